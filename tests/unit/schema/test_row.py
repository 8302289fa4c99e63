"""The row and key codec on named cases: the byte layout of docs §3.1-3.2, every refusal naming its column,
schema evolution, keys cut out of row bytes, bucket-key prefixes and the producer's bucket function."""

from __future__ import annotations

import struct
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from fluss_py.client.producer.accumulator import bucket_for_key
from fluss_py.errors import InvalidRowError, TableTypeMismatchError, UnknownSchemaIdError
from fluss_py.schema import Column, RowCodec, parse_schema, parse_type, row_codec

SCHEMA = parse_schema(
    "id BIGINT, name STRING, score DOUBLE, amount DECIMAL(10,2), day DATE, ts TIMESTAMP(3), ok BOOLEAN, "
    "blob BYTES, small INT, f FLOAT",
    "id",
)
VALUES = [
    42,
    "hé",
    1.5,
    Decimal("-12.5"),
    date(2024, 1, 2),
    datetime(2024, 1, 2, 3, 4, 5, 123000),
    True,
    b"\x00\xff",
    -7,
    0.25,
]


def test_the_row_layout_is_the_documented_one() -> None:
    codec = RowCodec(parse_schema("id BIGINT, name STRING, flag BOOLEAN", "id"))
    row = codec.encode_row([7, None, False])
    # schema id 1 | bitmap: column 1 null | id | flag
    assert row == b"\x00\x01" + b"\x02" + struct.pack(">q", 7) + b"\x00"
    assert codec.encode_row([7, "ab", True]) == b"\x00\x01\x00" + struct.pack(">q", 7) + b"\x00\x00\x00\x02ab\x01"
    assert codec.key_of_row_bytes(row) == struct.pack(">q", 7)


def test_every_type_round_trips() -> None:
    codec = RowCodec(SCHEMA)
    row = codec.encode_row(VALUES)
    assert codec.validate_row(row) == 1
    assert codec.decode_row(row) == (1, VALUES)
    assert codec.encode_row(dict(zip(SCHEMA.current.names, VALUES, strict=True))) == row


def test_the_encodings_of_decimal_date_and_timestamp() -> None:
    codec = RowCodec(parse_schema("d DECIMAL(10,2), day DATE, ts TIMESTAMP(6)"))
    row = codec.encode_row([Decimal("-1.28"), date(1969, 12, 31), datetime(1970, 1, 1, 0, 0, 1)])
    assert row[3:] == b"\x01\x80" + struct.pack(">i", -1) + struct.pack(">q", 1_000_000)
    assert codec.encode_row([Decimal("1.28"), None, None])[3:] == b"\x02\x00\x80"  # 128 needs a sign byte
    assert codec.encode_row([0, None, None])[3:] == b"\x01\x00"


