"""An in-memory stand-in for the ZooKeeper operations the coordinator's handlers use (``MetadataStore``).

Nodes carry a version; ``commit`` is atomic and honours ``fence`` (a check of the epoch node's version)
and per-op versions. It answers as ZooKeeper answers a multi and lets ``ZkClient``'s own reading of that
answer (``zk.client.multi_outcome``) raise, so the unit tests exercise it: the fence is a check op sent
first; when op *k* fails, the ops before it (the fence included) read RolledBackError, *k* its error, the
ops after it RuntimeInconsistency. Paths go through kazoo's ``normpath`` as in ``ZkClient`` ("g/" is "g",
"." and ".." raise ValueError); ZooKeeper's own path rule refuses a create, set or check of a path it
cannot store (BadArguments, ``types.znode_name_problem``), and a request over ``jute.maxbuffer`` (1 MiB)
drops the connection (SessionLostError). Unit tests only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from kazoo import exceptions as kz
from kazoo.protocol.paths import normpath

from fluss_py.types import znode_name_problem
from fluss_py.zk.client import multi_outcome
from fluss_py.zk.values import (
    CheckOp,
    CreateOp,
    DeleteOp,
    EpochFence,
    NoNodeError,
    Op,
    SessionLostError,
    SetOp,
    ZnodeStat,
)

JUTE_MAX_BUFFER = 1024 * 1024 - 1  # ZooKeeper's default: a larger request closes the connection


def _path_refused(path: str) -> bool:
    """ZooKeeper's PathUtils.validatePath, on a path kazoo has normalised."""
    return path != "/" and (not path.startswith("/") or any(znode_name_problem(c) for c in path[1:].split("/")))


class FakeStore:
    def __init__(self, root: str = "/fluss") -> None:
        self.root = root
        self.nodes: dict[str, tuple[bytes, int]] = {"/": (b"", 0)}
        self.commits = 0  # successful transactions (writes)

    # ---------------------------------------------------------------- helpers for tests
    def ensure(self, path: str, data: bytes = b"") -> None:
        parts = [p for p in path.split("/") if p]
        for i in range(1, len(parts) + 1):
            self.nodes.setdefault("/" + "/".join(parts[:i]), (b"", 0))
        self.nodes[path] = (data, self.nodes[path][1])

    def _children(self, path: str) -> list[str]:
        prefix = path.rstrip("/") + "/"
        return sorted({p[len(prefix) :].split("/")[0] for p in self.nodes if p.startswith(prefix) and p != path})

    # ---------------------------------------------------------------- MetadataStore
    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        path = normpath(path)
        if path not in self.nodes:
            return None
        data, version = self.nodes[path]
        return data, ZnodeStat(version, 0, 0, 0, len(self._children(path)))

    async def get_children(self, path: str) -> list[str]:
        path = normpath(path)
        if path not in self.nodes:
            raise NoNodeError(path)
        return self._children(path)

    async def commit(self, ops: Sequence[Op], fence: EpochFence | None = None) -> list[Any]:
        sent: list[Op] = [CheckOp(f"{self.root}/coordinator/epoch", fence.zk_version)] if fence is not None else []
        sent += [dataclasses.replace(op, path=normpath(op.path)) for op in ops]
        if sum(len(op.path) + len(getattr(op, "data", b"")) for op in sent) > JUTE_MAX_BUFFER:
            raise SessionLostError("ZooKeeper session lost: ConnectionLoss (request over jute.maxbuffer)")
        nodes = dict(self.nodes)
        results: list[Any] = []
        for k, op in enumerate(sent):
            result = self._apply(nodes, op)
            if isinstance(result, Exception):
                after = len(sent) - k - 1
                results = [kz.RolledBackError()] * k + [result] + [kz.RuntimeInconsistency()] * after
                break
            results.append(result)
        else:
            self.nodes = nodes
            self.commits += 1
        return multi_outcome(ops, results, fence)

    @staticmethod
    def _apply(nodes: dict[str, tuple[bytes, int]], op: Op) -> Any:
        """Apply one op to ``nodes``: its result, or the kazoo exception ZooKeeper answers for it."""
        if not isinstance(op, DeleteOp) and _path_refused(op.path):
            return kz.BadArgumentsError()
        if isinstance(op, CreateOp):
            parent = op.path.rsplit("/", 1)[0] or "/"
            if op.path in nodes:
                return kz.NodeExistsError()
            if parent not in nodes:
                return kz.NoNodeError()
            nodes[op.path] = (op.data, 0)
            return op.path
        if op.path not in nodes:
            return kz.NoNodeError()
        if op.version not in (-1, nodes[op.path][1]):
            return kz.BadVersionError()
        if isinstance(op, SetOp):
            nodes[op.path] = (op.data, nodes[op.path][1] + 1)
        elif isinstance(op, DeleteOp):
            if any(p.startswith(op.path + "/") for p in nodes):
                return kz.NotEmptyError()
            del nodes[op.path]
        return True

    def bump_epoch(self) -> EpochFence:
        """What a new leader does: bump the epoch node; returns its fence."""
        path = f"{self.root}/coordinator/epoch"
        data, version = self.nodes.get(path, (b"0", -1))
        epoch = int(data) + 1
        self.nodes[path] = (str(epoch).encode(), version + 1)
        return EpochFence(epoch, version + 1)
