"""The record accumulator: per-bucket queues of batches being filled, and the buffer-memory bound.

``send`` appends a record to the open (last) batch of its bucket, opening a new one when that is full.
A batch is *ready* when it is full (or not the last of its queue), its first record is ``linger`` old, or
a flush/close is in progress. The sender drains ready batches; it owns them from then on.

Buffer memory: every record reserves its estimated size (16 bytes of record overhead + key + value)
before it is appended and gives it back when its batch completes (acknowledged or failed), so
``buffer_memory`` bounds the bytes held by the producer; ``send`` waits for room (back-pressure).

Owned by the producer's event loop: ``Producer.send`` appends, the sender task drains.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Iterator
from typing import NamedTuple

import crc32c

from fluss_py.errors import FlussError, RequestTimedOutError
from fluss_py.record import NO_SEQUENCE, NO_WRITER_EPOCH, NO_WRITER_ID, CompressionType, RecordBatchBuilder
from fluss_py.record.batch import HEADER, RECORD_OVERHEAD, RecordBatch
from fluss_py.types import TableBucket


class RecordMetadata(NamedTuple):
    """Where an acknowledged record landed; offset is -1 when unknown (acks=0, or a duplicate the leader no
    longer remembers the offset of)."""

    bucket: TableBucket
    offset: int


def record_size(key: bytes | None, value: bytes | None) -> int:
    return RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)


def bucket_for_key(key: bytes, num_buckets: int) -> int:
    """Stable key -> bucket: CRC-32C of the key bytes modulo the bucket count."""
    return crc32c.crc32c(key) % num_buckets


def stamp_writer(payload: bytearray, writer_id: int, writer_epoch: int, base_sequence: int) -> None:
    """Set a built batch's writer id/epoch/base sequence in place and recompute its CRC."""
    header = list(HEADER.unpack_from(payload, 0))
    header[9], header[10], header[11] = writer_id, writer_epoch, base_sequence
    HEADER.pack_into(payload, 0, *header)
    header[4] = RecordBatch(payload).compute_crc()
    HEADER.pack_into(payload, 0, *header)


class ProducerBatch:
    """One batch of one bucket, from its first record to its acknowledgement.

    Filled by ``Producer.send`` while open; after ``close()`` its bytes are fixed except for the writer
    fields, which the sender stamps on each (re)send.
    """

    __slots__ = (
        "ambiguous",
        "attempts",
        "attributes",
        "base_sequence",
        "builder",
        "created",
        "deadline",
        "done",
        "futures",
        "last_error",
        "payload",
        "record_count",
        "reserved",
        "send_id",
        "sent_at",
        "sent_to",
        "sent_writer",
        "table_bucket",
        "writer_id",
    )

    def __init__(
        self,
        table_bucket: TableBucket,
        batch_size: int,
        compression: CompressionType,
        delivery_timeout: float,
        attributes: int = 0,
    ) -> None:
        self.table_bucket = table_bucket
        self.attributes = attributes  # a KV batch's bit (docs/primary-key-tables.md §3.3), else 0
        self.builder: RecordBatchBuilder | None = RecordBatchBuilder(
            compression=compression, max_bytes=batch_size, attributes=attributes
        )
        self.futures: list[asyncio.Future[RecordMetadata]] = []
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.created = time.monotonic()
        self.deadline = self.created + delivery_timeout
        self.reserved = 0
        self.record_count = 0
        self.payload: bytearray | None = None
        self.writer_id = NO_WRITER_ID
        self.base_sequence = NO_SEQUENCE
        self.sent_writer: tuple[int, int] | None = None  # (writer id, sequence) stamped into payload
        self.attempts = 0
        self.send_id = 0  # bumped per send and per abandonment: answers to an older send are ignored
        self.sent_to = -1  # the server of the current send
        self.sent_at = 0.0
        self.last_error: FlussError | None = None
        self.ambiguous = False

    @property
    def is_open(self) -> bool:
        return self.builder is not None

    def try_append(
        self, key: bytes | None, value: bytes | None, timestamp_ms: int | None, size: int
    ) -> asyncio.Future[RecordMetadata] | None:
        builder = self.builder
        if builder is None or not builder.append(value, key, timestamp_ms):
            return None
        fut: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        self.futures.append(fut)
        self.reserved += size
        self.record_count += 1
        return fut

    def is_full(self, batch_size: int) -> bool:
        return self.builder is None or self.builder.size_in_bytes >= batch_size

    def close(self) -> None:
        """No more appends: build the bytes."""
        if self.builder is not None:
            self.payload = self.builder.build_buffer()
            self.builder = None

    def wire_bytes(self, writer_epoch: int) -> bytearray:
        """The batch as sent now, with the current writer fields stamped in: the payload itself, not a copy
        (the request encoder copies it; a resend may stamp it again)."""
        assert self.payload is not None
        stamp = (self.writer_id, self.base_sequence)
        if self.writer_id != NO_WRITER_ID and self.sent_writer != stamp:
            stamp_writer(self.payload, self.writer_id, writer_epoch, self.base_sequence)
            self.sent_writer = stamp
        return self.payload

    def complete(self, base_offset: int) -> None:
        tb = self.table_bucket
        for i, fut in enumerate(self.futures):
            if not fut.done():
                fut.set_result(RecordMetadata(tb, base_offset + i if base_offset >= 0 else -1))
        if not self.done.done():
            self.done.set_result(None)

    def fail(self, error: BaseException) -> None:
        for fut in self.futures:
            if not fut.done():
                fut.set_exception(error)
        if not self.done.done():
            self.done.set_result(None)

    def __repr__(self) -> str:
        return (
            f"ProducerBatch({self.table_bucket}, n={self.record_count}, writer={self.writer_id} "
            f"seq={self.base_sequence}, attempts={self.attempts})"
        )


