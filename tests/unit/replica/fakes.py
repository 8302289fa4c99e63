"""Fakes at the replica layer's seams: clock, in-memory log (until the real LogTablet lands), leader endpoint
wired straight to another ReplicaManager, and a coordinator that validates AdjustIsr like the real one."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from types import SimpleNamespace

from fluss_py.errors import (
    FencedLeaderEpochError,
    InvalidRecordBatchError,
    InvalidUpdateVersionError,
    NetworkExceptionError,
    OffsetOutOfRangeError,
)
from fluss_py.record import RecordBatchBuilder, iter_batches, set_base_offset_and_epoch
from fluss_py.replica.messages import AdjustIsrItem, AdjustIsrResult, EpochRequest, FetchRequest
from fluss_py.types import LeaderAndIsr, TableBucket


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def batch(*values: bytes) -> bytes:
    b = RecordBatchBuilder()
    for v in values:
        b.append(v)
    return b.build()


def values_of(records: bytes) -> list[tuple[int, bytes]]:
    return [(r.offset, r.value) for b in iter_batches(records) for r in b.records()]


# ---------------------------------------------------------------- in-memory log


class FakeEpochCache:
    def __init__(self) -> None:
        self._entries: list[tuple[int, int]] = []

    def assign(self, epoch: int, start_offset: int) -> None:
        if self._entries and self._entries[-1][0] >= epoch:
            return
        self._entries = [e for e in self._entries if e[1] < start_offset]
        self._entries.append((epoch, start_offset))

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1][0] if self._entries else None

    def end_offset_for(self, epoch: int, leo: int) -> tuple[int, int]:
        if epoch < 0 or not self._entries:
            return (-1, -1)
        if epoch == self._entries[-1][0]:
            return (epoch, leo)
        higher = [e for e in self._entries if e[0] > epoch]
        if not higher:
            return (-1, -1)
        lower = [e for e in self._entries if e[0] <= epoch]
        if not lower:
            return (epoch, higher[0][1])
        return (lower[-1][0], higher[0][1])

    def truncate_from_end(self, end_offset: int) -> None:
        self._entries = [e for e in self._entries if e[1] < end_offset]

    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)


class FakeLog:
    """In-memory stand-in for LogTablet with the same methods; batches are real fluss_py.record batches."""

    def __init__(self, table_bucket: TableBucket) -> None:
        self.table_bucket = table_bucket
        self.batches: list[bytes] = []
        self.log_start_offset = 0
        self.high_watermark = 0
        self.epoch_cache = FakeEpochCache()
        self._leo = 0

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    def append_as_leader(self, records: bytes, leader_epoch: int):
        buf = bytearray(records)
        parsed = list(iter_batches(buf))
        for b in parsed:
            b.ensure_valid()
        first = self._leo
        for b in parsed:
            set_base_offset_and_epoch(buf, b.position, self._leo, leader_epoch)
            self.epoch_cache.assign(leader_epoch, self._leo)
            self._leo += b.last_offset_delta + 1
        for b in iter_batches(bytes(buf)):
            self.batches.append(b.tobytes())
        return SimpleNamespace(
            first_offset=first, last_offset=self._leo - 1, duplicate=False, append_time_ms=-1, leader_epoch=leader_epoch
        )

    def append_as_follower(self, records: bytes):
        parsed = list(iter_batches(records))
        if parsed and parsed[0].base_offset != self._leo:
            raise InvalidRecordBatchError(f"base offset {parsed[0].base_offset} != LEO {self._leo}")
        first = self._leo
        for b in parsed:
            self.epoch_cache.assign(b.leader_epoch, b.base_offset)
            self.batches.append(b.tobytes())
            self._leo = b.last_offset + 1
        return SimpleNamespace(first_offset=first, last_offset=self._leo - 1, duplicate=False)

    def read(self, fetch_offset: int, max_bytes: int, upper_bound: int):
        if fetch_offset < self.log_start_offset or fetch_offset > self._leo:
            raise OffsetOutOfRangeError(f"offset {fetch_offset} outside [{self.log_start_offset}, {self._leo}]")
        out, size = [], 0
        for raw in self.batches:
            b = next(iter_batches(raw))
            if b.last_offset < fetch_offset:
                continue
            if b.last_offset >= upper_bound:
                break
            if out and size + len(raw) > max_bytes:
                break
            out.append(raw)
            size += len(raw)
        return SimpleNamespace(
            fetch_offset=fetch_offset,
            records=b"".join(out),
            log_start_offset=self.log_start_offset,
            high_watermark=self.high_watermark,
            log_end_offset=self._leo,
        )

    def update_high_watermark(self, offset: int) -> bool:
        new = max(self.log_start_offset, min(offset, self._leo))
        moved = new != self.high_watermark
        self.high_watermark = new
        return moved

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self.epoch_cache.end_offset_for(epoch, self._leo)

    def offset_for_timestamp(self, ts_ms: int) -> int | None:
        for raw in self.batches:
            b = next(iter_batches(raw))
            if b.max_timestamp >= ts_ms:
                for r in b.records():
                    if r.timestamp_ms >= ts_ms:
                        return r.offset
        return None

    def truncate_to(self, offset: int) -> None:
        kept = []
        for raw in self.batches:
            b = next(iter_batches(raw))
            if b.base_offset < offset:
                assert b.last_offset < offset, "fake log truncates on batch boundaries only"
                kept.append(raw)
        self.batches = kept
        self._leo = min(self._leo, offset)
        self.epoch_cache.truncate_from_end(offset)
        self.high_watermark = min(self.high_watermark, self._leo)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.batches, self._leo, self.log_start_offset, self.high_watermark = [], offset, offset, offset
        self.epoch_cache = FakeEpochCache()

    def flush(self, up_to: int | None = None) -> None:
        pass

    def close(self) -> None:
        pass


class FakeLogManager:
    def __init__(self) -> None:
        self.logs: dict[TableBucket, FakeLog] = {}
        self.checkpoints = 0

    def get(self, tb: TableBucket) -> FakeLog | None:
        return self.logs.get(tb)

    def get_or_create(self, tb: TableBucket, log_config=None) -> FakeLog:
        return self.logs.setdefault(tb, FakeLog(tb))

    def delete(self, tb: TableBucket) -> None:
        self.logs.pop(tb, None)

    def checkpoint(self) -> None:
        self.checkpoints += 1


# ---------------------------------------------------------------- network seams


class LocalLeaderEndpoint:
    """A LeaderEndpoint that calls the leader's ReplicaManager directly; ``down`` makes calls fail."""

    def __init__(self, cluster: Cluster, leader_id: int) -> None:
        self.cluster = cluster
        self.leader_id = leader_id
        self.calls = 0
        self.closed = False

    def _target(self):
        if self.leader_id in self.cluster.down or self.leader_id not in self.cluster.managers:
            raise NetworkExceptionError(f"server {self.leader_id} is down")
        return self.cluster.managers[self.leader_id]

    async def fetch(self, request: FetchRequest):
        self.calls += 1
        await asyncio.sleep(0)
        return await self._target().fetch(
            request.replica_id, request.max_wait_s, request.min_bytes, request.max_bytes, request.buckets
        )

    async def offsets_for_leader_epoch(self, replica_id: int, requests: Sequence[EpochRequest]):
        self.calls += 1
        await asyncio.sleep(0)
        return await self._target().offsets_for_leader_epoch(requests)

    async def close(self) -> None:
        self.closed = True


