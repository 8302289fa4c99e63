"""``Producer``: the public, thin face of the producer pipeline.

    async with Producer("127.0.0.1:9123") as producer:
        fut = await producer.send("db.events", b"value", key=b"k")   # waits only for buffer room
        bucket, offset = await fut                                  # acknowledged per acks

``send`` picks the bucket (explicit, else CRC-32C of the key modulo the bucket count, else a *sticky*
bucket that changes once its batch is full or sent), reserves buffer memory (back-pressure, at most
``max_block``) and appends to the accumulator; the ``Sender`` task does everything else. ``flush``
sends every lingering batch now and waits for all records sent before it; ``close`` flushes (bounded by
its timeout) and then fails whatever is left.

Owned by one event loop; for threads use ``fluss_py.client.sync.SyncProducer``.
"""

from __future__ import annotations

import asyncio
import random
import time

from fluss_py.client.gateway import CoordinatorGateway
from fluss_py.client.metadata import ClusterMetadata, TableInfo
from fluss_py.client.options import ProducerOptions
from fluss_py.client.producer.accumulator import (
    BufferPool,
    ProducerBatch,
    RecordAccumulator,
    RecordMetadata,
    bucket_for_key,
    record_size,
)
from fluss_py.client.producer.idempotence import WriterIdSource
from fluss_py.client.producer.sender import Sender
from fluss_py.client.transport import GrpcTransport, Transport
from fluss_py.errors import (
    FlussError,
    InvalidRequestError,
    PartitionNotExistError,
    RequestTimedOutError,
    TableNotExistError,
)
from fluss_py.partitioning import TimeUnit, partition_for, routing_unit
from fluss_py.security.identity import PLAINTEXT, PeerIdentity
from fluss_py.types import TableBucket, TablePath


class ProducerClosedError(FlussError):
    """``send`` after ``close``."""


