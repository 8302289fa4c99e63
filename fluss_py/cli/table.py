"""``fluss-py table create|drop|list|describe``: table DDL and placement (like ``kafka-topics``).

    fluss-py table create TABLE [--buckets N] [--replication-factor N] [--property K=V ...] [--comment TEXT]
                                [--schema COLUMNS [--primary-key COL,... [--bucket-key COL,...]
                                 [--merge-engine E [--version-column COL]]]] [--if-not-exists] [--json]
    fluss-py table drop TABLE [--if-exists]
    fluss-py table alter TABLE --buckets N | --add-column 'NAME TYPE'
    fluss-py table list [--database DB] [--json]
    fluss-py table describe TABLE [--under-replicated] [--json]

TABLE is ``db.table`` or ``table`` (database ``fluss``). ``describe`` prints one row per bucket: leader,
leader epoch, replicas, ISR, under-replicated flag (ISR smaller than the replica set), HW and LEO (asked of
the bucket's leader; -1 when it did not answer), after the schema, keys and merge engine of a table with a
schema (``cli/table_schema.py``). ``describe --json``::

    {"table": "fluss.t", "table_id": 1, "num_buckets": 3, "replication_factor": 3, "properties": {},
     "schema_id": 1, "columns": [...], "primary_key": [...], "bucket_key": [...], "merge_engine": ...,
     "buckets": [{"bucket": 0, "leader": 1, "leader_epoch": 0, "bucket_epoch": 0, "replicas": [1, 2, 3],
                  "isr": [1, 2, 3], "under_replicated": false, "log_start_offset": 0,
                  "high_watermark": 10, "log_end_offset": 10, "error": ""}, ...]}

A primary-key table's buckets also carry ``kv_size_bytes`` and ``kv_rows`` (its leader's KV; -1: unknown).
"""

from __future__ import annotations

import argparse
from typing import Any

from fluss_py import config as cfg
from fluss_py.cli import table_schema
from fluss_py.cli.args import int_in, table_property
from fluss_py.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Context,
    add_connection_args,
    add_json_arg,
    client_command,
    emit_names,
    emit_table,
    ids,
    print_json,
    table_path,
)
from fluss_py.client.admin import Admin, TableDescription
from fluss_py.types import NO_LEADER, PARTITION_SEPARATOR


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("table", help="create, drop, alter, list and describe tables")
    sub = parser.add_subparsers(dest="table_command", metavar="SUBCOMMAND", required=True)

    create = add_connection_args(sub.add_parser("create", help="create a table"))
    create.add_argument("table", help="db.table or table (database fluss)")
    create.add_argument("--buckets", type=int_in(1, cfg.MAX_BUCKETS), default=0,
                        help=f"number of buckets, 1..{cfg.MAX_BUCKETS} (default: the cluster's)")  # fmt: skip
    create.add_argument("--replication-factor", type=int_in(1, cfg.MAX_REPLICATION_FACTOR), default=0,
                        help="replicas per bucket (default: the cluster's)")  # fmt: skip
    create.add_argument("--property", dest="properties", action="append", default=[], type=table_property,
                        metavar="KEY=VALUE", help="table property (docs/configuration.md)")  # fmt: skip
    create.add_argument("--comment", default="", type=_comment)
    create.add_argument("--if-not-exists", action="store_true", help="succeed if the table exists")
    part = create.add_argument_group("partitioned table (docs/partitioning.md)")
    part.add_argument("--partitioned-by", metavar="NAME", help="partition column name")
    part.add_argument("--auto-partition", choices=("hour", "day", "month"), help="time slot of a partition (UTC)")
    part.add_argument("--num-precreate", type=int_in(1, 1000), help="slots created ahead, current included")
    part.add_argument("--retention", type=int_in(0, 100_000), help="past slots kept; older are dropped")
    table_schema.add_create_args(create)
    add_json_arg(create)
    create.set_defaults(func=client_command(cmd_create))

    drop = add_connection_args(sub.add_parser("drop", help="drop a table and delete its data"))
    drop.add_argument("table")
    drop.add_argument("--if-exists", action="store_true", help="succeed if the table does not exist")
    drop.set_defaults(func=client_command(cmd_drop))

    alter = add_connection_args(sub.add_parser("alter", help="grow a table's bucket count or add a column"))
    alter.add_argument("table")
    change = alter.add_mutually_exclusive_group(required=True)
    change.add_argument("--buckets", type=int_in(1, cfg.MAX_BUCKETS),
                        help="the new bucket count, larger than the current one")  # fmt: skip
    change.add_argument("--add-column", metavar="'NAME TYPE'",
                        help="a nullable column added at the end of the table's schema")  # fmt: skip
    alter.set_defaults(func=client_command(cmd_alter))

    ls = add_connection_args(sub.add_parser("list", help="list tables"))
    ls.add_argument("--database", help="only this database (default: all)")
    add_json_arg(ls)
    ls.set_defaults(func=client_command(cmd_list))

    describe = add_connection_args(
        sub.add_parser("describe", help="per bucket: leader, epoch, replicas, ISR, under-replicated, HW, LEO")
    )
    describe.add_argument("table")
    describe.add_argument("--under-replicated", action="store_true", help="only under-replicated buckets")
    add_json_arg(describe)
    describe.set_defaults(func=client_command(cmd_describe))

    parts = add_connection_args(sub.add_parser("list-partitions", help="partitions of a partitioned table"))
    parts.add_argument("table")
    add_json_arg(parts)
    parts.set_defaults(func=client_command(cmd_list_partitions))


