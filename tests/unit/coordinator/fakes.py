"""In-memory fakes of the coordinator's network edges: the ZooKeeper facade and the tablet gateway.

``FakeZk`` extends ``fake_zk.FakeStore`` (ZooKeeper's rules: versions grow by one per set, creates need
the parent, deletes need no children, a transaction applies all ops or none, a fenced transaction first
checks the epoch node's version) with what the table processor also uses: ``exists``, ZnodeStat results
for sets (as ``ZkClient.commit``), a log of transactions and test helpers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from fluss_py.rpc import convert
from fluss_py.rpc.pb import tablet_pb2
from fluss_py.types import ServerNode
from fluss_py.zk.values import EpochFence, Op, SetOp, ZnodeStat

from .fake_zk import FakeStore


class FakeZk(FakeStore):
    def __init__(self, root: str = "/fluss") -> None:
        super().__init__(root)
        self.epoch_path = f"{root}/coordinator/epoch"
        self.transactions: list[list[Op]] = []

    # ---------------------------------------------------------------- setup helpers
    def put(self, path: str, data: bytes = b"") -> None:
        """Create ``path`` (and parents) or overwrite its data, bumping the version."""
        if path in self.nodes:
            self.nodes[path] = (data, self.nodes[path][1] + 1)
        else:
            self.ensure(path, data)

    def fence(self, epoch: int = 1) -> EpochFence:
        self.put(self.epoch_path, str(epoch).encode())
        return EpochFence(epoch, self.nodes[self.epoch_path][1])

    def snapshot(self) -> dict[str, tuple[bytes, int]]:
        return dict(self.nodes)

    def data(self, path: str) -> bytes:
        return self.nodes[path][0]

    # ---------------------------------------------------------------- MetadataStore additions
    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        await asyncio.sleep(0)
        return await super().get(path)

    async def exists(self, path: str) -> ZnodeStat | None:
        got = await self.get(path)
        return got[1] if got else None

    async def commit(self, ops: Sequence[Op], fence: EpochFence | None = None) -> list[Any]:
        await asyncio.sleep(0)
        self.transactions.append(list(ops))
        results = await super().commit(ops, fence)
        return [
            ZnodeStat(self.nodes[op.path][1], 0, 0, 0, 0) if isinstance(op, SetOp) else r
            for op, r in zip(ops, results, strict=True)
        ]


class FakeGateway:
    """Records every request; answers success unless ``down`` holds the server id (the call fails) or
    ``refusing`` does (a whole-request error answer, recorded too)."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, str, Any]] = []
        self.down: set[int] = set()
        self.refusing: dict[int, int] = {}  # server -> whole-request error code it answers
        self.bucket_errors: dict[int, int] = {}  # server -> error code of every bucket it is notified of
        self.attempts = 0
        self.failed = 0  # attempts that raised; attempts == failed: no call is in progress

    async def send(self, server: ServerNode, kind: str, request: Any) -> Any:
        self.attempts += 1
        await asyncio.sleep(0)
        if server.id in self.down:
            self.failed += 1
            raise ConnectionError(f"server {server.id} unreachable")
        self.calls.append((server.id, kind, request))
        refusal = self.refusing.get(server.id)
        if refusal is not None:
            error = convert.error_code(refusal, "refused")
            return getattr(tablet_pb2, f"{kind}Response")(error=error)
        if kind == "NotifyLeaderAndIsr":
            code = self.bucket_errors.get(server.id)
            error = convert.ok() if code is None else convert.error_code(code, "disk failed")
            return tablet_pb2.NotifyLeaderAndIsrResponse(
                error=convert.ok(),
                buckets=[tablet_pb2.BucketResult(table_bucket=b.table_bucket, error=error) for b in request.buckets],
            )
        if kind == "StopReplica":
            return tablet_pb2.StopReplicaResponse(error=convert.ok())
        return tablet_pb2.UpdateMetadataResponse(error=convert.ok())

    def of(self, kind: str, server: int | None = None) -> list[Any]:
        return [r for s, k, r in self.calls if k == kind and (server is None or s == server)]

    def clear(self) -> None:
        self.calls.clear()


class RecordingLeader:
    """A serving ``CoordinatorView`` for the servicer's unit tests: its event loop records every event it is
    handed and answers ``answer(event)``."""

    server_id, coordinator_epoch, state = 1, 1, None

    def __init__(self, answer: Any = lambda event: None) -> None:
        self.events: list[Any] = []
        self._answer = answer

    def serving_event_loop(self) -> RecordingLeader:
        return self

    async def submit(self, event: Any) -> Any:
        self.events.append(event)
        return self._answer(event)

    async def current_leader(self) -> None:
        return None