class Producer:
    """Writes records to tables (see module docstring). Create inside a running event loop."""

    def __init__(
        self,
        bootstrap_servers: str,
        options: ProducerOptions | None = None,
        *,
        transport: Transport | None = None,
        metadata: ClusterMetadata | None = None,
        security: PeerIdentity | None = None,
    ) -> None:
        self.options = opts = options or ProducerOptions()
        self._owns_transport = transport is None
        self._transport = transport or GrpcTransport(  # TLS + credentials (docs/security.md)
            security or PLAINTEXT, produce_stream=opts.produce_stream, keepalive=opts.keepalive
        )
        self._owns_metadata = metadata is None
        self.metadata = metadata or ClusterMetadata(
            bootstrap_servers, self._transport, request_timeout=opts.request_timeout, retry=opts.retry
        )
        gateway = CoordinatorGateway(
            self.metadata, self._transport, request_timeout=opts.request_timeout, retry=opts.retry
        )
        self._pool = BufferPool(opts.buffer_memory)
        self._accumulator = RecordAccumulator(opts.batch_size, opts.linger, opts.compression, opts.delivery_timeout)
        writer_ids = WriterIdSource(gateway, opts.request_timeout) if opts.idempotence else None
        self._sender = Sender(self._accumulator, self._pool, self.metadata, self._transport, opts, writer_ids)
        self._paths: dict[str, TablePath] = {}
        # per-record lookups, cached: table name -> info while the metadata version is unchanged, and each
        # table id's TableBucket objects (one object per bucket: cheaper dict lookups in the accumulator)
        self._infos: dict[TablePath | str, TableInfo] = {}
        # table id of the logical table of a partitioned table -> the unit its records are routed by
        self._routed: dict[int, TimeUnit] = {}
        self._infos_version = -1
        self._buckets: dict[int, tuple[TableBucket, ...]] = {}
        self._sticky: dict[int, tuple[int, ProducerBatch | None]] = {}
        self._closed = False
        self._sender.start()

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def lost_writer_state(self) -> int:
        """How many times a leader answered that it lacks records of this producer it had acknowledged
        (docs/client.md, rule 4): with acks=all each one also failed a send. 0 in a healthy cluster."""
        return self._sender.lost_writer_state

    # ---------------------------------------------------------------- sending
    async def send(
        self,
        table: TablePath | str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        bucket: int | None = None,
        timestamp_ms: int | None = None,
        attributes: int = 0,
    ) -> asyncio.Future[RecordMetadata]:
        """Queue one record; returns a future of ``RecordMetadata(bucket, offset)``.

        ``attributes``: the attribute bits of the record's batch besides compression (``KV_BATCH`` for the
        upserts and deletes of ``client.kv.Upserter``, docs/primary-key-tables.md §3.3); records of other
        attributes never share a batch.

        Waits only for table metadata and buffer room (up to ``max_block``, then REQUEST_TIMED_OUT).
        The future fails with the record's error once it cannot be delivered (a non-retriable error, or
        ``delivery_timeout`` passed).

        This is the pipelined path: every parameter, await or call more here is paid per record
        (``tests.bench.client_cpu``; docs/performance.md "The client's CPU per pipelined record"), so what only
        ``send_and_wait`` needs happens there, after this returns.
        """
        if self._closed:
            raise ProducerClosedError("the producer is closed")
        if self._sender.error is not None:
            raise self._sender.error
        info = self._infos.get(table) if self._infos_version == self.metadata.version else None
        if info is None:
            info = await self._table(table)
        unit = self._routed.get(info.table_id)
        if unit is not None:  # a partitioned table: the record's timestamp picks the partition
            if timestamp_ms is None:
                timestamp_ms = int(time.time() * 1000)
            info = await self._partition(info, unit, timestamp_ms)
        n = info.num_buckets
        if bucket is None:
            bucket = bucket_for_key(key, n) if key is not None else self._sticky_bucket(info)
        elif not 0 <= bucket < n:
            raise InvalidRequestError(f"bucket {bucket} out of range: {info.path} has {n} buckets")
        size = record_size(key, value)
        acc = self._accumulator
        if acc.filled:
            # A batch filled up since the last yield: let the sender ship it now, while this caller goes on
            # filling the next one (a caller that never blocks would otherwise hold the loop until the
            # buffer memory is exhausted, and no request would overlap with its appends).
            acc.filled = False
            await asyncio.sleep(0)
        if not self._pool.try_reserve(size):
            await self._pool.reserve(size, self.options.max_block)
        if self._closed:  # closed while this call waited (metadata, the yield, buffer room): nothing is queued
            self._pool.release(size)
            raise ProducerClosedError("the producer was closed while the record waited to be queued")
        tbs = self._buckets.get(info.table_id)
        if tbs is None or len(tbs) != n:
            tbs = self._buckets[info.table_id] = tuple(TableBucket(info.table_id, b) for b in range(n))
        fut, batch = acc.append(tbs[bucket], key, value, timestamp_ms, size, attributes)
        if key is None:
            self._sticky[info.table_id] = (bucket, batch)
        return fut

    async def send_and_wait(
        self,
        table: TablePath | str,
        value: bytes | None,
        *,
        key: bytes | None = None,
        bucket: int | None = None,
        timestamp_ms: int | None = None,
        attributes: int = 0,
    ) -> RecordMetadata:
        """``send`` and wait for the answer. A record sent while nothing of this producer is on the wire has its
        request started in this loop turn (no batch can form behind it: this caller sends nothing more until the
        answer): ``send`` returns in the turn it appended the record, so the sender is still as it found it."""
        fut = await self.send(table, value, key=key, bucket=bucket, timestamp_ms=timestamp_ms, attributes=attributes)
        if self._sender.idle:
            self._sender.send_now()
        return await fut

    async def _partition(self, info: TableInfo, unit: TimeUnit, timestamp_ms: int) -> TableInfo:
        """The partition of the partitioned table ``info`` that a record stamped ``timestamp_ms`` goes to
        (its slot computed as the coordinator does); PARTITION_NOT_EXIST (not retriable) when that partition
        does not exist: expired, or not created yet (docs/partitioning.md)."""
        path = TablePath(info.path.database, partition_for(info.path.table, timestamp_ms, unit))
        cached = self._infos.get(path) if self._infos_version == self.metadata.version else None
        if cached is not None:
            return cached
        try:
            return await self._table(path)
        except TableNotExistError:
            raise PartitionNotExistError(
                f"no partition {path} of {info.path} for the record's timestamp {timestamp_ms} ms: it expired "
                f"(retention) or is not created yet (num-precreate); `table list-partitions {info.path}`"
            ) from None

    async def _table(self, table: TablePath | str) -> TableInfo:
        if isinstance(table, str):
            path = self._paths.get(table)
            if path is None:
                path = self._paths[table] = TablePath.parse(table)
        else:
            path = table
        info = self.metadata.table(path)
        if info is None:
            info = await self.metadata.wait_for_table(path, self.options.max_block)
        if self._infos_version != self.metadata.version:
            self._infos.clear()  # any metadata change may have dropped or recreated a table
            self._infos_version = self.metadata.version
        self._infos[table] = info
        unit = routing_unit(info.path.table, info.properties)
        if unit is not None:
            self._routed[info.table_id] = unit
        return info

    def _sticky_bucket(self, info: TableInfo) -> int:
        current = self._sticky.get(info.table_id)
        if current is not None:
            bucket, batch = current
            if batch is not None and batch.is_open and not batch.is_full(self.options.batch_size):
                return bucket
            return (bucket + 1) % info.num_buckets
        return random.randrange(info.num_buckets)

    # ---------------------------------------------------------------- flush / close
    async def flush(self, timeout: float | None = None) -> None:
        """Send all queued records now and wait until each is acknowledged or failed."""
        pending = [b.done for b in self._accumulator.incomplete]
        if not pending:
            return
        self._accumulator.flushing += 1
        self._accumulator.wakeup.set()
        try:
            _, not_done = await asyncio.wait(pending, timeout=timeout)
            if not_done:
                raise RequestTimedOutError(f"flush: {len(not_done)} batch(es) still unacknowledged after {timeout}s")
        finally:
            self._accumulator.flushing -= 1

    async def close(self, timeout: float | None = None) -> None:
        """Flush (at most ``timeout`` seconds, default the delivery timeout), fail the rest, stop."""
        if self._closed:
            return
        self._closed = True
        # sends waiting for buffer room fail now (a batch failed later would otherwise wake one after the stop)
        self._pool.close(ProducerClosedError("the producer was closed while the record waited for buffer memory"))
        self._accumulator.closing = True
        self._accumulator.wakeup.set()
        try:
            await self.flush(self.options.delivery_timeout if timeout is None else timeout)
        except RequestTimedOutError:
            pass
        finally:
            await self._sender.close()
            self._sender.fail_all(ProducerClosedError("the producer was closed before the record was acknowledged"))
            if self._owns_metadata:
                await self.metadata.close()
            if self._owns_transport:
                await self._transport.close()
