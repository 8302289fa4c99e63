#!/usr/bin/env bash
# Makes sure Debian's Chromium and its WebDriver (chromedriver) are installed: the console's end-to-end test
# drives a real headless Chromium through selenium (tests/fault/test_console_browser.py, docs/console.md).
# Also installs Debian's docker-compose (1.29), which the compose-file test validates every file with, and
# Debian's prometheus for promtool, which checks the alert rules in deploy/prometheus/.
set -euo pipefail
. "$(dirname "$0")/apt.sh"
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "Installing Debian's ${missing[*]} (console browser test, compose-file test, alert-rule test) ..."
apt_install "${missing[@]}"
for tool in chromium chromedriver docker-compose promtool; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: apt-get finished but $tool is still missing." >&2; exit 1; }
done