class BufferPool:
    """Counts reserved bytes against ``limit``; ``reserve`` waits (FIFO) for room. ``close`` fails every
    waiter and every later ``reserve`` with the error it is given (the producer closed). One event loop."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiters: deque[tuple[int, asyncio.Future[None]]] = deque()
        self._closed: BaseException | None = None

    def close(self, error: BaseException) -> None:
        """No more reservations: wake every waiter with ``error`` (as Kafka's BufferPool.close does)."""
        self._closed = error
        while self._waiters:
            _, fut = self._waiters.popleft()
            if not fut.done():
                fut.set_exception(error)

    def try_reserve(self, size: int) -> bool:
        """Reserve at once if there is room and nobody waits (the per-record fast path of ``reserve``)."""
        if not self._waiters and self.used + size <= self.limit:
            self.used += size
            return True
        return False

    async def reserve(self, size: int, timeout: float) -> None:
        if self._closed is not None:
            raise self._closed
        size = min(size, self.limit)  # one record larger than the pool still goes, alone
        if not self._waiters and self.used + size <= self.limit:
            self.used += size
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (size, fut)
        self._waiters.append(entry)
        try:
            async with asyncio.timeout(timeout):
                await fut
        except BaseException as e:
            if fut.done() and not fut.cancelled() and fut.exception() is None:
                self.release(size)  # granted, but the caller is gone
            else:
                fut.cancel()
                with contextlib.suppress(ValueError):
                    self._waiters.remove(entry)
                self._wake()
            if isinstance(e, TimeoutError):
                raise RequestTimedOutError(
                    f"no room in the producer's buffer memory ({self.limit} bytes) after {timeout:.1f}s"
                ) from None
            raise

    def release(self, size: int) -> None:
        self.used -= min(size, self.used)
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            size, fut = self._waiters[0]
            if fut.done():
                self._waiters.popleft()
                continue
            if self.used + size > self.limit and self.used > 0:
                return
            self._waiters.popleft()
            self.used += size
            fut.set_result(None)


class RecordAccumulator:
    """Per-bucket deques of batches not yet handed to the sender (see module docstring)."""

    def __init__(self, batch_size: int, linger: float, compression: CompressionType, delivery_timeout: float) -> None:
        self.batch_size = batch_size
        self.linger = linger
        self.compression = compression
        self.delivery_timeout = delivery_timeout
        self.queues: dict[TableBucket, deque[ProducerBatch]] = {}
        self.wakeup = asyncio.Event()  # set when the sender has something new to look at
        self.flushing = 0
        self.closing = False
        self.incomplete: set[ProducerBatch] = set()  # created and not yet completed or failed
        # a batch filled up since the producer last yielded to the event loop (``Producer.send`` yields then)
        self.filled = False

    def append(
        self,
        tb: TableBucket,
        key: bytes | None,
        value: bytes | None,
        timestamp_ms: int | None,
        size: int,
        attributes: int = 0,
    ) -> tuple[asyncio.Future[RecordMetadata], ProducerBatch]:
        """Append to the bucket's open batch, or to a new one when it is full or of other ``attributes`` (a
        batch is all KV records or none)."""
        queue = self.queues.get(tb)
        if queue is None:
            queue = self.queues[tb] = deque()
        if queue:
            last = queue[-1]
            fut = last.try_append(key, value, timestamp_ms, size) if last.attributes == attributes else None
            if fut is not None:
                if last.is_full(self.batch_size):
                    self.filled = True
                    self.wakeup.set()
                return fut, last
            self.filled = True  # ``last`` could not take the record: it is complete (only the last takes any)
        batch = ProducerBatch(tb, self.batch_size, self.compression, self.delivery_timeout, attributes)
        fut = batch.try_append(key, value, timestamp_ms, size)
        assert fut is not None  # an empty batch takes any record
        queue.append(batch)
        self.incomplete.add(batch)
        self.wakeup.set()
        return fut, batch

    def is_ready(self, batch: ProducerBatch, queue: deque[ProducerBatch], now: float) -> bool:
        return (
            len(queue) > 1
            or batch.is_full(self.batch_size)
            or now - batch.created >= self.linger
            or self.flushing > 0
            or self.closing
        )

    def next_ready_time(self, now: float) -> float | None:
        """The earliest time a not-yet-ready head batch becomes ready by linger (None: none waiting)."""
        times = [q[0].created + self.linger for q in self.queues.values() if q]
        return min(times) if times else None

    def pop_head(self, tb: TableBucket) -> ProducerBatch:
        batch = self.queues[tb].popleft()
        batch.close()
        return batch

    def heads(self) -> Iterator[tuple[TableBucket, ProducerBatch, deque[ProducerBatch]]]:
        for tb, queue in self.queues.items():
            if queue:
                yield tb, queue[0], queue

    def expire(self, now: float) -> list[ProducerBatch]:
        """Remove and return never-sent batches past their delivery deadline."""
        expired = []
        for queue in self.queues.values():
            while queue and queue[0].deadline <= now:
                batch = queue.popleft()
                batch.close()
                expired.append(batch)
        return expired

    def has_unsent(self) -> bool:
        return any(self.queues.values())

    def drain_all(self) -> list[ProducerBatch]:
        """Every queued batch (for a forced close)."""
        batches = [b for q in self.queues.values() for b in q]
        self.queues.clear()
        return batches


__all__ = ["NO_WRITER_EPOCH", "BufferPool", "ProducerBatch", "RecordAccumulator", "RecordMetadata"]