def _properties(pairs: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise CliError(f"--property {pair!r}: expected KEY=VALUE", EXIT_USAGE)
        out[key.strip()] = value.strip()
    return out


def _comment(text: str) -> str:
    if len(text.encode()) > cfg.MAX_TABLE_COMMENT_BYTES:
        raise argparse.ArgumentTypeError(f"longer than {cfg.MAX_TABLE_COMMENT_BYTES} bytes")
    return text


async def cmd_create(args: argparse.Namespace, ctx: Context) -> int:
    path = table_path(args.table)
    properties = {**_properties(args.properties), **partition_properties(args)}
    schema = table_schema.schema_of_args(args, properties)
    admin = await ctx.admin()
    existed = args.if_not_exists and str(path) in await _names(admin, [path.database])
    await admin.create_table(
        path,
        num_buckets=args.buckets,
        replication_factor=args.replication_factor,
        properties=properties,
        comment=args.comment,
        ignore_if_exists=args.if_not_exists,
        schema=schema,
    )
    info = await admin.get_table_info(path)
    doc = {
        "table": str(path),
        "table_id": info.table_id,
        "num_buckets": info.num_buckets,
        "replication_factor": info.replication_factor,
        "created": not existed,
    }
    if args.json:
        print_json({**doc, **table_schema.schema_document(info)})
    else:
        verb = "created" if doc["created"] else "exists:"
        kind = " primary-key" if info.is_primary_key_table else ""
        print(f"{verb}{kind} table {path} (id {info.table_id}, {info.num_buckets} buckets, "
              f"RF {info.replication_factor})")  # fmt: skip
    return EXIT_OK


def partition_properties(args: argparse.Namespace) -> dict[str, str]:
    """The table properties of the partition flags (pure); --partitioned-by and --auto-partition go together."""
    flags = (args.partitioned_by, args.auto_partition, args.num_precreate, args.retention)
    if all(f is None for f in flags):
        return {}
    if args.partitioned_by is None or args.auto_partition is None:
        raise CliError("a partitioned table needs --partitioned-by NAME and --auto-partition hour|day|month",
                       EXIT_USAGE)  # fmt: skip
    out = {cfg.TABLE_PARTITION_KEY.key: args.partitioned_by, cfg.TABLE_AUTO_PARTITION_UNIT.key: args.auto_partition}
    if args.num_precreate is not None:
        out[cfg.TABLE_AUTO_PARTITION_PRECREATE.key] = str(args.num_precreate)
    if args.retention is not None:
        out[cfg.TABLE_AUTO_PARTITION_RETENTION.key] = str(args.retention)
    return out


async def cmd_list_partitions(args: argparse.Namespace, ctx: Context) -> int:
    path = table_path(args.table)
    admin = await ctx.admin()
    prefix = f"{path}{PARTITION_SEPARATOR}"
    names = [n for n in await _names(admin, [path.database]) if n.startswith(prefix)]
    emit_names(args, sorted(names))
    return EXIT_OK


async def cmd_drop(args: argparse.Namespace, ctx: Context) -> int:
    path = table_path(args.table)
    await (await ctx.admin()).drop_table(path, ignore_if_not_exists=args.if_exists)
    print(f"dropped table {path}")
    return EXIT_OK


async def cmd_alter(args: argparse.Namespace, ctx: Context) -> int:
    path = table_path(args.table)
    if args.add_column is not None:
        column = table_schema.added_column(args.add_column)
        admin = await ctx.admin()
        await admin.add_column(path, column)
        schema = (await admin.get_table_info(path)).schema
        print(f"table {path} has column {column} (schema id {schema.current.schema_id if schema else '?'})")
        return EXIT_OK
    await (await ctx.admin()).add_buckets(path, args.buckets)
    print(f"table {path} now has {args.buckets} buckets")
    return EXIT_OK


async def cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    admin = await ctx.admin()
    databases = [args.database] if args.database else sorted(await admin.list_databases())
    names = await _names(admin, databases)
    emit_names(args, names)
    return EXIT_OK


async def _names(admin: Admin, databases: list[str]) -> list[str]:
    return [f"{db}.{t}" for db in databases for t in sorted(await admin.list_tables(db))]


def describe_document(desc: TableDescription) -> dict[str, Any]:
    """The ``describe --json`` document (module docstring)."""
    info = desc.info
    buckets = []
    for b in desc.buckets:
        loc = b.location
        buckets.append(
            {
                "bucket": loc.table_bucket.bucket,
                "leader": loc.leader,
                "leader_epoch": loc.leader_epoch,
                "bucket_epoch": loc.bucket_epoch,
                "replicas": list(loc.replicas),
                "isr": sorted(loc.isr),
                "under_replicated": under_replicated(loc.replicas, loc.isr, loc.leader),
                "log_start_offset": b.log_start_offset,
                "high_watermark": b.high_watermark,
                "log_end_offset": b.log_end_offset,
                **({"kv_size_bytes": b.kv_size_bytes, "kv_rows": b.kv_rows} if info.is_primary_key_table else {}),
                "error": b.error,
            }
        )
    return {
        "table": str(info.path),
        "table_id": info.table_id,
        "num_buckets": info.num_buckets,
        "replication_factor": info.replication_factor,
        "properties": dict(info.properties),
        **table_schema.schema_document(info),
        "buckets": buckets,
    }


def under_replicated(replicas: tuple[int, ...], isr: tuple[int, ...], leader: int) -> bool:
    """A bucket is under-replicated when its ISR is smaller than its replica set, or it has no leader."""
    return leader == NO_LEADER or len(set(isr)) < len(set(replicas))


async def cmd_describe(args: argparse.Namespace, ctx: Context) -> int:
    path = table_path(args.table)
    desc = await (await ctx.admin()).describe_table(path)
    doc = describe_document(desc)
    if args.under_replicated:
        doc["buckets"] = [b for b in doc["buckets"] if b["under_replicated"]]
    rows = [
        (
            b["bucket"],
            b["leader"] if b["leader"] != NO_LEADER else "none",
            b["leader_epoch"],
            ids(b["replicas"]),
            ids(b["isr"]),
            "yes" if b["under_replicated"] else "",
            b["high_watermark"],
            b["log_end_offset"],
            *table_schema.kv_cells(b),
            b["error"],
        )
        for b in doc["buckets"]
    ]
    title = f"{doc['table']} (id {doc['table_id']}, {doc['num_buckets']} buckets, RF {doc['replication_factor']})"
    kv = ("kv size", "kv rows") if desc.info.is_primary_key_table else ()
    columns = ("bucket", "leader", "leader epoch", "replicas", "isr", "under-replicated", "hw", "leo", *kv, "error")
    if not args.json:
        for line in table_schema.schema_lines(table_schema.schema_document(desc.info)):
            print(line)
    emit_table(args, title, columns, rows, doc)
    return EXIT_OK
