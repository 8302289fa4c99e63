"""Test hosts: one Linux network namespace per process, all on one bridge, and packet-level faults.

    net = HostNetwork.create()                    # namespace <prefix>-hub holding bridge br0
    a = net.add_host("zookeeper-1")               # namespace <prefix>-zookeeper-1, eth0 = 198.18.0.10
    argv = net.exec_prefix("zookeeper-1") + ["java", ...]
    net.drop("tablet-server-1", ["zookeeper-1"])  # packets zookeeper-1 -> tablet-server-1 silently dropped
    net.netem("tablet-server-2", delay_ms=50, loss_pct=10)
    net.heal()                                    # every drop rule, loss and delay removed
    net.teardown()                                # every namespace deleted by name (veths go with them)

Layout (``<prefix>`` is ``fpy`` + 6 random hex digits, one per run, so concurrent runs never collide)::

    <prefix>-hub           br0 (no address) + one veth end per host: v1, v2, ...
    <prefix>-<host>        lo + eth0 (the other veth end) with 198.18.0.<10+i>/16; nftables table
                           ``inet fluss_py`` with an input chain that holds the drop rules of this host

Addresses come from 198.18.0.0/15 (the benchmarking range) and exist only inside the run's namespaces:
the root namespace gets no address, route, link or rule. A fault is a drop at the *receiver's* input hook
(silent for the sender: no refusal, no EPERM), so "A cannot reach B" is a rule in B's namespace; netem is
a qdisc on both ends of a host's veth (or, without ``sch_netem``, netdelay.py holding the host's packets in an
NFQUEUE; its PID is in the state), loss a random drop on the bridge (hub's ``bridge fluss_py`` table) both ways.

Leftovers: ``/run/fluss-py-netns/<prefix>.json`` names the owner PID (and start time); ``remove_stale()``
deletes by name the namespaces of every prefix whose owner is gone and which is not ``detached`` (a CLI
cluster that outlives its command; ``cluster down`` removes those).

In-process code may enter a host's namespace with ``entered(host)``: sockets and threads created inside
live there (kazoo, urllib). gRPC connects from its own threads, so gRPC clients must run as processes
started with ``exec_prefix``.

Who may call: one thread (the test's or the CLI's); ``entered`` switches only the calling thread.
"""

from __future__ import annotations

import ctypes
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from fluss_py.testing.netdelay import start_delayer, stop_delayer
from fluss_py.testing.procs import proc_start_ticks

NETWORK = ipaddress.ip_network("198.18.0.0/15")
SUBNET_BITS = 16
FIRST_HOST = 10
PREFIX_START = "fpy"
HUB = "hub"
BRIDGE = "br0"
HOST_IF = "eth0"
NFT_TABLE = "fluss_py"
STATE_DIR = Path("/run/fluss-py-netns")
NETNS_DIR = Path("/run/netns")
_CLONE_NEWNET = 0x40000000
_FORWARD_CHAIN = f"add chain bridge {NFT_TABLE} forward {{ type filter hook forward priority 0 ; policy accept ; }}"
T = TypeVar("T")


class NetnsError(RuntimeError):
    """A namespace, link or rule could not be created or removed (the ``ip``/``nft``/``tc`` error is included)."""


class NetemUnsupported(NetnsError):
    """The kernel has no ``sch_netem`` qdisc: added latency cannot be injected (loss still can)."""


def host_address(index: int) -> str:
    """Address of the ``index``-th host (0-based): 198.18.0.10, .11, ... (wraps into the next /24s)."""
    addr = NETWORK.network_address + FIRST_HOST + index
    if addr not in NETWORK:
        raise ValueError(f"host index {index} is outside {NETWORK}")
    return str(addr)


def new_prefix() -> str:
    return PREFIX_START + secrets.token_hex(3)


