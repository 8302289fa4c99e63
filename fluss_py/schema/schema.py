"""A table's schema and its history (docs/primary-key-tables.md §2). Pure values, checked when built.

    TableSchema(versions, primary_key, bucket_key)
      versions     SchemaVersion(schema_id, columns), oldest first, ids 1, 2, 3, ...; each later version is the
                   one before plus nullable columns at the end (the only alteration: ``add_column``)
      primary_key  column names (empty: a log table with a schema); always NOT NULL, never FLOAT or DOUBLE
                   (a key is compared byte for byte, and -0.0 == 0.0 would be two keys)
      bucket_key   a prefix of the primary key in primary-key order; empty means the whole primary key

A ``TableSchema`` that exists is valid: the constructor checks every rule, so ``from_json`` (the znode form,
which is input) and ``parse_schema`` (a DDL string) refuse bad input with one InvalidRequestError naming it.

The znode form (``to_json``)::

    {"versions": [{"schema_id": 1, "columns": [{"name": "id", "type": "BIGINT", "nullable": false}, ...]}],
     "primary_key": ["id"], "bucket_key": []}
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fluss_py.errors import InvalidRequestError, UnknownSchemaIdError
from fluss_py.schema.types import DataType, TypeRoot, parse_type

MAX_COLUMNS = 1024
MAX_SCHEMA_ID = 0xFFFF  # a row carries it as u16
NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_COLUMN_RE = re.compile(r"\s*(\S+)\s+(.*?)(\s+NOT\s+NULL|\s+NULL)?\s*", re.IGNORECASE | re.DOTALL)
_NO_KEY_TYPES = (TypeRoot.FLOAT, TypeRoot.DOUBLE)


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    type: DataType
    nullable: bool = True

    def __str__(self) -> str:
        return f"{self.name} {self.type}" + ("" if self.nullable else " NOT NULL")


@dataclass(frozen=True, slots=True)
class SchemaVersion:
    """One version's columns, in order; ``index`` maps a name to its position."""

    schema_id: int
    columns: tuple[Column, ...]

    def __post_init__(self) -> None:
        if isinstance(self.columns, list):
            object.__setattr__(self, "columns", tuple(self.columns))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    def index(self, name: str) -> int:
        for i, column in enumerate(self.columns):
            if column.name == name:
                return i
        raise InvalidRequestError(f"no column {name!r} in schema {self.schema_id} (columns: {', '.join(self.names)})")

    def __len__(self) -> int:
        return len(self.columns)


