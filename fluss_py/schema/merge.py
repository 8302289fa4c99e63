"""Merge engines: what one KV input does to the stored row of its key (docs/primary-key-tables.md §2). Pure.

    engine      upsert of key k                                      delete of k        partial update
    last_row    +I if absent, else UPDATE(old, new)                  -D old; NOOP if    targets from the input,
                                                                     absent             the rest from old
    first_row   +I if absent, else NOOP (the first row is kept)      refused            refused
    versioned   +I if absent; UPDATE if new version >= old version,  refused            refused
                else NOOP

A partial update of an absent key stores the input row with every other column null: refused when one of
those is NOT NULL. A partial update of a present key is written in the table's current schema. Refusals are
InvalidRowError (the leader answers INVALID_ROW for that batch and writes nothing).

``MergeRule.from_properties`` reads and checks the table properties ``table.merge-engine`` and
``table.merge-engine.versioned.ver-column`` against the schema (ConfigError, i.e. INVALID_CONFIG).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from fluss_py import config as cfg
from fluss_py.errors import ConfigError, InvalidRowError
from fluss_py.schema.changelog import ChangeType, KvInput, KvOp
from fluss_py.schema.row import RowCodec
from fluss_py.schema.schema import TableSchema
from fluss_py.schema.types import TypeRoot

VERSION_TYPES = (TypeRoot.INT, TypeRoot.BIGINT, TypeRoot.TIMESTAMP)


class MergeEngine(Enum):
    LAST_ROW = "last_row"
    FIRST_ROW = "first_row"
    VERSIONED = "versioned"


@dataclass(frozen=True, slots=True)
class MergeRule:
    """A table's merge engine; ``version_index`` is the version column's position (VERSIONED only)."""

    engine: MergeEngine = MergeEngine.LAST_ROW
    version_column: str | None = None
    version_index: int | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str], table_schema: TableSchema | None) -> MergeRule:
        """The rule of a table's properties; ConfigError naming the key when they make no sense for the
        schema (a merge engine on a table without a primary key, a version column missing, nullable, of a
        wrong type, or given without the versioned engine)."""
        engine_key, column_key = cfg.TABLE_MERGE_ENGINE.key, cfg.TABLE_MERGE_VER_COLUMN.key
        raw_engine, raw_column = props.get(engine_key), props.get(column_key)
        if (raw_engine is not None or raw_column is not None) and (
            table_schema is None or not table_schema.is_primary_key_table
        ):
            key = engine_key if raw_engine is not None else column_key
            raise ConfigError(key, "only a primary-key table has a merge engine")
        engine = MergeEngine.LAST_ROW
        if raw_engine is not None:
            engine = MergeEngine(cfg.TABLE_MERGE_ENGINE.parse(raw_engine).lower())
        if engine is not MergeEngine.VERSIONED:
            if raw_column is not None:
                raise ConfigError(column_key, f"needs {engine_key}=versioned (it is {engine.value})")
            return cls(engine)
        if raw_column is None:
            raise ConfigError(column_key, f"{engine_key}=versioned needs a version column")
        name = cfg.TABLE_MERGE_VER_COLUMN.parse(raw_column)
        current = table_schema.current  # type: ignore[union-attr]
        if name not in current.names:
            raise ConfigError(column_key, f"no column {name!r} (columns: {', '.join(current.names)})")
        index = current.index(name)
        column = current.columns[index]
        if column.nullable or column.type.root not in VERSION_TYPES:
            raise ConfigError(
                column_key, f"the version column must be NOT NULL INT, BIGINT or TIMESTAMP; {name!r} is {column}"
            )
        return cls(engine, name, index)


def merge(rule: MergeRule, codec: RowCodec, old_row: bytes | None, inp: KvInput) -> tuple[ChangeType, bytes | None]:
    """The change one (checked) input makes to its key's stored row ``old_row`` (None: absent), and the
    row stored afterwards (None after a DELETE; None for a NOOP: the stored row stays)."""
    engine = rule.engine
    if inp.op is KvOp.DELETE:
        if engine is not MergeEngine.LAST_ROW:
            raise InvalidRowError(f"the {engine.value} merge engine refuses deletes")
        return (ChangeType.DELETE, None) if old_row is not None else (ChangeType.NOOP, None)
    if inp.op is KvOp.PARTIAL_UPSERT:
        if engine is not MergeEngine.LAST_ROW:
            raise InvalidRowError(f"the {engine.value} merge engine refuses partial updates")
        return _partial(codec, old_row, inp)
    new_row = inp.row
    if old_row is None:
        return ChangeType.INSERT, new_row
    if engine is MergeEngine.LAST_ROW:
        return ChangeType.UPDATE, new_row
    if engine is MergeEngine.FIRST_ROW:
        return ChangeType.NOOP, None
    index = rule.version_index
    new_version = codec.decode_row(new_row)[1][index]  # type: ignore[arg-type, index]
    old_version = codec.decode_row(old_row)[1][index]  # type: ignore[index]
    if new_version >= old_version:
        return ChangeType.UPDATE, new_row
    return ChangeType.NOOP, None


def _partial(codec: RowCodec, old_row: bytes | None, inp: KvInput) -> tuple[ChangeType, bytes]:
    update = codec.decode_current(inp.row, partial=True)  # type: ignore[arg-type]
    targets = inp.targets or ()
    if old_row is None:
        current = codec.schema.current
        wanted = set(targets)
        for i, column in enumerate(current.columns):
            if i not in wanted and not column.nullable:
                raise InvalidRowError(
                    f"partial update of an absent key: column {column.name!r} ({column.type}) is NOT NULL and not "
                    "a target"
                )
        return ChangeType.INSERT, codec.encode_row(update)
    merged = codec.decode_current(old_row)
    for i in targets:
        merged[i] = update[i]
    return ChangeType.UPDATE, codec.encode_row(merged)
