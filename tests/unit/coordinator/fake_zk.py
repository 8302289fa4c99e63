"""An in-memory stand-in for the ZooKeeper operations the coordinator's handlers use (``MetadataStore``).

Nodes carry a version; ``commit`` is atomic and honours ``fence`` (a check of the epoch node's version)
and per-op versions, raising the same ``ZkError`` subclasses as ``ZkClient``. Unit tests only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fluss_py.zk.values import (
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    EpochFence,
    EpochFencedError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    Op,
    SetOp,
    ZnodeStat,
)


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
        if path not in self.nodes:
            return None
        data, version = self.nodes[path]
        return data, ZnodeStat(version, 0, 0, 0, len(self._children(path)))

    async def get_children(self, path: str) -> list[str]:
        if path not in self.nodes:
            raise NoNodeError(path)
        return self._children(path)

    async def commit(self, ops: Sequence[Op], fence: EpochFence | None = None) -> list[Any]:
        nodes = dict(self.nodes)
        if fence is not None:
            epoch_path = f"{self.root}/coordinator/epoch"
            if epoch_path not in nodes or nodes[epoch_path][1] != fence.zk_version:
                raise EpochFencedError(f"epoch {fence.epoch} fenced")
        results: list[Any] = []
        for op in ops:
            if isinstance(op, CreateOp):
                parent = op.path.rsplit("/", 1)[0] or "/"
                if op.path in nodes:
                    raise NodeExistsError(op.path)
                if parent not in nodes:
                    raise NoNodeError(parent)
                nodes[op.path] = (op.data, 0)
                results.append(op.path)
            elif isinstance(op, SetOp | CheckOp | DeleteOp):
                if op.path not in nodes:
                    raise NoNodeError(op.path)
                if op.version not in (-1, nodes[op.path][1]):
                    raise BadVersionError(op.path)
                if isinstance(op, SetOp):
                    nodes[op.path] = (op.data, nodes[op.path][1] + 1)
                elif isinstance(op, DeleteOp):
                    if any(p.startswith(op.path + "/") for p in nodes):
                        raise NotEmptyError(op.path)
                    del nodes[op.path]
                results.append(True)
        self.nodes = nodes
        self.commits += 1
        return results

    def bump_epoch(self) -> EpochFence:
        """What a new leader does: bump the epoch node; returns its fence."""
        path = f"{self.root}/coordinator/epoch"
        data, version = self.nodes.get(path, (b"0", -1))
        epoch = int(data) + 1
        self.nodes[path] = (str(epoch).encode(), version + 1)
        return EpochFence(epoch, version + 1)
