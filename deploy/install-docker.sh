#!/usr/bin/env bash
# Makes sure Debian's Docker engine (docker.io: dockerd, the docker CLI), docker-compose (1.29) and debootstrap
# are installed: the compose test (tests/fault/test_compose.py) starts a private dockerd of its own, builds
# a base image from Debian packages with debootstrap and runs deploy/docker-compose.yml on it. Nothing is
# started here: no system dockerd is needed (the package's service may stay stopped).
set -euo pipefail
. "$(dirname "$0")/apt.sh"
missing=()
command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
[ -x /usr/bin/docker ] || missing+=(docker.io)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
command -v nsenter >/dev/null 2>&1 || missing+=(util-linux)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
readarray -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
echo "Installing Debian's ${missing[*]} (the compose test's private Docker engine and base image) ..."
# docker.io's postinst would start the system's dockerd (Docker's 172.17 bridge, iptables rules on the host):
# while it installs, a policy-rc.d that refuses every service start (removed again unless it was there).
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ] && [ "$(id -u)" -eq 0 ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt_install "${missing[@]}"
for tool in dockerd docker-compose debootstrap nsenter; do
  command -v "$tool" >/dev/null 2>&1 || { echo "error: apt-get finished but $tool is still missing." >&2; exit 1; }
done
