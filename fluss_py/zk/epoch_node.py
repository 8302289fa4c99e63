"""The coordinator epoch node's rules: what it may hold, and where it restarts when it was deleted.

* It holds a non-negative integer; anything else is refused (``parse_epoch``) with one ERROR naming the
  node: no candidate leads until an operator repairs it (a leader no tablet server obeys helps nobody).
* The fence keeps **version == epoch**: the next epoch is ``max(value, version) + 1`` and the fencing
  transaction first pads the version up to ``epoch - 1`` (``fence_ops``), so the token of a term (the
  version) and its epoch are the same number and only grow.
* A missing node is re-created at the highest coordinator epoch the stored metadata names (the leader
  node, every ``leader_isr``; 0 for a brand-new cluster, ``restart_value``). The next fence then gives
  that + 1, a version no earlier term's fence had, and an epoch above what tablet servers saw.

docs/coordinator-ha.md (Becoming leader, "The epoch node"). Caller: ``election.fence_become_leader``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from fluss_py.zk.client import ZkClient
from fluss_py.zk.paths import CoordinatorEpochZNode, CoordinatorLeaderZNode, LeaderIsrZNode, TableAssignmentZNode
from fluss_py.zk.values import NodeExistsError, NoNodeError, SetOp

log = logging.getLogger("fluss_py.coordinator.CoordinatorLeaderElection")

MAX_PADDING_OPS = 500  # version padding per transaction (a re-created node of a long-lived cluster)


class InvalidEpochNodeError(ValueError):
    """The epoch node does not hold a non-negative integer: no candidate may become leader."""


def parse_epoch(path: str, data: bytes) -> int:
    """The epoch stored in ``data``, or InvalidEpochNodeError saying what was found and what to do."""
    text = data.decode("ascii", errors="replace").strip()
    if text.isascii() and text.isdigit():
        return int(text)
    raise InvalidEpochNodeError(
        f"coordinator epoch node {path} holds {text[:40]!r}, not a non-negative integer: no coordinator will "
        f"lead. Set it to the highest coordinator epoch in use (the coordinator_epoch of the stored leader_isr "
        f"nodes), or delete it and the next leader derives it from the stored metadata"
    )


def next_epoch(value: int, version: int) -> int:
    """The epoch the next fence writes: above both the stored value and the node's version."""
    return max(value, version) + 1


def padding(path: str, data: bytes, version: int, target: int, limit: int = MAX_PADDING_OPS) -> list[SetOp]:
    """Version-chained sets rewriting ``data`` that bring the node's version from ``version`` to ``target``."""
    return [SetOp(path, data, v) for v in range(version, min(target, version + limit))]


def restart_value(epochs: Iterable[int]) -> int:
    """What a deleted epoch node is re-created with: the highest stored coordinator epoch (0 if none)."""
    return max((e for e in epochs if e >= 0), default=0)


async def stored_epochs(zk: ZkClient, root: str) -> list[int]:
    """Coordinator epochs named by the leader node and every readable leader_isr node."""
    found: list[int] = []
    leader = await zk.get(CoordinatorLeaderZNode.path(root))
    if leader is not None:
        try:
            found.append(CoordinatorLeaderZNode.decode(leader[0]).epoch)
        except (ValueError, KeyError, TypeError):
            pass
    try:
        tables = await zk.get_children(TableAssignmentZNode.parent(root))
    except NoNodeError:
        tables = []
    for table in (t for t in tables if t.isdigit()):
        try:
            buckets = await zk.get_children(f"{TableAssignmentZNode.path(root, int(table))}/buckets")
        except NoNodeError:
            continue
        for bucket in (b for b in buckets if b.isdigit()):
            got = await zk.get(LeaderIsrZNode.path(root, int(table), int(bucket)))
            if got is None:
                continue
            try:
                found.append(LeaderIsrZNode.decode(got[0]).coordinator_epoch)
            except (ValueError, KeyError, TypeError):
                pass  # the leader's load reports it (coordinator/unreadable.py)
    return found


async def recreate_epoch_node(zk: ZkClient, root: str) -> None:
    """Create the missing epoch node at ``restart_value`` of the stored metadata (NodeExists: someone did)."""
    path = CoordinatorEpochZNode.path(root)
    value = restart_value(await stored_epochs(zk, root))
    if value:
        log.error("Coordinator epoch node %s is missing but the stored metadata names coordinator epoch %d: "
                  "re-creating it at %d so the next leader has epoch %d (never restarting at 1)",
                  path, value, value, value + 1)  # fmt: skip
    try:
        await zk.create(path, CoordinatorEpochZNode.encode(value), makepath=True)
    except NodeExistsError:
        pass
