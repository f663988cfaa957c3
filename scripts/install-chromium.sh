#!/usr/bin/env bash
# The console's browser tests drive Debian's chromium (through playwright-core, which downloads no
# browser of its own). Installs it when /usr/bin/chromium is missing; needs root (CI containers).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-chromium: /usr/bin/chromium is missing and there is no apt-get: install Chromium and set RABBIT_INBOX_CHROMIUM to its path" >&2
  exit 1
fi
echo "install-chromium: installing Debian's chromium package"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core
/usr/bin/chromium --version
