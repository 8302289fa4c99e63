"""``fluss-py upsert | delete | lookup | scan``: the rows of primary-key tables (docs/primary-key-tables.md).

    fluss-py upsert TABLE [--format json|csv] [--partial COL,COL] [--acks all|1] [--print-offsets]
    fluss-py delete TABLE [--format json|csv] [--key COL=VALUE ...] [--acks all|1] [--print-offsets]
    fluss-py lookup TABLE (--key COL=VALUE ... | --prefix COL=VALUE ...)
    fluss-py scan TABLE [--bucket N ...] [--page-rows N]

``upsert`` reads rows from stdin: JSON lines (one object per line, by column name; absent columns are null) or
CSV (a header line of column names, then one row per line; an empty field is null). ``--partial a,b`` changes
only those columns of each row (the whole primary key among them; the others keep their stored value).
``delete`` reads keys the same way (the primary-key columns only), or takes one key from ``--key`` options.
Text values: numbers or strings for numeric and DECIMAL columns, ``YYYY-MM-DD`` dates, ISO timestamps,
base64 for BYTES. The whole input is read and checked before anything is sent: a bad line is reported as
``line N: ...`` and nothing is written (exit 2). Then every row is upserted (acks=all by default) and a
summary goes to stderr (``upserted N, acknowledged N, failed N, ...``); exit 1 if any failed.

``lookup`` prints the row of the key given by ``--key`` (every primary-key column once) as one JSON line, or
exits 1 with ``no row ...`` on stderr; with ``--prefix`` (the bucket-key columns) every matching row, one JSON
line each. ``scan`` prints the rows of the buckets named (default: all), one JSON line each, in key order per
bucket. Bad input (a log table, an unknown column, a value of the wrong type) is one line and exit 2.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sys
import time
from collections.abc import Sequence
from typing import Any

from fluss_py.cli.args import int_in
from fluss_py.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Context,
    add_connection_args,
    client_command,
    table_path,
)
from fluss_py.cli.produce import Tally
from fluss_py.client.kv import Deleter, KvTable, Lookuper, Upserter
from fluss_py.client.options import ProducerOptions, parse_acks
from fluss_py.config import MAX_BUCKETS
from fluss_py.errors import ErrorCode, FlussError, InvalidRowError
from fluss_py.schema.text import parse_key_args, row_from_csv, row_from_json, row_to_json, value_from_text

# Input errors of these codes are the user's: one line, exit 2 (not 1: nothing failed, nothing was written).
_USAGE_CODES = (
    ErrorCode.INVALID_ROW,
    ErrorCode.TABLE_TYPE_MISMATCH,
    ErrorCode.INVALID_REQUEST,
    ErrorCode.PARTITIONED_TABLE,
    ErrorCode.TABLE_NOT_EXIST,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    up = add_connection_args(subparsers.add_parser("upsert", help="upsert rows (JSON lines or CSV on stdin)"))
    _writer_args(up)
    up.add_argument("--partial", metavar="COL,COL", help="change only these columns (with the whole primary key)")
    up.set_defaults(func=client_command(cmd_upsert))

    de = add_connection_args(subparsers.add_parser("delete", help="delete rows by key (stdin, or --key)"))
    _writer_args(de)
    de.add_argument("--key", action="append", metavar="COL=VALUE", help="the key to delete (each key column once)")
    de.set_defaults(func=client_command(cmd_delete))

    lk = add_connection_args(subparsers.add_parser("lookup", help="print the row of a key (or of a key prefix)"))
    lk.add_argument("table", help="db.table or table (database fluss)")
    how = lk.add_mutually_exclusive_group(required=True)
    how.add_argument("--key", action="append", metavar="COL=VALUE", help="a primary-key column's value (repeat)")
    how.add_argument("--prefix", action="append", metavar="COL=VALUE", help="a bucket-key column's value (repeat)")
    lk.set_defaults(func=client_command(cmd_lookup))

    sc = add_connection_args(subparsers.add_parser("scan", help="print the rows of buckets, in key order"))
    sc.add_argument("table", help="db.table or table (database fluss)")
    sc.add_argument("--bucket", type=int_in(0, MAX_BUCKETS - 1), action="append", metavar="N",
                    help="scan this bucket (repeatable; default: every bucket)")  # fmt: skip
    sc.add_argument("--page-rows", type=int_in(1, 100_000), default=1000, metavar="N", help="rows per request")
    sc.set_defaults(func=client_command(cmd_scan))


def _writer_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("table", help="db.table or table (database fluss)")
    p.add_argument("--format", choices=("json", "csv"), default="json", help="stdin format (default: %(default)s)")
    p.add_argument("--acks", choices=("all", "1"), default="all", help="default: %(default)s")
    p.add_argument("--print-offsets", action="store_true", help="print <bucket>\\t<offset>\\t<line> per ack")


def _usage(e: FlussError, where: str = "") -> CliError:
    return CliError(f"{where}{e.message}", EXIT_USAGE)


async def _resolve(writer_or_reader: Upserter | Deleter | Lookuper, table: str) -> KvTable:
    try:
        if isinstance(writer_or_reader, Lookuper):
            return await writer_or_reader.table(table_path(table))
        return await writer_or_reader.table()
    except FlussError as e:
        if e.code in _USAGE_CODES:
            raise _usage(e) from None
        raise


# ---------------------------------------------------------------- input
def read_rows(
    t: KvTable, text: str, fmt: str, *, keys_only: bool = False, partial: Sequence[str] = ()
) -> list[tuple[str, list[Any]]]:
    """(line, values) per input row, each converted and checked against the current schema; CliError (exit 2)
    naming the first bad line. With ``keys_only`` a row names the primary-key columns only and the values are
    the key's, in primary-key order."""
    version = t.schema.current
    pk = t.schema.pk_indexes
    out: list[tuple[str, list[Any]]] = []
    header: list[str] | None = None
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            if fmt == "json":
                obj = _json_object(line, n)
                values, names = row_from_json(version, obj), list(obj)
            else:
                fields = next(csv.reader([line]))
                if header is None:
                    header = names = fields
                    if keys_only:
                        _only_key_columns(t, names)
                    continue
                values = row_from_csv(version, fields, header)
                names = header
            if keys_only:
                _only_key_columns(t, names)
                values = [values[i] for i in pk]
                t.codec.encode_key(values)  # every key column present and of its type
            elif partial:
                t.codec.encode_partial_row(values, partial)  # the target columns of their types, no others
            else:
                t.codec.encode_row(values)  # every column of its type, NOT NULL ones present
        except FlussError as e:
            raise _usage(e, f"line {n}: ") from None
        out.append((line, values))
    return out


