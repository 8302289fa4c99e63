#!/usr/bin/env bash
# Makes sure Debian's FUSE 3 (fusermount3 and libfuse3.so.3) is installed: the power-cut tests mount the
# in-memory filesystem of fluss_py/testing/powercut_fs.py through it (docs/fault-testing.md "Power cuts").
# Installs the `fuse3` package (which brings `libfuse3-3`) when missing.
set -euo pipefail
. "$(dirname "$0")/apt.sh"
have_lib() { ldconfig -p 2>/dev/null | grep 'libfuse3\.so\.3' >/dev/null; }  # not grep -q: under pipefail, grep leaving early can SIGPIPE ldconfig (exit 141)
if command -v fusermount3 >/dev/null 2>&1 && have_lib; then exit 0; fi
echo "FUSE 3 is missing (fusermount3 / libfuse3.so.3); installing Debian's 'fuse3' ..."
apt_install fuse3 libfuse3-3
if ! command -v fusermount3 >/dev/null 2>&1 || ! have_lib; then
  echo "error: apt-get finished but fusermount3 or libfuse3.so.3 is still missing." >&2
  exit 1
fi
echo "FUSE 3 installed: $(command -v fusermount3)"
