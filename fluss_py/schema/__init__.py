"""Table schemas, rows, keys, KV and changelog records, merge engines (docs/primary-key-tables.md). Pure:
no I/O, no asyncio; clients and servers both import it.

    types.py      DataType, TypeRoot, parse_type
    schema.py     Column, SchemaVersion, TableSchema, parse_schema
    values.py     one value <-> bytes, per type
    plan.py       compiled row layouts (per schema id and null bitmap)
    row.py        RowCodec: rows and keys <-> bytes, the leader's validate_row / key_of_row_bytes
    changelog.py  KV record values (KvOp, KvInput) and changelog record values (ChangeType, Change)
    merge.py      MergeEngine, MergeRule, merge
    text.py       rows from JSON / CSV, to JSON; key arguments

Beyond the names of the team plan (issue 34): ``RowCodec.validate_row_key`` (both checks in one call),
``RowCodec.validate_key`` (a delete's key), ``RowCodec.encode_partial_row`` (a partial update's row and
targets), ``RowCodec.values_of`` (a mapping as values), ``row_codec(schema)`` (a cached codec),
``decode_kv_record(codec, key, value)`` (the leader's whole check of one KV record); ``decode_kv_value`` and
``decode_change`` take an optional codec to check rows against the schema; ``validate_row`` takes a partial
update's targets, ``decode_row``/``decode_current`` a ``partial`` flag. ``KvInput`` and ``Change`` are
NamedTuples (fields as in the plan; cheaper to build per row than frozen dataclasses). Primary-key columns may
not be FLOAT or DOUBLE (docs §2).
"""

from fluss_py.schema.changelog import (
    Change,
    ChangeType,
    KvInput,
    KvOp,
    change_rows,
    decode_change,
    decode_kv_record,
    decode_kv_value,
    encode_change,
    encode_kv_value,
)
from fluss_py.schema.merge import MergeEngine, MergeRule, merge
from fluss_py.schema.row import RowCodec, row_codec
from fluss_py.schema.schema import Column, SchemaVersion, TableSchema, parse_column, parse_schema
from fluss_py.schema.text import parse_key_args, row_from_csv, row_from_json, row_to_json
from fluss_py.schema.types import DataType, TypeRoot, parse_type

__all__ = [
    "Change",
    "ChangeType",
    "Column",
    "DataType",
    "KvInput",
    "KvOp",
    "MergeEngine",
    "MergeRule",
    "RowCodec",
    "SchemaVersion",
    "TableSchema",
    "TypeRoot",
    "change_rows",
    "decode_change",
    "decode_kv_record",
    "decode_kv_value",
    "encode_change",
    "encode_kv_value",
    "merge",
    "parse_column",
    "parse_key_args",
    "parse_schema",
    "parse_type",
    "row_codec",
    "row_from_csv",
    "row_from_json",
    "row_to_json",
]
