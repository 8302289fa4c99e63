"""Property tests of the row, key, KV and changelog codecs over random schemas (hypothesis): every type
round-trips with and without nulls; rows of an old schema version decode under later ones; the key cut out of
a row is the encoded key and the bucket key is its byte prefix; accepted bytes are canonical (re-encoding
their values gives the same bytes); and arbitrary or mutated bytes never raise anything but InvalidRowError
or UnknownSchemaIdError."""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fluss_py.errors import InvalidRowError, UnknownSchemaIdError
from fluss_py.schema import (
    ChangeType,
    Column,
    DataType,
    KvOp,
    RowCodec,
    TableSchema,
    TypeRoot,
    decode_change,
    decode_kv_record,
    decode_kv_value,
    encode_change,
    encode_kv_value,
)
from fluss_py.schema.values import encoder

REFUSALS = (InvalidRowError, UnknownSchemaIdError)
KEYABLE = [r for r in TypeRoot if r not in (TypeRoot.FLOAT, TypeRoot.DOUBLE)]
PROPS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def data_types(draw: st.DrawFn, roots: list[TypeRoot] | None = None) -> DataType:
    root = draw(st.sampled_from(roots or list(TypeRoot)))
    if root is TypeRoot.DECIMAL:
        p = draw(st.integers(1, 38))
        return DataType(root, p, draw(st.integers(0, p)))
    if root is TypeRoot.TIMESTAMP:
        return DataType(root, draw(st.integers(0, 6)))
    return DataType(root)


