"""The fetcher: the consumer's background task keeping records flowing from bucket leaders.

Each round it (1) resolves buckets awaiting a reset with ONE ListOffsets per leader server, and (2) for
positioned buckets with nothing buffered, sends ONE FetchLog per leader server carrying all of them
(long poll: ``fetch_max_wait``/``fetch_min_bytes``), at most one in flight per server. Answers become
*completed fetches* buffered per bucket until ``poll`` takes them: this is the prefetch — the next fetch
is in flight while the user processes the previous records.

Leader changes are invisible to the user: an error that invalidates metadata moves the bucket at once to
the leader the error names, else refreshes metadata; the bucket backs off (tens of ms, doubling) and is
fetched again from the same position. Each fetch carries the leader epoch the client knows, so a deposed
leader that has not noticed yet answers UNKNOWN_LEADER_EPOCH instead of serving stale data.
OFFSET_OUT_OF_RANGE resets the bucket by ``auto_offset_reset`` (or is raised by ``poll`` when "none").

Each server's FetchLog runs in an incremental fetch session (docs/replication.md "Fetch sessions"): a request
names only the buckets whose position or leader epoch changed since the previous one (and forgets those no
longer fetched from that server, e.g. while their records wait in the buffer), the server answers only what it
read. A failed or cancelled call, or a session error, drops the session; the next request names every bucket.

Owned by the consumer's event loop; ``poll`` (user task) and the fetch task share the buffer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import defaultdict
from collections.abc import Coroutine
from typing import Any, NamedTuple

from fluss_py.client.admin import BucketOffsets, OffsetSpec, list_offsets_request
from fluss_py.client.consumer.positions import BucketPosition, Positions, ResetTo
from fluss_py.client.metadata import ClusterMetadata, RefreshThrottle
from fluss_py.client.options import ConsumerOptions, backoff_delay
from fluss_py.client.tasks import TaskSet
from fluss_py.client.transport import FETCH_LOG, Transport
from fluss_py.errors import CorruptMessageError, ErrorCode, FlussError, LeaderNotAvailableError
from fluss_py.record import iter_batches
from fluss_py.rpc.convert import raise_for_client, to_client_exception
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)

_SPEC = {ResetTo.EARLIEST: OffsetSpec.EARLIEST, ResetTo.LATEST: OffsetSpec.HIGH_WATERMARK}


class ConsumerRecord(NamedTuple):
    """One record handed to the user."""

    bucket: TableBucket
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None


class _Completed(NamedTuple):
    """One bucket's answer: its records from the position on, where the position goes once they are taken,
    and the error of a batch that could not be read (raised by ``take`` after every record before it)."""

    generation: int
    records: list[ConsumerRecord]
    next_offset: int
    error: FlussError | None = None


def _unreadable(tb: TableBucket, offset: int, cause: FlussError) -> FlussError:
    """The error ``poll`` raises for a batch it cannot read: same code, saying where and what to do."""
    return type(cause)(
        f"bucket {tb}: cannot read the batch at offset {offset} ({cause.message}); every record before offset "
        f"{offset} was delivered; seek past the batch to skip it"
    )


class _Session:
    """The consumer's side of one server's fetch session: id, next epoch, and what the server holds
    (bucket -> (fetch offset, leader epoch, position generation)). A bucket whose answer was not taken (an
    error, or the user moved it meanwhile) is ``retry``-marked: the next request names it again, else the
    server — which believes it answered — would not read it until new records arrive."""

    __slots__ = ("epoch", "id", "sent")

    def __init__(self) -> None:
        self.id = 0
        self.epoch = 0
        self.sent: dict[TableBucket, tuple[int, ...]] = {}

    def reset(self) -> None:
        self.id, self.epoch, self.sent = 0, 0, {}

    def delta(self, wanted: dict[TableBucket, tuple[int, ...]]) -> tuple[list[TableBucket], list[TableBucket]]:
        """(buckets to name, buckets to forget) for a request fetching ``wanted``; every bucket when opening."""
        if self.id == 0:
            named, forgotten = list(wanted), []
        else:
            named = [tb for tb, position in wanted.items() if self.sent.get(tb) != position]
            forgotten = [tb for tb in self.sent if tb not in wanted]
        self.sent = dict(wanted)
        return named, forgotten

    def retry(self, tb: TableBucket) -> None:
        if tb in self.sent:
            self.sent[tb] = ()

    def answered(self, session_id: int) -> None:
        if session_id == 0:  # the server keeps no session: every request stays full
            self.reset()
        elif session_id != self.id:
            self.id, self.epoch = session_id, 1
        else:
            self.epoch += 1


_SESSION_ERRORS = (ErrorCode.FETCH_SESSION_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)


class Fetcher:
    """Background fetch loop and the buffer of completed fetches (see module docstring)."""

    def __init__(
        self, positions: Positions, metadata: ClusterMetadata, transport: Transport, options: ConsumerOptions
    ) -> None:
        self._positions = positions
        self._metadata = metadata
        self._transport = transport
        self._options = options
        self._buffer: dict[TableBucket, _Completed] = {}
        self._busy_servers: dict[int, float] = {}  # server -> when its in-flight fetch was sent
        self._sessions: dict[int, _Session] = {}  # server -> its fetch session
        self._resetting: set[TableBucket] = set()
        self._errors: list[FlussError] = []  # non-retriable errors for poll to raise
        self.wakeup = asyncio.Event()  # the fetch loop has something to do
        self.data = asyncio.Event()  # poll has something to take
        self._tasks = TaskSet(on_error=self._task_failed, on_done=self.wakeup.set)
        self._task: asyncio.Task[None] | None = None
        self._refresh = RefreshThrottle(metadata, options.retry, self.wakeup.set)
        self.error: BaseException | None = None
        self._closing = False

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name="consumer-fetcher")

    async def close(self) -> None:
        self._closing = True
        self.wakeup.set()
        await self._tasks.cancel_all(self._task)

    # ---------------------------------------------------------------- user side
    def take(self, max_records: int) -> list[ConsumerRecord]:
        """Buffered records at the current positions (advancing them); raises a pending fatal error, and the
        error of a bucket's unreadable batch once every record before it has been taken (the position stays
        at that batch: each later take raises again until the user seeks past it)."""
        if self._errors:
            raise self._errors.pop(0)
        out: list[ConsumerRecord] = []
        for tb in list(self._buffer):
            if len(out) >= max_records:
                break
            completed = self._buffer[tb]
            p = self._positions.buckets.get(tb)
            if p is None or p.generation != completed.generation or p.offset is None:
                del self._buffer[tb]  # taken for a position the user has since changed
                continue
            records = [r for r in completed.records if r.offset >= p.offset]
            room = max_records - len(out)
            if len(records) > room:
                out.extend(records[:room])
                self._positions.advance(tb, records[room - 1].offset + 1)
                self._buffer[tb] = completed._replace(records=records[room:])
            elif completed.error is not None and not records:
                if out:
                    continue  # raised by the next take, after the records handed out now
                del self._buffer[tb]
                self._after_take()
                raise completed.error
            else:
                out.extend(records)
                self._positions.advance(tb, max(completed.next_offset, p.offset))
                if completed.error is not None:
                    self._buffer[tb] = completed._replace(records=[])
                else:
                    del self._buffer[tb]
        self._after_take()
        return out

    def _after_take(self) -> None:
        if not self._buffer:
            self.data.clear()
        self.wakeup.set()

    # ---------------------------------------------------------------- the loop
    async def _run(self) -> None:
        try:
            while not self._closing:
                self.wakeup.clear()
                now = time.monotonic()
                wake = self._round(now)
                timeout = None if wake is None else max(wake - time.monotonic(), 0.0005)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(timeout):  # not wait_for: 3.11's can swallow a cancel
                        await self.wakeup.wait()
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            log.exception("consumer fetch loop died")
            self.error = e
            self._errors.append(e if isinstance(e, FlussError) else FlussError(repr(e)))
            self.data.set()
            raise

    def _round(self, now: float) -> float | None:
        wake: list[float] = []
        missing_leader = found_leader = False
        resets: dict[int, list[TableBucket]] = defaultdict(list)
        fetches: dict[int, list[TableBucket]] = defaultdict(list)
        for tb, p in self._positions.buckets.items():
            if p.retry_at > now:
                wake.append(p.retry_at)
                continue
            if (p.offset is None and p.reset is None) or tb in self._buffer or tb in self._resetting:
                continue
            leader = self._metadata.leader_for(tb)
            if leader is None:
                missing_leader = True
                continue
            found_leader = True
            if p.offset is None:
                resets[leader.id].append(tb)
            elif leader.id not in self._busy_servers:
                fetches[leader.id].append(tb)
        for server_id, tbs in resets.items():
            self._resetting.update(tbs)
            self._spawn(self._reset(server_id, tbs))
        for server_id, tbs in fetches.items():
            self._busy_servers[server_id] = now
            self._spawn(self._fetch(server_id, tbs))
        # A fetch unanswered well past its long-poll wait: the leader may be paused; re-check who leads.
        stall_after = self._options.fetch_max_wait + 1.0
        stalled = any(now - sent >= stall_after for sent in self._busy_servers.values())
        wake.extend(sent + stall_after for sent in self._busy_servers.values() if now - sent < stall_after)
        if missing_leader or stalled:  # refreshes back off while it lasts, as the producer's sender's do
            wake.append(self._refresh.request(now))
        elif found_leader:  # (a round where every bucket backs off tells nothing)
            self._refresh.reset()
        return min(wake) if wake else None

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        self._tasks.spawn(coro)

    def _task_failed(self, error: BaseException) -> None:
        self._errors.append(error if isinstance(error, FlussError) else FlussError(repr(error)))
        self.data.set()

    # ---------------------------------------------------------------- offset resets
    async def _reset(self, server_id: int, tbs: list[TableBucket]) -> None:
        try:
            node = self._metadata.servers.get(server_id)
            groups: dict[tuple[OffsetSpec, int], list[TableBucket]] = defaultdict(list)
            generations = {}
            for tb in tbs:
                p = self._positions.buckets.get(tb)
                if p is None or p.reset is None:
                    continue
                generations[tb] = p.generation
                spec = _SPEC.get(p.reset, OffsetSpec.TIMESTAMP)
                groups[(spec, p.timestamp_ms if p.reset is ResetTo.TIMESTAMP else 0)].append(tb)
            for (spec, ts), group in groups.items():
                try:
                    if node is None:
                        raise LeaderNotAvailableError(f"server {server_id} is not in the cluster metadata")
                    got = await list_offsets_request(
                        self._transport, node.address, group, spec, ts, self._options.request_timeout
                    )
                except FlussError as e:
                    self._metadata.request_update()
                    got = dict.fromkeys(group, e)
                for tb in group:
                    p = self._positions.buckets.get(tb)
                    if p is None or p.generation != generations.get(tb):
                        continue
                    value = _reset_offset(tb, spec, got.get(tb), server_id)
                    if isinstance(value, int):
                        self._positions.seek(tb, value)
                        p.attempts = 0
                    else:
                        if p.attempts == 0 and value.code == ErrorCode.LEADER_NOT_AVAILABLE:
                            log.warning("%s", value.message)  # once per run of failures, then at debug level
                        self._on_bucket_error(tb, p, value, server_id)
        finally:
            self._resetting.difference_update(tbs)

    # ---------------------------------------------------------------- fetching
    async def _fetch(self, server_id: int, tbs: list[TableBucket]) -> None:
        try:
            opts = self._options
            node = self._metadata.servers.get(server_id)
            started = {tb: (p.generation, p.offset) for tb in tbs if (p := self._positions.buckets.get(tb))}
            session = self._sessions.setdefault(server_id, _Session())
            wanted = {
                tb: (offset or 0, self._metadata.leader_epoch(tb), generation)
                for tb, (generation, offset) in started.items()
            }
            named, forgotten = session.delta(wanted)
            request = tablet_pb2.FetchLogRequest(
                replica_id=-1,
                max_wait_ms=int(opts.fetch_max_wait * 1000),
                min_bytes=opts.fetch_min_bytes,
                max_bytes=opts.fetch_max_bytes,
                buckets=[
                    tablet_pb2.FetchBucket(
                        table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket),
                        fetch_offset=wanted[tb][0],
                        max_bytes=opts.bucket_max_bytes,
                        current_leader_epoch=wanted[tb][1],
                        last_fetched_epoch=-1,
                    )
                    for tb in named
                ],
                session=tablet_pb2.FetchSession(
                    id=session.id,
                    epoch=session.epoch,
                    forgotten=[common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket) for tb in forgotten],
                ),
            )
            try:
                if node is None:
                    raise LeaderNotAvailableError(f"server {server_id} is not in the cluster metadata")
                response = await self._transport.call(
                    node.address, FETCH_LOG, request, opts.request_timeout + opts.fetch_max_wait
                )
                raise_for_client(response.error)
            except FlussError as e:
                session.reset()  # the server may or may not have applied the request
                if e.code in _SESSION_ERRORS:
                    log.debug("fetch session with server %d ends (%s): the next request opens one", server_id, e)
                    return
                self._metadata.request_update()
                for tb, (generation, _) in started.items():
                    p = self._positions.buckets.get(tb)
                    if p is not None and p.generation == generation:
                        self._on_bucket_error(tb, p, e, server_id)
                return
            except BaseException:  # cancelled: the server may or may not have applied the request
                session.reset()
                raise
            session.answered(response.session_id)
            for r in response.buckets:
                tb = TableBucket(r.table_bucket.table_id, r.table_bucket.bucket)
                p = self._positions.buckets.get(tb)
                if p is None or tb not in started or p.generation != started[tb][0] or p.offset != started[tb][1]:
                    session.retry(tb)
                    continue  # the user moved this bucket meanwhile
                if r.error.code != ErrorCode.NONE:
                    session.retry(tb)
                    self._on_bucket_error(tb, p, to_client_exception(r.error), server_id)
                    continue
                p.high_watermark = r.high_watermark
                if not r.records or self._buffer_records(tb, p, r.records, r.high_watermark):
                    p.attempts = p.out_of_range = 0
                else:
                    session.retry(tb)  # named again when its backoff ends
        finally:
            self._busy_servers.pop(server_id, None)

    def _buffer_records(self, tb: TableBucket, p: BucketPosition, data: bytes, hw: int) -> bool:
        """Decode the answer batch by batch. A batch that fails its checks ends it: the records of the
        batches before it are buffered, then its error (a batch is delivered whole or not at all). An answer
        holding no whole batch (torn: a leader always sends at least its first batch whole, whatever the max
        bytes) buffers CORRUPT_MESSAGE for ``poll`` and backs the bucket off; returns False then. Records at
        or above the answer's high watermark ``hw`` are dropped (a leader never sends them: they are not
        committed), with a warning; an answer holding nothing else backs the bucket off too (False)."""
        assert p.offset is not None
        records: list[ConsumerRecord] = []
        next_offset = p.offset
        error: FlussError | None = None
        whole = above = False
        for batch in iter_batches(data):
            whole = True
            if batch.last_offset < p.offset:
                continue
            if batch.base_offset >= hw:
                above = True
                break
            try:
                batch.ensure_valid()
                decoded = [
                    ConsumerRecord(tb, r.offset, r.timestamp_ms, r.key, r.value)
                    for r in batch.records()
                    if p.offset <= r.offset < hw
                ]
            except FlussError as e:
                error = _unreadable(tb, batch.base_offset, e)
                log.warning("%s", error.message)
                break
            records.extend(decoded)
            next_offset = min(batch.last_offset + 1, hw)
            if batch.last_offset >= hw:
                above = True
                break
        if above:
            log.warning("bucket %s: the fetch answer holds records at or above its high watermark %d: dropped", tb, hw)
        if not whole or (above and next_offset == p.offset and error is None):
            p.attempts += 1
            p.retry_at = time.monotonic() + backoff_delay(self._options.retry, p.attempts)
        if not whole:
            error = CorruptMessageError(
                f"bucket {tb}: the fetch answer at offset {p.offset} holds {len(data)} bytes but no complete "
                f"record batch (a torn answer); fetched again after a backoff"
            )
            log.warning("%s", error.message)
        if records or next_offset > p.offset or error is not None:
            self._buffer[tb] = _Completed(p.generation, records, next_offset, error)
            self.data.set()
        return whole and not (above and next_offset == p.offset)

    def _on_bucket_error(self, tb: TableBucket, p: BucketPosition, error: FlussError, server_id: int) -> None:
        if error.code == ErrorCode.OFFSET_OUT_OF_RANGE:
            if self._positions.reset_to_default(tb):
                # The first reset goes at once (retention removed the position); one that lands out of range
                # again (a server answering offsets it does not serve) backs off instead of looping.
                p.out_of_range += 1
                if p.out_of_range > 1:
                    p.retry_at = time.monotonic() + backoff_delay(self._options.retry, p.out_of_range - 1)
                log.info("bucket %s: offset %s out of range, resetting: %s", tb, p.offset, error)
                return
            self._errors.append(error)  # raised by poll until the user seeks
            p.retry_at = time.monotonic() + self._options.retry.backoff_max
            self.data.set()
            return
        if not error.retriable:
            self._errors.append(error)
            self.data.set()
        hinted = False
        if error.invalid_metadata:
            if error.leader_id >= 0 and error.leader_id != server_id:
                hinted = self._metadata.apply_leader_hint(tb, error.leader_id, error.leader_address)
            if not hinted:
                self._metadata.request_update()
        if not hinted:  # hinted retries go at once and do not double the next backoff (see Backoff)
            p.attempts += 1
        delay = 0.0 if hinted else backoff_delay(self._options.retry, p.attempts)
        p.retry_at = time.monotonic() + delay
        log.debug("bucket %s: fetch error %s, retry in %.3fs", tb, error, delay)


def _reset_offset(
    tb: TableBucket, spec: OffsetSpec, value: BucketOffsets | FlussError | None, server_id: int
) -> int | FlussError:
    """The position a ListOffsets answer resets ``tb`` to, or the error to back off with: the server's own,
    or LEADER_NOT_AVAILABLE (retriable) for an answer a sane leader never gives (the bucket left out, a
    negative offset), which would otherwise be asked again at once, round after round."""
    if value is None:
        return LeaderNotAvailableError(f"bucket {tb}: server {server_id} left it out of its ListOffsets answer")
    if isinstance(value, FlussError):
        return value
    offset = value.offset
    if spec is OffsetSpec.TIMESTAMP and offset < 0:
        offset = value.high_watermark  # nothing at or after that time yet: start at the end
    if offset < 0:
        return LeaderNotAvailableError(
            f"bucket {tb}: server {server_id} answered ListOffsets {spec.name} with {offset}"
        )
    return offset
