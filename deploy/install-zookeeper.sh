#!/usr/bin/env bash
# Makes sure Debian's ZooKeeper (3.8) is installed: /usr/share/java/zookeeper.jar and its scripts.
set -euo pipefail
JAR=/usr/share/java/zookeeper.jar
[ -e "$JAR" ] && exit 0
echo "ZooKeeper is missing ($JAR); installing Debian's 'zookeeper' package ..."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
    echo "error: not root and no sudo: run 'apt-get install -y zookeeper' as root, then retry." >&2; exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "error: no apt-get here: install ZooKeeper 3.8 so that $JAR exists, or pass --zookeeper HOST:PORT." >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y zookeeper >/dev/null 2>&1 || { $SUDO apt-get update -q && $SUDO apt-get install -y zookeeper; }
[ -e "$JAR" ] || { echo "error: apt-get finished but $JAR is still missing." >&2; exit 1; }
echo "ZooKeeper installed."
