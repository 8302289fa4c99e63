"""The record-level check of a batch (``ensure_valid_records``) and bounded decompression, against malformed
inputs: every length field set to every interesting value, random byte flips, truncations and counts, each
compared with a plain reference walk; the named inputs of the issue (a value length of 2^31-1, a count larger
than the records present, zstd and lz4 bombs); and the leader's append path refusing them without writing."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from fluss_py.errors import CorruptMessageError, InvalidRecordBatchError, UnsupportedCompressionError
from fluss_py.log import LogConfig
from fluss_py.log.validator import validate_leader_append
from fluss_py.log.writer_state import WriterStateManager
from fluss_py.record import CompressionType, RecordBatch, RecordBatchBuilder
from fluss_py.record.compression import decompress
from fluss_py.record.validation import RECORD_OVERHEAD, ensure_valid_records
from fluss_py.testing.bad_batches import (
    count_larger_than_records,
    forge_batch,
    lying_value_length,
    lz4_bomb,
    max_timestamp_below_a_record,
    record,
    zstd_bomb,
)
from tests.unit.log.helpers import TB, batch, open_log

MiB = 1024 * 1024
INTERESTING = [-(2**31), -2, -1, 0, 1, 2, 5, 15, 16, 17, 100, 2**31 - 1]

records_st = st.lists(
    st.tuples(st.none() | st.binary(max_size=20), st.none() | st.binary(max_size=40)), min_size=1, max_size=12
)


def reference_ok(data: bytes, count: int) -> bool:
    """The definition, written as plainly as possible: ``count`` records, each a 16-byte header whose two
    lengths are >= -1 followed by that many bytes, and nothing after the last."""
    pos = 0
    for _ in range(count):
        if len(data) - pos < 16:
            return False
        klen = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
        vlen = int.from_bytes(data[pos + 12 : pos + 16], "big", signed=True)
        if klen < -1 or vlen < -1:
            return False
        pos += 16 + max(klen, 0) + max(vlen, 0)
        if pos > len(data):
            return False
    return count >= 1 and pos == len(data)


def accepted(data: bytes, count: int) -> bool:
    try:
        ensure_valid_records(data, count, "test")
    except CorruptMessageError:
        return False
    return True


def block_of(rows: list[tuple[bytes | None, bytes | None]]) -> bytes:
    return b"".join(record(v, k) for k, v in rows)


# ------------------------------------------------------------------------------------------ the record walk
@given(records_st)
def test_well_formed_records_pass_and_decode_back(rows) -> None:
    block = block_of(rows)
    assert accepted(block, len(rows))
    decoded = list(RecordBatch(forge_batch(block, len(rows))).records())
    assert [(r.key, r.value) for r in decoded] == rows


@given(records_st, st.integers(min_value=-3, max_value=3).filter(lambda d: d != 0))
def test_a_wrong_count_is_refused(rows, delta) -> None:
    block = block_of(rows)
    assert not accepted(block, len(rows) + delta)


@given(records_st, st.data())
def test_every_truncation_and_every_appended_tail_is_refused(rows, data) -> None:
    block = block_of(rows)
    cut = data.draw(st.integers(min_value=0, max_value=len(block) - 1))
    assert not accepted(block[:cut], len(rows))
    tail = data.draw(st.binary(min_size=1, max_size=20))
    assert not accepted(block + tail, len(rows))


def test_every_length_field_set_to_every_interesting_value_matches_the_reference() -> None:
    rows = [(b"k0", b"value-0"), (None, b"v1"), (b"key-2", None), (b"k3", b"value-3")]
    block = block_of(rows)
    offsets, pos = [], 0
    for k, v in rows:  # positions of each record's key-length and value-length fields
        offsets += [pos + 8, pos + 12]
        pos += RECORD_OVERHEAD + len(k or b"") + len(v or b"")
    checked = 0
    for at in offsets:
        for value in INTERESTING:
            mutated = bytearray(block)
            struct.pack_into(">i", mutated, at, value)
            for count in (len(rows) - 1, len(rows), len(rows) + 1):
                assert accepted(bytes(mutated), count) == reference_ok(bytes(mutated), count), (at, value, count)
                checked += 1
    assert checked == len(offsets) * len(INTERESTING) * 3


@settings(max_examples=300)
@given(records_st, st.data())
def test_random_byte_flips_are_judged_as_the_reference_does(rows, data) -> None:
    block = bytearray(block_of(rows))
    for _ in range(data.draw(st.integers(min_value=1, max_value=4))):
        at = data.draw(st.integers(min_value=0, max_value=len(block) - 1))
        block[at] = data.draw(st.integers(min_value=0, max_value=255))
    assert accepted(bytes(block), len(rows)) == reference_ok(bytes(block), len(rows))


@settings(max_examples=200)
@given(
    st.integers(min_value=1, max_value=30),
    st.none() | st.binary(max_size=8),
    st.none() | st.binary(max_size=30),
    st.data(),
)
def test_uniform_batches_take_the_fast_path_and_one_odd_record_is_still_caught(n, key, value, data) -> None:
    """All records the same size: the strided check proves it; change one record's lengths and the result
    must still be the reference's (whichever path decides it)."""
    rows = [(key, value)] * n
    block = bytearray(block_of(rows))
    assert accepted(bytes(block), n)
    stride = len(block) // n
    i = data.draw(st.integers(min_value=0, max_value=n - 1))
    field = data.draw(st.sampled_from([8, 12]))
    struct.pack_into(">i", block, i * stride + field, data.draw(st.sampled_from(INTERESTING)))
    assert accepted(bytes(block), n) == reference_ok(bytes(block), n)


