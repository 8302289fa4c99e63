"""A primary-key table's per-bucket KV size and rows for ``table describe``: the leader's ``ListOffsetsResult.kv``
goes out in ListOffsets (tablet.proto ``KvSize``), the client reads it into ``BucketOffsets`` /
``BucketDescription``, and describe shows it for primary-key tables only (an in-memory replica manager and
transport: the narrow edges of the layer and the client)."""

from __future__ import annotations

from typing import Any

from fluss_py.cli.table import describe_document
from fluss_py.cli.table_schema import kv_cells
from fluss_py.client.admin import BucketDescription, TableDescription, list_offsets_request
from fluss_py.client.metadata import BucketLocation, TableInfo
from fluss_py.config import Config
from fluss_py.replica.messages import KvSize, ListOffsetsResult
from fluss_py.rpc import convert
from fluss_py.rpc.pb import tablet_pb2
from fluss_py.schema.schema import parse_schema
from fluss_py.tablet.metadata_cache import MetadataCache
from fluss_py.tablet.replica_layer import ManagerReplicaLayer
from fluss_py.types import OffsetSpec, TableBucket, TablePath

PK_BUCKET, LOG_BUCKET = TableBucket(5, 0), TableBucket(6, 0)


class _Replicas:
    """What the layer's ListOffsets asks of a ReplicaManager: one answer per bucket."""

    async def list_offsets(self, asked: list[Any]) -> dict[TableBucket, ListOffsetsResult]:
        return {
            PK_BUCKET: ListOffsetsResult(PK_BUCKET, None, 10, 10, 10, 0, KvSize(3 * 1024 * 1024, 1234)),
            LOG_BUCKET: ListOffsetsResult(LOG_BUCKET, None, 4, 4, 4, 0),
        }


class _Transport:
    def __init__(self, layer: ManagerReplicaLayer) -> None:
        self.layer = layer

    async def call(self, address: str, rpc: Any, request: Any, timeout: float) -> Any:
        return await self.layer.list_offsets(request)


async def test_the_leaders_kv_size_travels_to_describe() -> None:
    layer = ManagerReplicaLayer(_Replicas(), MetadataCache(), Config("tablet-server", {}))  # type: ignore[arg-type]
    asked = [
        tablet_pb2.ListOffsetsBucket(table_bucket=convert.table_bucket_to_pb(tb)) for tb in (PK_BUCKET, LOG_BUCKET)
    ]
    request = tablet_pb2.ListOffsetsRequest(buckets=asked)
    pk, plain = (await layer.list_offsets(request)).buckets
    assert (pk.kv.size_bytes, pk.kv.rows) == (3 * 1024 * 1024, 1234) and not plain.HasField("kv")

    got = await list_offsets_request(_Transport(layer), "a:1", [PK_BUCKET, LOG_BUCKET], OffsetSpec.LATEST, 0, 1.0)
    assert (got[PK_BUCKET].kv_size_bytes, got[PK_BUCKET].kv_rows) == (3 * 1024 * 1024, 1234)
    assert (got[LOG_BUCKET].kv_size_bytes, got[LOG_BUCKET].kv_rows) == (-1, -1)

    location = BucketLocation(PK_BUCKET, 1, 0, 0, (1,), (1,))
    bucket = BucketDescription(location, 0, 10, 10, kv_size_bytes=got[PK_BUCKET].kv_size_bytes, kv_rows=1234)
    pk_info = TableInfo(5, TablePath("fluss", "users"), 1, 1, schema=parse_schema("id BIGINT", "id"))
    (row,) = describe_document(TableDescription(pk_info, (bucket,)))["buckets"]
    assert (row["kv_size_bytes"], row["kv_rows"]) == (3 * 1024 * 1024, 1234) and kv_cells(row) == ("3.0 MiB", "1234")
    log_info = TableInfo(6, TablePath("fluss", "events"), 1, 1)
    (row,) = describe_document(TableDescription(log_info, (bucket,)))["buckets"]
    assert "kv_size_bytes" not in row and kv_cells(row) == ()
