#!/usr/bin/env bash
# Makes sure Debian's ZooKeeper (3.8) and a Java runtime are installed: /usr/share/java/zookeeper.jar,
# the scripts in /usr/share/zookeeper/bin and `java`. Installs the `zookeeper` package when missing.
set -euo pipefail
. "$(dirname "$0")/apt.sh"
JAR=${FLUSS_PY_ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}
if [ -e "$JAR" ] && command -v java >/dev/null 2>&1; then exit 0; fi
echo "ZooKeeper or java is missing ($JAR); installing Debian's 'zookeeper' package ..."
if ! apt_install zookeeper; then
  echo "       (or start your own ZooKeeper and use: fluss-py cluster up --zookeeper HOST:PORT)" >&2
  exit 1
fi
if [ ! -e "$JAR" ] || ! command -v java >/dev/null 2>&1; then
  echo "error: apt-get finished but $JAR or java is still missing." >&2
  exit 1
fi
echo "ZooKeeper installed: $JAR"