def test_an_aware_timestamp_is_stored_in_utc() -> None:
    codec = RowCodec(parse_schema("ts TIMESTAMP"))
    aware = datetime(2024, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    assert codec.decode_row(codec.encode_row([aware]))[1] == [datetime(2024, 1, 1, 10, 0)]


@pytest.mark.parametrize(
    ("index", "value", "fragment"),
    [
        (0, None, "'id' .* NOT NULL"),
        (0, "42", "'id' .*expected an int"),
        (0, True, "expected an int"),
        (0, 2**63, "outside"),
        (1, b"x", "'name' .*expected a str"),
        (1, "\ud800", "UTF-8"),
        (2, "1.0", "expected a float"),
        (3, Decimal("1.234"), "more than 2 digits after the point"),
        (3, Decimal("123456789.1"), "more than 10 digits"),
        (3, Decimal("NaN"), "not a finite"),
        (3, 1.5, "expected a decimal"),
        (4, datetime(2024, 1, 1), "expected a datetime.date"),
        (5, date(2024, 1, 1), "expected a datetime.datetime"),
        (5, datetime(2024, 1, 1, 0, 0, 0, 1), "below the precision"),
        (6, 1, "expected a bool"),
        (7, "x", "expected bytes"),
        (8, 2**31, "outside"),
        (9, 1e300, "out of range"),
    ],
)
def test_encode_refuses_a_bad_value_naming_the_column(index: int, value: object, fragment: str) -> None:
    values = list(VALUES)
    values[index] = value
    with pytest.raises(InvalidRowError, match=fragment):
        RowCodec(SCHEMA).encode_row(values)


def test_encode_refuses_a_wrong_shape() -> None:
    codec = RowCodec(SCHEMA)
    with pytest.raises(InvalidRowError, match="10 columns, the row 2"):
        codec.encode_row([1, "x"])
    with pytest.raises(InvalidRowError, match="unknown column 'nope'"):
        codec.encode_row({"id": 1, "nope": 2})
    with pytest.raises(InvalidRowError, match="a list of values"):
        codec.encode_row("id=1")  # type: ignore[arg-type]
    with pytest.raises(UnknownSchemaIdError):
        codec.encode_row(VALUES, schema_id=2)


def _good_row() -> bytes:
    return RowCodec(SCHEMA).encode_row(VALUES)


@pytest.mark.parametrize(
    ("mutate", "error", "fragment"),
    [
        (lambda r: b"", InvalidRowError, "no schema id"),
        (lambda r: b"\x00", InvalidRowError, "no schema id"),
        (lambda r: b"\x00\x00" + r[2:], InvalidRowError, "schema id 0"),
        (lambda r: b"\x00\x02" + r[2:], UnknownSchemaIdError, "schema id 2"),
        (lambda r: r[:3], InvalidRowError, "shorter than its null bitmap"),
        (lambda r: r[:3] + b"\x04" + r[4:], InvalidRowError, "past the last"),
        (lambda r: r[:2] + b"\x01" + r[3:], InvalidRowError, "'id' .*NOT NULL"),
        (lambda r: r + b"\x00", InvalidRowError, "after its last column"),
        (lambda r: r[:-1], InvalidRowError, "truncated"),
        (lambda r: r[:14], InvalidRowError, "truncated at column 'name'"),
    ],
)
def test_validate_and_decode_refuse_malformed_bytes(mutate, error, fragment: str) -> None:
    codec = RowCodec(SCHEMA)
    bad = mutate(_good_row())
    with pytest.raises(error, match=fragment):
        codec.validate_row(bad)
    with pytest.raises(error, match=fragment):
        codec.decode_row(bad)


@pytest.mark.parametrize(
    ("ddl", "payload", "fragment"),
    [
        ("b BOOLEAN", b"\x02", "byte 2 is not 0 or 1"),
        ("s STRING", b"\x00\x00\x00\x02\xc3\x28", "invalid UTF-8"),
        ("s STRING", b"\x00\x00\x00\x05ab", "truncated at column 's'"),
        ("d DECIMAL(10,2)", b"\x00", "0 bytes"),
        ("d DECIMAL(10,2)", b"\x02\x00\x01", "fewest bytes"),
        ("d DECIMAL(10,2)", b"\x02\xff\xff", "fewest bytes"),
        ("d DECIMAL(2,0)", b"\x01\x64", "more than 2 digits"),
        ("d DECIMAL(38,0)", b"\x11" + b"\x01" * 17, "17 bytes"),
        ("d DATE", struct.pack(">i", 2_932_897), "outside years"),
        ("t TIMESTAMP", struct.pack(">q", 2**62), "outside years"),
        ("t TIMESTAMP(3)", struct.pack(">q", 1001), "below the precision"),
    ],
)
def test_validate_refuses_values_no_encoder_writes(ddl: str, payload: bytes, fragment: str) -> None:
    codec = RowCodec(parse_schema(ddl))
    with pytest.raises(InvalidRowError, match=fragment):
        codec.validate_row(b"\x00\x01\x00" + payload)
    with pytest.raises(InvalidRowError, match=fragment):
        codec.decode_row(b"\x00\x01\x00" + payload)


def test_validate_refuses_non_bytes() -> None:
    with pytest.raises(InvalidRowError, match="is bytes"):
        RowCodec(SCHEMA).validate_row(bytearray(_good_row()))  # type: ignore[arg-type]


def test_an_old_row_decodes_under_a_later_schema_with_the_new_columns_null() -> None:
    old_codec = RowCodec(SCHEMA)
    row = old_codec.encode_row(VALUES)
    evolved = SCHEMA.add_column(Column("extra", parse_type("STRING"))).add_column(Column("n", parse_type("INT")))
    codec = RowCodec(evolved)
    assert codec.validate_row(row) == 1
    assert codec.decode_row(row) == (1, VALUES)
    assert codec.decode_current(row) == [*VALUES, None, None]
    assert codec.key_of_row_bytes(row) == old_codec.key_of_row_bytes(row)
    new_row = codec.encode_row([*VALUES, "x", 3])
    assert codec.decode_row(new_row) == (3, [*VALUES, "x", 3])
    with pytest.raises(UnknownSchemaIdError):
        old_codec.validate_row(new_row)  # a server that has not learned schema 3 yet


@pytest.mark.parametrize(
    ("ddl", "pk", "row"),
    [
        ("id BIGINT, v STRING", "id", [1, "x"]),
        ("v STRING, id BIGINT", "id", ["x", 1]),
        ("a STRING, b INT, c STRING", "c, a", ["aa", 5, "cc"]),
        ("a INT, b INT, c INT", "b, a", [1, 2, 3]),
        ("a INT, n STRING, b INT", "a, b", [1, None, 3]),
        ("a INT, n STRING, b INT", "a, b", [1, "mid", 3]),
        ("d DECIMAL(20,3), s STRING, t TIMESTAMP", "t, d", [Decimal("1.5"), "s", datetime(2000, 1, 1)]),
    ],
)
def test_the_key_cut_from_the_bytes_is_the_encoded_key(ddl: str, pk: str, row: list) -> None:
    schema = parse_schema(ddl, pk)
    codec = RowCodec(schema)
    data = codec.encode_row(row)
    key = codec.encode_key([row[i] for i in schema.pk_indexes])
    assert codec.key_of_row_bytes(data) == key
    assert codec.key_of_row(row) == key
    assert codec.validate_row_key(data) == (1, key)
    assert codec.decode_key(key) == [row[i] for i in schema.pk_indexes]


def test_bucket_key_is_a_prefix_and_buckets_as_the_producer_does() -> None:
    schema = parse_schema("tenant STRING, id BIGINT, v STRING", "tenant, id", "tenant")
    codec = RowCodec(schema)
    key = codec.encode_key(["acme", 7])
    prefix = codec.bucket_key_bytes(key)
    assert prefix == b"\x00\x00\x00\x04acme"
    assert key.startswith(prefix)
    assert codec.bucket_of(key, 12) == bucket_for_key(prefix, 12)
    assert codec.bucket_of(codec.encode_key(["acme", 8]), 12) == codec.bucket_of(key, 12)
    fixed = RowCodec(parse_schema("a INT, b INT", "a, b", "a"))
    assert fixed.bucket_key_bytes(fixed.encode_key([1, 2])) == struct.pack(">i", 1)
    whole = RowCodec(parse_schema("a INT, b INT", "a, b"))
    k = whole.encode_key([1, 2])
    assert whole.bucket_key_bytes(k) == k


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        (b"", "truncated at column 'tenant'"),
        (b"\x00\x00\x00\x04acm", "truncated at column 'tenant'"),
        (b"\x00\x00\x00\x04acme\x00", "truncated at column 'id'"),
        (b"\x00\x00\x00\x04acme" + bytes(8) + b"!", "after its last column"),
        (b"\x00\x00\x00\x02\xff\xfe" + bytes(8), "invalid UTF-8"),
    ],
)
def test_decode_key_refuses_anything_but_one_key(key: bytes, fragment: str) -> None:
    codec = RowCodec(parse_schema("tenant STRING, id BIGINT", "tenant, id"))
    with pytest.raises(InvalidRowError, match=fragment):
        codec.decode_key(key)
    with pytest.raises(InvalidRowError, match=fragment):
        codec.validate_key(key)