def values_of(t: DataType) -> st.SearchStrategy[Any]:
    root = t.root
    if root is TypeRoot.DECIMAL:
        bound = 10**t.precision - 1  # type: ignore[operator]
        return st.integers(-bound, bound).map(lambda u: Decimal(f"{u}e-{t.scale}"))
    if root is TypeRoot.TIMESTAMP:
        unit = 10 ** (6 - t.precision)  # type: ignore[operator]
        return st.datetimes().map(lambda d: d.replace(microsecond=d.microsecond // unit * unit))
    return {
        TypeRoot.BOOLEAN: st.booleans(),
        TypeRoot.INT: st.integers(-(2**31), 2**31 - 1),
        TypeRoot.BIGINT: st.integers(-(2**63), 2**63 - 1),
        TypeRoot.FLOAT: st.floats(width=32),
        TypeRoot.DOUBLE: st.floats(),
        TypeRoot.STRING: st.text(max_size=40),
        TypeRoot.BYTES: st.binary(max_size=40),
        TypeRoot.DATE: st.dates(),
    }[root]


@st.composite
def schemas(draw: st.DrawFn, min_key: int = 0, max_columns: int = 20) -> TableSchema:
    n = draw(st.integers(max(1, min_key), max_columns))
    columns = [Column(f"c{i}", draw(data_types()), draw(st.booleans())) for i in range(n)]
    keyable = [c.name for c in columns if c.type.root in KEYABLE]
    assume(len(keyable) >= min_key)
    pk = draw(st.permutations(keyable).map(lambda names: names[: draw(st.integers(min_key, min(3, len(names))))]))
    bucket_key = pk[: draw(st.integers(0, len(pk)))] if pk else []
    return TableSchema.of(columns, pk, bucket_key)


@st.composite
def rows(draw: st.DrawFn, schema: TableSchema, schema_id: int | None = None) -> list[Any]:
    version = schema.version(schema_id or schema.current.schema_id)
    out = []
    for c in version.columns:
        if c.nullable and draw(st.booleans()):
            out.append(None)
        else:
            out.append(draw(values_of(c.type)))
    return out


def same(a: list[Any], b: list[Any]) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, float) and isinstance(y, float):
            if not (x == y or (math.isnan(x) and math.isnan(y))):
                return False
        elif x != y or type(x) is not type(y):
            return False
    return True


def has_nan(values: list[Any]) -> bool:
    return any(isinstance(v, float) and math.isnan(v) for v in values)


@PROPS
@given(st.data())
def test_every_type_round_trips_with_and_without_nulls(data: st.DataObject) -> None:
    schema = data.draw(schemas())
    codec = RowCodec(schema)
    values = data.draw(rows(schema))
    row = codec.encode_row(values)
    assert codec.validate_row(row) == 1
    sid, decoded = codec.decode_row(row)
    assert sid == 1
    assert same(decoded, values)
    assert codec.encode_row(decoded) == row or has_nan(values)
    assert codec.present_columns(row) == tuple(i for i, v in enumerate(values) if v is not None)


@PROPS
@given(st.data())
def test_old_rows_decode_under_later_schemas_with_the_new_columns_null(data: st.DataObject) -> None:
    schema = data.draw(schemas(max_columns=8))
    versions = [schema]
    for i in range(data.draw(st.integers(1, 4))):
        versions.append(versions[-1].add_column(Column(f"added{i}", data.draw(data_types()))))
    latest = RowCodec(versions[-1])
    for sid, old in enumerate(versions, start=1):
        old_codec = RowCodec(old)
        values = data.draw(rows(old))
        row = old_codec.encode_row(values)
        assert latest.validate_row(row) == sid
        assert same(latest.decode_row(row)[1], values)
        padding = len(versions[-1].current) - len(values)
        assert same(latest.decode_current(row), values + [None] * padding)
        if schema.is_primary_key_table:
            assert latest.key_of_row_bytes(row) == old_codec.key_of_row_bytes(row)
        if sid < len(versions):
            newer = RowCodec(versions[-1]).encode_row(data.draw(rows(versions[-1])))
            try:
                old_codec.validate_row(newer)
                raise AssertionError("a row of a later schema id passed an old codec")
            except UnknownSchemaIdError:
                pass


@PROPS
@given(st.data())
def test_the_key_is_cut_from_the_row_and_the_bucket_key_is_its_prefix(data: st.DataObject) -> None:
    schema = data.draw(schemas(min_key=1))
    codec = RowCodec(schema)
    values = data.draw(rows(schema))
    row = codec.encode_row(values)
    pk_values = [values[i] for i in schema.pk_indexes]
    key = codec.encode_key(pk_values)
    assert codec.key_of_row_bytes(row) == key
    assert codec.validate_row_key(row) == (1, key)
    assert codec.key_of_row(values) == key
    assert same(codec.decode_key(key), pk_values)
    codec.validate_key(key)
    prefix = codec.bucket_key_bytes(key)
    assert key.startswith(prefix)
    n_bucket = len(schema.bucket_key_names)
    other = data.draw(rows(schema))
    for i in schema.pk_indexes[:n_bucket]:
        other[i] = values[i]  # same bucket-key values, anything else may differ
    other_key = codec.key_of_row(other)
    assert codec.bucket_key_bytes(other_key) == prefix
    assert codec.bucket_of(other_key, 7) == codec.bucket_of(key, 7)
    if n_bucket < len(schema.primary_key):
        bucket_only = TableSchema.of(schema.current.columns, schema.bucket_key_names)
        assert RowCodec(bucket_only).encode_key(pk_values[:n_bucket]) == prefix


def _check_accepted(codec: RowCodec, data: bytes) -> None:
    """``data`` either is refused with a row error or decodes to values whose encoding is ``data``."""
    try:
        sid = codec.validate_row(data)
    except REFUSALS:
        try:
            codec.decode_row(data)
            raise AssertionError("decode_row accepted a row validate_row refused")
        except REFUSALS:
            return
    got_sid, values = codec.decode_row(data)
    assert got_sid == sid
    assert codec.encode_row(values, sid) == data or has_nan(values)
    if codec.schema.is_primary_key_table:
        assert codec.key_of_row_bytes(data) == codec.key_of_row(values)


@PROPS
@given(st.data(), st.binary(max_size=80))
def test_arbitrary_bytes_are_refused_with_row_errors_only(data: st.DataObject, junk: bytes) -> None:
    schema = data.draw(schemas(max_columns=6))
    codec = RowCodec(schema)
    prefix = data.draw(st.sampled_from([b"", b"\x00\x01", b"\x00\x01\x00", b"\x00\x02"]))
    blob = prefix + junk
    _check_accepted(codec, blob)
    calls = [lambda b: decode_kv_value(b, codec), lambda b: decode_change(b, codec)]
    if schema.is_primary_key_table:  # a log table has no keys: TableTypeMismatchError, the caller's mistake
        key = data.draw(st.binary(max_size=20))
        calls += [codec.decode_key, lambda b: decode_kv_record(codec, key, b)]
    for call in calls:
        try:
            call(blob)
        except REFUSALS:
            pass


@st.composite
def mutations(draw: st.DrawFn, data: bytes) -> bytes:
    kind = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "set"]))
    if not data:
        return data
    i = draw(st.integers(0, len(data) - 1))
    if kind == "flip":
        return data[:i] + bytes([data[i] ^ (1 << draw(st.integers(0, 7)))]) + data[i + 1 :]
    if kind == "truncate":
        return data[:i]
    if kind == "insert":
        return data[:i] + draw(st.binary(min_size=1, max_size=4)) + data[i:]
    if kind == "delete":
        return data[:i] + data[i + 1 :]
    return data[:i] + bytes([draw(st.integers(0, 255))]) + data[i + 1 :]


@PROPS
@given(st.data())
def test_mutated_rows_are_refused_or_canonical(data: st.DataObject) -> None:
    schema = data.draw(schemas(max_columns=8))
    codec = RowCodec(schema)
    row = codec.encode_row(data.draw(rows(schema)))
    for _ in range(5):
        row = data.draw(mutations(row))
        _check_accepted(codec, row)


def _sign_extended(encoded: bytes) -> bytes:
    """A DECIMAL's encoding with one redundant sign byte (the same number, not in its fewest bytes)."""
    payload = encoded[1:]
    return bytes([len(payload) + 1, 0xFF if payload[0] & 0x80 else 0x00]) + payload