def test_the_issue_inputs_are_refused_and_named() -> None:
    with pytest.raises(CorruptMessageError, match="value length 2147483647"):
        RecordBatch(lying_value_length()).ensure_valid_records(8 * MiB)
    with pytest.raises(CorruptMessageError, match="record 3 of 10 is missing"):
        RecordBatch(count_larger_than_records(3, 10)).ensure_valid_records(8 * MiB)


def test_records_yields_every_record_before_a_bad_one_then_raises() -> None:
    got = []
    with pytest.raises(CorruptMessageError, match="record 3"):
        for r in RecordBatch(lying_value_length(3)).records():
            got.append(r.value)
    assert got == [b"good-0", b"good-1", b"good-2"]
    with pytest.raises(CorruptMessageError, match="key length -2"):
        list(RecordBatch(forge_batch(record(b"x") + struct.pack(">qii", 0, -2, 0), 2)).records())
    with pytest.raises(CorruptMessageError, match="bytes after the last record"):
        list(RecordBatch(forge_batch(record(b"x") + b"junk", 1)).records())


# ------------------------------------------------------------------------------------------ timestamps
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
DELTAS = st.one_of(INT64, st.integers(min_value=-300, max_value=70_000), st.sampled_from([0, 255, 256, 65_535]))


def timestamps_ok(data: bytes, count: int, max_ts_delta: int) -> bool:
    try:
        ensure_valid_records(data, count, "test", max_ts_delta)
    except InvalidRecordBatchError:
        return False
    return True


@settings(max_examples=400)
@given(st.lists(DELTAS, min_size=1, max_size=12), st.data())
def test_a_record_timestamp_above_the_max_is_refused_on_both_paths(deltas, data) -> None:
    """Against the plain rule (every delta <= the header's max - first), with the limit drawn at, around and
    far from the largest delta; records of one size take the strided path, of mixed sizes the walk."""
    top = max(deltas)
    limit = data.draw(st.sampled_from([top, top - 1, top + 1, 0, 255, 256, 2**63 - 1]).filter(lambda x: x >= 0))
    uniform = b"".join(record(b"v", ts_delta=d) for d in deltas)
    mixed = b"".join(record(b"v" * i, ts_delta=d) for i, d in enumerate(deltas))
    expected = top <= limit
    assert timestamps_ok(uniform, len(deltas), limit) == expected
    assert timestamps_ok(mixed, len(deltas), limit) == expected


@pytest.mark.parametrize("compression", list(CompressionType))
def test_a_header_max_timestamp_below_its_records_is_refused_compressed_or_not(compression) -> None:
    bad = RecordBatch(max_timestamp_below_a_record(compression))
    bad.ensure_valid()  # the header alone is consistent (max >= first)
    with pytest.raises(InvalidRecordBatchError, match="record 1 has a timestamp 49000 ms after the first"):
        bad.ensure_valid_records(MiB)


@settings(max_examples=100)
@given(st.lists(st.integers(min_value=-(2**40), max_value=2**40), min_size=1, max_size=20))
def test_the_builder_writes_the_largest_record_timestamp_as_max(timestamps) -> None:
    for compression in CompressionType:
        b = RecordBatchBuilder(compression=compression)
        for ts in timestamps:
            assert b.append(b"v", timestamp_ms=ts)
        batch = RecordBatch(b.build())
        assert (batch.first_timestamp, batch.max_timestamp) == (timestamps[0], max(timestamps))
        batch.ensure_valid()
        batch.ensure_valid_records(MiB)


# ------------------------------------------------------------------------------------------ decompression
@pytest.mark.parametrize("compression", [CompressionType.LZ4, CompressionType.ZSTD])
def test_compressed_batches_pass_up_to_the_bound_exactly(compression) -> None:
    b = RecordBatchBuilder(compression=compression)
    for i in range(50):
        b.append(os.urandom(30) + bytes(100), key=b"k%d" % i)
    rb = RecordBatch(b.build())
    size = b.size_in_bytes - 61  # the records block, uncompressed
    rb.ensure_valid_records(size)
    with pytest.raises(CorruptMessageError, match="over the limit"):
        rb.ensure_valid_records(size - 1)


