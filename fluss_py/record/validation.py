"""The record-level check of a batch: every record's lengths, and their count (no I/O, no decoding).

A batch's CRC only proves that its bytes are the ones the producer built, not that they make sense: a record
may claim a value of 2^31-1 bytes, or the header a record count larger than the records present. The leader
runs ``ensure_valid_records`` once on every batch before appending it (``fluss_py.log.validator``), so what a
log holds always decodes; followers and consumers keep to the CRC (a consumer decoding records still stops at
the first that does not make sense: ``RecordBatch.records``).

Records are fixed-width headers (``RECORD_HEADER``: int64 timestamp delta, int32 key length, int32 value
length; -1 = null) followed by the key and value bytes. The walk checks, for ``count`` records in order:
a whole header is there, both lengths are >= -1, and the bytes they announce are there; and after the last
record, that nothing is left over. Cost: one ``struct`` call per record, or — when every record has the same
key and value lengths, as in most batches — a handful of strided byte comparisons for the whole batch.
"""

from __future__ import annotations

import struct

from fluss_py.errors import CorruptMessageError

RECORD_HEADER = struct.Struct(">qii")
RECORD_OVERHEAD = RECORD_HEADER.size  # 16
_LENGTHS = struct.Struct(">8xii")  # the key and value lengths of a record header
_LENGTHS_AT = 8  # offset of the lengths in a record header
_LENGTHS_SIZE = 8


def ensure_valid_records(data: bytes | bytearray | memoryview, count: int, where: str) -> None:
    """Raise ``CorruptMessageError`` (naming ``where``, e.g. "batch at offset 12") unless ``data`` is exactly
    ``count`` well-formed records."""
    if count < 1:
        raise CorruptMessageError(f"{where}: record count {count}")
    if _uniform(data, count):
        return
    unpack = _LENGTHS.unpack_from
    pos, size = 0, len(data)
    i = klen = vlen = 0
    try:
        for i in range(count):
            klen, vlen = unpack(data, pos)  # struct.error when fewer than 16 bytes are left
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


def _uniform(data: bytes | bytearray | memoryview, count: int) -> bool:
    """True if ``data`` is ``count`` records that all have the first record's (valid) key and value lengths.

    Then record i starts at ``i * stride`` and the check is: the size is ``count * stride``, and the 8 length
    bytes at ``8 + i * stride`` equal the first record's for every i (one strided slice per byte, in C).
    False means "not proven", and the caller walks the records one by one.
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
        return True
    flat = data if isinstance(data, bytes) else bytes(data)  # (strided slices of bytes run 3x faster)
    lengths = flat[_LENGTHS_AT : _LENGTHS_AT + _LENGTHS_SIZE]
    return all(flat[_LENGTHS_AT + j :: stride] == lengths[j : j + 1] * count for j in range(_LENGTHS_SIZE))
