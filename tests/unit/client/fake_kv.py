"""The fake cluster with primary-key tables: a leader that turns KV batches into changelog batches and
answers Lookup, PrefixLookup and ScanKv from an in-memory KV (no sockets, no RocksDB).

As a real leader (docs/primary-key-tables.md §4) it checks each KV record against the table's schema
(``decode_kv_record``), refuses a key of another bucket and a plain batch (TABLE_TYPE_MISMATCH), merges with the
table's merge engine and appends one changelog record per input record through the fake's idempotent append;
HW = LEO here, so the KV is applied at once. The KV keeps the rows of a table's buckets by key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fluss_py.errors import ErrorCode, InvalidRowError, TableTypeMismatchError
from fluss_py.record import RecordBatchBuilder, iter_batches
from fluss_py.record.batch import CHANGELOG
from fluss_py.rpc.convert import schema_to_pb
from fluss_py.rpc.pb import tablet_pb2
from fluss_py.schema.changelog import ChangeType, decode_kv_record, encode_change
from fluss_py.schema.merge import MergeRule, merge
from fluss_py.schema.row import row_codec
from fluss_py.schema.schema import TableSchema
from fluss_py.types import TableBucket
from tests.unit.client.fake_cluster import FakeBucket, FakeCluster, _err


class FakeKvCluster(FakeCluster):
    def __init__(self, num_servers: int = 3) -> None:
        super().__init__(num_servers)
        self.schemas: dict[int, TableSchema] = {}  # table id -> schema
        self.rules: dict[int, MergeRule] = {}
        self.bucket_counts: dict[int, int] = {}
        self.kv: dict[TableBucket, dict[bytes, bytes]] = {}
        self.max_prefix_rows = 1000

    def create_kv_table(
        self,
        table: str,
        schema: TableSchema,
        num_buckets: int = 1,
        properties: Mapping[str, str] | None = None,
    ) -> int:
        table_id = self.create_table("fluss", table, num_buckets, properties=None)
        if properties:
            self.properties[("fluss", table)] = dict(properties)
        self.schemas[table_id] = schema
        self.bucket_counts[table_id] = num_buckets
        self.rules[table_id] = MergeRule.from_properties(dict(properties or {}), schema)
        for b in range(num_buckets):
            self.kv[TableBucket(table_id, b)] = {}
        return table_id

    def alter_schema(self, table_id: int, schema: TableSchema) -> None:
        self.schemas[table_id] = schema

    def rows(self, tb: TableBucket) -> dict[bytes, bytes]:
        return self.kv[tb]

    # ---------------------------------------------------------------- metadata with schemas
    def _metadata(self) -> Any:
        md = super()._metadata()
        for tm in md.tables:
            schema = self.schemas.get(tm.info.table_id)
            if schema is not None:
                tm.info.descriptor.schema.CopyFrom(schema_to_pb(schema))
        return md

    # ---------------------------------------------------------------- the write path
    def _append(self, b: FakeBucket, data: bytearray) -> tuple[int, int]:
        schema = self.schemas.get(b.tb.table_id)
        (batch,) = list(iter_batches(data))
        if schema is None:
            if batch.is_kv_batch:
                raise TableTypeMismatchError(f"{b.tb} is a log table")
            return super()._append(b, data)
        if not batch.is_kv_batch:
            raise TableTypeMismatchError(f"{b.tb} is a primary-key table: only KV batches")
        codec = row_codec(schema)
        kv, pending = self.kv[b.tb], {}
        builder = RecordBatchBuilder(
            writer_id=batch.writer_id,
            writer_epoch=batch.writer_epoch,
            base_sequence=batch.base_sequence,
            max_bytes=1 << 30,
            attributes=CHANGELOG,
        )
        for r in batch.records():
            inp = decode_kv_record(codec, r.key, r.value)
            assert r.key is not None
            if codec.bucket_of(r.key, self.bucket_counts[b.tb.table_id]) != b.tb.bucket:
                raise InvalidRowError(f"a key of another bucket than {b.tb}")
            old = pending[r.key] if r.key in pending else kv.get(r.key)
            change, new = merge(self.rules[b.tb.table_id], codec, old, inp)
            if change is ChangeType.INSERT:
                value = encode_change(change, new=new)
            elif change is ChangeType.UPDATE:
                value = encode_change(change, old, new)
            elif change is ChangeType.DELETE:
                value = encode_change(change, old)
            else:
                value = encode_change(change)
            if change is not ChangeType.NOOP:
                pending[r.key] = new
            builder.append(value, r.key, r.timestamp_ms)
        leo = b.leo
        offsets = super()._append(b, builder.build_buffer())
        if b.leo > leo:  # appended now, not a duplicate answered with its first offsets
            for key, row in pending.items():
                if row is None:
                    kv.pop(key, None)
                else:
                    kv[key] = row
        return offsets

    # ---------------------------------------------------------------- reads
    def _read_bucket(self, address: str, rpc: str, pb: Any) -> tuple[TableBucket, Any, dict[bytes, bytes] | None]:
        tb = TableBucket(pb.table_id, pb.bucket)
        b = self.buckets.get(tb)
        if b is None:
            return tb, _err(ErrorCode.UNKNOWN_TABLE_OR_BUCKET), None
        error = self._leader_error(b, self._server_id(address), self._take_fault(rpc, address, tb))
        if error is not None:
            return tb, error, None
        if tb not in self.kv:
            return tb, _err(ErrorCode.TABLE_TYPE_MISMATCH), None
        return tb, None, self.kv[tb]

    async def _h_Lookup(self, address: str, request: Any, timeout: float) -> Any:
        await self._transport_fault("Lookup", address, timeout)
        response = tablet_pb2.LookupResponse()
        for lb in request.buckets:
            result = response.buckets.add(table_bucket=lb.table_bucket)
            _, error, kv = self._read_bucket(address, "Lookup", lb.table_bucket)
            if error is not None:
                result.error.CopyFrom(error)
                continue
            assert kv is not None
            for key in lb.keys:
                row = kv.get(key)
                result.values.add(found=row is not None, row=row or b"")
        return response

    async def _h_PrefixLookup(self, address: str, request: Any, timeout: float) -> Any:
        await self._transport_fault("PrefixLookup", address, timeout)
        response = tablet_pb2.PrefixLookupResponse()
        limit = request.max_rows_per_prefix or self.max_prefix_rows
        for pb in request.buckets:
            result = response.buckets.add(table_bucket=pb.table_bucket)
            _, error, kv = self._read_bucket(address, "PrefixLookup", pb.table_bucket)
            if error is not None:
                result.error.CopyFrom(error)
                continue
            assert kv is not None
            for prefix in pb.prefixes:
                matched = [kv[k] for k in sorted(kv) if k.startswith(prefix)]
                result.results.add(rows=matched[:limit], truncated=len(matched) > limit)
        return response

    async def _h_ScanKv(self, address: str, request: Any, timeout: float) -> Any:
        await self._transport_fault("ScanKv", address, timeout)
        _, error, kv = self._read_bucket(address, "ScanKv", request.table_bucket)
        if error is not None:
            return tablet_pb2.ScanKvResponse(error=error)
        assert kv is not None
        keys = [k for k in sorted(kv) if k > request.after_key]
        page = keys[: request.max_rows]
        return tablet_pb2.ScanKvResponse(
            rows=[tablet_pb2.KvRow(key=k, row=kv[k]) for k in page], more=len(keys) > len(page)
        )


__all__ = ["FakeKvCluster"]
