"""Rows and keys of one table as bytes (docs/primary-key-tables.md §3.1, §3.2). Pure; no I/O.

    row:  u16 schema_id | null bitmap, ceil(n/8) bytes, bit i (LSB first) = column i is null |
          the non-null values in column order
    key:  the primary-key columns in primary-key order, each encoded as in a row (no id, no bitmap)

``RowCodec(table_schema)`` owns the compiled layouts of every schema version (``fluss_py.schema.plan``); it is
immutable apart from its plan cache and safe to share between threads. Who calls what:

    clients         encode_row (values or a {name: value} mapping), encode_key, key_of_row, bucket_of,
                    decode_row / decode_current for what they read
    the leader      validate_row (a client's bytes: refuse anything malformed) and key_of_row_bytes, or both
                    at once with validate_row_key; validate_key for a delete; bucket_of for the key's bucket
    merge           decode_current / encode_row (partial updates, versioned rows)

Every refusal is an InvalidRowError naming the column, or UnknownSchemaIdError (retriable: the server has not
learned the schema version yet); no other exception escapes, whatever the bytes.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Any

import crc32c

from fluss_py.errors import InvalidRowError, TableTypeMismatchError, UnknownSchemaIdError
from fluss_py.schema.plan import RowPlan, compile_plan, header_size, truncated
from fluss_py.schema.schema import Column, SchemaVersion, TableSchema
from fluss_py.schema.types import DataType
from fluss_py.schema.values import U16, encoder, fixed_size, fixed_to_py, is_var, length_prefix, payload_to_py

MAX_CACHED_PLANS = 4096  # per codec; (schema id, bitmap) pairs seen, cleared when full


class RowCodec:
    """Encoder, decoder and checker of one table's rows and keys (see the module docstring)."""

    def __init__(self, table_schema: TableSchema) -> None:
        self.schema = table_schema
        versions = table_schema.versions
        self._header_sizes = [header_size(len(v)) for v in versions]
        self._head_by_id = [0, *self._header_sizes]  # by schema id
        self._nullable = [tuple(c.nullable for c in v.columns) for v in versions]
        self._encoders = [tuple(encoder(c.name, c.type) for c in v.columns) for v in versions]
        self._plans: dict[bytes, RowPlan] = {}
        self._pk = table_schema.pk_indexes
        first = versions[0].columns
        self._key_columns = tuple(first[i] for i in self._pk)
        self._key_encoders = tuple(self._encoders[0][i] for i in self._pk)
        self._key_decoders = tuple(_key_decoder(c.name, c.type) for c in self._key_columns)
        self._bucket_key_count = len(table_schema.bucket_key_names)
        bucket_columns = self._key_columns[: self._bucket_key_count]
        self._bucket_key_size: int | None = None  # constant when the bucket key is fixed-width
        if not any(is_var(c.type) for c in bucket_columns):
            self._bucket_key_size = sum(fixed_size(c.type) for c in bucket_columns)

    @property
    def current_schema_id(self) -> int:
        return len(self._header_sizes)

    # ------------------------------------------------------------ values -> bytes
    def encode_row(self, values: Sequence[Any] | Mapping[str, Any], schema_id: int | None = None) -> bytes:
        """The row of ``values`` (one per column of ``schema_id``, default the current one; or a mapping of
        column name to value, absent names null), each checked against its column's type."""
        version, values = self._values(values, schema_id)
        return self._encode(version, values, None)

    def encode_partial_row(
        self,
        values: Sequence[Any] | Mapping[str, Any],
        targets: Sequence[int] | Sequence[str],
        schema_id: int | None = None,
    ) -> tuple[bytes, tuple[int, ...]]:
        """A partial update's row and its target indexes: ``targets`` (names or indexes) must include the
        primary key; the other columns must be None (or absent from a mapping) and are encoded as null."""
        version, values = self._values(values, schema_id)
        indexes = sorted({t if isinstance(t, int) else self._index(version, t) for t in targets})
        if not indexes or indexes[0] < 0 or indexes[-1] >= len(version):
            raise InvalidRowError(f"partial-update targets {list(targets)!r:.100} are not columns of the schema")
        row = self._encode(version, values, set(indexes))
        self._check_partial(row, self._plan(row), indexes)
        return row, tuple(indexes)

    def _values(
        self, values: Sequence[Any] | Mapping[str, Any], schema_id: int | None
    ) -> tuple[SchemaVersion, Sequence[Any]]:
        version = self.schema.version(self.current_schema_id if schema_id is None else schema_id)
        if isinstance(values, Mapping):
            return version, self.values_of(values, version.schema_id)
        if not isinstance(values, (list, tuple)):
            raise InvalidRowError(f"a row is a list of values or a mapping, got {type(values).__name__}")
        if len(values) != len(version):
            raise InvalidRowError(
                f"schema {version.schema_id} has {len(version)} columns, the row {len(values)} values"
            )
        return version, values

    def _encode(self, version: SchemaVersion, values: Sequence[Any], targets: set[int] | None) -> bytes:
        """The row; with ``targets`` (a partial row) the other columns must be None and are null."""
        sid = version.schema_id
        nullable, encoders = self._nullable[sid - 1], self._encoders[sid - 1]
        bitmap = bytearray(self._header_sizes[sid - 1] - 2)
        parts: list[bytes] = [U16.pack(sid), b""]
        for i, value in enumerate(values):
            if value is None:
                if not nullable[i] and (targets is None or i in targets):
                    column = version.columns[i]
                    raise InvalidRowError(f"column {column.name!r} ({column.type}) is NOT NULL")
                bitmap[i >> 3] |= 1 << (i & 7)
            elif targets is not None and i not in targets:
                raise InvalidRowError(f"column {version.columns[i].name!r} has a value but is not a target")
            else:
                parts.append(encoders[i](value))
        parts[1] = bytes(bitmap)
        return b"".join(parts)

    @staticmethod
    def _index(version: SchemaVersion, name: str) -> int:
        if name not in version.names:
            raise InvalidRowError(f"unknown column {name!r} (columns: {', '.join(version.names)})")
        return version.names.index(name)

    def values_of(self, row: Mapping[str, Any], schema_id: int | None = None) -> list[Any]:
        """A ``{name: value}`` mapping as a value list of ``schema_id``; unknown names refused, absent ones None."""
        version = self.schema.version(self.current_schema_id if schema_id is None else schema_id)
        names = version.names
        unknown = [k for k in row if k not in names]
        if unknown:
            raise InvalidRowError(f"unknown column {unknown[0]!r} (columns: {', '.join(names)})")
        return [row.get(name) for name in names]

    def encode_key(self, pk_values: Sequence[Any]) -> bytes:
        """The key of the primary-key values, in primary-key order."""
        encoders = self._require_key()
        if not isinstance(pk_values, (list, tuple)) or len(pk_values) != len(encoders):
            raise InvalidRowError(
                f"a key is {len(encoders)} values ({', '.join(self.schema.primary_key)}), got {pk_values!r:.100}"
            )
        parts = []
        for column, enc, value in zip(self._key_columns, encoders, pk_values, strict=True):
            if value is None:
                raise InvalidRowError(f"key column {column.name!r} ({column.type}) is null")
            parts.append(enc(value))
        return b"".join(parts)

    def key_of_row(self, values: Sequence[Any]) -> bytes:
        """The key of a row given as values (of any schema version: key columns never move)."""
        self._require_key()
        if not isinstance(values, (list, tuple)) or len(values) <= max(self._pk):
            raise InvalidRowError(f"a row of this table has the key columns at {self._pk}, got {values!r:.100}")
        return self.encode_key([values[i] for i in self._pk])

    # ------------------------------------------------------------ bytes -> checked / values
    def _plan(self, data: bytes) -> RowPlan:
        """The plan of ``data``'s (schema id, bitmap); InvalidRowError / UnknownSchemaIdError for a bad header."""
        if data.__class__ is bytes:
            try:  # the hot path: a header seen before (schema id 0 slices to b"", never a key)
                plan = self._plans.get(data[: self._head_by_id[(data[0] << 8) | data[1]]])
            except IndexError:
                plan = None
            if plan is not None:
                return plan
        return self._compile(data)

    def _compile(self, data: bytes) -> RowPlan:
        if not isinstance(data, bytes):
            raise InvalidRowError(f"a row is bytes, got {type(data).__name__}")
        if len(data) < 2:
            raise InvalidRowError(f"row of {len(data)} bytes has no schema id")
        sid = (data[0] << 8) | data[1]
        if not 1 <= sid < len(self._head_by_id):
            if sid == 0:
                raise InvalidRowError("row has schema id 0")
            raise UnknownSchemaIdError(f"row has schema id {sid}; this table knows 1..{len(self._head_by_id) - 1}")
        head = data[: self._head_by_id[sid]]
        if len(head) < self._head_by_id[sid]:
            raise InvalidRowError(f"row of {len(data)} bytes is shorter than its null bitmap")
        plan = compile_plan(self.schema.versions[sid - 1], head[2:], self._pk)
        if len(self._plans) >= MAX_CACHED_PLANS:
            self._plans.clear()
        self._plans[head] = plan
        return plan

    def validate_row(self, data: bytes, targets: Sequence[int] | None = None) -> int:
        """Check a row's bytes completely (header, every value, no trailing bytes); its schema id.

        With ``targets`` (a partial update's ascending column indexes) the row is a partial row: the targets
        must include the primary key, every other column must be null, and NOT NULL may be null there."""
        plan = self._plan(data)
        if targets is None:
            if plan.null_violations:
                raise self._null_violation(data, plan.null_violations[0])
        else:
            self._check_partial(data, plan, targets)
        self._check_values(plan, data)
        return plan.schema_id

    def validate_row_key(self, data: bytes) -> tuple[int, bytes]:
        """``validate_row`` and ``key_of_row_bytes`` in one call (the leader's per-row check)."""
        plan = self._plan(data)
        if plan.null_violations:
            raise self._null_violation(data, plan.null_violations[0])
        self._check_values(plan, data)
        return plan.schema_id, self._key(plan, data)

    @staticmethod
    def _check_values(plan: RowPlan, data: bytes) -> None:
        pos = plan.header_size
        for step in plan.validate_steps:
            pos = step(data, pos)
        end = pos + plan.tail
        if end != len(data):
            if end > len(data):
                raise InvalidRowError(f"row truncated: {len(data)} bytes, the layout needs {end}")
            raise InvalidRowError(f"row has {len(data) - end} bytes after its last column")

    def _null_violation(self, data: bytes, index: int) -> InvalidRowError:
        column = self.schema.versions[((data[0] << 8) | data[1]) - 1].columns[index]
        return InvalidRowError(f"column {column.name!r} ({column.type}) is NOT NULL but the row has null")

    def _check_partial(self, data: bytes, plan: RowPlan, targets: Sequence[int]) -> None:
        columns = self.schema.versions[((data[0] << 8) | data[1]) - 1].columns
        if not targets or any(a >= b for a, b in pairwise(targets)) or targets[0] < 0:
            raise InvalidRowError(f"partial-update targets must be ascending column indexes, got {list(targets)[:20]}")
        if targets[-1] >= len(columns):
            raise InvalidRowError(f"target column {targets[-1]} is past the row's last column ({len(columns) - 1})")
        wanted = set(targets)
        missing = [columns[i].name for i in self._pk if i not in wanted]
        if missing:
            raise InvalidRowError(f"a partial update's targets must include the primary key; {missing[0]!r} is not one")
        stray = [columns[i].name for i in plan.present if i not in wanted]
        if stray:
            raise InvalidRowError(f"column {stray[0]!r} is not a target of the partial update but has a value")
        for i in plan.null_violations:
            if i in wanted:
                raise self._null_violation(data, i)

    def present_columns(self, data: bytes) -> tuple[int, ...]:
        """Indexes of the columns a row's bitmap marks non-null."""
        return self._plan(data).present

    def key_of_row_bytes(self, row: bytes) -> bytes:
        """The key of a row's bytes, cut out of them (the row is checked by ``validate_row`` first)."""
        return self._key(self._plan(row), row)

    def _key(self, plan: RowPlan, row: bytes) -> bytes:
        slices = plan.key_slices
        if slices is None:
            return self._walk_key(plan, row)
        if plan.key_end > len(row):
            raise InvalidRowError(f"row of {len(row)} bytes is too short for its key")
        if len(slices) == 1:
            start, end = slices[0]
            return row[start:end]
        return b"".join([row[start:end] for start, end in slices])

    def _walk_key(self, plan: RowPlan, row: bytes) -> bytes:
        if not plan.key_parts:
            raise TableTypeMismatchError("the table has no primary key")
        parts: list[bytes] = [b""] * plan.key_parts
        pos = plan.header_size
        try:
            for unpack, size, slot in plan.key_walk:
                end = pos + size if unpack is None else pos + size + unpack(row, pos)[0]
                if slot >= 0:
                    parts[slot] = row[pos:end]
                pos = end
        except struct.error:
            raise InvalidRowError(f"row of {len(row)} bytes is too short for its key") from None
        if pos > len(row):
            raise InvalidRowError(f"row of {len(row)} bytes is too short for its key")
        return b"".join(parts)

    def decode_row(self, data: bytes, *, partial: bool = False) -> tuple[int, list[Any]]:
        """The schema id and the values (None for nulls) of a row's bytes, checked as ``validate_row`` does
        (``partial``: NOT NULL columns may be null, as in a partial update's row)."""
        plan = self._plan(data)
        if plan.null_violations and not partial:
            raise self._null_violation(data, plan.null_violations[0])
        out: list[Any] = []
        pos = plan.header_size
        for step in plan.decode_steps:
            pos = step(data, pos, out)
        if pos != len(data):
            raise InvalidRowError(f"row has {len(data) - pos} bytes after its last column")
        if len(plan.present) != plan.column_count:
            values: list[Any] = [None] * plan.column_count
            for i, value in zip(plan.present, out, strict=True):
                values[i] = value
            out = values
        return (data[0] << 8) | data[1], out

    def decode_current(self, data: bytes, *, partial: bool = False) -> list[Any]:
        """The values of a row under the current schema: columns added after its version are None."""
        _, values = self.decode_row(data, partial=partial)
        missing = len(self.schema.current) - len(values)
        return values + [None] * missing if missing else values

    def decode_key(self, key: bytes) -> list[Any]:
        """The primary-key values of a key's bytes; InvalidRowError unless they are exactly one valid key."""
        self._require_key()
        if not isinstance(key, bytes):
            raise InvalidRowError(f"a key is bytes, got {type(key).__name__}")
        values, pos = [], 0
        for decode in self._key_decoders:
            value, pos = decode(key, pos)
            values.append(value)
        if pos != len(key):
            raise InvalidRowError(f"key has {len(key) - pos} bytes after its last column")
        return values

    def validate_key(self, key: bytes) -> None:
        """Refuse bytes that are not exactly one key of this table (a delete's only input)."""
        self.decode_key(key)

    def bucket_key_bytes(self, key_bytes: bytes) -> bytes:
        """The bucket-key prefix of a (valid) key."""
        self._require_key()
        if self._bucket_key_count == len(self._pk):
            return key_bytes
        if self._bucket_key_size is not None:
            return key_bytes[: self._bucket_key_size]
        pos = 0
        for decode in self._key_decoders[: self._bucket_key_count]:
            _, pos = decode(key_bytes, pos)
        return key_bytes[:pos]

    def bucket_of(self, key_bytes: bytes, num_buckets: int) -> int:
        """CRC-32C of the bucket-key bytes mod ``num_buckets`` (as the log producer's ``bucket_for_key``)."""
        return crc32c.crc32c(self.bucket_key_bytes(key_bytes)) % num_buckets

    def _require_key(self) -> tuple:
        if not self._pk:
            raise TableTypeMismatchError("the table has no primary key")
        return self._key_encoders


