"""Fakes at the replica layer's network seams: a clock, a leader endpoint wired straight to another
ReplicaManager, and a coordinator that validates AdjustIsr like the real one. Logs are real LogTablets."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fluss_py.errors import (
    ApiError,
    FencedLeaderEpochError,
    InvalidUpdateVersionError,
    NetworkExceptionError,
    RequestTimedOutError,
)
from fluss_py.record import RecordBatchBuilder, iter_batches
from fluss_py.replica.fetch_stream import FetchStreamClient, FetchStreamGuard
from fluss_py.replica.log_faults import CORRUPT
from fluss_py.replica.messages import (
    NO_SESSION,
    AdjustIsrItem,
    AdjustIsrResult,
    EpochRequest,
    FetchBucketRequest,
    FetchRequest,
    FetchResponse,
    FetchSessionRequest,
)
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


# ---------------------------------------------------------------- network seams


class LocalFetchStream:
    """A FetchLogStream to a leader ReplicaManager in this process, like the servicer's: a leader-side task
    reads requests in order, checks each against a ``FetchStreamGuard``, and answers into a queue; a refusal
    or a whole-request error is the last answer (then the stream reads as ended). ``cancel`` stops the task."""

    def __init__(self, endpoint: LocalLeaderEndpoint) -> None:
        self._endpoint = endpoint
        self._requests: asyncio.Queue[FetchRequest] = asyncio.Queue()
        self._answers: asyncio.Queue[FetchResponse | BaseException] = asyncio.Queue()
        self._task = asyncio.create_task(self._serve())

    async def write(self, request: FetchRequest) -> None:
        self._requests.put_nowait(request)

    async def read(self) -> FetchResponse:
        answer = await self._answers.get()
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def cancel(self) -> None:
        self._task.cancel()

    async def _serve(self) -> None:
        guard: FetchStreamGuard | None = None
        try:
            while True:
                request = await self._requests.get()
                guard = guard or FetchStreamGuard(request.replica_id)
                session = request.session.id if request.session is not None else None
                error = guard.admit(
                    request.replica_id, session, ((r.table_bucket, r.current_leader_epoch) for r in request.buckets)
                )
                if error is not None:
                    self._endpoint.stream_refusals.append(error)
                    self._answers.put_nowait(error)
                    return
                try:
                    answer = await self._endpoint._target().fetch_in_session(request)
                    self._endpoint._target()  # cut off while the fetch was parked: the answer is lost
                except ApiError as e:
                    self._answers.put_nowait(e)
                    return
                self._answers.put_nowait(answer)
                if not guard.answered(answer.session_id, failed=False):
                    return
        finally:
            self._answers.put_nowait(NetworkExceptionError("the leader ended the fetch stream"))


class LocalLeaderEndpoint:
    """A LeaderEndpoint that calls the leader's ReplicaManager directly; ``down`` makes calls fail.
    With ``cluster.streams`` a fetch session travels on a ``LocalFetchStream`` (through a
    ``FetchStreamClient``, as ``GrpcLeaderEndpoint`` does)."""

    def __init__(self, cluster: Cluster, leader_id: int) -> None:
        self.cluster = cluster
        self.leader_id = leader_id
        self.calls = 0
        self.closed = False
        self.epoch_answers: list[dict] = []  # every OffsetsForLeaderEpoch answer, in order
        self.fetch_answers: list[FetchResponse] = []  # every FetchLog answer, in order
        self.streams = FetchStreamClient(lambda: LocalFetchStream(self))
        self.stream_refusals: list[ApiError] = []  # every binding a stream's leader side refused

    def _target(self):
        if self.leader_id in self.cluster.down or self.leader_id not in self.cluster.managers:
            raise NetworkExceptionError(f"server {self.leader_id} is down")
        return self.cluster.managers[self.leader_id]

    async def fetch(self, request: FetchRequest) -> FetchResponse:
        self.calls += 1
        await asyncio.sleep(0)
        if self.cluster.streams and request.session is not None:
            response = await self.streams.exchange(request, opens_session=request.session.id == NO_SESSION)
            self.fetch_answers.append(response)
            return response
        if request.session is None:
            args = (request.replica_id, request.max_wait_s, request.min_bytes, request.max_bytes, request.buckets)
            response = FetchResponse(await self._target().fetch(*args))
        else:
            response = await self._target().fetch_in_session(request)
        self._target()  # cut off while the fetch was parked: the answer is lost
        self.fetch_answers.append(response)
        return response

    async def offsets_for_leader_epoch(self, replica_id: int, requests: Sequence[EpochRequest]):
        self.calls += 1
        await asyncio.sleep(0)
        answer = await self._target().offsets_for_leader_epoch(requests)
        self.epoch_answers.append(answer)
        return answer

    async def close(self) -> None:
        self.closed = True
        self.streams.drop()


class HandFetches:
    """One follower's fetch session with a leader's ReplicaManager, each request sent by the test as the
    follower's fetcher would: the next request only after the answer to the previous one. ``open`` starts a
    session naming ``positions`` (bucket -> (fetch offset, leader epoch)); ``next`` continues it, naming only
    the buckets given (the others stay as the session holds them)."""

    def __init__(self, leader, follower_id: int) -> None:
        self.leader = leader
        self.follower_id = follower_id
        self.session_id = NO_SESSION
        self.epoch = 0

    async def open(self, positions: dict, max_wait_s: float = 0.0) -> FetchResponse:
        self.session_id, self.epoch = NO_SESSION, 0
        return await self.next(positions, max_wait_s)

    async def next(self, positions: dict | None = None, max_wait_s: float = 0.0, forgotten=()) -> FetchResponse:
        buckets = tuple(
            FetchBucketRequest(tb, offset, 1 << 20, current_leader_epoch=epoch)
            for tb, (offset, epoch) in (positions or {}).items()
        )
        session = FetchSessionRequest(self.session_id, self.epoch, tuple(forgotten))
        request = FetchRequest(self.follower_id, max_wait_s, 1, 1 << 20, buckets, session)
        answer = await self.leader.fetch_in_session(request)
        self.epoch = 1 if answer.session_id != self.session_id else self.epoch + 1
        self.session_id = answer.session_id
        return answer


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
        self.lose_answers = 0  # the next N AdjustIsr calls are applied, then fail (the answer is lost)
        self.after_lost_answer: Callable[[], None] | None = None  # runs once an answer was lost
        self.faults: list[tuple[int, int, list[TableBucket]]] = []  # (server, ReplicaFault, buckets)
        self.fault_answers: asyncio.Event | None = None  # when set up: reports wait for it (no answer yet)

    async def report_replica_faults(self, server_id: int, fault: int, buckets: Sequence[TableBucket], reason: str):
        if self.fail:
            raise NetworkExceptionError("coordinator unreachable")
        self.faults.append((server_id, fault, list(buckets)))
        if self.fault_answers is not None:
            await self.fault_answers.wait()
        if fault == CORRUPT:  # as the coordinator does before it answers: a corrupt follower leaves the ISR
            for tb in buckets:
                cur = self.state.get(tb)
                if cur is not None and cur.leader != server_id and server_id in cur.isr:
                    self.state[tb] = cur.with_isr(tuple(r for r in cur.isr if r != server_id), cur.coordinator_epoch)

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
            elif tuple(i.new_isr) == cur.isr:  # an idempotent retry (coordinator/election.py adjust_isr, 3.)
                out[i.table_bucket] = AdjustIsrResult(i.table_bucket, None, cur)
            elif i.bucket_epoch != cur.bucket_epoch:
                out[i.table_bucket] = AdjustIsrResult(i.table_bucket, InvalidUpdateVersionError())
            else:
                new = cur.with_isr(i.new_isr, cur.coordinator_epoch)
                self.state[i.table_bucket] = new
                out[i.table_bucket] = AdjustIsrResult(i.table_bucket, None, new)
        if self.lose_answers > 0:
            self.lose_answers -= 1
            if self.after_lost_answer is not None:
                self.after_lost_answer()
            raise RequestTimedOutError("AdjustIsr answer lost (the change was written)")
        return out


class Cluster:
    """Several ReplicaManagers sharing a FakeCoordinator and in-memory endpoints (built by tests/conftest)."""

    def __init__(self) -> None:
        self.managers: dict = {}
        self.down: set[int] = set()
        self.streams = False  # followers fetch on LocalFetchStreams (else one call per request)
        self.coordinator = FakeCoordinator()
        self.endpoints: list[LocalLeaderEndpoint] = []

    def endpoint_factory(self, node):
        ep = LocalLeaderEndpoint(self, node.id)
        self.endpoints.append(ep)
        return ep


def log_contents(log) -> list[tuple[int, int, bytes]]:
    """(offset, leader epoch, value) of every record of a LogTablet."""
    data = log.read(log.log_start_offset, 1 << 30, log.log_end_offset).records
    return [(r.offset, b.leader_epoch, r.value) for b in iter_batches(data) for r in b.records()]


def epochs(log) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in log.epoch_cache.entries()]
