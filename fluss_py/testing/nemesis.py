"""Network and process faults on a ``LocalCluster`` whose processes run on test hosts (``netns=True``).

    leader = "tablet-server-2"
    cut_off(cluster, leader)                      # leader reaches nobody but the clients (host "client")
    split(cluster, ["zookeeper-1", "coordinator-1", "tablet-server-1"])   # two halves
    one_way(cluster, to="tablet-server-1", from_=["zookeeper-1"])        # zookeeper-1 -> ts-1 dropped
    bridge(cluster, ["ts-1", "zk-1"], ["ts-2", "zk-2"], middle="zk-3")   # halves that share one node
    netem(cluster, "tablet-server-2", delay_ms=100, jitter_ms=50, loss_pct=20)
    stopped = lose_zookeeper_quorum(cluster)     # SIGKILL a majority of the ensemble
    heal(cluster)                                 # every drop rule and netem removed

Names may be process names or a role (``zookeeper``, ``coordinator``, ``tablet-server``) meaning every
process of it; ``client`` is the host of the test's own clients, left out of every side unless named.
A drop is silent (the receiver's input hook discards packets), so nothing is ever *refused*: proof of
death by "connection refused" cannot fire on a partition. Process faults (kill -9, SIGSTOP, SIGTERM) are in
``faults.py`` and work on any cluster, ZooKeeper members included.

Who may call: the thread that owns the cluster (a test, the CLI, ``fluss-py verify``).
"""

from __future__ import annotations

from collections.abc import Iterable

from fluss_py.testing.cluster import CLIENT, ClusterError, LocalCluster
from fluss_py.testing.cluster_file import ROLES, ZOOKEEPER
from fluss_py.testing.netns import HostNetwork


def _net(cluster: LocalCluster) -> HostNetwork:
    if cluster.net is None:
        raise ClusterError("network faults need a cluster on test hosts (LocalCluster(netns=True), `up --netns`)")
    return cluster.net


def resolve(cluster: LocalCluster, names: Iterable[str]) -> list[str]:
    """Process names, with role names expanded to every process of the role; KeyError for unknown names."""
    out: list[str] = []
    for name in names:
        name = name.strip()
        if not name:
            continue
        if name in ROLES:
            out += cluster.names(name)
        elif name == CLIENT:
            out.append(CLIENT)
        else:
            out.append(cluster.get(name).name)
    return list(dict.fromkeys(out))


def everyone(cluster: LocalCluster) -> list[str]:
    """Every process host of the cluster (not the client host)."""
    return cluster.names()


def _changed(cluster: LocalCluster) -> None:
    cluster.record.netns = _net(cluster).to_dict()
    cluster.save()


def isolate(cluster: LocalCluster, name: str, keep: Iterable[str] = ()) -> None:
    """``name`` exchanges no packet with any process (nor the client host) except those in ``keep``."""
    net = _net(cluster)
    kept = set(resolve(cluster, keep)) | {name}
    net.partition([name], [h for h in net.hosts if h not in kept])


def cut_off(cluster: LocalCluster, name: str) -> None:
    """``name`` is cut from ZooKeeper, the coordinators and the other servers; the client host still reaches it."""
    isolate(cluster, name, keep=[CLIENT])


def partition(cluster: LocalCluster, name: str, from_: Iterable[str]) -> None:
    """No packet between ``name`` and any of ``from_`` (either way); everything else still flows."""
    _net(cluster).partition([name], resolve(cluster, from_))


def split(cluster: LocalCluster, side_a: Iterable[str]) -> list[str]:
    """Two halves: ``side_a`` and every other process; the client host reaches both. Returns side b."""
    a = resolve(cluster, side_a)
    b = [n for n in everyone(cluster) if n not in a]
    _net(cluster).partition(a, b)
    return b


def bridge(cluster: LocalCluster, side_a: Iterable[str], side_b: Iterable[str], middle: str) -> None:
    """Two halves that both still reach ``middle`` (Jepsen's bridge); the client host reaches all."""
    a = [n for n in resolve(cluster, side_a) if n != middle]
    b = [n for n in resolve(cluster, side_b) if n != middle]
    _net(cluster).partition(a, b)


def one_way(cluster: LocalCluster, to: str, from_: Iterable[str]) -> None:
    """Packets from ``from_`` to ``to`` are dropped; ``to``'s own packets still reach them."""
    _net(cluster).drop(to, resolve(cluster, from_))


def netem(cluster: LocalCluster, name: str, delay_ms: float = 0, jitter_ms: float = 0, loss_pct: float = 0) -> None:
    """Latency ± jitter and random loss on ``name``'s link, both ways (NetemUnsupported without sch_netem)."""
    _net(cluster).netem(name, delay_ms, jitter_ms, loss_pct)
    _changed(cluster)


def heal(cluster: LocalCluster) -> None:
    """Every drop rule and every netem of the cluster removed."""
    _net(cluster).heal()
    _changed(cluster)


def zookeeper_quorum_size(cluster: LocalCluster) -> int:
    return len(cluster.names(ZOOKEEPER)) // 2 + 1


def lose_zookeeper_quorum(cluster: LocalCluster, spare: str | None = None) -> list[str]:
    """SIGKILL a majority of the ZooKeeper ensemble (keeping ``spare`` alive); returns the killed members.

    With one member left below the quorum it answers nobody ("not currently serving requests"); start the
    killed ones again (``cluster.start_process``) to get the quorum back.
    """
    members = [n for n in cluster.names(ZOOKEEPER) if n != spare and cluster.alive(n)]
    alive = len([n for n in cluster.names(ZOOKEEPER) if cluster.alive(n)])
    need = alive - (zookeeper_quorum_size(cluster) - 1)
    victims = members[: max(0, need)]
    for name in victims:
        cluster.kill(name)
    return victims


def zookeeper_leader(cluster: LocalCluster) -> str | None:
    """The ensemble member whose ``srvr`` says ``Mode: leader`` (a standalone server counts), else None."""
    for name in cluster.names(ZOOKEEPER):
        if not cluster.alive(name) or cluster.paused(name):
            continue
        try:
            text = cluster.zk_four_letter("srvr", timeout=1.0, name=name)
        except OSError:
            continue
        if "Mode: leader" in text or "Mode: standalone" in text:
            return name
    return None