def _json_object(line: str, n: int) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        raise CliError(f"line {n}: not JSON: {e.msg} at column {e.colno}", EXIT_USAGE) from None
    if not isinstance(obj, dict):
        raise CliError(f"line {n}: a JSON object is expected, not {type(obj).__name__}", EXIT_USAGE)
    return obj


def _only_key_columns(t: KvTable, names: Any) -> None:
    extra = [str(n) for n in names if n not in t.schema.primary_key]
    if extra:
        raise InvalidRowError(
            f"a key of {t.path} names only its primary key ({', '.join(t.schema.primary_key)}); "
            f"not: {', '.join(extra)[:200]}"
        )


def _stdin_text() -> str:
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError as e:
        raise CliError(f"stdin is not UTF-8: {e}", EXIT_USAGE) from None


# ---------------------------------------------------------------- writes
def _producer_options(args: argparse.Namespace) -> ProducerOptions:
    return ProducerOptions(acks=parse_acks(args.acks))


async def _write(
    args: argparse.Namespace, ctx: Context, writer: Deleter, rows: list[tuple[str, list[Any]]], what: str
) -> int:
    tally = Tally(args.print_offsets)
    pending: set[asyncio.Future[Any]] = set()
    try:
        for line, values in rows:
            started = time.monotonic()
            if isinstance(writer, Upserter):
                fut = await writer.upsert(values)
            else:
                fut = await writer.delete(values)
            tally.sent += 1
            text = line.encode()
            fut.add_done_callback(lambda f, text=text, started=started: tally.done(text, started, f))
            pending.add(fut)
            fut.add_done_callback(pending.discard)
        await writer.close()
        if pending:
            await asyncio.wait(pending)
    finally:
        sys.stdout.flush()
        print(tally.summary().replace("sent", what, 1), file=sys.stderr)
    return EXIT_FAILED if tally.failed or tally.acked < tally.sent else EXIT_OK


