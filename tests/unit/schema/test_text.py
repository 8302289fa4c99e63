"""Rows from JSON and CSV text, back to JSON, and key arguments (``fluss-py upsert/lookup``)."""

from __future__ import annotations

import json
import math
from datetime import date, datetime
from decimal import Decimal

import pytest

from fluss_py.errors import InvalidRowError
from fluss_py.schema import RowCodec, parse_key_args, parse_schema, row_from_csv, row_from_json, row_to_json

SCHEMA = parse_schema(
    "id BIGINT, name STRING, score DOUBLE, amount DECIMAL(10,2), day DATE, ts TIMESTAMP(3), ok BOOLEAN, blob BYTES",
    "id, name",
)
V = SCHEMA.current


def test_json_round_trip_through_text() -> None:
    values = [
        42,
        "hé",
        math.inf,
        Decimal("-12.50"),
        date(2024, 1, 2),
        datetime(2024, 1, 2, 3, 4, 5, 123000),
        False,
        b"\x00\xff",
    ]
    text = json.dumps(row_to_json(V, values), allow_nan=False)
    assert row_from_json(V, json.loads(text)) == values
    RowCodec(SCHEMA).encode_row(values)  # the converted values are valid row values


def test_json_accepts_strings_and_numbers_where_natural() -> None:
    row = row_from_json(
        V,
        {
            "id": "42",
            "name": "x",
            "score": "NaN",
            "amount": 1.1,
            "day": "2024-02-29",
            "ts": "2024-01-01 10:00:00Z",
            "ok": "TRUE",
        },
    )
    assert row[0] == 42 and math.isnan(row[2]) and row[3] == Decimal("1.1") and row[6] is True
    assert row[5].utcoffset().total_seconds() == 0
    assert row[7] is None  # absent: null
    codec = RowCodec(SCHEMA)
    assert codec.decode_row(codec.encode_row(row))[1][5] == datetime(2024, 1, 1, 10, 0)


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        ({"id": 1.5}, "'id' .*expected an integer"),
        ({"id": True}, "expected an integer"),
        ({"name": 5}, "'name' .*expected a string"),
        ({"score": "fast"}, "expected a number"),
        ({"amount": "1,5"}, "expected a decimal"),
        ({"amount": "Infinity"}, "expected a decimal"),
        ({"day": "2024-02-30"}, "expected a date"),
        ({"ts": "yesterday"}, "expected a timestamp"),
        ({"ok": "yes"}, "expected true or false"),
        ({"blob": "!!"}, "expected base64"),
        ({"nope": 1}, "unknown column 'nope'"),
        ({"id": "1_000"}, "expected an integer"),
        ({"id": "\u0664\u0662"}, "expected an integer"),
        ({"score": 10**400}, "in the range of a double"),
        ({"score": "1_0"}, "expected a number"),
        ({"amount": "1_0"}, "expected a decimal"),
    ],
)
def test_json_refusals_name_the_column(obj: dict, fragment: str) -> None:
    with pytest.raises(InvalidRowError, match=fragment):
        row_from_json(V, obj)


def test_json_row_must_be_an_object() -> None:
    with pytest.raises(InvalidRowError, match="JSON object"):
        row_from_json(V, [1, 2])  # type: ignore[arg-type]


def test_csv_with_and_without_a_header() -> None:
    fields = ["7", "n", "1.5", "3.25", "2020-01-01", "2020-01-01T00:00:00.5", "0", "AAE="]
    row = row_from_csv(V, fields)
    assert row == [
        7,
        "n",
        1.5,
        Decimal("3.25"),
        date(2020, 1, 1),
        datetime(2020, 1, 1, 0, 0, 0, 500000),
        False,
        b"\0\1",
    ]
    assert row_from_csv(V, ["n", "7", ""], header=["name", "id", "score"]) == [
        7,
        "n",
        None,
        None,
        None,
        None,
        None,
        None,
    ]
    with pytest.raises(InvalidRowError, match="2 fields, the header 3"):
        row_from_csv(V, ["1", "2"], header=["id", "name", "score"])
    with pytest.raises(InvalidRowError, match="twice"):
        row_from_csv(V, ["1", "2"], header=["id", "id"])
    with pytest.raises(InvalidRowError, match="unknown column"):
        row_from_csv(V, ["1"], header=["idd"])


def test_parse_key_args_gives_key_order() -> None:
    assert parse_key_args(SCHEMA, ["name=bob", "id=42"]) == [42, "bob"]
    assert parse_key_args(SCHEMA, ["id=1", "name="]) == [1, ""]
    assert parse_key_args(SCHEMA, ["id=1", "name=a=b"]) == [1, "a=b"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["id=1"], "'name' missing"),
        (["id=1", "id=2", "name=x"], "given twice"),
        (["score=1", "id=1", "name=x"], "not a primary-key column"),
        (["id", "name=x"], "name=value"),
        (["id=x", "name=x"], "'id' .*expected an integer"),
    ],
)
def test_parse_key_args_refusals(args: list[str], fragment: str) -> None:
    with pytest.raises(InvalidRowError, match=fragment):
        parse_key_args(SCHEMA, args)


def test_parse_key_args_on_a_log_table() -> None:
    with pytest.raises(InvalidRowError, match="no primary key"):
        parse_key_args(parse_schema("a INT"), ["a=1"])
