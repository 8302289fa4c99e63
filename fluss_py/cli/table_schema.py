"""The schema flags of ``fluss-py table create|alter|describe`` (docs/primary-key-tables.md §2).

    table create NAME --schema 'id BIGINT, name STRING, ts TIMESTAMP' --primary-key id [--bucket-key ...]
                      [--merge-engine last_row|first_row|versioned [--version-column COL]]
    table alter NAME --add-column 'c STRING'
    table describe NAME        schema (current version and id), primary key, bucket key, merge engine;
                               per bucket of a primary-key table its leader's KV size and rows

Everything that can be checked without the cluster is checked here, before anything is sent: a schema that
does not parse, a key naming no column, a bucket key that is not a prefix of the primary key, a merge engine
on a table without a primary key or a version column of the wrong type, a NOT NULL added column. Each is one
line and exit 2 (``CliError(EXIT_USAGE)``); the coordinator checks it all again.

Who may call: ``cli/table.py`` (pure helpers, no I/O).
"""

from __future__ import annotations

import argparse
from typing import Any

from fluss_py import config as cfg
from fluss_py.cli.common import EXIT_USAGE, CliError
from fluss_py.client.metadata import TableInfo
from fluss_py.common.schema_rules import check_new_table
from fluss_py.errors import FlussError
from fluss_py.schema.merge import MergeEngine
from fluss_py.schema.schema import Column, TableSchema, parse_column, parse_schema


def add_create_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("schema and primary key (docs/primary-key-tables.md)")
    group.add_argument("--schema", metavar="COLUMNS", help="e.g. 'id BIGINT, name STRING, score DOUBLE' (NOT NULL "
                       "after a type: no nulls); without it records are opaque key/value bytes")  # fmt: skip
    group.add_argument("--primary-key", metavar="COL,...", help="a primary-key table: rows are upserted and deleted "
                       "by these columns (NOT NULL)")  # fmt: skip
    group.add_argument("--bucket-key", metavar="COL,...", help="a prefix of the primary key deciding the bucket "
                       "(default: the primary key)")  # fmt: skip
    group.add_argument("--merge-engine", choices=[e.value for e in MergeEngine],
                       help="how an upsert meets the stored row (default last_row)")  # fmt: skip
    group.add_argument("--version-column", metavar="COL", help="the versioned merge engine's version column "
                       "(NOT NULL INT, BIGINT or TIMESTAMP)")  # fmt: skip


def schema_of_args(args: argparse.Namespace, properties: dict[str, str]) -> TableSchema | None:
    """The schema of ``table create``'s flags, with the merge-engine flags put into ``properties``; checked
    with the properties (``check_new_table``). CliError (exit 2) naming what is wrong."""
    if args.schema is None:
        for flag, value in (("--primary-key", args.primary_key), ("--bucket-key", args.bucket_key)):
            if value is not None:
                raise CliError(f"{flag} needs --schema (the columns it names)", EXIT_USAGE)
    if args.merge_engine is not None:
        properties[cfg.TABLE_MERGE_ENGINE.key] = args.merge_engine
    if args.version_column is not None:
        if (args.merge_engine or properties.get(cfg.TABLE_MERGE_ENGINE.key)) != MergeEngine.VERSIONED.value:
            raise CliError("--version-column goes with --merge-engine versioned", EXIT_USAGE)
        properties[cfg.TABLE_MERGE_VER_COLUMN.key] = args.version_column
    try:
        schema = None
        if args.schema is not None:
            schema = parse_schema(args.schema, args.primary_key or (), args.bucket_key or ())
        check_new_table(schema, properties)
    except FlussError as e:
        raise CliError(e.message, EXIT_USAGE) from None
    return schema


def added_column(text: str) -> Column:
    """``--add-column``'s value; CliError (exit 2) for a column that does not parse or is NOT NULL."""
    try:
        column = parse_column(text)
    except FlussError as e:
        raise CliError(f"--add-column: {e.message}", EXIT_USAGE) from None
    if not column.nullable:
        raise CliError(f"--add-column: an added column must be nullable (rows written before have none): {column}",
                       EXIT_USAGE)  # fmt: skip
    return column


def schema_document(info: TableInfo) -> dict[str, Any]:
    """The schema part of ``describe --json`` (empty for a log table without a schema)::

    {"schema_id": 2, "columns": [{"name": "id", "type": "BIGINT", "nullable": false}, ...],
     "primary_key": ["id"], "bucket_key": ["id"], "merge_engine": "last_row"}
    """
    schema = info.schema
    if schema is None:
        return {}
    doc: dict[str, Any] = {
        "schema_id": schema.current.schema_id,
        "columns": [{"name": c.name, "type": str(c.type), "nullable": c.nullable} for c in schema.current.columns],
        "primary_key": list(schema.primary_key),
        "bucket_key": list(schema.bucket_key_names),
        "merge_engine": None,
    }
    if schema.is_primary_key_table:
        props = info.properties
        doc["merge_engine"] = props.get(cfg.TABLE_MERGE_ENGINE.key, MergeEngine.LAST_ROW.value)
        if cfg.TABLE_MERGE_VER_COLUMN.key in props:
            doc["version_column"] = props[cfg.TABLE_MERGE_VER_COLUMN.key]
    return doc


def schema_lines(doc: dict[str, Any]) -> list[str]:
    """``schema_document`` for people: the columns, then the keys and merge engine of a primary-key table."""
    if not doc:
        return []
    columns = ", ".join(f"{c['name']} {c['type']}" + ("" if c["nullable"] else " NOT NULL") for c in doc["columns"])
    lines = [f"schema (id {doc['schema_id']}): {columns}"]
    if doc["primary_key"]:
        engine = doc["merge_engine"] + (f" (version column {doc['version_column']})" if "version_column" in doc
                                        else "")  # fmt: skip
        lines.append(f"primary key: {', '.join(doc['primary_key'])}; bucket key: {', '.join(doc['bucket_key'])}; "
                     f"merge engine: {engine}")  # fmt: skip
    return lines


def kv_cells(bucket: dict[str, Any]) -> tuple[str, ...]:
    """A primary-key table's bucket row: its KV size (binary units) and rows, "-" when unknown; nothing for
    another table's (no ``kv_size_bytes`` in its ``describe`` document)."""
    if "kv_size_bytes" not in bucket:
        return ()
    size, rows = bucket["kv_size_bytes"], bucket["kv_rows"]
    return (_binary(size) if size >= 0 else "-", str(rows) if rows >= 0 else "-")


def _binary(n: int) -> str:
    value, unit = float(n), "B"
    for bigger in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