@dataclass
class GatewayCall:
    server_id: int
    items: list[AdjustIsrItem]


class FakeCoordinator:
    """Holds each bucket's LeaderAndIsr and applies AdjustIsr with the coordinator's checks."""

    def __init__(self) -> None:
        self.state: dict[TableBucket, LeaderAndIsr] = {}
        self.calls: list[GatewayCall] = []
        self.block: asyncio.Event | None = None
        self.fail = False

    async def adjust_isr(self, server_id: int, items: Sequence[AdjustIsrItem]):
        self.calls.append(GatewayCall(server_id, list(items)))
        if self.block is not None:
            await self.block.wait()
        if self.fail:
            raise NetworkExceptionError("coordinator unreachable")
        out = {}
        for i in items:
            cur = self.state[i.table_bucket]
            if i.leader_epoch < cur.leader_epoch:
                out[i.table_bucket] = AdjustIsrResult(i.table_bucket, FencedLeaderEpochError())
            elif i.bucket_epoch != cur.bucket_epoch:
                out[i.table_bucket] = AdjustIsrResult(i.table_bucket, InvalidUpdateVersionError())
            else:
                new = cur.with_isr(i.new_isr, cur.coordinator_epoch)
                self.state[i.table_bucket] = new
                out[i.table_bucket] = AdjustIsrResult(i.table_bucket, None, new)
        return out


class Cluster:
    """Several ReplicaManagers sharing a FakeCoordinator and in-memory endpoints (built by tests/conftest)."""

    def __init__(self) -> None:
        self.managers: dict = {}
        self.down: set[int] = set()
        self.coordinator = FakeCoordinator()
        self.endpoints: list[LocalLeaderEndpoint] = []

    def endpoint_factory(self, node):
        ep = LocalLeaderEndpoint(self, node.id)
        self.endpoints.append(ep)
        return ep
