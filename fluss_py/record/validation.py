"""The record-level check of a batch: every record's lengths, and their count (no I/O, no decoding).

A batch's CRC only proves that its bytes are the ones the producer built, not that they make sense: a record
may claim a value of 2^31-1 bytes, or the header a record count larger than the records present. The leader
runs ``ensure_valid_records`` once on every batch before appending it (``fluss_py.log.validator``), so what a
log holds always decodes; followers and consumers keep to the CRC (a consumer decoding records still stops at
the first that does not make sense: ``RecordBatch.records``).

Records are fixed-width headers (``RECORD_HEADER``: int64 timestamp delta, int32 key length, int32 value
length; -1 = null) followed by the key and value bytes. The walk checks, for ``count`` records in order:
a whole header is there, both lengths are >= -1, and the bytes they announce are there; and after the last
record, that nothing is left over. Given the header's ``max_timestamp - first_timestamp``, it also checks that
no record's timestamp delta is above it: a header claiming an older max timestamp than its records would
mislead ListOffsets by timestamp, the time index, segment roll by age and TTL retention, which all read the
header (refused with INVALID_RECORD_BATCH; docs/storage.md §2.1). Cost: one ``struct`` call per record, or —
when every record has the same key and value lengths, as in most batches — a handful of strided byte
operations for the whole batch, timestamps included (``_deltas_at_most``).
"""

from __future__ import annotations

import struct
from functools import cache

from fluss_py.errors import CorruptMessageError, InvalidRecordBatchError

RECORD_HEADER = struct.Struct(">qii")
RECORD_OVERHEAD = RECORD_HEADER.size  # 16
_LENGTHS = struct.Struct(">8xii")  # the key and value lengths of a record header
_LENGTHS_AT = 8  # offset of the lengths in a record header
_LENGTHS_SIZE = 8
_INT64_MAX = 2**63 - 1
_TIMESTAMP_SIZE = 8  # the int64 timestamp delta opening a record header


def ensure_valid_records(
    data: bytes | bytearray | memoryview, count: int, where: str, max_ts_delta: int = _INT64_MAX
) -> None:
    """Raise ``CorruptMessageError`` (naming ``where``, e.g. "batch at offset 12") unless ``data`` is exactly
    ``count`` well-formed records, ``InvalidRecordBatchError`` when a record's timestamp delta is above
    ``max_ts_delta`` (the header's max timestamp minus its first; the default checks nothing)."""
    if count < 1:
        raise CorruptMessageError(f"{where}: record count {count}")
    if _uniform(data, count, max_ts_delta):
        return
    unpack = RECORD_HEADER.unpack_from
    pos, size = 0, len(data)
    i = klen = vlen = 0
    try:
        for i in range(count):
            ts, klen, vlen = unpack(data, pos)  # struct.error when fewer than 16 bytes are left
            if ts > max_ts_delta:
                raise InvalidRecordBatchError(
                    f"{where}: record {i} has a timestamp {ts} ms after the first, above the header's max "
                    f"timestamp ({max_ts_delta} ms after the first)"
                )
            if klen >= 0 and vlen >= 0:
                pos += RECORD_OVERHEAD + klen + vlen
            elif klen < -1 or vlen < -1:
                raise CorruptMessageError(f"{where}: record {i} has key length {klen}, value length {vlen}")
            else:
                pos += RECORD_OVERHEAD + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
    except struct.error:
        if pos > size:
            i -= 1  # the previous record claimed more bytes than there are
        else:
            raise CorruptMessageError(
                f"{where}: record {i} of {count} is missing or truncated ({size - pos} bytes left, "
                f"a record needs at least {RECORD_OVERHEAD})"
            ) from None
    if pos > size:
        raise CorruptMessageError(
            f"{where}: record {i} (key length {klen}, value length {vlen}) runs {pos - size} bytes past "
            f"the end of the records ({size} bytes)"
        )
    if pos != size:
        raise CorruptMessageError(f"{where}: {size - pos} bytes after the last of {count} records")


def _uniform(data: bytes | bytearray | memoryview, count: int, max_ts_delta: int) -> bool:
    """True if ``data`` is ``count`` records that all have the first record's (valid) key and value lengths
    and timestamp deltas of at most ``max_ts_delta``.

    Then record i starts at ``i * stride`` and the check is: the size is ``count * stride``, the 8 length
    bytes at ``8 + i * stride`` equal the first record's for every i (one strided slice per byte, in C), and
    the deltas pass ``_deltas_at_most``. False means "not proven", and the caller walks the records one by one.
    """
    size = len(data)
    if size < RECORD_OVERHEAD:
        return False
    klen, vlen = _LENGTHS.unpack_from(data, 0)
    if klen < -1 or vlen < -1:
        return False
    stride = RECORD_OVERHEAD + (klen if klen > 0 else 0) + (vlen if vlen > 0 else 0)
    if stride * count != size:
        return False
    if count == 1:
        return RECORD_HEADER.unpack_from(data, 0)[0] <= max_ts_delta
    flat = data if isinstance(data, bytes) else bytes(data)  # (strided slices of bytes run 3x faster)
    lengths = flat[_LENGTHS_AT : _LENGTHS_AT + _LENGTHS_SIZE]
    if not all(flat[_LENGTHS_AT + j :: stride] == lengths[j : j + 1] * count for j in range(_LENGTHS_SIZE)):
        return False
    if max_ts_delta >= _INT64_MAX:
        return True
    return max_ts_delta >= 0 and _deltas_at_most(flat, count, stride, max_ts_delta)


def _deltas_at_most(flat: bytes, count: int, stride: int, limit: int) -> bool:
    """True if the signed big-endian int64 opening each record (at ``i * stride``) is at most ``limit``
    (0 <= limit < 2^63), decided a byte column at a time as the length check is, in C.

    Column j holds byte j of every delta. A record is above the limit when, at the first byte where it differs
    from the limit's, its byte is larger (byte 0 of a negative delta is >= 0x80: never above). ``tied`` has
    one byte per record, 1 while the record's bytes so far equal the limit's, held as an int so that "above
    and tied" is one AND over all records. The common column (every record's byte equal to the limit's, as
    the high zero bytes of small deltas are) costs one ``count``; the check stops once no record is tied.
    """
    lim = limit.to_bytes(_TIMESTAMP_SIZE, "big")
    tied = -1  # every record tied so far
    for j in range(_TIMESTAMP_SIZE):
        column = flat[j::stride]
        byte = lim[j]
        if tied == -1 and column.count(byte) == count:
            continue
        above = int.from_bytes(column.translate(_above(byte, j == 0)), "big")
        if above & tied:
            return False
        tied &= int.from_bytes(column.translate(_equal(byte)), "big")
        if not tied:
            return True
    return True


@cache
def _above(byte: int, signed: bool) -> bytes:
    """A ``bytes.translate`` table: 1 for the bytes above ``byte``, else 0 (``signed``: bytes >= 0x80 are
    negative, so never above; ``byte`` < 0x80 there)."""
    top = 0x80 if signed else 0x100
    return bytes(byte + 1) + b"\x01" * (top - byte - 1) + bytes(0x100 - top)


@cache
def _equal(byte: int) -> bytes:
    """A ``bytes.translate`` table: 1 for ``byte``, else 0."""
    return bytes(byte) + b"\x01" + bytes(0xFF - byte)