def _nudged(fmt: str) -> Any:
    def nudge(encoded: bytes) -> bytes:
        (v,) = struct.unpack(fmt, encoded)
        try:
            return struct.pack(fmt, v + 1)
        except struct.error:
            return struct.pack(fmt, v - 1)

    return nudge


def raw_values_of(t: DataType) -> st.SearchStrategy[bytes]:
    """Bytes in the shape of a value of ``t``: random content, a valid value, a valid value mutated, and the
    near misses of each type (a decimal with a redundant sign byte, a date or timestamp one unit off)."""
    valid = values_of(t).map(encoder("c", t))
    if t.fixed_format is not None:
        size = struct.calcsize(">" + t.fixed_format)
        variants = [st.binary(min_size=size, max_size=size), valid.map(_nudged(">" + t.fixed_format))]
    elif t.root is TypeRoot.DECIMAL:
        variants = [st.binary(max_size=18).map(lambda b: bytes([len(b)]) + b), valid.map(_sign_extended)]
    else:
        variants = [st.binary(max_size=12).map(lambda b: struct.pack(">I", len(b)) + b)]
    return st.one_of(valid, valid.flatmap(mutations), *variants)


@PROPS
@given(st.data())
def test_rows_of_random_value_bytes_are_refused_or_canonical(data: st.DataObject) -> None:
    """Each present column holds bytes of the right shape but any content: the row is refused with a row
    error or it is the canonical encoding of its values (so no two byte strings mean the same key)."""
    schema = data.draw(schemas(max_columns=8))
    codec = RowCodec(schema)
    columns = schema.current.columns
    nulls = [c.nullable and data.draw(st.booleans()) for c in columns]
    bitmap = bytearray((len(columns) + 7) // 8)
    for i, null in enumerate(nulls):
        if null:
            bitmap[i >> 3] |= 1 << (i & 7)
    values = b"".join(data.draw(raw_values_of(c.type)) for c, null in zip(columns, nulls, strict=True) if not null)
    _check_accepted(codec, b"\x00\x01" + bytes(bitmap) + values)


@PROPS
@given(st.data())
def test_kv_values_and_changes_round_trip(data: st.DataObject) -> None:
    schema = data.draw(schemas(min_key=1, max_columns=8))
    codec = RowCodec(schema)
    values = data.draw(rows(schema))
    row = codec.encode_row(values)
    key = codec.key_of_row(values)
    assert decode_kv_record(codec, key, encode_kv_value(KvOp.UPSERT, row)) == (KvOp.UPSERT, row, None)
    assert decode_kv_record(codec, key, encode_kv_value(KvOp.DELETE)) == (KvOp.DELETE, None, None)
    targets = sorted(set(schema.pk_indexes) | set(data.draw(st.sets(st.integers(0, len(values) - 1)))))
    partial_values = [v if i in targets else None for i, v in enumerate(values)]
    partial, got_targets = codec.encode_partial_row(partial_values, targets)
    assert got_targets == tuple(targets)
    value = encode_kv_value(KvOp.PARTIAL_UPSERT, partial, targets)
    assert decode_kv_record(codec, key, value) == (KvOp.PARTIAL_UPSERT, partial, tuple(targets))
    other = codec.encode_row(data.draw(rows(schema)))
    for change in (
        (ChangeType.INSERT, None, row),
        (ChangeType.UPDATE, other, row),
        (ChangeType.DELETE, other, None),
        (ChangeType.NOOP, None, None),
    ):
        assert tuple(decode_change(encode_change(*change), codec)) == change


@PROPS
@given(st.data())
def test_mutated_kv_values_and_changes_raise_row_errors_only(data: st.DataObject) -> None:
    schema = data.draw(schemas(min_key=1, max_columns=6))
    codec = RowCodec(schema)
    values = data.draw(rows(schema))
    row = codec.encode_row(values)
    key = codec.key_of_row(values)
    blobs = [
        encode_kv_value(KvOp.UPSERT, row),
        encode_kv_value(
            KvOp.PARTIAL_UPSERT,
            *codec.encode_partial_row(
                [v if i in schema.pk_indexes else None for i, v in enumerate(values)], list(schema.pk_indexes)
            ),
        ),
        encode_change(ChangeType.UPDATE, row, row),
    ]
    for blob in blobs:
        bad = data.draw(mutations(blob))
        for call in (
            lambda b: decode_kv_value(b, codec),
            lambda b: decode_kv_record(codec, key, b),
            lambda b: decode_change(b, codec),
        ):
            try:
                call(bad)
            except REFUSALS:
                pass
    bad_key = data.draw(mutations(key))
    try:
        assert codec.encode_key(codec.decode_key(bad_key)) == bad_key
    except REFUSALS:
        pass


def test_float_bits_are_kept() -> None:
    codec = RowCodec(TableSchema.of([Column("f", DataType(TypeRoot.FLOAT)), Column("d", DataType(TypeRoot.DOUBLE))]))
    row = codec.encode_row([-0.0, -0.0])
    assert row[3:] == struct.pack(">fd", -0.0, -0.0)
    assert [math.copysign(1, v) for v in codec.decode_row(row)[1]] == [-1, -1]
