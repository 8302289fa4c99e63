# Sourced by deploy/*.sh: `apt_install PKG...` installs Debian packages as root, through `sudo -n`, or
# fails with a message saying exactly what to run. Never prompts.
apt_install() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo="sudo -n"
    else
      echo "error: need root to install '$*' (not root, no password-less sudo)." >&2
      echo "       run as root:  apt-get install -y $*   then retry." >&2
      return 1
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "error: no apt-get on this machine: install '$*' (or the equivalent) yourself, then retry." >&2
    return 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  # Wait for another apt/dpkg run (a second install on the same machine) instead of failing on its lock.
  local lock="-o DPkg::Lock::Timeout=300"
  if ! $sudo apt-get $lock install -y -q "$@" >/tmp/fluss-py-apt.log 2>&1; then
    echo "apt-get install $* failed from the current package lists; running apt-get update first ..."
    if ! { $sudo apt-get $lock update -q && $sudo apt-get $lock install -y -q "$@"; } >>/tmp/fluss-py-apt.log 2>&1; then
      tail -n 20 /tmp/fluss-py-apt.log >&2
      echo "error: 'apt-get install -y $*' failed (full log: /tmp/fluss-py-apt.log)." >&2
      return 1
    fi
  fi
}