def _run(argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise NetnsError(f"`{' '.join(argv)}` failed ({r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
    return r


def unavailable_reason() -> str | None:
    """Why namespaces cannot be used here (missing tool, no privilege), or None when they can."""
    for tool in ("ip", "tc", "nft"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (run deploy/install-netns-tools.sh)"
    probe = f"{PREFIX_START}probe{os.getpid()}"
    r = _run(["ip", "netns", "add", probe], check=False)
    if r.returncode != 0:
        return f"creating a network namespace is refused: {r.stderr.strip()}"
    try:
        r = _run(["ip", "netns", "exec", probe, "nft", "add", "table", "inet", NFT_TABLE], check=False)
        if r.returncode != 0:
            return f"nftables does not work in a network namespace: {r.stderr.strip()}"
    finally:
        _run(["ip", "netns", "del", probe], check=False)
    return None


@contextmanager
def entered_namespace(ns: str) -> Iterator[None]:
    """Switch the calling thread into network namespace ``ns`` for the block, then back."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    own = os.open(f"/proc/self/task/{threading.get_native_id()}/ns/net", os.O_RDONLY)
    try:
        target = os.open(NETNS_DIR / ns, os.O_RDONLY)
        try:
            if libc.setns(target, _CLONE_NEWNET) != 0:
                raise NetnsError(f"setns({ns}) failed: {os.strerror(ctypes.get_errno())}")
        finally:
            os.close(target)
        try:
            yield
        finally:
            if libc.setns(own, _CLONE_NEWNET) != 0:  # cannot happen for our own namespace; never continue in ns
                raise NetnsError(f"setns back from {ns} failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(own)


@dataclass
class HostNetwork:
    """Owns the namespaces, veth pairs and rules of one run (prefix); ``hosts`` maps host name -> address."""

    prefix: str
    hosts: dict[str, str] = field(default_factory=dict)
    detached: bool = False
    loss: dict[str, float] = field(default_factory=dict)
    delayers: dict[str, list[int | None]] = field(default_factory=dict)  # host -> [pid, start_ticks]

    # ---------------------------------------------------------------- building
    @classmethod
    def create(cls, prefix: str | None = None) -> HostNetwork:
        """The hub namespace and its bridge; removes stale leftovers of crashed runs first."""
        remove_stale()
        net = cls(prefix or new_prefix())
        net._write_state()
        try:
            _run(["ip", "netns", "add", net.ns(HUB)])
            _run(["ip", "-n", net.ns(HUB), "link", "add", BRIDGE, "type", "bridge"])
            _run(["ip", "-n", net.ns(HUB), "link", "set", BRIDGE, "up"])
            for command in (f"add table bridge {NFT_TABLE}", _FORWARD_CHAIN):
                _run(["ip", "netns", "exec", net.ns(HUB), "nft", command])
        except BaseException:
            net.teardown()
            raise
        return net

    def ns(self, host: str) -> str:
        return f"{self.prefix}-{host}"

    def add_host(self, host: str) -> str:
        """Namespace ``<prefix>-<host>`` with eth0 on the bridge; returns its address."""
        if host in self.hosts:
            return self.hosts[host]
        if host == HUB:
            raise ValueError(f"{HUB!r} is reserved")
        index = len(self.hosts)
        address = host_address(index)
        ns, hub_if = self.ns(host), f"v{index + 1}"
        self.hosts[host] = address
        self._write_state()
        _run(["ip", "netns", "add", ns])
        _run(["ip", "-n", self.ns(HUB), "link", "add", hub_if, "type", "veth", "peer", "name", HOST_IF, "netns", ns])
        _run(["ip", "-n", self.ns(HUB), "link", "set", hub_if, "master", BRIDGE, "up"])
        _run(["ip", "-n", ns, "addr", "add", f"{address}/{SUBNET_BITS}", "dev", HOST_IF])
        _run(["ip", "-n", ns, "link", "set", HOST_IF, "up"])
        _run(["ip", "-n", ns, "link", "set", "lo", "up"])
        self._nft(host, "add table inet fluss_py")
        self._nft(host, "add chain inet fluss_py input { type filter hook input priority 0 ; policy accept ; }")
        return address

    def exec_prefix(self, host: str) -> list[str]:
        """Command prefix that runs a program in ``host``'s namespace (``ip netns exec`` execs: same PID)."""
        return ["ip", "netns", "exec", self.ns(host)]

    def address(self, host: str) -> str:
        return self.hosts[host]

    @contextmanager
    def entered(self, host: str) -> Iterator[None]:
        with entered_namespace(self.ns(host)):
            yield

    def call_in(self, host: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` in a short-lived thread inside ``host``'s namespace; return its result (or raise)."""
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                with entered_namespace(self.ns(host)):
                    box["value"] = fn()
            except BaseException as e:  # handed to the caller below
                box["error"] = e

        t = threading.Thread(target=run, name=f"netns-{host}", daemon=True)
        t.start()
        t.join()
        if "error" in box:
            raise box["error"]
        return box["value"]

    # ---------------------------------------------------------------- faults
    def drop(self, to_host: str, from_hosts: Iterable[str]) -> None:
        """Packets from each of ``from_hosts`` to ``to_host`` are dropped silently at ``to_host``'s input."""
        sources = [self.hosts[h] for h in from_hosts if h != to_host]
        if sources:
            self._nft(to_host, f"add rule inet fluss_py input ip saddr {{ {', '.join(sources)} }} drop")

    def partition(self, side_a: Iterable[str], side_b: Iterable[str]) -> None:
        """No packet crosses between the two sides, either way (hosts on both sides keep their links)."""
        a, b = list(side_a), list(side_b)
        for host in a:
            self.drop(host, [h for h in b if h not in a])
        for host in b:
            self.drop(host, [h for h in a if h not in b])

    def isolate(self, host: str, keep: Iterable[str] = ()) -> None:
        """``host`` exchanges packets with no other host except those in ``keep``."""
        kept = set(keep) | {host}
        self.partition([host], [h for h in self.hosts if h not in kept])

    def netem(self, host: str, delay_ms: float = 0, jitter_ms: float = 0, loss_pct: float = 0) -> None:
        """Latency (± jitter) and random loss on ``host``'s link, both directions (replaces earlier ones there).

        Loss is an nftables ``numgen random`` drop on the bridge (works on any kernel with nftables). Latency
        is a ``tc netem`` qdisc on both veth ends; on a kernel without ``sch_netem`` it is a netdelay.py
        process holding the host's packets in an NFQUEUE (NetemUnsupported when neither is possible).
        """
        self._clear_delay(host)
        if delay_ms or jitter_ms:
            spec = ["delay", f"{delay_ms:g}ms"] + ([f"{jitter_ms:g}ms"] if jitter_ms else [])
            for ns, dev in ((self.ns(host), HOST_IF), (self.ns(HUB), self._hub_if(host))):
                qdisc = ["tc", "qdisc", "replace", "dev", dev, "root", "netem", *spec]
                if _run(["ip", "netns", "exec", ns, *qdisc], check=False).returncode != 0:
                    self._clear_delay(host)
                    self._delay_by_queue(host, delay_ms, jitter_ms)
                    break
        self.loss = {h: pct for h, pct in self.loss.items() if h != host}
        if loss_pct:
            self.loss[host] = loss_pct
        self._apply_loss()

    def clear_netem(self, host: str) -> None:
        self._clear_delay(host)
        if host in self.loss:
            del self.loss[host]
            self._apply_loss()

    def _delay_by_queue(self, host: str, delay_ms: float, jitter_ms: float) -> None:
        if shutil.which("iptables") is None:
            raise NetemUnsupported("no sch_netem in this kernel, and no iptables for the NFQUEUE fallback")
        log_file = STATE_DIR / f"{self.ns(host)}-netdelay.log"
        self.delayers[host] = list(start_delayer(self.exec_prefix(host), delay_ms, jitter_ms, log_file))
        self._write_state()

    def _clear_delay(self, host: str) -> None:
        for ns, dev in ((self.ns(host), HOST_IF), (self.ns(HUB), self._hub_if(host))):
            _run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root"], check=False)
        if host in self.delayers:
            pid, ticks = self.delayers.pop(host)
            stop_delayer(self.exec_prefix(host), pid, ticks)
            self._write_state()

    def _apply_loss(self) -> None:
        hub = self.ns(HUB)
        _run(["ip", "netns", "exec", hub, "nft", "flush", "chain", "bridge", NFT_TABLE, "forward"])
        for host, pct in self.loss.items():
            chance = "" if pct >= 100 else f"numgen random mod 1000 < {round(pct * 10)} "
            for direction in ("iifname", "oifname"):
                rule = f'add rule bridge {NFT_TABLE} forward {direction} "{self._hub_if(host)}" {chance}drop'
                _run(["ip", "netns", "exec", hub, "nft", rule])
        self._write_state()

    def rules(self, host: str) -> str:
        """The drop rules in ``host``'s namespace (``nft list chain``), for logs and tests."""
        return _run(["ip", "netns", "exec", self.ns(host), "nft", "list", "chain", "inet", NFT_TABLE, "input"]).stdout

    def heal(self) -> None:
        """Remove every drop rule and every netem qdisc of this run."""
        for host in self.hosts:
            self._nft(host, "flush chain inet fluss_py input")
            self._clear_delay(host)
        self.loss = {}
        self._apply_loss()

    # ---------------------------------------------------------------- teardown
    def teardown(self) -> list[str]:
        """Delete every namespace of this run by name (their veths and rules go with them); returns leftovers."""
        for pid, ticks in self.delayers.values():
            stop_delayer(None, pid, ticks)
        self.delayers = {}
        for ns in [self.ns(h) for h in self.hosts] + [self.ns(HUB)]:
            if (NETNS_DIR / ns).exists():
                _run(["ip", "netns", "del", ns], check=False)
        left = namespaces_of(self.prefix)
        if not left:
            (STATE_DIR / f"{self.prefix}.json").unlink(missing_ok=True)
        return left

    # ---------------------------------------------------------------- persistence
    def to_dict(self) -> dict[str, Any]:
        return {
            "prefix": self.prefix,
            "hosts": dict(self.hosts),
            "detached": self.detached,
            "loss": dict(self.loss),
            "delayers": {h: list(v) for h, v in self.delayers.items()},
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> HostNetwork:
        hosts = {str(k): str(v) for k, v in data["hosts"].items()}
        loss = {str(k): float(v) for k, v in data.get("loss", {}).items()}
        delayers = {str(k): list(v) for k, v in data.get("delayers", {}).items()}
        return cls(str(data["prefix"]), hosts, bool(data["detached"]), loss, delayers)

    def detach(self) -> None:
        """Keep the namespaces after this process exits (a CLI cluster); ``teardown`` still removes them."""
        self.detached = True
        self._write_state()

    def _write_state(self) -> None:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        owner = {"pid": os.getpid(), "start_ticks": proc_start_ticks(os.getpid()), **self.to_dict()}
        (STATE_DIR / f"{self.prefix}.json").write_text(json.dumps(owner) + "\n")

    def _hub_if(self, host: str) -> str:
        return f"v{list(self.hosts).index(host) + 1}"

    def _nft(self, host: str, command: str) -> None:
        _run(["ip", "netns", "exec", self.ns(host), "nft", command])


def namespaces_of(prefix: str) -> list[str]:
    """Names of the existing namespaces of run ``prefix``."""
    if not NETNS_DIR.exists():
        return []
    return sorted(p.name for p in NETNS_DIR.iterdir() if p.name.startswith(f"{prefix}-"))


def stale_prefixes() -> list[str]:
    """Runs whose namespaces exist but whose owner process is gone (and which are not detached CLI clusters)."""
    live: set[str] = set()
    known: set[str] = set()
    if STATE_DIR.exists():
        for f in STATE_DIR.glob(f"{PREFIX_START}*.json"):
            try:
                data = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            prefix = f.stem
            known.add(prefix)
            ticks = proc_start_ticks(int(data["pid"]))
            if data.get("detached") or (ticks is not None and ticks == data.get("start_ticks")):
                live.add(prefix)
    found = {p.name.split("-", 1)[0] for p in NETNS_DIR.iterdir()} if NETNS_DIR.exists() else set()
    found = {p for p in found if p.startswith(PREFIX_START) and len(p) == len(PREFIX_START) + 6}
    return sorted((found | known) - live)


def remove_stale() -> list[str]:
    """Delete by name the namespaces (and state files) of every stale run; returns the prefixes removed."""
    removed = stale_prefixes()
    for prefix in removed:
        try:
            state = json.loads((STATE_DIR / f"{prefix}.json").read_text())
        except (OSError, ValueError):
            state = {}
        for pid, ticks in state.get("delayers", {}).values():
            stop_delayer(None, pid, ticks)
        for ns in namespaces_of(prefix):
            _run(["ip", "netns", "del", ns], check=False)
        (STATE_DIR / f"{prefix}.json").unlink(missing_ok=True)
    return removed
