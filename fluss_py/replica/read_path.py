"""The leader's read path: fetches (sessionless and in incremental sessions), long polls, the response byte
budget and the rebalance throttle, and ListOffsets / OffsetsForLeaderEpoch.

Reads go to the ``Replica`` (leader only, epoch checked by ``ReplicaManager.leader_replica``); a follower's fetch
records its progress, which may move the HW (``ReplicaManager.hw_maybe_moved``) or propose an ISR change
(``IsrChanges.propose``). Nothing here looks inside a batch: records stay opaque bytes.

Each session request also feeds the read fence of KV reads (``read_fence.py``): its arrival may confirm a
waiting round, and a round that needs its answer ends its long poll at once.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from fluss_py.common import latency_trace as trace
from fluss_py.errors import InvalidRequestError, ReplicaNotAssignedError
from fluss_py.replica.delayed import DelayedFetch, Waker, wait_futures
from fluss_py.replica.fetch_session import FetchSession, FetchSessionCache
from fluss_py.replica.messages import (
    EpochRequest,
    EpochResult,
    FetchBucketRequest,
    FetchBucketResult,
    FetchRequest,
    FetchResponse,
    FetchResult,
    KvSize,
    ListOffsetsRequest,
    ListOffsetsResult,
    OffsetSpec,
    as_api_error,
)
from fluss_py.replica.read_fence import ReadFence
from fluss_py.replica.replica import LocalReplicaState, Replica
from fluss_py.replica.throttle import ReplicationThrottle
from fluss_py.types import TableBucket

if TYPE_CHECKING:
    from fluss_py.replica.manager import ReplicaManager


class ReadPath:
    """Owns the parked client fetches (``delayed_fetch``), the fetch sessions, the read fence of KV reads
    (``fence``) and the rebalance throttle, and
    answers FetchLog, ListOffsets and OffsetsForLeaderEpoch for the ``ReplicaManager`` that built it (the
    tablet service calls them through the manager from its RPC handlers; everything runs on the server's one
    asyncio loop). ``replicas`` is the manager's own map, read, never changed here."""

    def __init__(
        self,
        manager: ReplicaManager,
        replicas: Mapping[TableBucket, Replica],
        throttle_bytes_per_s: int,
        max_fetch_bytes: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._rm = manager
        self._replicas = replicas
        self.delayed_fetch = DelayedFetch()
        self.fetch_sessions = FetchSessionCache(clock)
        self.fence = ReadFence(manager.server_id, replicas, self.fetch_sessions, clock)  # KV reads' ISR confirmation
        rate = throttle_bytes_per_s  # burst: one second of budget, at most one follower fetch
        self.throttle = ReplicationThrottle(rate, min(rate, max_fetch_bytes), clock)
        self.unassigned_fetches = 0  # follower fetches of buckets the fetcher holds no replica of (/metrics)

    async def fetch(
        self,
        replica_id: int,
        max_wait_s: float,
        min_bytes: int,
        max_bytes: int,
        requests: Sequence[FetchBucketRequest],
    ) -> dict[TableBucket, FetchBucketResult]:
        """A sessionless fetch for a client (``replica_id`` -1: up to HW) or a follower (its server id: up to
        LEO, recording its progress). Long-polls up to ``max_wait_s`` until ``min_bytes`` are available or a
        bucket errs."""
        for_follower = replica_id >= 0
        results = self._read_all(replica_id, max_bytes, requests)
        if max_wait_s <= 0 or self._fetch_satisfied(results, min_bytes, for_follower):
            return results
        by_bucket = {r.table_bucket: r for r in requests}
        waiter = self.delayed_fetch.park(by_bucket, for_follower=for_follower)
        try:
            await self._long_poll(waiter, by_bucket, results, replica_id, max_wait_s, min_bytes, max_bytes)
        finally:
            self.delayed_fetch.unpark(waiter)
        return results

    async def fetch_in_session(self, request: FetchRequest) -> FetchResponse:
        """A fetch in an incremental session (``request.session`` set; a follower's or a consumer's): reads the
        buckets the request names (all of them when it opens the session, else the added or moved ones) plus
        those carried or marked since the session's last look, long-polls like ``fetch``, and answers the
        buckets it read. Raises FETCH_SESSION_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH (the fetcher then sends a
        full request)."""
        replica_id, max_bytes, requests = request.replica_id, request.max_bytes, request.buckets
        if request.session is None:
            raise InvalidRequestError("not a session fetch")
        for_follower = replica_id >= 0
        session = self.fetch_sessions.begin(replica_id, request.session, requests)
        self.fence.requested(session)
        # buckets the last answer left behind first, then those marked since, then those named: a bucket with
        # a steady stream of data (named every time) cannot starve the others of the response budget
        to_read = {tb: session.positions[tb] for tb in session.take_carried()}
        to_read.update((tb, session.positions[tb]) for tb in session.take_dirty() if tb not in to_read)
        to_read.update((r.table_bucket, r) for r in requests if r.table_bucket not in to_read)
        results = self._read_all(replica_id, max_bytes, to_read.values())
        max_wait_s, min_bytes = request.max_wait_s, request.min_bytes
        waits = not self._fetch_satisfied(results, min_bytes, for_follower) and not self.fence.owes(session)
        if max_wait_s > 0 and waits:
            await self._long_poll(session, session.positions, results, replica_id, max_wait_s, min_bytes, max_bytes)
        self._carry_over(session, results)
        self.fence.answered(session)
        return FetchResponse(results, session.id)

    async def _long_poll(
        self,
        waiter: Waker,
        positions: Mapping[TableBucket, FetchBucketRequest],
        results: FetchResult,
        replica_id: int,
        max_wait_s: float,
        min_bytes: int,
        max_bytes: int,
    ) -> None:
        """Wait for ``waiter``'s buckets to change and re-read the ones that did into ``results``, until
        ``min_bytes``, an error, ``max_wait_s`` or shutdown."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_s
        while not self._rm.closed:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            await wait_futures((waiter.arm(),), remaining)
            dirty = waiter.take_dirty()
            if not dirty:
                break
            changed = [positions[b] for b in dirty if b in positions]
            results.update(self._read_all(replica_id, max_bytes, changed, results))
            if self._fetch_satisfied(results, min_bytes, replica_id >= 0) or self.fence.owes(waiter):
                break

    def role_changed(self, tb: TableBucket) -> None:
        """``tb`` changed role or left: parked fetches and sessions look again, waiting KV reads too."""
        self.delayed_fetch.role_changed(tb)
        self.fetch_sessions.role_changed(tb)
        self.fence.recheck(tb)

    def _carry_over(self, session: FetchSession, results: FetchResult) -> None:
        """Carry to the front of the session's next request the buckets read without records that still need a
        look: the fetcher is behind (the response budget or the throttle ran out), or a follower is not in the
        ISR (an expansion refused or backing off is proposed again at a later fetch)."""
        for tb, r in results.items():
            if r.records or r.error is not None or r.diverging_epoch is not None:
                continue  # the next request names it (moved) or drops it (backed off)
            position = session.positions.get(tb)
            replica = self._replicas.get(tb)
            if position is None or replica is None:
                continue
            if not session.for_follower:
                if position.fetch_offset < r.high_watermark:
                    session.carry(tb)
            elif position.fetch_offset < r.log_end_offset or session.replica_id not in replica.maximal_isr:
                session.carry(tb)

    def _fetch_satisfied(
        self, results: Mapping[TableBucket, FetchBucketResult], min_bytes: int, for_follower: bool
    ) -> bool:
        """Answer now: an error or divergence, ``min_bytes`` gathered, or (followers) data that an acks=all
        produce is waiting for — so acks=all latency does not depend on replica.fetch.min.bytes."""
        total = 0
        for tb, r in results.items():
            if r.error is not None or r.diverging_epoch is not None:
                return True
            if r.records and for_follower and self._rm.delayed_produce.pending(tb):
                return True
            total += len(r.records)
        return total >= max(min_bytes, 1)

    def _read_all(
        self,
        replica_id: int,
        max_bytes: int,
        to_read: Iterable[FetchBucketRequest],
        previous: Mapping[TableBucket, FetchBucketResult] | None = None,
    ) -> dict[TableBucket, FetchBucketResult]:
        """Read ``to_read`` within the response byte budget (the first bucket with data always gets a batch).
        A follower's buckets a rebalance move is adding it to (not in the ISR) are read last, within the throttle."""
        used = sum(len(r.records) for r in (previous or {}).values())
        out: dict[TableBucket, FetchBucketResult] = {}
        throttled: list[FetchBucketRequest] = []
        for request in to_read:
            tb = request.table_bucket
            if replica_id >= 0 and self.throttle.enabled and self._throttled(tb, replica_id):
                throttled.append(request)
                continue
            used -= len(previous[tb].records) if previous and tb in previous else 0
            budget = min(request.max_bytes, max_bytes - used)
            result = self._read_one(replica_id, request, budget, must_fill=used == 0)
            used += len(result.records)
            out[tb] = result
        for request in throttled:  # after the ISR buckets; an empty answer when the budget is spent
            tb = request.table_bucket
            used -= len(previous[tb].records) if previous and tb in previous else 0
            budget = self.throttle.allowance(max(0, min(request.max_bytes, max_bytes - used)))
            result = self._read_one(replica_id, request, budget, must_fill=False)
            self.throttle.take(len(result.records))
            used += len(result.records)
            out[tb] = result
        return out

    def _throttled(self, tb: TableBucket, follower_id: int) -> bool:
        replica = self._replicas.get(tb)
        return replica is not None and replica.is_throttled(follower_id)

    def _read_one(
        self, replica_id: int, request: FetchBucketRequest, budget: int, must_fill: bool
    ) -> FetchBucketResult:
        tb = request.table_bucket
        replica = self._replicas.get(tb)
        try:
            replica = self._rm.leader_replica(tb, request.current_leader_epoch)
            log_ = replica.log
            follower = replica_id >= 0
            if follower and replica_id not in replica.followers:  # not assigned here, or the leader itself
                self.unassigned_fetches += 1
                raise ReplicaNotAssignedError(
                    f"server {replica_id} holds no follower replica of {tb} (replicas {list(replica.replicas)})"
                )
            if follower:
                diverging = replica.diverging_epoch(request.fetch_offset, request.last_fetched_epoch)
                if diverging is not None:  # the follower's progress is not recorded
                    return FetchBucketResult(
                        tb, None, log_.high_watermark, log_.log_start_offset, log_.log_end_offset, b"", diverging
                    )
            size = max(budget, 1) if must_fill else budget
            records = replica.read(request.fetch_offset, size, for_follower=follower)
            if trace.ENABLED:
                who = f"{replica_id}" if follower else "C"
                trace.mark(f"L_fetch_in{who}", tb, request.fetch_offset)
                if records:
                    trace.mark(f"L_fetch_out{who}", tb, request.fetch_offset)
            if follower:  # only a fetch inside our log counts as progress (and may move the HW)
                hw_moved, proposal = replica.update_follower_fetch(
                    replica_id, request.fetch_offset, request.flushed_offset
                )
                if hw_moved:
                    self._rm.hw_maybe_moved(tb, replica)
                elif replica.flush_on_ack:
                    self._rm.durable_maybe_moved(tb, replica)
                if proposal is not None:
                    self._rm.isr.propose(replica, proposal)
            return FetchBucketResult(tb, None, log_.high_watermark, log_.log_start_offset, log_.log_end_offset, records)
        except Exception as e:
            error = as_api_error(e, f"fetch from {tb}")
            if replica is not None and replica.state in (LocalReplicaState.LEADER, LocalReplicaState.FOLLOWER):
                lg = replica.log
                return FetchBucketResult(tb, error, lg.high_watermark, lg.log_start_offset, lg.log_end_offset)
            return FetchBucketResult(tb, error)

    async def list_offsets(self, requests: Sequence[ListOffsetsRequest]) -> dict[TableBucket, ListOffsetsResult]:
        """EARLIEST = log start, LATEST = LEO, HIGH_WATERMARK = HW, TIMESTAMP = first offset with timestamp
        >= the given one (below the HW), -1 if none. Leader only."""
        out: dict[TableBucket, ListOffsetsResult] = {}
        for r in requests:
            tb = r.table_bucket
            try:
                replica = self._rm.leader_replica(tb)
                lg = replica.log
                hw, leo, start = lg.high_watermark, lg.log_end_offset, lg.log_start_offset
                if r.spec is OffsetSpec.EARLIEST:
                    offset = start
                elif r.spec is OffsetSpec.LATEST:
                    offset = leo
                elif r.spec is OffsetSpec.HIGH_WATERMARK:
                    offset = hw
                else:
                    found = lg.offset_for_timestamp(r.timestamp_ms)
                    offset = found if found is not None and found < hw else -1
                kv = None
                if replica.kv is not None and not replica.kv.closed:  # a primary-key bucket (table describe)
                    footprint = replica.kv.footprint()
                    kv = KvSize(footprint.sst_bytes, footprint.rows_estimate)
                out[tb] = ListOffsetsResult(tb, None, offset, hw, leo, start, kv)
            except Exception as e:
                out[tb] = ListOffsetsResult(tb, as_api_error(e, f"list offsets of {tb}"))
        return out

    async def offsets_for_leader_epoch(self, requests: Sequence[EpochRequest]) -> dict[TableBucket, EpochResult]:
        """Where each asked epoch ends on this leader's log (KIP-279: largest epoch <= asked, its end)."""
        out: dict[TableBucket, EpochResult] = {}
        for r in requests:
            tb = r.table_bucket
            try:
                lg = self._rm.leader_replica(tb, r.current_leader_epoch).log
                epoch, end = lg.end_offset_for_epoch(r.leader_epoch)
                out[tb] = EpochResult(tb, None, epoch, end)
            except Exception as e:
                out[tb] = EpochResult(tb, as_api_error(e, f"offsets for leader epoch of {tb}"))
        return out