@dataclass(frozen=True, slots=True)
class TableSchema:
    """Every version of a table's schema with its keys; see the module docstring for the rules."""

    versions: tuple[SchemaVersion, ...]
    primary_key: tuple[str, ...] = ()
    bucket_key: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("versions", "primary_key", "bucket_key"):
            if not isinstance(getattr(self, name), tuple):
                object.__setattr__(self, name, tuple(getattr(self, name)))
        _check(self)

    @classmethod
    def of(
        cls, columns: Iterable[Column], primary_key: Iterable[str] = (), bucket_key: Iterable[str] = ()
    ) -> TableSchema:
        """Schema id 1 of a new table; primary-key columns become NOT NULL."""
        pk = tuple(primary_key)
        cols = tuple(Column(c.name, c.type, c.nullable and c.name not in pk) for c in columns)
        return cls((SchemaVersion(1, cols),), pk, tuple(bucket_key))

    @property
    def current(self) -> SchemaVersion:
        return self.versions[-1]

    def version(self, schema_id: int) -> SchemaVersion:
        if type(schema_id) is int and 1 <= schema_id <= len(self.versions):
            return self.versions[schema_id - 1]
        raise UnknownSchemaIdError(f"schema id {schema_id} is not known (latest: {len(self.versions)})")

    @property
    def is_primary_key_table(self) -> bool:
        return bool(self.primary_key)

    @property
    def pk_indexes(self) -> tuple[int, ...]:
        """Positions of the primary-key columns (the same in every version), in primary-key order."""
        first = self.versions[0]
        return tuple(first.index(name) for name in self.primary_key)

    @property
    def bucket_key_names(self) -> tuple[str, ...]:
        return self.bucket_key or self.primary_key

    def add_column(self, column: Column) -> TableSchema:
        """A new version with ``column`` (nullable, new name) appended; InvalidRequestError otherwise."""
        if not isinstance(column, Column):
            raise InvalidRequestError(f"expected a Column, got {type(column).__name__}")
        if not column.nullable:
            raise InvalidRequestError(f"an added column must be nullable: {column}")
        if column.name in self.current.names:
            raise InvalidRequestError(f"column {column.name!r} already exists")
        added = SchemaVersion(self.current.schema_id + 1, (*self.current.columns, column))
        return TableSchema((*self.versions, added), self.primary_key, self.bucket_key)

    def describe(self) -> str:
        """The current columns as a DDL string (``parse_schema`` reads it back)."""
        return ", ".join(str(c) for c in self.current.columns)

    # ------------------------------------------------------------ the znode form
    def to_json(self) -> dict[str, Any]:
        return {
            "versions": [
                {
                    "schema_id": v.schema_id,
                    "columns": [{"name": c.name, "type": str(c.type), "nullable": c.nullable} for c in v.columns],
                }
                for v in self.versions
            ],
            "primary_key": list(self.primary_key),
            "bucket_key": list(self.bucket_key),
        }

    @classmethod
    def from_json(cls, obj: dict[str, Any] | str | bytes) -> TableSchema:
        """Parse and check the znode form (a dict, or its JSON text); InvalidRequestError on anything wrong."""
        if isinstance(obj, (str, bytes)):
            try:
                obj = json.loads(obj)
            except (ValueError, UnicodeDecodeError) as e:
                raise InvalidRequestError(f"schema is not JSON: {e}") from None
        if not isinstance(obj, dict):
            raise InvalidRequestError(f"schema must be a JSON object, got {type(obj).__name__}")
        versions = [_version_from_json(v) for v in _list(obj, "versions")]
        return cls(tuple(versions), _names(obj, "primary_key"), _names(obj, "bucket_key"))


def _list(obj: dict[str, Any], key: str) -> list[Any]:
    value = obj.get(key, [])
    if not isinstance(value, list):
        raise InvalidRequestError(f"schema field {key!r} must be a list, got {type(value).__name__}")
    return value


def _names(obj: dict[str, Any], key: str) -> tuple[str, ...]:
    names = _list(obj, key)
    if not all(isinstance(n, str) for n in names):
        raise InvalidRequestError(f"schema field {key!r} must be a list of column names")
    return tuple(names)


def _version_from_json(v: Any) -> SchemaVersion:
    if not isinstance(v, dict) or type(v.get("schema_id")) is not int:
        raise InvalidRequestError(f"a schema version must be an object with an int schema_id, got {v!r:.100}")
    columns = []
    for c in _list(v, "columns"):
        if (
            not isinstance(c, dict)
            or not isinstance(c.get("name"), str)
            or not isinstance(c.get("type"), str)
            or not isinstance(c.get("nullable"), bool)
        ):
            raise InvalidRequestError(f"a schema column must be {{name: str, type: str, nullable: bool}}: {c!r:.100}")
        columns.append(Column(c["name"], parse_type(c["type"]), c["nullable"]))
    return SchemaVersion(v["schema_id"], tuple(columns))


def _check(schema: TableSchema) -> None:
    versions = schema.versions
    if not versions:
        raise InvalidRequestError("a schema needs at least one version")
    if len(versions) > MAX_SCHEMA_ID:
        raise InvalidRequestError(f"more than {MAX_SCHEMA_ID} schema versions")
    previous: tuple[Column, ...] = ()
    for expected_id, version in enumerate(versions, start=1):
        if not isinstance(version, SchemaVersion):
            raise InvalidRequestError(f"expected a SchemaVersion, got {type(version).__name__}")
        if version.schema_id != expected_id:
            raise InvalidRequestError(f"schema ids must be 1, 2, 3, ...: got {version.schema_id} at {expected_id}")
        _check_columns(version)
        columns = version.columns
        if columns[: len(previous)] != previous or (expected_id > 1 and len(columns) <= len(previous)):
            raise InvalidRequestError(f"schema {expected_id} must be schema {expected_id - 1} plus columns at the end")
        added = [c for c in columns[len(previous) :] if not c.nullable]
        if expected_id > 1 and added:
            raise InvalidRequestError(f"schema {expected_id}: an added column must be nullable: {added[0]}")
        previous = columns
    _check_keys(schema)


