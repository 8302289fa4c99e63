"""Bad input in text form gets a clear error and nothing else: arbitrary JSON values and CSV fields for every
type raise InvalidRowError only (and what converts encodes or is refused with InvalidRowError); arbitrary type
and DDL text, and arbitrary JSON as a schema znode, raise InvalidRequestError only."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from fluss_py.errors import InvalidRequestError, InvalidRowError
from fluss_py.schema import RowCodec, TableSchema, parse_schema, parse_type, row_from_csv, row_from_json
from fluss_py.schema.text import value_from_text

SCHEMA = parse_schema(
    "b BOOLEAN, i INT, l BIGINT, f FLOAT, d DOUBLE, s STRING, y BYTES, m DECIMAL(5,2), big DECIMAL(38,10), "
    "day DATE, t TIMESTAMP(3)"
)
CODEC = RowCodec(SCHEMA)
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.sampled_from([10**400, -(10**400)])
    | st.floats()
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
TEXTY = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["1e400", "-1e400", "NaN", "Infinity", "1_000", "٤٢", "9" * 50, "2024-02-30", "0001-01-01"]),
    st.integers().map(str),
    st.floats().map(repr),
    st.datetimes().map(lambda d: d.isoformat()),
    st.dates().map(str),
)
SETTINGS = settings(max_examples=300, deadline=None)


@SETTINGS
@given(st.sampled_from(SCHEMA.current.columns), st.one_of(JSON, TEXTY))
def test_any_json_value_is_converted_or_refused_as_a_row_error(column, value) -> None:
    values: list = [None] * len(SCHEMA.current)
    try:
        values[SCHEMA.current.index(column.name)] = value_from_text(column, value)
        CODEC.encode_row(values)
    except InvalidRowError:
        pass


@SETTINGS
@given(st.lists(TEXTY, min_size=11, max_size=11))
def test_any_csv_line_is_converted_or_refused_as_a_row_error(fields: list[str]) -> None:
    try:
        CODEC.encode_row(row_from_csv(SCHEMA.current, fields))
    except InvalidRowError:
        pass


@SETTINGS
@given(st.dictionaries(st.sampled_from([*SCHEMA.current.names, "zz"]), st.one_of(JSON, TEXTY)))
def test_any_json_object_is_converted_or_refused_as_a_row_error(obj: dict) -> None:
    try:
        CODEC.encode_row(row_from_json(SCHEMA.current, obj))
    except InvalidRowError:
        pass


@SETTINGS
@given(st.one_of(st.text(max_size=30), st.from_regex(r"[A-Za-z]{1,10}\(\d{1,4}(,\s*\d{1,4})?\)", fullmatch=True)))
def test_any_type_text_parses_or_is_refused(text: str) -> None:
    try:
        t = parse_type(text)
    except InvalidRequestError:
        return
    assert parse_type(str(t)) == t


@SETTINGS
@given(st.text(max_size=80), st.text(max_size=10), st.text(max_size=10))
def test_any_ddl_parses_or_is_refused(ddl: str, pk: str, bk: str) -> None:
    try:
        schema = parse_schema(ddl, pk, bk)
    except InvalidRequestError:
        return
    assert TableSchema.from_json(schema.to_json()) == schema


VALID_ZNODE = parse_schema("id BIGINT, v STRING", "id").to_json()


@SETTINGS
@given(st.one_of(JSON, st.fixed_dictionaries({"versions": JSON, "primary_key": JSON, "bucket_key": JSON})))
def test_any_json_as_a_schema_znode_is_refused_cleanly(obj: object) -> None:
    for candidate in (obj, json.dumps(obj)):
        try:
            TableSchema.from_json(candidate)  # type: ignore[arg-type]
        except InvalidRequestError:
            pass


@SETTINGS
@given(st.data())
def test_a_znode_with_one_field_replaced_is_refused_cleanly_or_valid(data: st.DataObject) -> None:
    obj = json.loads(json.dumps(VALID_ZNODE))
    column = obj["versions"][0]["columns"][data.draw(st.integers(0, 1))]
    field = data.draw(st.sampled_from(["name", "type", "nullable"]))
    column[field] = data.draw(JSON)
    try:
        TableSchema.from_json(obj)
    except InvalidRequestError:
        pass