def _key_decoder(name: str, dtype: DataType) -> Callable[[bytes, int], tuple[Any, int]]:
    """``decode(key, pos) -> (value, end)`` for one key column, checking the value."""
    column = Column(name, dtype)
    if is_var(dtype):
        prefix = length_prefix(dtype)
        to_py = payload_to_py(name, dtype)

        def var(key: bytes, pos: int) -> tuple[Any, int]:
            try:
                (length,) = prefix.unpack_from(key, pos)
            except struct.error:
                raise truncated(column) from None
            start = pos + prefix.size
            if start + length > len(key):
                raise truncated(column)
            return to_py(key[start : start + length]), start + length

        return var
    fixed = struct.Struct(">" + dtype.fixed_format)
    convert = fixed_to_py(name, dtype)

    def fixed_value(key: bytes, pos: int) -> tuple[Any, int]:
        try:
            (raw,) = fixed.unpack_from(key, pos)
        except struct.error:
            raise truncated(column) from None
        return (raw if convert is None else convert(raw)), pos + fixed.size

    return fixed_value


@functools.lru_cache(maxsize=256)
def row_codec(table_schema: TableSchema) -> RowCodec:
    """The shared codec of a schema (schemas are frozen and hashable; compiling one costs ~ms)."""
    return RowCodec(table_schema)
