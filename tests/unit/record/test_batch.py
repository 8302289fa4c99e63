"""Record batch format: build, parse, validate, patch, iterate."""

from __future__ import annotations

import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluss_py.errors import CorruptMessageError, InvalidRecordBatchError
from fluss_py.record import (
    BATCH_HEADER_SIZE,
    NO_SEQUENCE,
    CompressionType,
    RecordBatch,
    RecordBatchBuilder,
    increment_sequence,
    iter_batches,
    set_base_offset_and_epoch,
)


def build(n: int = 3, **kw) -> bytes:
    b = RecordBatchBuilder(**kw)
    for i in range(n):
        assert b.append(b"value-%d" % i, key=b"k%d" % i if i % 2 else None, timestamp_ms=1_000 + i)
    return b.build()


def test_header_size_is_61() -> None:
    assert BATCH_HEADER_SIZE == 61


@pytest.mark.parametrize("compression", list(CompressionType))
def test_round_trip_records(compression: CompressionType) -> None:
    raw = build(5, compression=compression, writer_id=7, writer_epoch=2, base_sequence=10)
    batch = RecordBatch(raw)
    batch.ensure_valid()
    assert batch.base_offset == 0 and batch.leader_epoch == -1
    assert batch.record_count == 5 and batch.last_offset == 4 and batch.last_offset_delta == 4
    assert batch.batch_length == len(raw)
    assert batch.compression == compression
    assert (batch.writer_id, batch.writer_epoch, batch.base_sequence, batch.last_sequence) == (7, 2, 10, 14)
    assert batch.first_timestamp == 1000 and batch.max_timestamp == 1004
    recs = list(batch.records())
    assert [r.offset for r in recs] == [0, 1, 2, 3, 4]
    assert recs[0].key is None and recs[1].key == b"k1"
    assert recs[4].value == b"value-4" and recs[4].timestamp_ms == 1004


def test_patch_offset_and_epoch_keeps_crc_valid() -> None:
    buf = bytearray(build())
    crc = RecordBatch(buf).crc
    set_base_offset_and_epoch(buf, 0, 12345, 9)
    batch = RecordBatch(buf)
    batch.ensure_valid()
    assert (batch.base_offset, batch.leader_epoch, batch.crc) == (12345, 9, crc)
    assert [r.offset for r in batch.records()] == [12345, 12346, 12347]


def test_corrupt_payload_fails_crc() -> None:
    buf = bytearray(build())
    buf[-1] ^= 0xFF
    with pytest.raises(CorruptMessageError, match="CRC mismatch"):
        RecordBatch(buf).ensure_valid()
    assert not RecordBatch(buf).is_valid()


def test_bad_magic_and_short_length_are_invalid_headers() -> None:
    buf = bytearray(build())
    buf[16] = 9
    with pytest.raises(InvalidRecordBatchError, match="magic"):
        RecordBatch(buf).ensure_valid()
    buf = bytearray(build())
    struct.pack_into(">i", buf, 8, 10)
    with pytest.raises(InvalidRecordBatchError, match="smaller than the header"):
        RecordBatch(buf).ensure_valid()


def test_header_inconsistent_count_is_invalid() -> None:
    # A builder never produces this; forge it and fix the CRC so only the header check can catch it.
    import crc32c

    buf = bytearray(build(3))
    struct.pack_into(">i", buf, 57, 5)  # record_count
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    with pytest.raises(InvalidRecordBatchError, match="does not match record count"):
        RecordBatch(buf).ensure_valid()


def test_sequence_without_writer_is_invalid() -> None:
    import crc32c

    buf = bytearray(build(1))
    struct.pack_into(">i", buf, 53, 4)
    struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21:])))
    with pytest.raises(InvalidRecordBatchError, match="without a writer id"):
        RecordBatch(buf).ensure_valid()


def test_iter_batches_stops_at_torn_tail() -> None:
    a, b = build(2), build(3)
    whole = a + b
    assert [x.record_count for x in iter_batches(whole)] == [2, 3]
    for cut in range(len(a), len(whole)):
        assert [x.record_count for x in iter_batches(whole[:cut])] == [2]
    assert list(iter_batches(b"")) == []


def test_builder_max_bytes_and_empty_build() -> None:
    b = RecordBatchBuilder(max_bytes=200)
    assert b.append(b"x" * 500)  # the first record always fits
    assert not b.append(b"y")
    assert len(b) == 1 and b.size_in_bytes == 61 + 16 + 500
    with pytest.raises(ValueError):
        RecordBatchBuilder().build()


def test_no_writer_defaults() -> None:
    batch = RecordBatch(build())
    assert batch.writer_id == -1 and batch.base_sequence == NO_SEQUENCE and batch.last_sequence == NO_SEQUENCE


def test_increment_sequence_wraps() -> None:
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 3) == 1


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=20)), st.binary(max_size=50)), min_size=1, max_size=30),
    st.sampled_from(list(CompressionType)),
)
def test_property_round_trip(records: list[tuple[bytes | None, bytes]], compression: CompressionType) -> None:
    b = RecordBatchBuilder(compression=compression, max_bytes=1 << 20)
    for i, (k, v) in enumerate(records):
        assert b.append(v, key=k, timestamp_ms=10 + i)
    batch = RecordBatch(b.build())
    batch.ensure_valid()
    assert [(r.key, r.value) for r in batch.records()] == records


@pytest.mark.parametrize("compression", list(CompressionType))
def test_build_buffer_writes_the_documented_layout(compression: CompressionType) -> None:
    """The header as laid out in the module docstring, computed independently of the builder."""
    b = RecordBatchBuilder(compression=compression, writer_id=7, writer_epoch=2, base_sequence=40)
    b.append(b"v1", b"k1", 1_000)
    b.append(None, None, 990)
    b.append(b"v3" * 100, None, 1_005)
    buf = b.build_buffer()
    assert isinstance(buf, bytearray) and bytes(buf) == b.build()
    records = struct.pack(">qii", 0, 2, 2) + b"k1v1" + struct.pack(">qii", -10, -1, -1)
    records += struct.pack(">qii", 5, -1, 200) + b"v3" * 100
    if compression is CompressionType.NONE:
        assert buf[61:] == records
    covered = struct.pack(">hiqqqhii", int(compression), 2, 1_000, 1_005, 7, 2, 40, 3) + bytes(buf[61:])
    head = struct.pack(">qiibI", 0, len(buf) - 12, -1, 0, crc32c.crc32c(covered))
    assert bytes(buf[:61]) == head + covered[:40]
    assert [r.value for r in RecordBatch(buf).records()] == [b"v1", None, b"v3" * 100]
