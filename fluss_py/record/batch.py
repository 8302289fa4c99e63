"""The record batch: the unit on the wire and on disk (no I/O here).

Byte layout (big-endian; the full description with rationale is in ``docs/storage.md``)::

    off  size field              notes
      0     8 base_offset        assigned by the leader (0 from the builder)
      8     4 length             bytes AFTER this field (total batch size = length + 12)
     12     4 leader_epoch       stamped by the leader (-1 from the builder)
     16     1 magic              MAGIC (0)
     17     4 crc                CRC-32C of bytes 21..end (attributes .. last record)
     21     2 attributes         bits 0-2: compression (0 none, 1 lz4, 2 zstd); bit 3 (0x08): a KV batch,
                                 bit 4 (0x10): a changelog batch (docs/primary-key-tables.md §3.3-3.4); others 0
     23     4 last_offset_delta  record_count - 1
     27     8 first_timestamp    ms
     35     8 max_timestamp      ms
     43     8 writer_id          -1: not idempotent
     51     2 writer_epoch       -1: not idempotent
     53     4 base_sequence      -1: not idempotent
     57     4 record_count
     61     . records            compressed as a whole when compression != none

    record: ts_delta int64 (timestamp - first_timestamp), key_len int32 (-1 = null),
            value_len int32 (-1 = null), key bytes, value bytes   (16 bytes of overhead)

The CRC does not cover base offset, length and leader epoch, so a leader assigns offsets and stamps its
epoch with ``set_base_offset_and_epoch`` without recomputing it.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass

import crc32c

from fluss_py.errors import (
    CorruptMessageError,
    InvalidRecordBatchError,
    TableTypeMismatchError,
    UnsupportedCompressionError,
)
from fluss_py.record.compression import CompressionType, compress, decompress
from fluss_py.record.validation import RECORD_HEADER, RECORD_OVERHEAD, ensure_valid_records

MAGIC = 0
NO_WRITER_ID = -1
NO_WRITER_EPOCH = -1
NO_SEQUENCE = -1
NO_LEADER_EPOCH = -1

# base_offset, length, leader_epoch, magic, crc, attributes, last_offset_delta, first_ts, max_ts,
# writer_id, writer_epoch, base_sequence, record_count
HEADER = struct.Struct(">qiibIhiqqqhii")
BATCH_HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + length: the bytes not counted in ``length``
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers [ATTRIBUTES_OFFSET, end)
LENGTH_OFFSET = 8
LEADER_EPOCH_OFFSET = 12
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_COMPRESSION_MASK = 0x07
# attribute bits of primary-key tables (docs/primary-key-tables.md): a client's upserts/deletes, the leader's changes
KV_BATCH = 0x08
CHANGELOG = 0x10
_KNOWN_ATTRIBUTES = _COMPRESSION_MASK | KV_BATCH | CHANGELOG
_INT32_MAX = 2**31 - 1
_HEADER_PLACEHOLDER = bytes(BATCH_HEADER_SIZE)
# What ``records()`` decompresses at most by default (a consumer does not know the leader's
# log.max-batch-size, 8 MiB by default; the leader never accepts a batch expanding beyond it).
MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024


def increment_sequence(sequence: int, delta: int) -> int:
    """``sequence + delta`` wrapping past int32 max to 0 (as Kafka's ``incrementSequence``)."""
    if sequence > _INT32_MAX - delta:
        return delta - (_INT32_MAX - sequence) - 1
    return sequence + delta


@dataclass(frozen=True, slots=True)
class Record:
    """One record as seen by clients and dump-log."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None


class RecordBatch:
    """A read-only view over one batch's bytes; the header is parsed on first access.

    Owned by whoever holds the buffer; cheap to create (no copy). Servers use only the header
    properties, ``is_valid`` and (the leader, once) ``ensure_valid_records``; ``records()`` is for clients
    and tools.
    """

    __slots__ = ("_buf", "_h", "_pos")

    def __init__(self, buf: bytes | bytearray | memoryview, pos: int = 0) -> None:
        self._buf = buf
        self._pos = pos
        self._h: tuple | None = None

    def _header(self) -> tuple:
        h = self._h
        if h is None:
            if len(self._buf) - self._pos < BATCH_HEADER_SIZE:
                raise InvalidRecordBatchError(
                    f"batch header truncated: {len(self._buf) - self._pos} bytes < {BATCH_HEADER_SIZE}"
                )
            h = self._h = HEADER.unpack_from(self._buf, self._pos)
        return h

    # --- header fields
    @property
    def position(self) -> int:
        return self._pos

    @property
    def base_offset(self) -> int:
        return self._header()[0]

    @property
    def batch_length(self) -> int:
        """Total bytes of this batch, header included."""
        return self._header()[1] + LOG_OVERHEAD

    @property
    def leader_epoch(self) -> int:
        return self._header()[2]

    @property
    def magic(self) -> int:
        return self._header()[3]

    @property
    def crc(self) -> int:
        return self._header()[4]

    @property
    def attributes(self) -> int:
        return self._header()[5]

    @property
    def compression(self) -> int:
        return self._header()[5] & _COMPRESSION_MASK

    @property
    def is_kv_batch(self) -> bool:
        """A client's batch of upserts and deletes for a primary-key table (§3.3)."""
        return bool(self._header()[5] & KV_BATCH)

    @property
    def is_changelog(self) -> bool:
        """A leader's changelog batch of a primary-key table (§3.4)."""
        return bool(self._header()[5] & CHANGELOG)

    @property
    def last_offset_delta(self) -> int:
        return self._header()[6]

    @property
    def last_offset(self) -> int:
        h = self._header()
        return h[0] + h[6]

    @property
    def next_offset(self) -> int:
        h = self._header()
        return h[0] + h[6] + 1

    @property
    def first_timestamp(self) -> int:
        return self._header()[7]

    @property
    def max_timestamp(self) -> int:
        return self._header()[8]

    @property
    def writer_id(self) -> int:
        return self._header()[9]

    @property
    def writer_epoch(self) -> int:
        return self._header()[10]

    @property
    def base_sequence(self) -> int:
        return self._header()[11]

    @property
    def last_sequence(self) -> int:
        h = self._header()
        if h[11] == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(h[11], h[6])

    @property
    def record_count(self) -> int:
        return self._header()[12]

    @property
    def is_idempotent(self) -> bool:
        return self._header()[9] != NO_WRITER_ID

    def tobytes(self) -> bytes:
        return bytes(self._buf[self._pos : self._pos + self.batch_length])

    # --- validation
    def compute_crc(self) -> int:
        end = self._pos + self.batch_length
        return crc32c.crc32c(memoryview(self._buf)[self._pos + ATTRIBUTES_OFFSET : end])

    def is_valid(self) -> bool:
        try:
            self.ensure_valid()
        except (CorruptMessageError, InvalidRecordBatchError, UnsupportedCompressionError):
            return False
        return True

    def ensure_valid(self) -> None:
        """Check the header's sanity and the CRC; raise InvalidRecordBatchError / CorruptMessageError."""
        h = self._header()
        length = h[1] + LOG_OVERHEAD
        if length < BATCH_HEADER_SIZE:
            raise InvalidRecordBatchError(f"batch length {length} is smaller than the header ({BATCH_HEADER_SIZE})")
        if self._pos + length > len(self._buf):
            raise InvalidRecordBatchError(
                f"batch length {length} runs past the end of the buffer ({len(self._buf) - self._pos} bytes)"
            )
        if h[3] != MAGIC:
            raise InvalidRecordBatchError(f"unsupported magic {h[3]} (expected {MAGIC})")
        computed = self.compute_crc()
        if computed != h[4]:
            raise CorruptMessageError(
                f"batch at offset {h[0]}: CRC mismatch (stored {h[4]:#010x}, computed {computed:#010x})"
            )
        ensure_valid_header(h)

    def ensure_valid_records(self, max_bytes: int) -> None:
        """The record-level check (after ``ensure_valid``): the records block decompresses to at most
        ``max_bytes`` and holds exactly ``record_count`` well-formed records, else ``CorruptMessageError``;
        no record's timestamp is above ``max_timestamp``, else ``InvalidRecordBatchError``.
        The leader runs it once per batch before the append (see ``fluss_py.record.validation``)."""
        h = self._header()
        data = self._records_block(h, max_bytes)
        ensure_valid_records(data, h[12], f"batch at offset {h[0]}", h[8] - h[7])

    def _records_block(self, h: tuple, max_bytes: int) -> bytes | memoryview:
        start = self._pos + BATCH_HEADER_SIZE
        end = self._pos + h[1] + LOG_OVERHEAD
        try:
            return decompress(h[5] & _COMPRESSION_MASK, memoryview(self._buf)[start:end], max_bytes)
        except CorruptMessageError as e:
            raise CorruptMessageError(f"batch at offset {h[0]}: {e.message}") from None

    # --- records (clients and tools only)
    def records(self, max_bytes: int = MAX_DECOMPRESSED_BYTES) -> Iterator[Record]:
        """The records in order; ``CorruptMessageError`` at the first that does not make sense (the records
        before it have been yielded), or when the block decompresses to more than ``max_bytes``."""
        for t in self.record_tuples(max_bytes):
            yield Record(*t)

    def record_tuples(
        self, max_bytes: int = MAX_DECOMPRESSED_BYTES
    ) -> Iterator[tuple[int, int, bytes | None, bytes | None]]:
        """``records()`` as (offset, timestamp, key, value) tuples: the servers' loops over records (a primary-key
        leader's writes, a KV's apply) skip building a ``Record`` per record."""
        h = self._header()
        data = self._records_block(h, max_bytes)
        base_offset, first_ts, count = h[0], h[7], h[12]
        unpack = RECORD_HEADER.unpack_from
        pos, size = 0, len(data)
        for i in range(count):
            if pos + RECORD_OVERHEAD > size:
                raise CorruptMessageError(f"batch at offset {base_offset}: record {i} of {count} is missing")
            ts_delta, klen, vlen = unpack(data, pos)
            pos += RECORD_OVERHEAD
            if klen < -1 or vlen < -1 or pos + max(klen, 0) + max(vlen, 0) > size:
                raise CorruptMessageError(
                    f"batch at offset {base_offset}: record {i} has key length {klen}, value length {vlen} "
                    f"({size - pos} bytes left)"
                )
            key = None
            if klen >= 0:
                key = bytes(data[pos : pos + klen])
                pos += klen
            value = None
            if vlen >= 0:
                value = bytes(data[pos : pos + vlen])
                pos += vlen
            yield base_offset + i, first_ts + ts_delta, key, value
        if pos != size:
            raise CorruptMessageError(f"batch at offset {base_offset}: {size - pos} bytes after the last record")

    def __repr__(self) -> str:
        h = self._header()
        return (
            f"RecordBatch(base_offset={h[0]}, last_offset={h[0] + h[6]}, count={h[12]}, epoch={h[2]}, "
            f"bytes={h[1] + LOG_OVERHEAD}, writer={h[9]}/{h[10]} seq={h[11]})"
        )


def ensure_valid_header(h: tuple) -> None:
    """Header checks beyond magic/length/CRC (shared by ``RecordBatch.ensure_valid``)."""
    _, _, _, _, _, attributes, last_delta, first_ts, max_ts, writer_id, writer_epoch, base_seq, count = h
    if count <= 0:
        raise InvalidRecordBatchError(f"batch at offset {h[0]} has record count {count} (must be >= 1)")
    if last_delta != count - 1:
        raise InvalidRecordBatchError(
            f"batch at offset {h[0]}: last offset delta {last_delta} does not match record count {count}"
        )
    if attributes & ~_KNOWN_ATTRIBUTES:
        raise InvalidRecordBatchError(f"batch at offset {h[0]}: unknown attribute bits {attributes:#06x}")
    if attributes & KV_BATCH and attributes & CHANGELOG:
        raise InvalidRecordBatchError(f"batch at offset {h[0]}: both the KV and the changelog attribute are set")
    if (attributes & _COMPRESSION_MASK) > max(CompressionType):
        raise UnsupportedCompressionError(f"batch at offset {h[0]}: compression code {attributes & 7}")
    if max_ts < first_ts:
        raise InvalidRecordBatchError(f"batch at offset {h[0]}: max timestamp {max_ts} < first {first_ts}")
    if writer_id == NO_WRITER_ID:
        if base_seq != NO_SEQUENCE or writer_epoch != NO_WRITER_EPOCH:
            raise InvalidRecordBatchError(f"batch at offset {h[0]}: sequence/epoch set without a writer id")
    elif writer_id < 0 or base_seq < 0 or writer_epoch < 0:
        raise InvalidRecordBatchError(
            f"batch at offset {h[0]}: idempotent batch needs writer id, epoch and sequence >= 0 "
            f"(got {writer_id}, {writer_epoch}, {base_seq})"
        )


def ensure_batch_kind(attributes: int, changelog: bool, where: str) -> None:
    """The attribute bits of primary-key tables are legal only where they belong (docs/primary-key-tables.md
    §3.3-3.4): the log of a primary-key bucket (``changelog``) holds changelog batches only, the log of a log
    table plain batches only, and a KV batch is never written to a log (the leader of a primary-key bucket
    turns it into a changelog batch first). TABLE_TYPE_MISMATCH otherwise, naming ``where``."""
    if changelog:
        if not attributes & CHANGELOG:
            kind = "a KV" if attributes & KV_BATCH else "a plain"
            raise TableTypeMismatchError(f"{where}: {kind} batch for a primary-key bucket, whose log holds changelogs")
    elif attributes & (KV_BATCH | CHANGELOG):
        kind = "a KV batch (upserts and deletes)" if attributes & KV_BATCH else "a changelog batch"
        raise TableTypeMismatchError(f"{where}: {kind} needs a primary-key table; this is a log table")


def iter_batches(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[RecordBatch]:
    """Whole batches of ``buf`` from ``pos``; stops silently at a torn tail (short header or length past end)."""
    size = len(buf)
    unpack = _OFFSET_AND_LENGTH.unpack_from
    while size - pos >= BATCH_HEADER_SIZE:
        _, length = unpack(buf, pos)
        total = length + LOG_OVERHEAD
        if total < BATCH_HEADER_SIZE or pos + total > size:
            return
        yield RecordBatch(buf, pos)
        pos += total


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple:
    """The raw header tuple at ``pos`` (see ``HEADER``); caller ensures 61 bytes are there."""
    return HEADER.unpack_from(buf, pos)


def set_base_offset_and_epoch(buf: bytearray | memoryview, pos: int, base_offset: int, leader_epoch: int) -> None:
    """Patch base offset and leader epoch in place; the CRC does not cover them, so it stays valid."""
    _INT64.pack_into(buf, pos, base_offset)
    _INT32.pack_into(buf, pos + LEADER_EPOCH_OFFSET, leader_epoch)


class RecordBatchBuilder:
    """Accumulates records into one batch (client side; not thread-safe; one owner).

    ``append`` is the per-record hot path: one struct pack and two list appends.
    """

    __slots__ = (
        "_attributes",
        "_base_sequence",
        "_compression",
        "_count",
        "_first_ts",
        "_max_bytes",
        "_max_ts",
        "_parts",
        "_size",
        "_writer_epoch",
        "_writer_id",
    )

    def __init__(
        self,
        *,
        compression: CompressionType = CompressionType.NONE,
        writer_id: int = NO_WRITER_ID,
        writer_epoch: int = NO_WRITER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        max_bytes: int = 1024 * 1024,
        attributes: int = 0,
    ) -> None:
        """``attributes``: attribute bits besides the compression code (a KV batch's, docs/primary-key-tables.md
        §3.3); the builder only sets them, the reader judges them."""
        if attributes & _COMPRESSION_MASK or not 0 <= attributes <= 0x7FFF:
            raise ValueError(f"attribute bits {attributes:#x} overlap the compression code or the sign bit")
        self._compression = CompressionType(compression)
        self._attributes = attributes
        self._writer_id = writer_id
        self._writer_epoch = writer_epoch
        self._base_sequence = base_sequence
        self._max_bytes = max_bytes
        self._parts: list[bytes] = [_HEADER_PLACEHOLDER]  # the header is written over it by build_buffer
        self._count = 0
        self._size = BATCH_HEADER_SIZE
        self._first_ts = -1
        self._max_ts = -1

    def append(self, value: bytes | None, key: bytes | None = None, timestamp_ms: int | None = None) -> bool:
        """Add a record; False (nothing added) when it would push a non-empty batch past ``max_bytes``."""
        klen = -1 if key is None else len(key)
        vlen = -1 if value is None else len(value)
        added = RECORD_OVERHEAD + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
        if self._count and self._size + added > self._max_bytes:
            return False
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        if self._count == 0:
            self._first_ts = self._max_ts = timestamp_ms
        elif timestamp_ms > self._max_ts:
            self._max_ts = timestamp_ms  # the header's max timestamp: the leader refuses one below a record's
        parts = self._parts
        parts.append(RECORD_HEADER.pack(timestamp_ms - self._first_ts, klen, vlen))
        if klen > 0:
            parts.append(key)  # type: ignore[arg-type]
        if vlen > 0:
            parts.append(value)  # type: ignore[arg-type]
        self._count += 1
        self._size += added
        return True

    def __len__(self) -> int:
        return self._count

    @property
    def size_in_bytes(self) -> int:
        """Uncompressed size of the batch built so far (an upper estimate when compressing)."""
        return self._size

    @property
    def writer_id(self) -> int:
        return self._writer_id

    def build(self) -> bytes:
        """The complete batch: base offset 0, leader epoch -1, CRC filled. Needs at least one record."""
        return bytes(self.build_buffer())

    def build_buffer(self) -> bytearray:
        """``build()`` as a bytearray, made with one copy of the records (large fresh buffers are costly:
        each 256 KiB one costs up to ~0.15 ms of page faults on the benchmark machine)."""
        if not self._count:
            raise ValueError("cannot build an empty record batch")
        if self._compression is CompressionType.NONE:
            buf = bytearray().join(self._parts)
        else:
            buf = bytearray(_HEADER_PLACEHOLDER)
            buf += compress(self._compression, b"".join(self._parts[1:]))
        count = self._count
        HEADER.pack_into(
            buf,
            0,
            0,
            len(buf) - LOG_OVERHEAD,
            NO_LEADER_EPOCH,
            MAGIC,
            0,
            int(self._compression) | self._attributes,
            count - 1,
            self._first_ts,
            self._max_ts,
            self._writer_id,
            self._writer_epoch,
            self._base_sequence,
            count,
        )
        _UINT32.pack_into(buf, CRC_OFFSET, crc32c.crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
        return buf
