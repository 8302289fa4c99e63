"""``Upserter`` and ``Deleter``: writes to a primary-key table, on the producer's pipeline.

    async with Upserter("127.0.0.1:9123", "db.users") as upserter:
        fut = await upserter.upsert({"id": 42, "name": "ada"})     # waits only for buffer room
        bucket, offset = await fut                                 # acknowledged (acks=all by default)
        await upserter.delete_and_wait(42)                         # the key: a value, a list, or a dict

Each upsert or delete is one record of a KV batch (docs/primary-key-tables.md §3.3): key = the encoded primary
key, value = the op byte and the row. It goes through ``Producer.send`` with the KV attribute and the bucket of
its key, so batching, idempotence, acks, retries, ordering per bucket and failovers are the producer's own
(docs/client.md). The offset acknowledged is the change's offset in the bucket's changelog.

A row is checked against the table's current schema before it is queued (a dict by column name or a list of
every column; types, NOT NULL, the primary key); a bad row raises INVALID_ROW at once and nothing is sent.
``partial=("id", "score")`` makes an upserter whose rows change only those columns (the others keep their
stored value; docs §2): the whole primary key must be among them.

Owned by one event loop; for threads use ``fluss_py.client.sync.SyncUpserter``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from fluss_py.client.kv.table import KvTable, KvTables
from fluss_py.client.options import ProducerOptions
from fluss_py.client.producer import Producer, RecordMetadata
from fluss_py.client.transport import Transport
from fluss_py.record.batch import KV_BATCH
from fluss_py.schema.changelog import KvOp, encode_kv_value
from fluss_py.security.identity import PeerIdentity
from fluss_py.types import TablePath

Row = Mapping[str, Any] | Sequence[Any]


class Deleter:
    """Deletes rows of one primary-key table by key (see module docstring). Owns its ``Producer`` unless one
    is given (one producer may serve writers of many tables)."""

    def __init__(
        self,
        bootstrap_servers: str | None,
        table: TablePath | str,
        options: ProducerOptions | None = None,
        *,
        producer: Producer | None = None,
        transport: Transport | None = None,
        security: PeerIdentity | None = None,
    ) -> None:
        if producer is None:
            if bootstrap_servers is None:
                raise ValueError("give bootstrap_servers or a producer")
            producer = Producer(bootstrap_servers, options, transport=transport, security=security)
            self._owns_producer = True
        else:
            self._owns_producer = False
        self.producer = producer
        self.path = TablePath.parse(table) if isinstance(table, str) else table
        self._tables = KvTables(producer.metadata, producer.options.max_block)

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def table(self) -> KvTable:
        """The table as currently known (schema, codec); TABLE_TYPE_MISMATCH for a log table."""
        return await self._tables.get(self.path)

    async def delete(self, key: Any) -> asyncio.Future[RecordMetadata]:
        """Queue the delete of ``key``; a future of where the change landed (as ``Producer.send``)."""
        t = await self._tables.get(self.path)
        encoded = t.codec.encode_key(t.key_values(key))
        return await self._send(t, encoded, encode_kv_value(KvOp.DELETE))

    async def delete_and_wait(self, key: Any) -> RecordMetadata:
        t = await self._tables.get(self.path)
        encoded = t.codec.encode_key(t.key_values(key))
        return await self._send_and_wait(t, encoded, encode_kv_value(KvOp.DELETE))

    async def flush(self, timeout: float | None = None) -> None:
        await self.producer.flush(timeout)

    async def close(self, timeout: float | None = None) -> None:
        """Flush and close the producer if this writer owns it, else only flush."""
        if self._owns_producer:
            await self.producer.close(timeout)
        else:
            await self.producer.flush(timeout)

    async def _send(self, t: KvTable, key: bytes, value: bytes) -> asyncio.Future[RecordMetadata]:
        return await self.producer.send(t.path, value, key=key, bucket=t.bucket_of(key), attributes=KV_BATCH)

    async def _send_and_wait(self, t: KvTable, key: bytes, value: bytes) -> RecordMetadata:
        return await self.producer.send_and_wait(t.path, value, key=key, bucket=t.bucket_of(key), attributes=KV_BATCH)


class Upserter(Deleter):
    """Upserts (and deletes) rows of one primary-key table (see module docstring)."""

    def __init__(
        self,
        bootstrap_servers: str | None,
        table: TablePath | str,
        options: ProducerOptions | None = None,
        *,
        partial: Sequence[str] = (),
        producer: Producer | None = None,
        transport: Transport | None = None,
        security: PeerIdentity | None = None,
    ) -> None:
        super().__init__(bootstrap_servers, table, options, producer=producer, transport=transport, security=security)
        if isinstance(partial, str):
            raise ValueError("partial names columns: a list of names, not one string")
        self.partial = tuple(partial)

    async def upsert(self, row: Row) -> asyncio.Future[RecordMetadata]:
        """Queue an upsert of ``row``; a future of where the change landed. INVALID_ROW at once for a bad row."""
        t = await self._tables.get(self.path)
        key, value = self._encode(t, row)
        return await self._send(t, key, value)

    async def upsert_and_wait(self, row: Row) -> RecordMetadata:
        t = await self._tables.get(self.path)
        key, value = self._encode(t, row)
        return await self._send_and_wait(t, key, value)

    def _encode(self, t: KvTable, row: Row) -> tuple[bytes, bytes]:
        codec = t.codec
        values = t.row_values(row)
        if self.partial:
            row_bytes, targets = codec.encode_partial_row(values, self.partial)
            value = encode_kv_value(KvOp.PARTIAL_UPSERT, row_bytes, targets)
        else:
            value = encode_kv_value(KvOp.UPSERT, codec.encode_row(values))
        return codec.key_of_row(values), value
