"""ReplicaFetcher: ONE task per (this follower server, source leader server), carrying all buckets it follows
from that leader in one long-poll FetchLog.

Per-bucket state::

    add ──► Truncating ──(OffsetsForLeaderEpoch answered, truncation complete)──► Fetching
               ▲   │ (incomplete: ask again with the new latest epoch)               │
               │   └───────────────────────────────────────────────┘               │
               └──────────── diverging epoch / append failure ──────────────────────┘

The body is ``maybe_truncate(); maybe_fetch()``: one OffsetsForLeaderEpoch call for every Truncating bucket,
then one FetchLog for every Fetching bucket. Errors back a bucket off for ``replica.fetch.backoff.ms``; after
a failed call the wait doubles with every further failed call in a row, up to 1 s (``_call_backoff``).
Adding buckets abandons a FetchLog long poll in flight (its buckets are fetched again from the same offsets
in the next round), and a long poll lasts at most until the first backed-off bucket's retry: a bucket whose
leader just moved here must not wait up to ``replica.fetch.wait.max.ms`` for its first fetch while acks=all
writes to it wait for this follower.
A response is applied only if the bucket still has the same fetch state object (not removed or re-added
meanwhile) and the replica is still a follower of this leader at that epoch.

FetchLog runs in an incremental fetch session (docs/replication.md "Fetch sessions", Kafka KIP-227): ``_sent``
is what the leader's session holds, and a round compares only the buckets ``_touched`` since (added, removed,
backed off or back, truncated, appended to) with it, so an idle round costs the same for 1 bucket or 1000.
Any doubt about the leader's state (a failed or abandoned call, a session error) opens a new session with a
full request.

Tables with ``log.flush.on-ack`` (docs/replication.md "Durable acknowledgement"): before a round builds its
request, the fetcher awaits the group flush of every touched on-ack log holding unflushed records, so the
request reports them in ``flushed_offset`` (each bucket's recovery point).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping

from fluss_py.common import latency_trace as trace
from fluss_py.errors import ApiError, ErrorCode
from fluss_py.log.tablet import LogTablet
from fluss_py.replica.fetcher.leader_endpoint import LeaderEndpoint
from fluss_py.replica.fetcher.state import SESSION_ERRORS, BucketFetchState, FetchPhase, FetchSettings, FollowerSession
from fluss_py.replica.isr import truncation_offset
from fluss_py.replica.messages import (
    NO_EPOCH,
    NO_SESSION,
    EpochRequest,
    FetchBucketRequest,
    FetchBucketResult,
    FetchRequest,
    FetchResponse,
    FetchSessionRequest,
)
from fluss_py.replica.replica import Replica
from fluss_py.types import ServerNode, TableBucket

log = logging.getLogger(__name__)

CALL_BACKOFF_MAX_S = 1.0  # the longest wait after failed calls in a row (see ReplicaFetcher._call_backoff)

FlushLogs = Callable[[list[LogTablet]], Awaitable[None]]
"""Flush (fsync) these logs and return when done: ``GroupFlusher.flush``."""


class ReplicaFetcher:
    """Replicates every bucket this server follows from ``leader``. Owns one task and the endpoint.

    ``add_buckets``/``remove_buckets`` are called by ``FetcherManager`` on the event loop at any time; the
    task picks changes up at its next round. ``replica_of(tb)`` returns the local ``Replica`` (or None).
    """

    def __init__(
        self,
        server_id: int,
        leader: ServerNode,
        endpoint: LeaderEndpoint,
        replica_of: Callable[[TableBucket], Replica | None],
        settings: FetchSettings,
        flush: FlushLogs | None = None,
    ) -> None:
        self.server_id = server_id
        self.leader = leader
        self._flush = flush
        self.endpoint = endpoint
        self._replica_of = replica_of
        self.settings = settings
        self._states: dict[TableBucket, BucketFetchState] = {}
        self._truncating: set[TableBucket] = set()  # phase Truncating
        self._backing_off: set[TableBucket] = set()  # retry_at not reached at the last look
        self._touched: set[TableBucket] = set()  # may differ from what the leader's session holds
        self.session = FollowerSession()
        self._new_session = False  # buckets were added: the next request opens a new session
        self._changed = asyncio.Event()
        self._inflight: asyncio.Task[FetchResponse] | None = None  # the FetchLog call; add_buckets cancels it
        self._task: asyncio.Task[None] | None = None
        self.failure: BaseException | None = None
        self.rounds = 0
        self.failed_calls = 0  # consecutive whole-call failures
        self.full_requests = 0  # requests that opened a session (all buckets named)

    def __repr__(self) -> str:
        return f"ReplicaFetcher(leader={self.leader.id}, buckets={len(self._states)})"

    # ------------------------------------------------------------ membership

    def add_buckets(self, buckets: Mapping[TableBucket, int]) -> None:
        """Follow ``{bucket: leader_epoch}`` from this leader, each starting in Truncating. Ends the fetch
        session (and the stream carrying it, bound to the epochs it was opened with: docs/replication.md
        "Streamed follower fetches") even when no call is in flight: the next request is a full one."""
        for tb, epoch in buckets.items():
            self._states[tb] = BucketFetchState(epoch)
            self._truncating.add(tb)
            self._backing_off.discard(tb)
            self._touched.add(tb)
        self._changed.set()
        self._new_session = True  # (not a reset here: an answer already on its way is still applied in order)
        if self._inflight is not None:  # end a long poll in flight: the next round fetches these with the others
            self._inflight.cancel()

    def remove_buckets(self, buckets: list[TableBucket]) -> None:
        for tb in buckets:
            self._states.pop(tb, None)
            self._truncating.discard(tb)
            self._backing_off.discard(tb)
            self._touched.add(tb)
        self._changed.set()

    @property
    def buckets(self) -> dict[TableBucket, BucketFetchState]:
        return dict(self._states)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"replica-fetcher-{self.server_id}-from-{self.leader.id}")
        self._task.add_done_callback(self._on_done)

    def _on_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            self.failure = task.exception()
            log.error("replica fetcher from leader %d died", self.leader.id, exc_info=self.failure)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            except Exception:  # already surfaced by _on_done
                pass
        await self.endpoint.close()

    # ------------------------------------------------------------ body

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            self._changed.clear()
            self._end_backoffs(loop.time())
            truncated = await self.maybe_truncate()
            fetched = await self.maybe_fetch()
            self.rounds += 1
            if not truncated and not fetched:
                await self._idle(loop)

    async def _idle(self, loop: asyncio.AbstractEventLoop) -> None:
        """Nothing was ready: wait for a membership change or the earliest backoff to end."""
        retry = self._next_retry()
        timeout = None if retry is None else max(0.0, retry - loop.time())
        try:
            # (not asyncio.wait_for: on 3.11 it can swallow a cancel that races with the event being set)
            async with asyncio.timeout(timeout):
                await self._changed.wait()
        except TimeoutError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():  # a close() raced with the timeout: it wins
                raise asyncio.CancelledError from None

    def _next_retry(self) -> float | None:
        """When the earliest backed-off bucket may be tried again (None: none is backing off)."""
        return min((self._states[tb].retry_at for tb in self._backing_off), default=None)

    def _end_backoffs(self, now: float) -> None:
        for tb in [tb for tb in self._backing_off if self._states[tb].retry_at <= now]:
            self._backing_off.discard(tb)
            self._touched.add(tb)

    def _set_phase(self, tb: TableBucket, state: BucketFetchState, phase: FetchPhase) -> None:
        state.phase = phase
        if phase is FetchPhase.TRUNCATING:
            self._truncating.add(tb)
        else:
            self._truncating.discard(tb)
        self._touched.add(tb)

    def _call_failed(self, what: str, e: ApiError) -> None:
        """Warn once when calls to the leader start failing (then debug: it retries every backoff)."""
        self.failed_calls += 1
        level = logging.WARNING if self.failed_calls == 1 else logging.DEBUG
        longest = max(self.settings.backoff_s, CALL_BACKOFF_MAX_S)
        log.log(level, "%s to leader %d failed (retrying in %.3fs, doubling while calls fail, at most %gs): %s",
                what, self.leader.id, self._call_backoff(), longest, e)  # fmt: skip

    def _call_succeeded(self) -> None:
        if self.failed_calls:
            log.info("leader %d answers again after %d failed calls", self.leader.id, self.failed_calls)
            self.failed_calls = 0

    def _call_backoff(self) -> float:
        """How long buckets wait after a failed call: ``replica.fetch.backoff.ms``, doubled with every further
        call to this leader that failed in a row, at most ``CALL_BACKOFF_MAX_S`` (never below the setting).
        A leader that is gone (a kill -9, until the coordinator moves its buckets) is not asked for every
        followed bucket every 50 ms: each attempt builds a full request (a new session) over all of them."""
        base = self.settings.backoff_s
        return min(max(base, CALL_BACKOFF_MAX_S), base * 2 ** min(max(0, self.failed_calls - 1), 16))

    def _back_off(self, tb: TableBucket, state: BucketFetchState, delay: float | None = None) -> None:
        state.retry_at = asyncio.get_running_loop().time() + (self.settings.backoff_s if delay is None else delay)
        if self._states.get(tb) is state:
            self._backing_off.add(tb)
            self._touched.add(tb)

    def _current(self, tb: TableBucket, state: BucketFetchState) -> Replica | None:
        """The replica, if this response still applies to it (same state object, still following us)."""
        if self._states.get(tb) is not state:
            return None
        replica = self._replica_of(tb)
        if replica is None or not replica.is_follower_of(self.leader.id, state.leader_epoch):
            return None
        return replica

    async def maybe_truncate(self) -> bool:
        """Truncate every Truncating bucket by the leader's end offset of its latest epoch (KIP-101/279)."""
        ready: dict[TableBucket, tuple[BucketFetchState, Replica]] = {}
        for tb in self._truncating:
            state = self._states[tb]
            if tb in self._backing_off:
                continue
            replica = self._replica_of(tb)
            if replica is not None and replica.is_follower_of(self.leader.id, state.leader_epoch):
                ready[tb] = (state, replica)
        if not ready:
            return False
        requests = []
        for tb, (state, replica) in ready.items():
            latest = replica.log.latest_epoch
            if latest is None:  # nothing written under any epoch: nothing can have diverged
                self._set_phase(tb, state, FetchPhase.FETCHING)
                continue
            requests.append(EpochRequest(tb, latest, state.leader_epoch))
        if not requests:
            return True
        try:
            results = await self.endpoint.offsets_for_leader_epoch(self.server_id, requests)
        except ApiError as e:
            self._call_failed("OffsetsForLeaderEpoch", e)
            delay = self._call_backoff()
            for tb, (state, _) in ready.items():
                self._back_off(tb, state, delay)
            return True
        self._call_succeeded()
        for request in requests:
            tb = request.table_bucket
            state = ready[tb][0]
            replica = self._current(tb, state)
            result = results.get(tb)
            if replica is None:
                continue
            if result is None or result.error is not None:
                log.info("bucket %s: OffsetsForLeaderEpoch: %s", tb, result.error if result else "no answer")
                self._back_off(tb, state)
                continue
            self._truncate(tb, state, replica, result.leader_epoch, result.end_offset, request.leader_epoch)
        return True

    def _truncate(
        self, tb: TableBucket, state: BucketFetchState, replica: Replica, epoch: int, end: int, asked: int
    ) -> None:
        log_ = replica.log
        decision = truncation_offset(epoch, end, log_.log_end_offset, log_.high_watermark, log_.end_offset_for_epoch)
        replica.truncate_to(decision.offset)
        latest = log_.latest_epoch
        if decision.complete or latest is None or latest >= asked:
            # (an incomplete step that removed no epoch cannot make progress by asking again)
            self._set_phase(tb, state, FetchPhase.FETCHING)
        else:
            self._set_phase(tb, state, FetchPhase.TRUNCATING)

    # ------------------------------------------------------------ fetch

    def _wanted(self, tb: TableBucket) -> tuple[FetchBucketRequest, BucketFetchState] | None:
        """What the leader's session should hold for ``tb`` now (None: nothing, it is not being fetched)."""
        state = self._states.get(tb)
        if state is None or state.phase is not FetchPhase.FETCHING or tb in self._backing_off:
            return None
        replica = self._replica_of(tb)
        if replica is None or not replica.is_follower_of(self.leader.id, state.leader_epoch):
            return None
        latest = replica.log.latest_epoch
        request = FetchBucketRequest(
            tb,
            replica.log.log_end_offset,
            self.settings.max_bytes,
            state.leader_epoch,
            NO_EPOCH if latest is None else latest,
            replica.log.recovery_point,
        )
        return request, state

    def _next_request(self) -> FetchRequest | None:
        """The session's next request: every fetched bucket when it opens one, else the buckets touched since
        the last request whose position changed, and those to forget. None when nothing is fetched."""
        session = self.session
        if self._new_session:
            self._new_session = False
            session.reset()
        if session.id == NO_SESSION:
            session.sent.clear()
            candidates: Iterable[TableBucket] = list(self._states)
        else:
            candidates = self._touched
        self._touched = set()
        changed: list[FetchBucketRequest] = []
        forgotten: list[TableBucket] = []
        for tb in candidates:
            wanted = self._wanted(tb)
            sent = session.sent.get(tb)
            if wanted is None:
                if sent is not None:
                    del session.sent[tb]
                    forgotten.append(tb)
            elif sent is None or sent[0] != wanted[0] or sent[1] is not wanted[1]:
                session.sent[tb] = wanted
                changed.append(wanted[0])
        if not session.sent:  # nothing to fetch: drop the session (the leader evicts it when idle)
            session.reset()
            return None
        if session.id == NO_SESSION:
            self.full_requests += 1
        s = self.settings
        return FetchRequest(
            self.server_id,
            self._poll_wait(),
            s.min_bytes,
            s.max_bytes,
            tuple(changed),
            FetchSessionRequest(session.id, session.epoch, tuple(forgotten)),
        )

    async def _flush_on_ack_logs(self) -> None:
        """log.flush.on-ack: fsync the touched on-ack logs with records above their recovery point (appended
        to by the last answer, or unflushed since a restart) before the next request reports them."""
        if self._flush is None:
            return
        logs = []
        for tb in self._touched:
            replica = self._replica_of(tb)  # the table setting first: most tables have no on-ack flush
            if replica is None or not replica.flush_on_ack or replica.log.recovery_point >= replica.log.log_end_offset:
                continue
            state = self._states.get(tb)
            if state is not None and self._current(tb, state) is replica:
                logs.append(replica.log)
        if not logs:
            return
        try:
            await self._flush(logs)
        except ApiError as e:  # logged by the flusher too; the next append here tries again, the leader waits
            log.warning("flush of %d logs followed from leader %d failed: %s", len(logs), self.leader.id, e)

    async def maybe_fetch(self) -> bool:
        await self._flush_on_ack_logs()
        request = self._next_request()
        if request is None:
            return False
        if trace.ENABLED:
            for r in request.buckets:
                trace.mark("F_req", r.table_bucket, r.fetch_offset)
        try:
            response = await self._fetch_unless_added(request)
        except ApiError as e:
            sent = list(self.session.sent.items())
            self.session.reset()  # the leader may or may not have applied the request
            if e.code in SESSION_ERRORS:
                log.info("fetch session with leader %d ends (%s): opening a new one", self.leader.id, e)
                return True
            self._call_failed("FetchLog", e)
            delay = self._call_backoff()
            for tb, (_, state) in sent:
                self._back_off(tb, state, delay)
            return True
        if response is None:  # buckets were added: a new session fetches them with the others
            self.session.reset()
            return True
        self._call_succeeded()
        self._apply_response(response)
        self.session.answered(response.session_id)
        return True

    def _apply_response(self, response: FetchResponse) -> None:
        sent = self.session.sent
        for tb, result in response.buckets.items():
            entry = sent.get(tb)
            if entry is None:
                continue
            request, state = entry
            self._touched.add(tb)  # its position may move, or it may have to be forgotten
            replica = self._current(tb, state)
            if replica is None or replica.log.log_end_offset != request.fetch_offset:
                continue
            try:
                self._apply(tb, state, replica, result)
            except ApiError as e:
                log.error("bucket %s: cannot apply data fetched from leader %d: %s", tb, self.leader.id, e)
                self._set_phase(tb, state, FetchPhase.TRUNCATING)
                self._back_off(tb, state)

    def _poll_wait(self) -> float:
        """The long poll ends when the first backed-off bucket may be tried again (e.g. refused because the
        follower heard of the new leader before the leader did), not after ``wait_max_s`` regardless."""
        retry = self._next_retry()
        if retry is None:
            return self.settings.wait_max_s
        return max(0.0, min(self.settings.wait_max_s, retry - asyncio.get_running_loop().time()))

    async def _fetch_unless_added(self, request: FetchRequest) -> FetchResponse | None:
        """The FetchLog answer, or None when ``add_buckets`` cancelled the call before it came. This task
        awaits the call's task itself: it resumes in the loop turn after the answer (no ``asyncio.wait``, whose
        callback takes one more; docs/performance.md)."""
        fetch = self._inflight = asyncio.ensure_future(self.endpoint.fetch(request))
        try:
            return await fetch
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if fetch.cancelled() and (task is None or not task.cancelling()):
                return None  # add_buckets abandoned the call; this task goes on
            raise  # this task is being cancelled (close): awaiting the call cancelled it too
        finally:
            self._inflight = None
            if not fetch.done():  # (cannot happen: kept so that no call outlives this task)
                fetch.cancel()

    def _apply(self, tb: TableBucket, state: BucketFetchState, replica: Replica, result: FetchBucketResult) -> None:
        if result.error is not None:
            self._on_error(tb, state, replica, result)
        elif result.diverging_epoch is not None:
            d = result.diverging_epoch
            log.info("bucket %s: diverged from leader %d at epoch %d end %d", tb, self.leader.id, d.epoch, d.end_offset)
            latest = replica.log.latest_epoch
            self._truncate(tb, state, replica, d.epoch, d.end_offset, NO_EPOCH if latest is None else latest)
        else:
            offset = replica.log.log_end_offset
            if result.records:
                trace.mark("F_recv", tb, offset)
            replica.append_as_follower(result.records, result.high_watermark)
            if result.records:
                trace.mark("F_appended", tb, offset)

    def _on_error(self, tb: TableBucket, state: BucketFetchState, replica: Replica, result: FetchBucketResult) -> None:
        assert result.error is not None
        if result.error.code is ErrorCode.OFFSET_OUT_OF_RANGE:
            leo = replica.log.log_end_offset
            if 0 <= result.log_end_offset < leo:
                log.warning("bucket %s: leader %d LEO %d below ours %d", tb, self.leader.id, result.log_end_offset, leo)
                replica.truncate_to(result.log_end_offset)
                return
            if leo < result.log_start_offset:
                replica.truncate_fully_and_start_at(result.log_start_offset)
                return
        log.info("bucket %s: fetch from leader %d: %s", tb, self.leader.id, result.error)
        self._back_off(tb, state)