@pytest.mark.parametrize(
    "bomb",
    [
        pytest.param(lambda: zstd_bomb(512 * MiB), id="zstd-512MiB-declared"),
        pytest.param(lambda: zstd_bomb(64 * MiB, declare_size=False), id="zstd-64MiB-streamed"),
        pytest.param(lambda: lz4_bomb(64 * MiB), id="lz4-64MiB"),
    ],
)
def test_bombs_are_refused_without_expanding(bomb) -> None:
    data = bomb()
    assert len(data) < 8 * MiB  # passes the wire-size limit: only the decompressed size can catch it
    rb = RecordBatch(data)
    rb.ensure_valid()
    with pytest.raises(CorruptMessageError, match="over the limit of 8388608 bytes"):
        rb.ensure_valid_records(8 * MiB)
    with pytest.raises(CorruptMessageError, match="over the limit"):
        next(rb.records(max_bytes=8 * MiB))


def test_the_lz4_bound_stops_decoding_not_just_checks_afterwards() -> None:
    """A frame claiming nothing about its size: the decoder hands back at most bound + 1 bytes."""
    frame = lz4.frame.compress(bytes(32 * MiB), store_size=False)
    decoder = lz4.frame.LZ4FrameDecompressor()
    assert len(decoder.decompress(frame, max_length=MiB + 1)) == MiB + 1
    with pytest.raises(CorruptMessageError):
        decompress(CompressionType.LZ4, frame, MiB)


@pytest.mark.parametrize("compression", [CompressionType.LZ4, CompressionType.ZSTD])
def test_broken_compressed_blocks_are_corrupt_messages(compression) -> None:
    raw = record(b"x" * 1000) * 3
    good = lz4.frame.compress(raw) if compression is CompressionType.LZ4 else zstandard.compress(raw)
    assert decompress(compression, good, MiB) == raw
    for bad in (good[:-4], good[: len(good) // 2], b"", b"garbage-garbage-garbage", bytes(64)):
        with pytest.raises(CorruptMessageError):
            decompress(compression, bad, MiB)
    if compression is CompressionType.LZ4:
        with pytest.raises(CorruptMessageError, match="after the frame"):
            decompress(compression, good + b"xyz", MiB)


@pytest.mark.parametrize("declare_size", [True, False], ids=["size-declared", "size-not-declared"])
def test_bytes_after_the_zstd_frame_are_refused(declare_size: bool) -> None:
    """A frame decodes to one record; a second frame (a decoder reading across frames would see two records
    in a count-1 batch) or junk after it is refused, as after an lz4 frame."""
    compressor = zstandard.ZstdCompressor(write_content_size=declare_size)
    one, hidden = compressor.compress(record(b"seen")), compressor.compress(record(b"hidden"))
    assert decompress(CompressionType.ZSTD, one, MiB) == record(b"seen")
    for tail in (hidden, b"junk", b"\x00"):
        with pytest.raises(CorruptMessageError, match=f"{len(tail)} bytes after the frame"):
            decompress(CompressionType.ZSTD, one + tail, MiB)
        with pytest.raises(CorruptMessageError, match="after the frame"):
            RecordBatch(forge_batch(one + tail, 1, CompressionType.ZSTD)).ensure_valid_records(MiB)


def test_unknown_compression_code_is_refused() -> None:
    with pytest.raises(UnsupportedCompressionError):
        decompress(5, b"abc", MiB)


# ------------------------------------------------------------------------------------------ the leader's append
BAD = {
    "lying-value-length": lying_value_length,
    "count-larger-than-records": count_larger_than_records,
    "zstd-bomb": lambda: zstd_bomb(64 * MiB),
    "lz4-bomb": lambda: lz4_bomb(16 * MiB),
    "max-timestamp-below-a-record": max_timestamp_below_a_record,
    "zstd-second-frame": lambda: forge_batch(zstandard.compress(record(b"a")) * 2, 1, CompressionType.ZSTD),
}


@pytest.mark.parametrize("name", list(BAD))
def test_the_leader_refuses_a_request_holding_a_bad_batch_and_writes_nothing(tmp_path: Path, name: str) -> None:
    bad = BAD[name]()
    refusal = InvalidRecordBatchError if name.startswith("max-timestamp") else CorruptMessageError
    with pytest.raises(refusal):
        validate_leader_append(bytearray(batch(2) + bad), 0, 0, 8 * MiB, WriterStateManager(tmp_path), TB)
    log = open_log(tmp_path / "log", LogConfig(max_batch_bytes=8 * MiB))
    log.append_as_leader(batch(3), 0)
    files = {p.name: p.read_bytes() for p in (tmp_path / "log").iterdir()}
    with pytest.raises(refusal):
        log.append_as_leader(batch(2) + bad, 0)
    assert log.log_end_offset == 3
    assert {p.name: p.read_bytes() for p in (tmp_path / "log").iterdir()} == files
    log.close()
