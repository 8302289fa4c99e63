"""``LookupBatcher``: point lookups coalesced into one Lookup request per leader server.

``submit(bucket, key)`` queues one key and returns a future of its stored row (None when absent). Keys
queued in the same event-loop turn, and keys queued while ``max_in_flight_per_server`` requests to their
leader are on the wire, travel together: one ``LookupRequest`` per server carrying every bucket of that
server it has keys for (at most ``max_keys_per_request`` keys), so batching costs no latency when the
client is idle and grows with the load.

A request unanswered for ``_STALL_S`` (a leader paused or cut off) refreshes metadata (throttled as the
producer's and consumer's refreshes are); once the metadata names another leader for a bucket, its keys on the
wire are abandoned (their late answer is ignored) and sent to the new leader at once — as the producer abandons
batches in flight to a moved leader. Without it a lookup would wait out its whole deadline at a paused leader
and, worse, be answered by it once it resumed, from a KV it no longer leads.

Retries (docs/client.md "Primary-key tables"): a bucket's error that invalidates metadata (NOT_LEADER_OR_FOLLOWER,
UNKNOWN_TABLE_OR_BUCKET, ...) moves its keys to the leader the error names, else refreshes metadata;
KV_NOT_READY (a new leader whose KV has not yet applied everything committed, docs/primary-key-tables.md §1.5)
and network errors back off (``retry.backoff`` doubling to ``retry.backoff_max``) and retry, refreshing
metadata too (the leader may have moved). A non-retriable error fails the key at once; a key still
unanswered ``request_timeout`` after it was submitted fails with REQUEST_TIMED_OUT naming the last error.
The server may wait for its KV up to what is left of the key's deadline (the request's ``timeout_ms``).

Owned by one event loop: ``submit`` and every callback run on it; request tasks are owned (``close``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict

from fluss_py.client.metadata import ClusterMetadata, RefreshThrottle
from fluss_py.client.options import LookupOptions, backoff_delay
from fluss_py.client.tasks import TaskSet
from fluss_py.client.transport import LOOKUP, Transport
from fluss_py.errors import (
    ErrorCode,
    FlussError,
    LeaderNotAvailableError,
    NetworkExceptionError,
    RequestTimedOutError,
)
from fluss_py.rpc.convert import to_client_exception
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)

_RPC_GRACE = 2.0  # the RPC deadline leaves the server this long to answer KV_NOT_READY itself
_STALL_S = 1.0  # a request unanswered this long refreshes metadata (has the leader moved?)


class LookupClosedError(FlussError):
    """A lookup asked of, or pending in, a closed ``Lookuper``."""


class _Key:
    """One submitted key until its future is resolved."""

    __slots__ = (
        "attempts", "bucket", "deadline", "future", "key", "last_error", "retry_at", "send_id", "sent_at", "sent_to",
    )  # fmt: skip

    def __init__(self, bucket: TableBucket, key: bytes, future: asyncio.Future[bytes | None], deadline: float) -> None:
        self.bucket = bucket
        self.key = key
        self.future = future
        self.deadline = deadline
        self.attempts = 0
        self.retry_at = 0.0
        self.last_error: FlussError | None = None
        self.send_id = 0  # bumped per send and per abandonment: an answer to an older send is ignored
        self.sent_to = -1
        self.sent_at = 0.0


class LookupBatcher:
    """See module docstring."""

    def __init__(self, metadata: ClusterMetadata, transport: Transport, options: LookupOptions) -> None:
        self._metadata = metadata
        self._transport = transport
        self._options = options
        self._queue: list[_Key] = []  # waiting to be sent (some backing off until their retry_at)
        self._on_wire: set[_Key] = set()  # sent and not yet answered nor abandoned
        self._in_flight: dict[int, int] = defaultdict(int)  # server id -> Lookup requests on the wire
        self._tasks = TaskSet(on_error=self._task_failed, on_done=self._schedule)
        self._refresh = RefreshThrottle(metadata, options.retry, self._schedule)
        self._handle: asyncio.Handle | asyncio.TimerHandle | None = None
        self._handle_at = 0.0
        self._closed = False
        self.requests = 0  # Lookup requests sent (a measure of the batching)

    def submit(self, bucket: TableBucket, key: bytes) -> asyncio.Future[bytes | None]:
        if self._closed:
            raise LookupClosedError("the lookuper is closed")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bytes | None] = loop.create_future()
        self._queue.append(_Key(bucket, key, future, time.monotonic() + self._options.request_timeout))
        self._schedule()
        return future

    async def close(self) -> None:
        self._closed = True
        if self._handle is not None:
            self._handle.cancel()
        await self._tasks.cancel_all()
        for k in [*self._queue, *self._on_wire]:
            _fail(k, LookupClosedError("the lookuper was closed before the lookup was answered"))
        self._queue.clear()
        self._on_wire.clear()

    # ---------------------------------------------------------------- dispatch
    def _schedule(self, at: float | None = None) -> None:
        """Run ``_dispatch`` in a later turn of the loop: the next one, or at monotonic time ``at``."""
        if self._closed:
            return
        loop = asyncio.get_running_loop()
        if self._handle is not None and not self._handle.cancelled():
            if at is not None and self._handle_at <= at:
                return  # an earlier (or immediate) run is already due
            self._handle.cancel()
        if at is None:
            self._handle, self._handle_at = loop.call_soon(self._dispatch), 0.0
        else:
            delay = max(at - time.monotonic(), 0.0)
            self._handle, self._handle_at = loop.call_later(delay, self._dispatch), at

    def _dispatch(self) -> None:
        self._handle = None
        now = time.monotonic()
        waiting: list[_Key] = []
        ready: dict[int, list[_Key]] = defaultdict(list)
        wake: list[float] = []
        missing_leader = False
        stalled = self._abandon_moved(now, wake)
        for k in self._queue:
            if k.future.done():
                continue  # cancelled by its caller
            if now >= k.deadline:
                _fail(k, _timed_out(k))
                continue
            wake.append(k.deadline)
            if k.retry_at > now:
                waiting.append(k)
                wake.append(k.retry_at)
                continue
            leader = self._metadata.leader_for(k.bucket)
            if leader is None:
                missing_leader = True
                k.last_error = LeaderNotAvailableError(f"no known leader of {k.bucket}")
                waiting.append(k)
                continue
            ready[leader.id].append(k)
        limit = self._options.max_keys_per_request
        for server_id, keys in ready.items():
            while keys and self._in_flight[server_id] < self._options.max_in_flight_per_server:
                batch, keys = keys[:limit], keys[limit:]
                self._in_flight[server_id] += 1
                self.requests += 1
                for k in batch:
                    k.send_id += 1
                    k.sent_to, k.sent_at = server_id, now
                    self._on_wire.add(k)
                    wake.append(now + _STALL_S)
                sends = [(k, k.send_id) for k in batch]
                self._tasks.spawn(self._request(server_id, sends), name="kv-lookup")
            waiting.extend(keys)  # sent when one of that server's requests is answered (on_done)
        self._queue = waiting
        if missing_leader or stalled:
            wake.append(self._refresh.request(now))
        if wake and (self._queue or self._on_wire):
            self._schedule(min(wake))

    def _abandon_moved(self, now: float, wake: list[float]) -> bool:
        """Keys on the wire to a server the metadata no longer names as their bucket's leader go back to the
        queue (sent to the new leader in this round; the old request's answer is ignored). True when a
        request has been unanswered for ``_STALL_S``: the caller refreshes metadata to learn whether it moved."""
        stalled = False
        for k in list(self._on_wire):
            leader = self._metadata.leader_for(k.bucket)
            if leader is not None and leader.id != k.sent_to:
                k.send_id += 1
                k.last_error = NetworkExceptionError(f"leader of {k.bucket} moved to {leader.id} while a lookup waited")
                self._on_wire.discard(k)
                self._queue.append(k)
            elif now - k.sent_at >= _STALL_S:
                stalled = True
                node = self._metadata.servers.get(k.sent_to)
                if node is not None:
                    self._metadata.note_failure(node.address)  # the refresh must not wait on it either
            else:
                wake.append(k.sent_at + _STALL_S)
        return stalled

    # ---------------------------------------------------------------- one request
    async def _request(self, server_id: int, sends: list[tuple[_Key, int]]) -> None:
        """One Lookup request of ``sends`` (each key with the send id it was sent under) to ``server_id``; an
        answer for a key abandoned meanwhile (its send id moved on) is ignored."""
        keys = [k for k, _ in sends]
        try:
            by_bucket: dict[TableBucket, list[_Key]] = defaultdict(list)
            for k in keys:
                k.attempts += 1
                by_bucket[k.bucket].append(k)
            remaining = min(k.deadline for k in keys) - time.monotonic()
            request = tablet_pb2.LookupRequest(
                timeout_ms=max(int(remaining * 1000), 1),
                buckets=[
                    tablet_pb2.LookupBucket(
                        table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket),
                        keys=[k.key for k in ks],
                    )
                    for tb, ks in by_bucket.items()
                ],
            )
            node = self._metadata.servers.get(server_id)
            try:
                if node is None:
                    raise LeaderNotAvailableError(f"server {server_id} is not in the cluster metadata")
                response = await self._transport.call(node.address, LOOKUP, request, max(remaining, 0.001) + _RPC_GRACE)
                if response.error.code != ErrorCode.NONE:
                    raise to_client_exception(response.error)
            except FlussError as e:
                if node is not None and isinstance(e, NetworkExceptionError):
                    self._metadata.note_failure(node.address)
                for ks in by_bucket.values():
                    if current := self._current(ks, sends):
                        self._retry_or_fail(current, e, server_id)
                return
            answered = {(r.table_bucket.table_id, r.table_bucket.bucket): r for r in response.buckets}
            for tb, all_ks in by_bucket.items():
                ks = self._current(all_ks, sends)
                if not ks:
                    continue  # every key of the bucket was abandoned meanwhile (sent to a new leader)
                r = answered.get((tb.table_id, tb.bucket))
                if r is None or (r.error.code == ErrorCode.NONE and len(r.values) != len(all_ks)):
                    error = NetworkExceptionError(f"server {server_id} answered no value for some keys of {tb}")
                    self._retry_or_fail(ks, error, server_id)
                elif r.error.code != ErrorCode.NONE:
                    self._retry_or_fail(ks, to_client_exception(r.error), server_id)
                else:
                    values = dict(zip(map(id, all_ks), r.values, strict=True))
                    for k in ks:
                        v = values[id(k)]
                        if not k.future.done():
                            k.future.set_result(v.row if v.found else None)
        finally:
            self._in_flight[server_id] -= 1
            for k, send_id in sends:
                if k.send_id == send_id:
                    self._on_wire.discard(k)

    @staticmethod
    def _current(keys: list[_Key], sends: list[tuple[_Key, int]]) -> list[_Key]:
        """``keys`` still awaiting this request's answer (not abandoned since it was sent)."""
        sent = {id(k): send_id for k, send_id in sends}
        return [k for k in keys if k.send_id == sent[id(k)]]

    def _retry_or_fail(self, keys: list[_Key], error: FlussError, server_id: int) -> None:
        """Judge one bucket's failed keys: fail them (not retriable), or queue them again after a backoff, or at
        once at the leader an error names."""
        if not error.retriable:
            for k in keys:
                _fail(k, error)
            return
        tb = keys[0].bucket
        hinted = False
        if error.invalid_metadata and error.leader_id >= 0 and error.leader_id != server_id:
            hinted = self._metadata.apply_leader_hint(tb, error.leader_id, error.leader_address)
        if not hinted and (error.invalid_metadata or error.code in _REFRESH_ON):
            self._metadata.request_update()
        now = time.monotonic()
        for k in keys:
            k.last_error = error
            k.retry_at = now if hinted else now + backoff_delay(self._options.retry, k.attempts)
        log.debug("lookup of %d key(s) of %s at server %d failed (%s); retrying", len(keys), tb, server_id, error)
        self._queue.extend(keys)

    def _task_failed(self, error: BaseException) -> None:
        """A request task died of a bug: fail everything rather than leave callers waiting."""
        for k in self._queue:
            _fail(k, error)
        self._queue.clear()


_REFRESH_ON = (ErrorCode.KV_NOT_READY, ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT)


def _fail(k: _Key, error: BaseException) -> None:
    if not k.future.done():
        k.future.set_exception(error)


def _timed_out(k: _Key) -> RequestTimedOutError:
    return RequestTimedOutError(
        f"lookup of a key of {k.bucket} not answered within the request timeout after {k.attempts} attempt(s); "
        f"last error: {k.last_error}"
    )


__all__ = ["LookupBatcher", "LookupClosedError"]
