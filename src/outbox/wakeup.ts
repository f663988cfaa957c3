/**
 * A wake-up for one waiting loop that is never lost: a `wake()` that arrives while the loop is
 * busy makes its next `wait()` return at once.
 */
export class Wakeup {
  private pending = false;
  private release: (() => void) | undefined;

  wake(): void {
    this.pending = true;
    const release = this.release;
    this.release = undefined;
    release?.();
  }

  /** Resolves after `ms`, or as soon as `wake()` is called (at once if it was called since the last wait). */
  wait(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.pending = false;
        if (this.release === done) this.release = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.release = done;
    });
  }
}
