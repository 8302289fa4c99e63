#!/usr/bin/env bash
# Makes sure Debian's nats-server is installed: the benchmark suite runs the same workloads on a 3-node NATS
# JetStream cluster in the same run as the peer column (tests/bench/peers/nats.py, docs/performance.md).
# Without it the bench still runs and the peer columns stay empty.
set -euo pipefail
. "$(dirname "$0")/apt.sh"
command -v nats-server >/dev/null 2>&1 && exit 0
echo "Installing Debian's nats-server (the benchmarks' peer) ..."
apt_install nats-server
command -v nats-server >/dev/null 2>&1 || { echo "error: apt-get finished but nats-server is still missing." >&2; exit 1; }