def test_encode_key_refuses_nulls_and_wrong_arity() -> None:
    codec = RowCodec(parse_schema("a INT, b STRING", "a, b"))
    with pytest.raises(InvalidRowError, match=r"'b' .*null"):
        codec.encode_key([1, None])
    with pytest.raises(InvalidRowError, match="2 values"):
        codec.encode_key([1])


def test_key_functions_on_a_table_without_a_primary_key() -> None:
    codec = RowCodec(parse_schema("a INT"))
    with pytest.raises(TableTypeMismatchError):
        codec.encode_key([1])
    with pytest.raises(TableTypeMismatchError):
        codec.key_of_row_bytes(codec.encode_row([1]))
    with pytest.raises(TableTypeMismatchError):
        codec.bucket_key_bytes(b"\x00\x00\x00\x01")
    with pytest.raises(TableTypeMismatchError):
        codec.decode_key(b"\x00\x00\x00\x01")


def test_partial_rows() -> None:
    schema = parse_schema("id BIGINT, a STRING NOT NULL, b INT", "id")
    codec = RowCodec(schema)
    row, targets = codec.encode_partial_row({"id": 1, "b": 5}, ["id", "b"])
    assert targets == (0, 2)
    assert codec.validate_row(row, targets) == 1
    with pytest.raises(InvalidRowError, match=r"'a' .*NOT NULL"):
        codec.validate_row(row)  # as a full row, a is missing
    assert codec.decode_row(row, partial=True) == (1, [1, None, 5])
    with pytest.raises(InvalidRowError, match="primary key"):
        codec.encode_partial_row({"b": 5}, ["b"])
    with pytest.raises(InvalidRowError, match="'a' has a value but is not a target"):
        codec.encode_partial_row([1, "x", 5], [0, 2])
    with pytest.raises(InvalidRowError, match="not a target of the partial update"):
        codec.validate_row(row, (0,))
    with pytest.raises(InvalidRowError, match="past the row's last column"):
        codec.validate_row(row, (0, 2, 3))
    with pytest.raises(InvalidRowError, match="ascending"):
        codec.validate_row(row, (2, 0))
    with pytest.raises(InvalidRowError, match="unknown column"):
        codec.encode_partial_row({"id": 1}, ["id", "zzz"])


def test_row_codec_is_shared_per_schema() -> None:
    assert row_codec(SCHEMA) is row_codec(parse_schema(SCHEMA.describe(), "id"))
