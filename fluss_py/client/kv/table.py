"""A primary-key table as the KV client sees it, and the user's rows and keys as the table's values.

``KvTable`` binds a table's ``TableInfo`` to its schema's ``RowCodec`` (docs/primary-key-tables.md §3): the
encoded key of a row, its bucket (CRC-32C of the bucket key modulo the bucket count, §3.2), and the
conversions between what users pass (a dict by column name, or a list in column order; a key as a dict, a list
in primary-key order or a bare value for a one-column key) and the codec's value lists. Every conversion
refuses bad input with INVALID_ROW naming the column, before anything is queued or sent.

``KvTables`` resolves and caches ``KvTable``s from a ``ClusterMetadata``; a table without a primary key is
TABLE_TYPE_MISMATCH, a partitioned table PARTITIONED_TABLE. Owned by one event loop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fluss_py.client.metadata import ClusterMetadata, TableInfo, is_partitioned
from fluss_py.errors import InvalidRowError, PartitionedTableError, TableTypeMismatchError, UnknownSchemaIdError
from fluss_py.schema.row import RowCodec, row_codec
from fluss_py.schema.schema import Column, SchemaVersion, TableSchema
from fluss_py.schema.values import encoder
from fluss_py.types import TableBucket, TablePath


@dataclass(frozen=True, slots=True)
class KvTable:
    """One primary-key table's info, schema and codec (immutable: a metadata change makes a new one)."""

    info: TableInfo
    schema: TableSchema
    codec: RowCodec

    @property
    def path(self) -> TablePath:
        return self.info.path

    @property
    def columns(self) -> list[str]:
        return [c.name for c in self.schema.current.columns]

    def bucket_of(self, key: bytes) -> int:
        return self.codec.bucket_of(key, self.info.num_buckets)

    def table_bucket(self, key: bytes) -> TableBucket:
        return TableBucket(self.info.table_id, self.bucket_of(key))

    # ---------------------------------------------------------------- user input -> values
    def row_values(self, row: Mapping[str, Any] | Sequence[Any]) -> Sequence[Any]:
        """The current schema's values of ``row``: a dict (absent columns null) or a list of every column (the
        codec checks its length and every value when it encodes it)."""
        return self.codec.values_of(row) if isinstance(row, Mapping) else row

    def key_values(self, key: Any) -> list[Any]:
        """Primary-key values in primary-key order from a dict, a list, or a bare value (one-column key)."""
        return _named_values(self.schema.primary_key, key, "primary key", self.path)

    def prefix_values(self, prefix: Any) -> list[Any]:
        """Bucket-key values (the prefix of a prefix lookup) from a dict, a list, or a bare value."""
        return _named_values(self.schema.bucket_key_names, prefix, "bucket key", self.path)

    def check_partial(self, names: Sequence[str]) -> None:
        """Refuse partial-update column ``names`` that are not columns or leave out part of the primary key."""
        columns = self.columns
        unknown = [n for n in names if n not in columns]
        if unknown:
            raise InvalidRowError(
                f"unknown column(s) {', '.join(unknown)} of {self.path}; columns: {', '.join(columns)}"
            )
        missing = [n for n in self.schema.primary_key if n not in names]
        if missing:
            raise InvalidRowError(
                f"a partial update of {self.path} must name the whole primary key; missing: {', '.join(missing)}"
            )

    def encode_prefix(self, values: Sequence[Any]) -> bytes:
        """The encoded bucket key of bucket-key ``values``: the byte prefix of every key it leads (§3.2)."""
        names = self.schema.bucket_key_names
        if len(values) != len(names):
            raise InvalidRowError(f"the bucket key of {self.path} is {len(names)} value(s) ({', '.join(names)})")
        parts = []
        for column, value in zip(_columns(self.schema.current, names), values, strict=True):
            if value is None:
                raise InvalidRowError(f"key column {column.name!r} ({column.type}) is null")
            parts.append(encoder(column.name, column.type)(value))
        return b"".join(parts)

    # ---------------------------------------------------------------- values -> user output
    def to_dict(self, values: Sequence[Any]) -> dict[str, Any]:
        return dict(zip(self.columns, values, strict=True))

    def decode(self, row: bytes) -> dict[str, Any]:
        """A stored row (any schema version this client knows) as a dict of the current schema's columns."""
        return self.to_dict(self.codec.decode_current(row))


def _columns(version: SchemaVersion, names: Sequence[str]) -> list[Column]:
    return [version.columns[version.index(n)] for n in names]


def _named_values(names: Sequence[str], given: Any, what: str, path: TablePath) -> list[Any]:
    if isinstance(given, Mapping):
        extra = [str(k) for k in given if k not in names]
        missing = [n for n in names if n not in given]
        if extra or missing:
            raise InvalidRowError(
                f"the {what} of {path} is ({', '.join(names)})"
                + (f"; missing {', '.join(missing)}" if missing else "")
                + (f"; not in it: {', '.join(extra)}" if extra else "")
            )
        return [given[n] for n in names]
    if isinstance(given, (list, tuple)):
        if len(given) != len(names):
            raise InvalidRowError(f"the {what} of {path} is ({', '.join(names)}): {len(given)} value(s) given")
        return list(given)
    if len(names) != 1:
        raise InvalidRowError(f"the {what} of {path} has {len(names)} columns ({', '.join(names)}): give them all")
    return [given]


def kv_table(info: TableInfo) -> KvTable:
    """``info`` as a primary-key table, or TABLE_TYPE_MISMATCH / PARTITIONED_TABLE."""
    if is_partitioned(info):
        raise PartitionedTableError(f"{info.path} is partitioned: primary-key operations need a table of its own")
    schema = info.schema
    if schema is None or not schema.is_primary_key_table:
        raise TableTypeMismatchError(f"{info.path} is a log table: it has no primary key to upsert or look up by")
    return KvTable(info, schema, row_codec(schema))  # one compiled codec per schema, shared


class KvTables:
    """``KvTable``s of one ``ClusterMetadata``, rebuilt when the metadata changes (see module docstring)."""

    def __init__(self, metadata: ClusterMetadata, wait_timeout: float) -> None:
        self._metadata = metadata
        self._wait_timeout = wait_timeout
        self._cache: dict[TablePath, KvTable] = {}
        self._version = -1

    async def get(self, table: TablePath | str) -> KvTable:
        path = TablePath.parse(table) if isinstance(table, str) else table
        md = self._metadata
        if self._version == md.version:
            cached = self._cache.get(path)
            if cached is not None:
                return cached
        info = md.table(path)
        if info is None:
            info = await md.wait_for_table(path, self._wait_timeout)
        if self._version != md.version:  # any change may have dropped, recreated or altered a table
            self._version = md.version
            self._cache = {}
        table_ = self._cache[path] = kv_table(info)
        return table_

    async def decode(self, table: KvTable, row: bytes) -> dict[str, Any]:
        """``table.decode(row)``; a row of a schema id the client does not know yet (a column was just added)
        refreshes the metadata once and decodes with the new schema."""
        try:
            return table.decode(row)
        except UnknownSchemaIdError:
            await self._metadata.update()
            return (await self.get(table.path)).decode(row)
