#!/usr/bin/env bash
# Usage: deploy/check-python.sh PYTHON. Makes sure PYTHON is >= 3.11 and can create a venv (Debian ships
# `venv`/`ensurepip` in the separate python3-venv package; it is installed when missing).
set -euo pipefail
. "$(dirname "$0")/apt.sh"
PY=${1:-python3}
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "error: '$PY' not found: install Python >= 3.11 (apt-get install -y python3 python3-venv)" >&2
  exit 1
fi
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  echo "error: $("$PY" --version 2>&1) is too old: fluss_py needs Python >= 3.11 (make PYTHON=python3.11 ...)" >&2
  exit 1
fi
if ! "$PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  ver=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
  echo "$PY cannot create a venv; installing python${ver}-venv ..."
  apt_install "python${ver}-venv" || apt_install python3-venv
fi
