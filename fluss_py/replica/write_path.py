"""The leader's write path: ProduceLog appends, the acks=all wait for the HW (or, with ``log.flush.on-ack``, the
durable offset), and the wake-ups an append and a group flush cause.

The batches are validated once, by ``LogTablet.append_as_leader`` (through ``Replica.append_as_leader``); after
that they stay opaque bytes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING

from fluss_py.common import latency_trace as trace
from fluss_py.errors import ApiError, InvalidRequestError, NotEnoughReplicasAfterAppendError, RequestTimedOutError
from fluss_py.log.tablet import LogTablet
from fluss_py.replica.delayed import wait_futures
from fluss_py.replica.messages import ProduceResult, as_api_error
from fluss_py.replica.replica import ACKS_ALL, Replica
from fluss_py.types import TableBucket

if TYPE_CHECKING:
    from fluss_py.replica.manager import ReplicaManager


class WritePath:
    """Answers ProduceLog for the ``ReplicaManager`` that built it (the tablet service calls ``append`` through
    the manager from its RPC handlers), parking acks=all produces in the manager's ``delayed_produce``; and
    takes the group flusher's callbacks. Owns no state of its own; runs on the server's one asyncio loop."""

    def __init__(self, manager: ReplicaManager, replicas: Mapping[TableBucket, Replica]) -> None:
        self._rm = manager
        self._replicas = replicas

    async def append(
        self, acks: int, timeout_s: float, batches: Mapping[TableBucket, bytes]
    ) -> dict[TableBucket, ProduceResult]:
        """Append each bucket's batches as leader; with acks=all wait (one timer for the whole request) until
        the HW passes each bucket's last offset, or REQUEST_TIMED_OUT."""
        if acks not in (ACKS_ALL, 0, 1):
            error = InvalidRequestError(f"acks must be -1 (all), 0 or 1, not {acks}")
            return {tb: ProduceResult(error) for tb in batches}
        results: dict[TableBucket, ProduceResult] = {}
        waiting: dict[TableBucket, tuple[asyncio.Future[ApiError | None], ProduceResult]] = {}
        for tb, records in batches.items():
            replica = self._replicas.get(tb)
            try:
                if replica is None or not replica.is_leader:
                    raise self._rm.not_leader(tb, replica)
                hw_before = replica.high_watermark
                leo_before = replica.log.log_end_offset
                trace.mark("L_append", tb, leo_before)
                info = replica.append_as_leader(records, acks)
                trace.mark("L_appended", tb, leo_before)
            except Exception as e:
                results[tb] = ProduceResult(as_api_error(e, f"append to {tb}"))
                continue
            if not info.duplicate:
                self.appended(tb, replica, leo_before)
            if replica.flush_on_ack:
                self._rm.group_flush.request(replica.log)  # durable offset: docs/replication.md
                replica.maybe_advance_durable()
            if replica.high_watermark != hw_before:
                self._rm.hw_maybe_moved(tb, replica)
            result = ProduceResult(None, info.first_offset, info.last_offset, info.append_time_ms)
            if acks == ACKS_ALL and replica.ack_offset <= info.last_offset:
                waiting[tb] = (self._rm.delayed_produce.add(tb, info.last_offset + 1), result)
                if info.duplicate:
                    self.duplicate_waits(tb)
            else:
                results[tb] = result
        if waiting:
            futures = [f for f, _ in waiting.values()]
            try:
                await wait_futures(futures, timeout_s)
            except asyncio.CancelledError:  # the caller went away: forget its waiters
                for tb, (future, _) in waiting.items():
                    self._rm.delayed_produce.remove(tb, future)
                raise
            for tb, (future, result) in waiting.items():
                results[tb] = self._complete_produce(tb, future, result, timeout_s)
                trace.mark("L_answer", tb, result.base_offset)
        return {tb: results[tb] for tb in batches}

    def _complete_produce(
        self, tb: TableBucket, future: asyncio.Future[ApiError | None], result: ProduceResult, timeout_s: float
    ) -> ProduceResult:
        if not future.done() or future.cancelled():  # (the timeout cancels the future it was waiting on)
            self._rm.delayed_produce.remove(tb, future)
            future.cancel()
            replica = self._replicas.get(tb)
            what = "durable offset" if replica is not None and replica.flush_on_ack else "HW"
            return ProduceResult(
                RequestTimedOutError(
                    f"bucket {tb}: {what} did not reach offset {result.last_offset + 1} within {timeout_s:.3f}s"
                )
            )
        error = future.result()
        if error is not None:
            return ProduceResult(error)
        replica = self._replicas.get(tb)
        if replica is not None and len(replica.maximal_isr) < replica.min_isr:
            return ProduceResult(
                NotEnoughReplicasAfterAppendError(
                    f"bucket {tb}: appended at {result.base_offset}, but ISR {list(replica.maximal_isr)} < "
                    f"min.insync.replicas {replica.min_isr}"
                )
            )
        return result

    def group_flushed(self, tablets: list[LogTablet]) -> None:
        for t in tablets:
            replica = self._replicas.get(t.table_bucket)
            if replica is not None and replica.log is t and replica.flush_on_ack:
                self._rm.durable_maybe_moved(t.table_bucket, replica)

    def group_flush_failed(self, tablets: list[LogTablet], error: ApiError) -> None:
        """A failed fsync: the produces waiting on those logs are answered with it (the next append
        requests a new round)."""
        for t in tablets:
            replica = self._replicas.get(t.table_bucket)
            if replica is not None and replica.log is t and replica.is_leader:
                self._rm.delayed_produce.fail_bucket(t.table_bucket, error)

    def duplicate_waits(self, tb: TableBucket) -> None:
        """An acks=all retry of a batch the log already holds above the HW now waits: wake the follower fetches
        parked on ``tb``. One of them may hold those very records unanswered (read before any produce waited,
        below ``replica.fetch.min.bytes``), and no append will wake it: without this the retry waits out
        ``replica.fetch.wait.max.ms`` (a failover's retry at a new leader that had the batch, its follower not)."""
        self._rm.reads.delayed_fetch.leo_moved(tb)
        self._rm.reads.fetch_sessions.produce_waits(tb)

    def appended(self, tb: TableBucket, replica: Replica, leo_before: int) -> None:
        """The leader's LEO moved from ``leo_before``: wake follower fetches. A follower whose session held the
        bucket clean at ``leo_before`` polled caught up until its last request (docs/replication.md "Fetch
        sessions": the caught-up rule for buckets a session does not re-read)."""
        self._rm.reads.delayed_fetch.leo_moved(tb)
        for session in self._rm.reads.fetch_sessions.appended(tb):
            position = session.positions.get(tb)
            if position is not None and position.fetch_offset == leo_before:
                replica.note_caught_up(session.replica_id, leo_before, session.last_used)
