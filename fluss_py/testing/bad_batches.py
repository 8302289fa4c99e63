"""Record batches that are well-formed on the outside (valid header and CRC) and bad on the inside: the
inputs of the record-validation tests (unit and fault) and of anyone checking a server by hand.

Each returns the bytes of one batch as a producer would send it (base offset 0, leader epoch -1).
"""

from __future__ import annotations

from collections.abc import Iterator

import crc32c
import lz4.frame
import zstandard

from fluss_py.record.batch import (
    ATTRIBUTES_OFFSET,
    BATCH_HEADER_SIZE,
    CRC_OFFSET,
    HEADER,
    LOG_OVERHEAD,
    MAGIC,
    NO_LEADER_EPOCH,
    NO_SEQUENCE,
    NO_WRITER_EPOCH,
    NO_WRITER_ID,
)
from fluss_py.record.compression import CompressionType
from fluss_py.record.validation import RECORD_HEADER

_CHUNK = bytes(1 << 20)


def record(value: bytes | None, key: bytes | None = None, *, ts_delta: int = 0, value_len: int | None = None) -> bytes:
    """One encoded record; ``value_len`` overrides the value length field (a lie when it differs)."""
    klen = -1 if key is None else len(key)
    vlen = (-1 if value is None else len(value)) if value_len is None else value_len
    return RECORD_HEADER.pack(ts_delta, klen, vlen) + (key or b"") + (value or b"")


def forge_batch(
    block: bytes,
    record_count: int,
    compression: CompressionType = CompressionType.NONE,
    *,
    timestamp: int = 1_000,
    max_timestamp: int | None = None,
) -> bytes:
    """A batch whose records block is ``block`` (already compressed when ``compression`` says so), with a
    header claiming ``record_count`` records, first timestamp ``timestamp``, max timestamp ``max_timestamp``
    (default: the first) and a correct CRC."""
    buf = bytearray(BATCH_HEADER_SIZE) + block
    HEADER.pack_into(
        buf,
        0,
        0,
        len(buf) - LOG_OVERHEAD,
        NO_LEADER_EPOCH,
        MAGIC,
        0,
        int(compression),
        record_count - 1,
        timestamp,
        timestamp if max_timestamp is None else max_timestamp,
        NO_WRITER_ID,
        NO_WRITER_EPOCH,
        NO_SEQUENCE,
        record_count,
    )
    crc = crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:])
    buf[CRC_OFFSET : CRC_OFFSET + 4] = crc.to_bytes(4, "big")
    return bytes(buf)


def lying_value_length(good_records: int = 3) -> bytes:
    """``good_records`` fine records, then one whose value length says 2^31-1 (5 bytes follow)."""
    block = b"".join(record(b"good-%d" % i) for i in range(good_records))
    return forge_batch(block + record(b"short", value_len=2**31 - 1), good_records + 1)


def max_timestamp_below_a_record(compression: CompressionType = CompressionType.NONE) -> bytes:
    """Records at 1000 and 50000 ms under a header whose max timestamp says 1000 (ListOffsets by timestamp,
    the time index, segment roll by age and TTL retention would all trust the header)."""
    block = record(b"at 1000") + record(b"at 50000", ts_delta=49_000)
    if compression is CompressionType.LZ4:
        block = lz4.frame.compress(block)
    elif compression is CompressionType.ZSTD:
        block = zstandard.compress(block)
    return forge_batch(block, 2, compression, timestamp=1_000, max_timestamp=1_000)


def count_larger_than_records(present: int = 3, claimed: int = 10) -> bytes:
    """``present`` fine records under a header claiming ``claimed``."""
    return forge_batch(b"".join(record(b"rec-%d" % i) for i in range(present)), claimed)


def _zero_record(expanded: int) -> Iterator[bytes]:
    """One record of ``expanded`` bytes in all (a zero-filled value), in pieces of at most 1 MiB."""
    yield RECORD_HEADER.pack(0, -1, expanded - RECORD_HEADER.size)
    remaining = expanded - RECORD_HEADER.size
    while remaining:
        n = min(remaining, len(_CHUNK))
        yield _CHUNK[:n]
        remaining -= n


def zstd_bomb(expanded: int = 512 * 1024 * 1024, *, declare_size: bool = True) -> bytes:
    """One zero-valued record of ``expanded`` bytes, zstd-compressed (512 MiB -> ~16 KiB). With
    ``declare_size`` the frame header states the content size, else it is a streamed frame without it."""
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=declare_size)
    chunker = compressor.chunker(size=expanded if declare_size else -1)
    parts = [out for piece in _zero_record(expanded) for out in chunker.compress(piece)]
    parts.extend(chunker.finish())
    return forge_batch(b"".join(parts), 1, CompressionType.ZSTD)


def lz4_bomb(expanded: int = 64 * 1024 * 1024) -> bytes:
    """One zero-valued record of ``expanded`` bytes, lz4-frame-compressed (about 1/255 of it), streamed so
    the frame header carries no content size."""
    compressor = lz4.frame.LZ4FrameCompressor()
    parts = [compressor.begin(), *(compressor.compress(piece) for piece in _zero_record(expanded))]
    parts.append(compressor.flush())
    return forge_batch(b"".join(parts), 1, CompressionType.LZ4)
