"""``encode_produce_request`` writes exactly the bytes protobuf would for the same ProduceLogRequest."""

from __future__ import annotations

import pytest

from fluss_py.client.producer.request import encode_produce_request, varint
from fluss_py.rpc.pb import common_pb2, tablet_pb2


def _protobuf(acks: int, timeout_ms: int, buckets: list[tuple[int, int, bytes]]) -> bytes:
    return tablet_pb2.ProduceLogRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        buckets=[
            tablet_pb2.ProduceBucket(table_bucket=common_pb2.TableBucket(table_id=t, bucket=b), records=r)
            for t, b, r in buckets
        ],
    ).SerializeToString()


@pytest.mark.parametrize("acks", [-1, 0, 1])
@pytest.mark.parametrize(
    "buckets",
    [
        [(1, 0, b"x")],
        [(0, 0, b"a" * 127), (7, 2, b"b" * 128)],
        [(2**40, 5, b"c" * 300_000), (3, 1, bytearray(b"d" * 16_384))],
    ],
)
def test_same_bytes_as_protobuf(acks: int, buckets: list[tuple[int, int, bytes]]) -> None:
    encoded = encode_produce_request(acks, 30_000, buckets)
    assert encoded.SerializeToString() == _protobuf(acks, 30_000, [(t, b, bytes(r)) for t, b, r in buckets])
    decoded = encoded.decode()
    assert [(x.table_bucket.table_id, x.table_bucket.bucket, x.records) for x in decoded.buckets] == [
        (t, b, bytes(r)) for t, b, r in buckets
    ]


def test_varint() -> None:
    assert [varint(n) for n in (0, 1, 127, 128, 300, 2**21)] == [
        b"\x00",
        b"\x01",
        b"\x7f",
        b"\x80\x01",
        b"\xac\x02",
        b"\x80\x80\x80\x01",
    ]


def test_correlation_id_appended_is_the_field_protobuf_writes_last() -> None:
    """A stream appends ``correlation_id`` (field 4, after the buckets): still the bytes protobuf writes."""
    encoded = encode_produce_request(-1, 30_000, [(1, 0, b"x" * 200)]).with_field(b"\x20" + varint(300))
    expected = tablet_pb2.ProduceLogRequest.FromString(_protobuf(-1, 30_000, [(1, 0, b"x" * 200)]))
    expected.correlation_id = 300
    assert encoded.SerializeToString() == expected.SerializeToString()
    assert encoded.decode().correlation_id == 300
