"""Rows as people write them: JSON objects, CSV fields and ``name=value`` key arguments. Pure.

Text -> typed value, per type (JSON values may be the native JSON type or a string; CSV fields are strings):

    BOOLEAN    true/false (JSON bool, or "true"/"false"/"1"/"0", any case)
    INT BIGINT an integer (JSON number without fraction, or a decimal string)
    FLOAT      a number, or "NaN", "Infinity", "-Infinity"
    DOUBLE
    STRING     text as is (JSON: a string only)
    BYTES      base64 (standard alphabet, padded)
    DECIMAL    a number or a string ("12.50"); JSON floats are read from their shortest repr
    DATE       ISO "YYYY-MM-DD"
    TIMESTAMP  ISO "YYYY-MM-DDTHH:MM:SS[.ffffff]" (or a space for the T); with "Z" or an offset it is
               converted to UTC, without one it is UTC

In JSON a missing key or ``null`` is null; in CSV an empty field is null (so an empty STRING cannot be
written by CSV: use JSON). ``row_to_json`` is the inverse (Decimal as a string, bytes as base64, dates and
timestamps ISO, non-finite floats as the strings above). Every refusal is an InvalidRowError naming the
column.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Sequence
from datetime import date, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from fluss_py.errors import InvalidRowError
from fluss_py.schema.schema import Column, SchemaVersion, TableSchema
from fluss_py.schema.types import TypeRoot

_TRUE, _FALSE = ("true", "1"), ("false", "0")
_INT_RE = re.compile(r"\s*[+-]?[0-9]{1,40}\s*")
_FLOAT_RE = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)(e[+-]?[0-9]+)?")
_SPECIAL_FLOATS = {"nan": math.nan, "infinity": math.inf, "-infinity": -math.inf, "inf": math.inf, "-inf": -math.inf}


def _bad(column: Column, value: Any, what: str) -> InvalidRowError:
    shown = repr(value)
    shown = shown if len(shown) <= 60 else shown[:57] + "..."
    return InvalidRowError(f"column {column.name!r} ({column.type}): expected {what}, got {shown}")


def _to_bool(column: Column, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.strip().lower() in _TRUE + _FALSE:
        return v.strip().lower() in _TRUE
    raise _bad(column, v, "true or false")


def _to_int(column: Column, v: Any) -> int:
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    if isinstance(v, str) and _INT_RE.fullmatch(v):  # ASCII digits only: int() would take "1_000" and "٤٢"
        return int(v)
    raise _bad(column, v, "an integer")


def _to_float(column: Column, v: Any) -> float:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            return float(v)
        except OverflowError:
            raise _bad(column, v, "a number in the range of a double") from None
    if isinstance(v, str) and len(v) <= 400:
        text = v.strip().lower()
        if text in _SPECIAL_FLOATS:
            return _SPECIAL_FLOATS[text]
        if _FLOAT_RE.fullmatch(text):
            return float(text)
    raise _bad(column, v, "a number")


def _to_str(column: Column, v: Any) -> str:
    if isinstance(v, str):
        return v
    raise _bad(column, v, "a string")


def _to_bytes(column: Column, v: Any) -> bytes:
    if isinstance(v, str):
        try:
            return base64.b64decode(v.strip(), validate=True)
        except (binascii.Error, ValueError):
            pass
    raise _bad(column, v, "base64 text")


def _to_decimal(column: Column, v: Any) -> Decimal:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        v = repr(v) if isinstance(v, float) else str(v)
    if isinstance(v, str) and len(v) <= 100 and _FLOAT_RE.fullmatch(v.strip().lower()):
        try:
            d = Decimal(v.strip())
        except InvalidOperation:
            pass
        else:
            if d.is_finite():
                return d
    raise _bad(column, v, "a decimal number")


def _to_date(column: Column, v: Any) -> date:
    if isinstance(v, str):
        try:
            return date.fromisoformat(v.strip())
        except ValueError:
            pass
    raise _bad(column, v, "a date YYYY-MM-DD")


def _to_timestamp(column: Column, v: Any) -> datetime:
    if isinstance(v, str):
        text = v.strip()
        if text.endswith(("Z", "z")):
            text = text[:-1] + "+00:00"
        try:
            return datetime.fromisoformat(text)  # an aware value is converted to UTC by the row encoder
        except ValueError:
            pass
    raise _bad(column, v, "a timestamp YYYY-MM-DDTHH:MM:SS[.ffffff][Z|+HH:MM]")


_PARSERS: dict[TypeRoot, Callable[[Column, Any], Any]] = {
    TypeRoot.BOOLEAN: _to_bool,
    TypeRoot.INT: _to_int,
    TypeRoot.BIGINT: _to_int,
    TypeRoot.FLOAT: _to_float,
    TypeRoot.DOUBLE: _to_float,
    TypeRoot.STRING: _to_str,
    TypeRoot.BYTES: _to_bytes,
    TypeRoot.DECIMAL: _to_decimal,
    TypeRoot.DATE: _to_date,
    TypeRoot.TIMESTAMP: _to_timestamp,
}


def value_from_text(column: Column, value: Any) -> Any:
    """One JSON value or CSV field of ``column`` as its Python value (None stays None)."""
    if value is None:
        return None
    return _PARSERS[column.type.root](column, value)


def row_from_json(version: SchemaVersion, obj: dict[str, Any]) -> list[Any]:
    """A JSON object as the value list of ``version``: unknown keys refused, missing ones null. The values are
    converted, not yet checked against their columns' ranges (``RowCodec.encode_row`` does that)."""
    if not isinstance(obj, dict):
        raise InvalidRowError(f"a row is a JSON object, got {type(obj).__name__}")
    names = version.names
    unknown = [k for k in obj if k not in names]
    if unknown:
        raise InvalidRowError(f"unknown column {str(unknown[0])[:130]!r} (columns: {', '.join(names)})")
    return [value_from_text(c, obj.get(c.name)) for c in version.columns]


