import { hostname, userInfo } from "node:os";

/** Who is acting, for the audit: --actor, else RABBIT_INBOX_ACTOR, else user@host. */
export function actorFrom(option: string | undefined): string {
  const given = option?.trim() || process.env.RABBIT_INBOX_ACTOR?.trim();
  if (given) return given;
  let user = "unknown";
  try {
    user = userInfo().username;
  } catch {
    // no passwd entry (containers): keep "unknown"
  }
  return `${user}@${hostname()}`;
}
