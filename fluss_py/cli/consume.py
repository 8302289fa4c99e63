"""``fluss-py consume TABLE``: print record values, one per line (like ``kafka-console-consumer``).

    fluss-py consume TABLE [--from-beginning | --from-latest | --from-offset N | --from-timestamp MS]
                           [--bucket B ...] [--group G [--instance-id ID] [--session-timeout S]]
                           [--max-records N] [--timeout S] [--print-offsets] [--json]

Where reading starts, per bucket: with ``--group`` the group's committed offset when it has one; else
``--from-offset``/``--from-timestamp`` (these two also override committed offsets), ``--from-beginning``,
or by default the end (``--from-latest``: only records produced from now on, as Kafka's console consumer).
Output: each value on its own line; with ``--print-offsets`` ``<bucket>\\t<offset>\\t<value>``. Exits 0
after ``--max-records`` records or ``--timeout`` seconds without a new record (default: run until
interrupted); ``Processed a total of N records`` goes to stderr.

A primary-key table's records are its changelog (docs/primary-key-tables.md §3.4): each is shown as its change
type and row, ``+I {"id": 1, ...}`` (insert), ``-U`` and ``+U`` (the old and the new row of an update, at the same
offset), ``-D`` (delete); a write that changed nothing shows nothing. A log table with a schema shows each value
as its row in JSON. ``--json`` prints one JSON object per line: ``{"change": "+U", "row": {...}, "offset": N,
"bucket": B}`` for a primary-key table, ``{"row": {...}, ...}`` for a log table with a schema, and ``{"key": ...,
"value": ..., ...}`` (text, undecodable bytes escaped) otherwise.

With ``--group`` the positions are committed after the records were written and flushed (at-least-once:
a crash between writing and committing prints those records again next time, never skips any).

``--group G`` without ``--bucket`` joins G as a member (docs/consumer-groups.md): the coordinator splits
the table's buckets among the processes of G, so three such processes read a third each, and a dead
one's buckets go to the others. Assignment changes go to stderr as ``assigned: 5-0 5-3 (member M epoch
E)`` / ``revoked: ...``; a refused commit (the member was fenced) as ``commit refused: ...`` (the process then rejoins).
``--instance-id`` makes the member static: a restart within ``--session-timeout`` of a process stopped by
SIGTERM or Ctrl-C (it leaves with -2) keeps its buckets. While another member holds the instance id (it
runs, or it was killed without leaving and its session has not run out yet) the process prints one line
``fluss-py: UNRELEASED_INSTANCE_ID: ...`` and exits 1: two processes never share an instance id.
``--group G --bucket B`` keeps the offset-only use: read B, resume from and commit to G, no membership.

SIGTERM stops the process as Ctrl-C does: the last records are committed, the member leaves its group.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Callable

from fluss_py.cli.args import OFFSET_MAX, finite, int_in
from fluss_py.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Context,
    add_connection_args,
    client_command,
    table_path,
)
from fluss_py.cli.record_text import RecordText
from fluss_py.client import Consumer, ConsumerOptions
from fluss_py.config import MAX_BUCKETS
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.types import TableBucket

POLL_SLICE = 0.5


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_connection_args(subparsers.add_parser("consume", help="print records of a table, one per line"))
    p.add_argument("table", help="db.table or table (database fluss)")
    start = p.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument("--from-latest", action="store_true", help="start at the end (default)")
    start.add_argument("--from-offset", type=int_in(0, OFFSET_MAX), metavar="N",
                       help="start at offset N in every bucket read")  # fmt: skip
    start.add_argument("--from-timestamp", type=int_in(0, OFFSET_MAX), metavar="MS",
                       help="first record with timestamp >= MS")  # fmt: skip
    p.add_argument("--bucket", type=int_in(0, MAX_BUCKETS - 1), action="append", metavar="B",
                   help="read only this bucket (repeatable)")  # fmt: skip
    p.add_argument("--group", metavar="G", help="join consumer group G (with --bucket: only its offsets)")
    p.add_argument("--instance-id", metavar="ID", help="static group membership (group.instance.id)")
    p.add_argument("--session-timeout", type=finite(0.0, 3600.0), default=10.0, metavar="S",
                   help="group session timeout (10 s; the coordinator bounds it)")  # fmt: skip
    p.add_argument("--max-records", type=int_in(0, OFFSET_MAX), metavar="N", help="exit after N records")
    p.add_argument("--timeout", type=finite(0.0, 10 * 365 * 86400.0, lo_open=False), metavar="S",
                   help="exit after S seconds without a new record")  # fmt: skip
    p.add_argument("--print-offsets", action="store_true", help="print <bucket>\\t<offset>\\t<value>")
    p.add_argument("--json", action="store_true", help="one JSON object per record (per change row)")
    p.set_defaults(func=client_command(cmd_consume))


def _write(out: object, lines: list[bytes]) -> None:
    out.write(b"".join(lines))  # type: ignore[attr-defined]
    out.flush()  # type: ignore[attr-defined]


def _report(what: str, consumer: list[Consumer]) -> Callable[[set[TableBucket]], None]:
    def report(buckets: set[TableBucket]) -> None:
        names = " ".join(str(tb) for tb in sorted(buckets, key=lambda tb: (tb.table_id, tb.bucket)))
        m = consumer[0].membership if consumer else None
        member = f" (member {m.member_id} epoch {m.member_epoch})" if m is not None else ""
        print(f"{what}: {names}{member}", file=sys.stderr, flush=True)

    return report


async def _commit(consumer: Consumer) -> None:
    try:
        await consumer.commit()
    except FlussError as e:
        if e.code not in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.BUCKET_NOT_OWNED):
            raise
        print(f"commit refused: {e}", file=sys.stderr, flush=True)


async def cmd_consume(args: argparse.Namespace, ctx: Context) -> int:
    path = table_path(args.table)
    reset = "earliest" if args.from_beginning else "latest"
    member = bool(args.group) and not args.bucket
    if member and (args.from_offset is not None or args.from_timestamp is not None):
        raise CliError("--from-offset/--from-timestamp need --bucket with --group (members resume)", EXIT_USAGE)
    if args.instance_id and not member:
        raise CliError("--instance-id needs --group without --bucket", EXIT_USAGE)
    group_args: dict = {}
    me: list[Consumer] = []  # the callbacks name the member: filled once the consumer exists
    if member:
        group_args = {
            "subscribe": [path], "on_assigned": _report("assigned", me), "on_revoked": _report("revoked", me),
            "instance_id": args.instance_id or "", "session_timeout": args.session_timeout,
        }  # fmt: skip
    consumer = Consumer(
        ctx.bootstrap, ConsumerOptions(auto_offset_reset=reset), group=args.group, security=ctx.security,
        **group_args,
    )  # fmt: skip
    me.append(consumer)
    ctx.own(consumer.close)
    await ctx.connect(consumer.metadata)
    info = await consumer.metadata.wait_for_table(path, ctx.connect_timeout)
    for b in args.bucket or ():
        if not 0 <= b < info.num_buckets:
            raise CliError(f"--bucket {b}: {path} has buckets 0..{info.num_buckets - 1}", EXIT_USAGE)
    if not member:
        await consumer.assign(path, args.bucket)
    if args.from_offset is not None:
        for tb in consumer.assignment():
            consumer.seek(tb, args.from_offset)
    elif args.from_timestamp is not None:
        consumer.seek_to_timestamp(args.from_timestamp)

    shown = RecordText(info, print_offsets=args.print_offsets, as_json=args.json)
    out = sys.stdout.buffer
    total = 0
    loop = asyncio.get_running_loop()
    idle_until = None if args.timeout is None else loop.time() + args.timeout
    stop = asyncio.Event()  # SIGTERM: leave the loop within a poll slice, then close (the member leaves)
    with contextlib.suppress(NotImplementedError, RuntimeError):  # no signal handlers off the main thread
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        while (args.max_records is None or total < args.max_records) and not stop.is_set():
            wait = POLL_SLICE if idle_until is None else max(0.0, min(POLL_SLICE, idle_until - loop.time()))
            left = None if args.max_records is None else args.max_records - total
            records = await consumer.poll(timeout=wait, max_records=left)
            if records:
                _write(out, await shown.lines(records, consumer.metadata))
                total += len(records)
                if args.group:
                    await _commit(consumer)  # after the records are out: at-least-once
                if args.timeout is not None:
                    idle_until = loop.time() + args.timeout
            elif idle_until is not None and loop.time() >= idle_until:
                break
    finally:
        print(f"Processed a total of {total} records", file=sys.stderr)
    return EXIT_OK