def row_from_csv(version: SchemaVersion, fields: Sequence[str], header: Sequence[str] | None = None) -> list[Any]:
    """CSV fields as the value list of ``version``; ``header`` names the fields (default: every column in
    order). Columns the header does not name are null; an empty field is null."""
    names = list(header) if header is not None else list(version.names)
    if len(fields) != len(names):
        raise InvalidRowError(f"the line has {len(fields)} fields, the header {len(names)}")
    obj: dict[str, Any] = {}
    for name, field in zip(names, fields, strict=True):
        if name in obj:
            raise InvalidRowError(f"the header names column {name!r} twice")
        obj[name] = field if field != "" else None
    return row_from_json(version, obj)


def value_to_json(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (date, datetime)):
        return value.isoformat()
    raise TypeError(f"no JSON form for {type(value).__name__}")


def row_to_json(version: SchemaVersion, values: Sequence[Any]) -> dict[str, Any]:
    """A row's values as a JSON-safe ``{name: value}`` (what ``row_from_json`` reads back)."""
    return {c.name: value_to_json(v) for c, v in zip(version.columns, values, strict=False)}


def parse_key_args(schema: TableSchema, args: Sequence[str]) -> list[Any]:
    """``["id=42", "region=eu"]`` -> the primary-key values in primary-key order; every key column once."""
    if not schema.is_primary_key_table:
        raise InvalidRowError("the table has no primary key")
    current = schema.current
    given: dict[str, Any] = {}
    for arg in args:
        name, sep, text = arg.partition("=")
        name = name.strip()
        if not sep:
            raise InvalidRowError(f"a key is name=value, got {arg[:100]!r}")
        if name not in schema.primary_key:
            raise InvalidRowError(f"{name[:130]!r} is not a primary-key column ({', '.join(schema.primary_key)})")
        if name in given:
            raise InvalidRowError(f"key column {name!r} given twice")
        given[name] = value_from_text(current.columns[current.index(name)], text)
    missing = [name for name in schema.primary_key if name not in given]
    if missing:
        raise InvalidRowError(f"key column {missing[0]!r} missing (the key is {', '.join(schema.primary_key)})")
    return [given[name] for name in schema.primary_key]