async def cmd_upsert(args: argparse.Namespace, ctx: Context) -> int:
    partial = [c.strip() for c in args.partial.split(",") if c.strip()] if args.partial else []
    if args.partial is not None and not partial:
        raise CliError("--partial names at least one column", EXIT_USAGE)
    upserter = Upserter(ctx.bootstrap, table_path(args.table), _producer_options(args), partial=partial,
                        security=ctx.security)  # fmt: skip
    ctx.own(upserter.close)
    await ctx.connect(upserter.producer.metadata)
    t = await _resolve(upserter, args.table)
    if partial:
        try:
            t.check_partial(partial)
        except FlussError as e:
            raise _usage(e, "--partial: ") from None
    rows = read_rows(t, _stdin_text(), args.format, partial=partial)
    return await _write(args, ctx, upserter, rows, "upserted")


async def cmd_delete(args: argparse.Namespace, ctx: Context) -> int:
    deleter = Deleter(ctx.bootstrap, table_path(args.table), _producer_options(args), security=ctx.security)
    ctx.own(deleter.close)
    await ctx.connect(deleter.producer.metadata)
    t = await _resolve(deleter, args.table)
    if args.key:
        rows = [(" ".join(args.key), _key_args(t, args.key))]
    else:
        rows = read_rows(t, _stdin_text(), args.format, keys_only=True)
    return await _write(args, ctx, deleter, rows, "deleted")


def _key_args(t: KvTable, given: list[str]) -> list[Any]:
    try:
        values = parse_key_args(t.schema, given)
        t.codec.encode_key(values)
        return values
    except FlussError as e:
        raise _usage(e, "--key: ") from None


def _prefix_args(t: KvTable, given: list[str]) -> list[Any]:
    """``["user_id=42"]`` -> the bucket-key values, in bucket-key order; every bucket-key column once."""
    names = t.schema.bucket_key_names
    version = t.schema.current
    values: dict[str, Any] = {}
    for arg in given:
        name, sep, text = arg.partition("=")
        name = name.strip()
        if not sep or name not in names or name in values:
            raise InvalidRowError(f"give each bucket-key column ({', '.join(names)}) once as name=value: {arg[:100]!r}")
        values[name] = value_from_text(version.columns[version.index(name)], text)
    missing = [n for n in names if n not in values]
    if missing:
        raise InvalidRowError(f"bucket-key column {missing[0]!r} missing (the bucket key is {', '.join(names)})")
    prefix = [values[n] for n in names]
    t.encode_prefix(prefix)
    return prefix


# ---------------------------------------------------------------- reads
async def cmd_lookup(args: argparse.Namespace, ctx: Context) -> int:
    lookuper = Lookuper(ctx.bootstrap, security=ctx.security)
    ctx.own(lookuper.close)
    await ctx.connect(lookuper.metadata)
    t = await _resolve(lookuper, args.table)
    version = t.schema.current
    if args.key:
        row = await lookuper.lookup(t.path, _key_args(t, args.key))
        if row is None:
            print(f"fluss-py: no row of {t.path} with key {' '.join(args.key)}", file=sys.stderr)
            return EXIT_FAILED
        _print_rows(version, [row])
        return EXIT_OK
    try:
        prefix = _prefix_args(t, args.prefix)
    except FlussError as e:
        raise _usage(e, "--prefix: ") from None
    rows = await lookuper.prefix_lookup(t.path, prefix)
    _print_rows(version, rows)
    if rows.truncated:
        print(f"fluss-py: more rows match; printed the first {len(rows)}", file=sys.stderr)
    return EXIT_OK


async def cmd_scan(args: argparse.Namespace, ctx: Context) -> int:
    lookuper = Lookuper(ctx.bootstrap, security=ctx.security)
    ctx.own(lookuper.close)
    await ctx.connect(lookuper.metadata)
    t = await _resolve(lookuper, args.table)
    buckets = args.bucket if args.bucket else range(t.info.num_buckets)
    for b in buckets:
        if not 0 <= b < t.info.num_buckets:
            raise CliError(f"--bucket {b}: {t.path} has buckets 0..{t.info.num_buckets - 1}", EXIT_USAGE)
    total = 0
    for b in buckets:
        scan = lookuper.scan(t.path, b, page_rows=args.page_rows)
        while (page := await scan.next_page()) is not None:
            _print_rows(t.schema.current, page)
            total += len(page)
    print(f"Scanned {total} rows", file=sys.stderr)
    return EXIT_OK


def _print_rows(version: Any, rows: Sequence[dict[str, Any]]) -> None:
    names = [c.name for c in version.columns]
    out = [json.dumps(row_to_json(version, [row[n] for n in names]), ensure_ascii=False) for row in rows]
    if out:
        sys.stdout.write("\n".join(out) + "\n")
        sys.stdout.flush()
