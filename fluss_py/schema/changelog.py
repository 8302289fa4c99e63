"""The values of KV records and changelog records (docs/primary-key-tables.md §3.3, §3.4). Pure.

A KV batch's record (client -> leader): key = the encoded key, value = op byte + payload::

    0x00 UPSERT          the full row
    0x01 DELETE          nothing
    0x02 PARTIAL_UPSERT  u16 n, n x u16 target column indexes (ascending, the whole primary key among them),
                         then a row whose non-target columns are null

A changelog batch's record (what the log holds): key = the encoded key, value = change byte + payload::

    0x00 INSERT  the new row                                   +I
    0x01 UPDATE  u32 length of the old row, old row, new row   -U old, +U new (one record, one offset)
    0x02 DELETE  the old row                                   -D
    0x03 NOOP    nothing                                       (nothing)

The decoders check the structure always, and the rows against the schema when given a ``RowCodec``; every
refusal is an InvalidRowError (or UnknownSchemaIdError for a row of a schema version not known yet).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from enum import IntEnum
from itertools import pairwise
from typing import NamedTuple

from fluss_py.errors import InvalidRowError
from fluss_py.schema.row import RowCodec
from fluss_py.schema.values import U16, U32

MIN_ROW_BYTES = 3  # schema id + a one-byte bitmap


class KvOp(IntEnum):
    UPSERT = 0
    DELETE = 1
    PARTIAL_UPSERT = 2


class ChangeType(IntEnum):
    INSERT = 0
    UPDATE = 1
    DELETE = 2
    NOOP = 3


class KvInput(NamedTuple):
    """One decoded KV record value: ``row`` is None for DELETE, ``targets`` set for PARTIAL_UPSERT only.
    (A NamedTuple, not a frozen dataclass: the leader makes one per row and this is 3x cheaper to build.)"""

    op: KvOp
    row: bytes | None = None
    targets: tuple[int, ...] | None = None


class Change(NamedTuple):
    """One decoded changelog record value: ``old`` for UPDATE and DELETE, ``new`` for INSERT and UPDATE."""

    type: ChangeType
    old: bytes | None = None
    new: bytes | None = None


# ---------------------------------------------------------------- KV records


def encode_kv_value(op: KvOp, row: bytes | None = None, targets: Sequence[int] | None = None) -> bytes:
    """The value of one KV record; ValueError when the arguments do not fit the op (a caller's bug)."""
    op = KvOp(op)
    if op is KvOp.DELETE:
        if row is not None or targets is not None:
            raise ValueError("a DELETE carries no row and no targets")
        return b"\x01"
    if not isinstance(row, bytes) or len(row) < MIN_ROW_BYTES:
        raise ValueError(f"{op.name} needs a row of at least {MIN_ROW_BYTES} bytes")
    if op is KvOp.UPSERT:
        if targets is not None:
            raise ValueError("a full UPSERT has no targets")
        return b"\x00" + row
    if not targets or list(targets) != sorted(set(targets)) or targets[0] < 0 or targets[-1] > 0xFFFF:
        raise ValueError(f"targets must be ascending distinct column indexes, got {targets!r}")
    n = len(targets)
    return b"\x02" + struct.pack(f">H{n}H", n, *targets) + row


def decode_kv_value(value: bytes, codec: RowCodec | None = None) -> KvInput:
    """Decode one KV record value; with ``codec`` the row is checked against the schema, and a partial
    update's targets against the row's version (in range, the whole primary key among them, every other
    column null)."""
    if not isinstance(value, bytes) or not value:
        raise InvalidRowError("empty KV record value (expected an op byte)")
    op = value[0]
    if op == KvOp.DELETE:
        if len(value) != 1:
            raise InvalidRowError(f"DELETE record with {len(value) - 1} bytes of payload")
        return KvInput(KvOp.DELETE)
    if op == KvOp.UPSERT:
        inp = KvInput(KvOp.UPSERT, value[1:])
    elif op == KvOp.PARTIAL_UPSERT:
        if len(value) < 3:
            raise InvalidRowError("PARTIAL_UPSERT record truncated before its target count")
        (n,) = U16.unpack_from(value, 1)
        end = 3 + 2 * n
        if n == 0 or len(value) < end:
            raise InvalidRowError(f"PARTIAL_UPSERT record with {n} targets in {len(value)} bytes")
        targets = struct.unpack_from(f">{n}H", value, 3)
        if any(a >= b for a, b in pairwise(targets)):
            raise InvalidRowError(f"PARTIAL_UPSERT targets are not ascending: {list(targets)[:20]}")
        inp = KvInput(KvOp.PARTIAL_UPSERT, value[end:], targets)
    else:
        raise InvalidRowError(f"unknown KV op {op:#04x}")
    if len(inp.row) < MIN_ROW_BYTES:  # type: ignore[arg-type]
        raise InvalidRowError(f"{inp.op.name} record's row has {len(inp.row)} bytes")  # type: ignore[arg-type]
    if codec is not None:
        codec.validate_row(inp.row, inp.targets)  # type: ignore[arg-type]
    return inp


def decode_kv_record(codec: RowCodec, key: bytes | None, value: bytes | None) -> KvInput:
    """The leader's whole check of one KV record: the value as ``decode_kv_value(value, codec)``, the key a
    valid key of the table and, with a row, the row's own key."""
    if key is None or value is None:
        raise InvalidRowError("a KV record needs a key and a value")
    if value[:1] == b"\x00" and len(value) > MIN_ROW_BYTES:  # the common case, in one pass over the row
        row = value[1:]
        if codec.validate_row_key(row)[1] != key:
            raise InvalidRowError("the record's key is not the key of its row")
        return KvInput(KvOp.UPSERT, row)
    inp = decode_kv_value(value, codec)
    if inp.row is None:
        codec.validate_key(key)
    elif codec.key_of_row_bytes(inp.row) != key:
        raise InvalidRowError("the record's key is not the key of its row")
    return inp


# ---------------------------------------------------------------- changelog records


def encode_change(change_type: ChangeType, old: bytes | None = None, new: bytes | None = None) -> bytes:
    """The value of one changelog record; ValueError when the rows do not fit the change type."""
    change_type = ChangeType(change_type)
    want_old = change_type in (ChangeType.UPDATE, ChangeType.DELETE)
    want_new = change_type in (ChangeType.INSERT, ChangeType.UPDATE)
    if (old is not None) != want_old or (new is not None) != want_new:
        raise ValueError(f"{change_type.name} takes old={want_old}, new={want_new}")
    if change_type is ChangeType.INSERT:
        return b"\x00" + new  # type: ignore[operator]
    if change_type is ChangeType.UPDATE:
        return b"\x01" + U32.pack(len(old)) + old + new  # type: ignore[arg-type, operator]
    if change_type is ChangeType.DELETE:
        return b"\x02" + old  # type: ignore[operator]
    return b"\x03"


def decode_change(value: bytes, codec: RowCodec | None = None) -> Change:
    """Decode one changelog record value; with ``codec`` its rows are checked against the schema."""
    if not isinstance(value, bytes) or not value:
        raise InvalidRowError("empty changelog record value (expected a change byte)")
    kind = value[0]
    if kind == ChangeType.INSERT:
        change = Change(ChangeType.INSERT, new=value[1:])
    elif kind == ChangeType.DELETE:
        change = Change(ChangeType.DELETE, old=value[1:])
    elif kind == ChangeType.UPDATE:
        if len(value) < 5:
            raise InvalidRowError("UPDATE record truncated before its old row's length")
        (old_len,) = U32.unpack_from(value, 1)
        if 5 + old_len > len(value):
            raise InvalidRowError(f"UPDATE record's old row of {old_len} bytes runs past its end")
        change = Change(ChangeType.UPDATE, value[5 : 5 + old_len], value[5 + old_len :])
    elif kind == ChangeType.NOOP:
        if len(value) != 1:
            raise InvalidRowError(f"NOOP record with {len(value) - 1} bytes of payload")
        return Change(ChangeType.NOOP)
    else:
        raise InvalidRowError(f"unknown change type {kind:#04x}")
    for row in (change.old, change.new):
        if row is not None:
            if len(row) < MIN_ROW_BYTES:
                raise InvalidRowError(f"{change.type.name} record holds a row of {len(row)} bytes")
            if codec is not None:
                codec.validate_row(row)
    return change


_LABELS = {
    ChangeType.INSERT: (("+I", "new"),),
    ChangeType.UPDATE: (("-U", "old"), ("+U", "new")),
    ChangeType.DELETE: (("-D", "old"),),
    ChangeType.NOOP: (),
}


def change_rows(change: Change) -> list[tuple[str, bytes]]:
    """The rows a consumer shows for a change, with their labels: +I new; -U old, +U new; -D old; none."""
    return [(label, getattr(change, field)) for label, field in _LABELS[change.type]]
