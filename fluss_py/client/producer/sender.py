"""The sender: the producer's one background task moving batches from the accumulator to bucket leaders.

Each round it (1) fails batches past their delivery timeout (queued, waiting to retry, or on the wire),
(2) picks per bucket at most one batch to send — a retry (lowest sequence, once nothing of that bucket is
in flight) or else the ready head of the accumulator queue while fewer than ``max_in_flight_per_bucket``
are in flight — (3) groups them by leader
server into ONE ProduceLog request per server carrying many buckets, fires those requests as tasks, and
(4) sleeps until a new batch, an answer, a linger or backoff timer, or a metadata refresh wakes it.

A record sent by ``send_and_wait`` while no request is on the wire (``idle``: a one-at-a-time caller) does not
wait for the loop to wake: right after ``send`` returns (the turn it appended the record) the producer runs one
round itself (``send_now``), so the request task starts in the next turn (two turns from the call to the write,
one saved). The loop, woken by the append, runs its round in that turn too, just before the request task: it
finds the batch in flight to its leader (``_start_requests`` marks batches sent in the round that picks them)
and only arms its timers. ``send`` never does (a caller sending several records in one turn would
have the first go alone and the rest in a second request), nor does anything while a request is on the wire:
those records wait for the loop's round as before, and batch meanwhile. A round is the same code either way
(one round at a time: both run synchronously on one loop), so the ordering and idempotence rules do not depend
on who runs it.

Answers are judged per bucket by ``BucketSequencer`` (ordering and exactly-once rules, see
``idempotence.py``). Errors that invalidate metadata move the bucket's leader at once when the error
names the new leader (and then retry without delay), else request a metadata refresh; the per-bucket
backoff starts at ``retry.backoff`` (tens of ms) and doubles up to ``retry.backoff_max``.

Owned by the producer's event loop. Only the sender task, the request tasks it spawns and ``send_now``
(from ``Producer.send_and_wait``, synchronously) touch the sequencers; ``Producer`` otherwise only appends to the
accumulator and waits on futures.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from typing import Any

from fluss_py.client.metadata import ClusterMetadata, RefreshThrottle
from fluss_py.client.options import Backoff, ProducerOptions
from fluss_py.client.producer.accumulator import BufferPool, ProducerBatch, RecordAccumulator
from fluss_py.client.producer.idempotence import BucketSequencer, Outcome, WriterIdSource
from fluss_py.client.producer.request import encode_produce_request
from fluss_py.client.tasks import TaskSet
from fluss_py.client.transport import PRODUCE_LOG, Transport
from fluss_py.errors import ErrorCode, FlussError, NetworkExceptionError, OutOfOrderSequenceError, RequestTimedOutError
from fluss_py.record import NO_WRITER_ID
from fluss_py.rpc.convert import to_client_exception
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)

_STALL_CHECK = 1.0  # a request unanswered this long triggers a metadata refresh (has the leader moved?)


class _BucketState:
    __slots__ = ("backoff", "retry_at", "sequencer")

    def __init__(self, sequencer: BucketSequencer[ProducerBatch], backoff: Backoff) -> None:
        self.sequencer = sequencer
        self.backoff = backoff
        self.retry_at = 0.0


class Sender:
    """Background send loop (see module docstring). ``start()`` once; ``close()`` stops it."""

    def __init__(
        self,
        accumulator: RecordAccumulator,
        pool: BufferPool,
        metadata: ClusterMetadata,
        transport: Transport,
        options: ProducerOptions,
        writer_ids: WriterIdSource | None,
    ) -> None:
        self._acc = accumulator
        self._pool = pool
        self._metadata = metadata
        self._transport = transport
        self._options = options
        self._writer_ids = writer_ids if options.idempotence else None
        self._writer_id: int | None = None if self._writer_ids is not None else NO_WRITER_ID
        self._buckets: dict[TableBucket, _BucketState] = {}
        self._tasks = TaskSet(on_error=self._task_failed, on_done=self._acc.wakeup.set)
        self._resetting: set[TableBucket] = set()
        self._allocating = False
        self._refresh = RefreshThrottle(metadata, options.retry, self._acc.wakeup.set)
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._requests = 0  # produce request tasks started and not yet done
        self.error: BaseException | None = None  # set when the loop died; surfaced by Producer.send
        self.lost_writer_state = 0  # leaders that answered rule 4's lost writer state (idempotence.py)

    # ---------------------------------------------------------------- lifecycle
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="producer-sender")

    async def close(self) -> None:
        """Stop the loop and abort requests still on the wire (their batches fail)."""
        self._stopping = True
        self._acc.wakeup.set()
        await self._tasks.cancel_all(self._task)

    def fail_all(self, error: BaseException) -> None:
        """Fail every batch not yet completed (forced close, or the loop died)."""
        for batch in list(self._acc.incomplete):
            self._finish_failed(batch, error)
        self._acc.drain_all()
        for state in self._buckets.values():
            state.sequencer.in_flight.clear()
            state.sequencer.retry.clear()

    # ---------------------------------------------------------------- the loop
    @property
    def idle(self) -> bool:
        """No produce request on the wire and the loop running with a writer id: ``send_now`` may run."""
        return (
            self._requests == 0
            and self._task is not None
            and not self._stopping
            and self.error is None
            and self._writer_id is not None
        )

    def send_now(self) -> None:
        """One round of the loop in the caller's turn (``Producer.send_and_wait``, right after it appended a record
        while ``idle``; see the module docstring); the loop is woken to arm its timers."""
        now = time.monotonic()
        self._expire(now)
        requests, _ = self._collect(now)
        self._start_requests(requests)
        self._acc.wakeup.set()  # the append did when it made a batch; not when the record joined one

    def _start_requests(self, requests: dict[int, list[ProducerBatch]]) -> None:
        """Mark the batches sent and spawn one request task per server. Marked here, in the round, not in the
        task's first step: a round that runs in between (the loop woken before the task was spawned, as
        ``send_and_wait``'s append wakes it) sees them in flight to their server, not to none (-1), which it
        would take for a moved leader and abandon."""
        now = time.monotonic()
        for server_id, batches in requests.items():
            sends = []
            for b in batches:
                b.attempts += 1
                b.send_id += 1
                b.sent_to = server_id
                b.sent_at = now
                sends.append((b, b.send_id))
            self._requests += 1  # back down in the request's own last step (``_send``)
            self._spawn(self._send(server_id, sends))

    async def _run(self) -> None:
        try:
            while not self._stopping:
                self._acc.wakeup.clear()
                now = time.monotonic()
                self._expire(now)
                requests, next_wake = self._collect(now)
                self._start_requests(requests)
                if requests:
                    next_wake = now  # a bucket may have more ready batches and in-flight room: look again
                timeout = None if next_wake is None else max(next_wake - time.monotonic(), 0.0005)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):  # not wait_for: 3.11's can swallow a cancel
                        await self._acc.wakeup.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as e:  # a bug: surface it to every caller instead of hanging them
            log.exception("producer sender loop died")
            self.error = e
            self.fail_all(e)
            raise

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.spawn(coro)

    def _task_failed(self, error: BaseException) -> None:
        self.error = error
        self.fail_all(error)

    def _state(self, tb: TableBucket) -> _BucketState:
        state = self._buckets.get(tb)
        if state is None:
            assert self._writer_id is not None
            sequencer: BucketSequencer[ProducerBatch] = BucketSequencer(
                self._writer_id, self._options.in_flight_per_bucket, acks_all=self._options.acks == -1
            )
            state = self._buckets[tb] = _BucketState(sequencer, Backoff(self._options.retry))
        return state

    def _collect(self, now: float) -> tuple[dict[int, list[ProducerBatch]], float | None]:
        """Pick the batches to send this round, per leader server; and when to look again."""
        requests: dict[int, list[ProducerBatch]] = {}
        wake: list[float] = []
        if self._writer_id is None:
            self._ensure_writer_id()
            return requests, None
        missing_leader = stalled = False
        candidates = set(self._acc.queues) | {tb for tb, s in self._buckets.items() if not s.sequencer.idle}
        for tb in candidates:
            state = self._state(tb)
            seq = state.sequencer
            if seq.needs_reset():
                self._start_reset(tb, state)
                # Its batches wait for a new writer id, which may take long (no coordinator answers): wake up
                # to fail them at their delivery timeout (_expire) all the same.
                queue = self._acc.queues.get(tb)
                waiting = [*seq.retry, queue[0]] if queue else seq.retry
                if waiting:
                    wake.append(min(b.deadline for b in waiting))
                continue
            if seq.in_flight:
                self._abandon_moved(tb, seq, now)
            if seq.in_flight:
                wake.append(min(b.deadline for b in seq.in_flight))  # given up on then (_expire)
                oldest = min(b.sent_at for b in seq.in_flight)
                if now - oldest >= _STALL_CHECK:
                    stalled = True  # a slow answer: make sure the leader has not moved
                else:
                    wake.append(oldest + _STALL_CHECK)
            queue = self._acc.queues.get(tb)
            if seq.retry:
                if not seq.in_flight and now < state.retry_at:
                    wake.append(state.retry_at)
                    continue
            elif not (queue and seq.can_send_new()):
                continue
            elif not self._acc.is_ready(queue[0], queue, now):
                wake.append(queue[0].created + self._acc.linger)
                continue
            leader = self._metadata.leader_for(tb)
            if leader is None:
                missing_leader = True
                continue
            if seq.retry:
                batch = seq.take_retry()
                if batch is None:
                    continue
            else:
                batch = self._acc.pop_head(tb)
                seq.assign(batch)
            requests.setdefault(leader.id, []).append(batch)
        if missing_leader or stalled:
            wake.append(self._refresh.request(now))
        else:
            self._refresh.reset()
        return requests, min(wake) if wake else None

    def _abandon_moved(self, tb: TableBucket, seq: BucketSequencer[ProducerBatch], now: float) -> None:
        """Batches in flight to a server that is no longer the bucket's leader are given up on and retried
        at the new leader (rule 3 keeps the order; their late answers are ignored). Without this a
        leader that stopped answering (paused, partitioned) would hold the bucket for a request timeout."""
        leader = self._metadata.leader_for(tb)
        if leader is None:
            return
        for batch in [b for b in seq.in_flight if b.sent_to != leader.id]:
            self._give_up(
                batch, NetworkExceptionError(f"leader of {tb} moved to {leader.id} while a request was in flight")
            )
            self._buckets[tb].retry_at = now  # the new leader is known: no backoff

    def _give_up(self, batch: ProducerBatch, error: FlussError) -> None:
        """Stop waiting for the answer to ``batch``'s current send (a later answer is ignored) and judge it as
        failed with ``error``: the sequencer retries it with its sequence kept, or (past its delivery deadline)
        fails it and renumbers the bucket's later batches under a new writer id, so the copy still on the
        wire, should the leader append it after all, cannot be duplicated by a retry."""
        batch.send_id += 1
        self._on_error(batch, error, batch.sent_to)

    # ---------------------------------------------------------------- writer ids
    def _ensure_writer_id(self) -> None:
        if self._allocating or self._writer_ids is None or not self._acc.has_unsent():
            return
        self._allocating = True
        self._spawn(self._allocate_writer_id())

    async def _allocate_writer_id(self) -> None:
        assert self._writer_ids is not None
        backoff = Backoff(self._options.retry)
        try:
            while self._writer_id is None and not self._stopping:
                try:
                    self._writer_id = await self._writer_ids.allocate()
                except FlussError as e:
                    if not e.retriable:
                        raise
                    log.info("writer id allocation failed, retrying: %s", e)
                    await asyncio.sleep(backoff.next_delay())
        finally:
            self._allocating = False

    def _start_reset(self, tb: TableBucket, state: _BucketState) -> None:
        if tb in self._resetting:
            return
        if self._writer_ids is None:
            self._apply_reset(tb, state, NO_WRITER_ID)
            return
        self._resetting.add(tb)
        self._spawn(self._reset(tb, state))

    async def _reset(self, tb: TableBucket, state: _BucketState) -> None:
        assert self._writer_ids is not None
        backoff = Backoff(self._options.retry)
        try:
            while not self._stopping:
                try:
                    writer_id = await self._writer_ids.allocate()
                    break
                except FlussError as e:
                    if not e.retriable:
                        raise
                    await asyncio.sleep(backoff.next_delay())
            else:
                return
            self._apply_reset(tb, state, writer_id)
        finally:
            self._resetting.discard(tb)

    def _apply_reset(self, tb: TableBucket, state: _BucketState, writer_id: int) -> None:
        log.warning("bucket %s: restarting sequences under writer id %d", tb, writer_id)
        for batch in state.sequencer.reset(writer_id):
            self._finish_failed(batch, _delivery_error(batch))

    # ---------------------------------------------------------------- one request
    async def _send(self, server_id: int, sends: list[tuple[ProducerBatch, int]]) -> None:
        """One request task: ``sends`` are the batches ``_start_requests`` marked sent, each with its send id;
        the count of requests on the wire goes down in its own last step (a done callback would run a turn
        late, after the caller its answer woke)."""
        try:
            node = self._metadata.servers.get(server_id)
            opts = self._options
            request = encode_produce_request(
                opts.acks,
                int(opts.request_timeout * 1000),
                [(b.table_bucket.table_id, b.table_bucket.bucket, b.wire_bytes(0)) for b, _ in sends],
            )
            if opts.acks == 0:
                for b, _ in sends:
                    self._on_success(b, -1)
            try:
                if node is None:
                    raise NetworkExceptionError(f"server {server_id} is not in the cluster metadata")
                # The RPC deadline leaves the server time to answer REQUEST_TIMED_OUT itself.
                response = await self._transport.call(node.address, PRODUCE_LOG, request, opts.request_timeout + 2.0)
            except FlussError as e:
                if opts.acks != 0:
                    self._metadata.request_update()
                    for b, send_id in sends:
                        if b.send_id == send_id:
                            self._on_error(b, e, server_id)
                return
            if opts.acks != 0:
                self._answered(server_id, sends, response)
        finally:
            self._requests -= 1

    def _answered(self, server_id: int, sends: list[tuple[ProducerBatch, int]], response: Any) -> None:
        """Apply ``server_id``'s ProduceLog answer to the batches of ``sends`` not abandoned meanwhile."""
        current = [b for b, send_id in sends if b.send_id == send_id]
        if response.error.code != ErrorCode.NONE:
            error = to_client_exception(response.error)
            for b in current:
                self._on_error(b, error, server_id)
            return
        results = {(r.table_bucket.table_id, r.table_bucket.bucket): r for r in response.buckets}
        for b in current:
            r = results.get((b.table_bucket.table_id, b.table_bucket.bucket))
            if r is None:
                self._on_error(b, NetworkExceptionError(f"no result for bucket {b.table_bucket}"), server_id)
            elif r.error.code != ErrorCode.NONE:
                self._on_error(b, to_client_exception(r.error), server_id)
            else:
                self._on_success(b, r.base_offset)

    def _on_success(self, batch: ProducerBatch, base_offset: int) -> None:
        state = self._buckets[batch.table_bucket]
        state.sequencer.on_success(batch)
        state.backoff.reset()
        self._finish(batch, base_offset)

    def _on_error(self, batch: ProducerBatch, error: FlussError, server_id: int) -> None:
        tb = batch.table_bucket
        state = self._buckets[tb]
        now = time.monotonic()
        batch.last_error = error
        lost_before = state.sequencer.lost_state
        outcome = state.sequencer.on_error(batch, error, expired=now >= batch.deadline)
        if state.sequencer.lost_state != lost_before:
            error = self._leader_lost_acknowledged(batch, error, server_id, outcome)
        hinted = False
        if error.invalid_metadata or error.code == ErrorCode.REQUEST_TIMED_OUT:
            if error.leader_id >= 0 and error.leader_id != server_id:
                hinted = self._metadata.apply_leader_hint(tb, error.leader_id, error.leader_address)
            if not hinted and error.invalid_metadata:
                self._metadata.request_update()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%r attempt %d failed at server %d: %s -> %s", batch, batch.attempts, server_id, error, outcome)
        if outcome is Outcome.RETRY:
            if error.code != ErrorCode.OUT_OF_ORDER_SEQUENCE:  # an OOS retry just waits for its predecessor
                state.retry_at = now + state.backoff.next_delay(hinted=hinted)
        elif outcome is Outcome.DONE_NO_OFFSET:
            self._finish(batch, -1)
        else:
            self._finish_failed(batch, error if now < batch.deadline else _delivery_error(batch))

    def _leader_lost_acknowledged(
        self, batch: ProducerBatch, error: FlussError, server_id: int, outcome: Outcome
    ) -> FlussError:
        """Rule 4's lost writer state: the leader lacks batches of this writer that were acknowledged. Counted
        and logged always; with acks=all the batch fails with an error saying so (docs/client.md)."""
        self.lost_writer_state += 1
        acked = batch.base_sequence  # (before the reset renumbers anything: the sequence the leader refused)
        if outcome is not Outcome.FAIL:  # acks=0/1: the documented loss on failover; retried under a new id
            log.warning(
                "bucket %s: leader %d has lost records of writer %d acknowledged below sequence %d (acks=%d); "
                "restarting sequences: %s",
                batch.table_bucket, server_id, batch.writer_id, acked, self._options.acks, error,
            )  # fmt: skip
            return error
        log.error(
            "bucket %s: leader %d has lost records of writer %d acknowledged with acks=all below sequence %d "
            "(an unclean leader election or a replication bug); failing the batch: %s",
            batch.table_bucket, server_id, batch.writer_id, acked, error,
        )  # fmt: skip
        return OutOfOrderSequenceError(
            f"leader {server_id} of {batch.table_bucket} lacks records acknowledged with acks=all (writer "
            f"{batch.writer_id}, sequences below {acked}): acknowledged records may have been lost; this batch "
            f"was not written; {error}"
        )

    # ---------------------------------------------------------------- completion
    def _expire(self, now: float) -> None:
        for batch in self._acc.expire(now):
            self._finish_failed(batch, _delivery_error(batch))
        for state in self._buckets.values():
            # On the wire at its deadline: given up on (as Kafka expires in-flight batches); the request's own
            # deadline (request_timeout + 2 s) may be much later.
            for batch in [b for b in state.sequencer.in_flight if b.deadline <= now]:
                self._give_up(batch, RequestTimedOutError(f"still on the wire to server {batch.sent_to}"))
            if state.sequencer.retry:
                for batch in state.sequencer.expire_retries(lambda b: b.deadline <= now):
                    self._finish_failed(batch, _delivery_error(batch))

    def _finish(self, batch: ProducerBatch, base_offset: int) -> None:
        if batch in self._acc.incomplete:
            self._acc.incomplete.discard(batch)
            self._pool.release(batch.reserved)
        batch.complete(base_offset)

    def _finish_failed(self, batch: ProducerBatch, error: BaseException) -> None:
        if batch in self._acc.incomplete:
            self._acc.incomplete.discard(batch)
            self._pool.release(batch.reserved)
        batch.fail(error)


def _delivery_error(batch: ProducerBatch) -> RequestTimedOutError:
    fate = "; they may or may not have been written" if batch.ambiguous else ""
    return RequestTimedOutError(
        f"{batch.record_count} record(s) for {batch.table_bucket} not acknowledged within the delivery timeout"
        f" after {batch.attempts} attempt(s){fate}; last error: {batch.last_error}"
    )
