#!/usr/bin/env bash
# Makes sure the tools of the network-namespace test hosts are installed: `ip` (iproute2: namespaces, veth
# pairs, the bridge, `tc` netem), `nft` (nftables: partitions, loss) and `iptables` (the NFQUEUE rule of the
# latency fallback on kernels without sch_netem). Installs the Debian packages when missing.
# Only the namespace tests and `fluss-py cluster up --netns` need them; the default loopback cluster does not.
set -euo pipefail
. "$(dirname "$0")/apt.sh"
missing=()
command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || missing+=(iproute2)
command -v nft >/dev/null 2>&1 || missing+=(nftables)
command -v iptables >/dev/null 2>&1 || missing+=(iptables)
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "installing ${missing[*]} (network-namespace test hosts) ..."
apt_install "${missing[@]}"
for tool in ip tc nft iptables; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "error: apt-get finished but '$tool' is still missing." >&2
    exit 1
  fi
done
echo "network-namespace tools installed: ip, tc, nft, iptables"