def _check_columns(version: SchemaVersion) -> None:
    if not isinstance(version.columns, tuple) or not version.columns:
        raise InvalidRequestError(f"schema {version.schema_id} has no columns")
    if len(version.columns) > MAX_COLUMNS:
        raise InvalidRequestError(
            f"schema {version.schema_id} has {len(version.columns)} columns (at most {MAX_COLUMNS})"
        )
    seen: set[str] = set()
    for column in version.columns:
        if not isinstance(column, Column) or not isinstance(column.type, DataType):
            raise InvalidRequestError(f"expected a Column with a DataType, got {column!r:.100}")
        if not isinstance(column.name, str) or not NAME_RE.fullmatch(column.name):
            raise InvalidRequestError(
                f"column name {column.name!r:.140} must match [A-Za-z_][A-Za-z0-9_]* (1-128 characters)"
            )
        if not isinstance(column.nullable, bool):
            raise InvalidRequestError(f"column {column.name!r}: nullable must be a bool")
        if column.name in seen:
            raise InvalidRequestError(f"column {column.name!r} appears twice")
        seen.add(column.name)


def _check_keys(schema: TableSchema) -> None:
    first = schema.versions[0]
    pk, bucket_key = schema.primary_key, schema.bucket_key
    if len(set(pk)) != len(pk):
        raise InvalidRequestError(f"primary key {', '.join(pk)} names a column twice")
    for name in pk:
        if not isinstance(name, str) or name not in first.names:
            raise InvalidRequestError(f"primary-key column {name!r} is not a column of the schema")
        column = first.columns[first.index(name)]
        if column.nullable:
            raise InvalidRequestError(f"primary-key column {name!r} must be NOT NULL")
        if column.type.root in _NO_KEY_TYPES:
            raise InvalidRequestError(f"primary-key column {name!r} may not be {column.type} (keys compare as bytes)")
    if bucket_key and not pk:
        raise InvalidRequestError("a bucket key needs a primary key (it is a prefix of it)")
    if tuple(bucket_key) != tuple(pk[: len(bucket_key)]):
        raise InvalidRequestError(
            f"bucket key ({', '.join(bucket_key)}) must be a prefix of the primary key ({', '.join(pk)})"
        )


def _key_names(names: str | Sequence[str]) -> tuple[str, ...]:
    if isinstance(names, str):
        return tuple(n.strip() for n in names.split(",") if n.strip())
    return tuple(names)


def split_columns(ddl: str) -> list[str]:
    """Split a DDL string at the commas outside parentheses (``DECIMAL(10, 2)`` stays whole)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(ddl):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(ddl[start:i])
            start = i + 1
    parts.append(ddl[start:])
    return parts


def parse_column(text: str) -> Column:
    """``"name STRING"``, ``"id BIGINT NOT NULL"`` -> Column; InvalidRequestError naming what is wrong."""
    m = _COLUMN_RE.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise InvalidRequestError(f"cannot parse column {text!r:.100} (expected 'name TYPE [NOT NULL]')")
    name, type_text, nullness = m.groups()
    if not NAME_RE.fullmatch(name):
        raise InvalidRequestError(f"column name {name!r:.140} must match [A-Za-z_][A-Za-z0-9_]* (1-128 characters)")
    try:
        dtype = parse_type(type_text)
    except InvalidRequestError as e:
        raise InvalidRequestError(f"column {name!r}: {e.message}") from None
    return Column(name, dtype, nullness is None or "NOT" not in nullness.upper())


def parse_schema(ddl: str, primary_key: str | Sequence[str] = (), bucket_key: str | Sequence[str] = ()) -> TableSchema:
    """``parse_schema("id BIGINT, name STRING", primary_key="id")`` -> the first version of a table's schema.
    Keys are names (a sequence or one comma-separated string); primary-key columns become NOT NULL."""
    if not isinstance(ddl, str) or not ddl.strip():
        raise InvalidRequestError("the schema is empty (expected e.g. 'id BIGINT, name STRING')")
    columns = [parse_column(part) for part in split_columns(ddl)]
    return TableSchema.of(columns, _key_names(primary_key), _key_names(bucket_key))
