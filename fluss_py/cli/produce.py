"""``fluss-py produce TABLE``: one record per stdin line (like ``kafka-console-producer``).

    fluss-py produce TABLE [--acks all|1|0] [--no-idempotence] [--key-separator SEP] [--batch-size BYTES]
                           [--linger-ms MS] [--print-offsets]

Each line (without its newline) is a record value; with ``--key-separator`` the text before the first SEP
is the key (records with the same key go to the same bucket) and the rest the value. ``--print-offsets``
writes ``<bucket>\\t<offset>\\t<line>`` to stdout as each record is acknowledged (offset -1 with acks=0).
At end of input (also when stdin closes early) every record sent is waited for, then a summary goes to
stderr: ``sent N, acknowledged N, failed N, max latency X ms``. Exit 1 if any record failed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import AsyncIterator

from fluss_py.cli.args import finite, int_in
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
from fluss_py.client import Producer, ProducerOptions, RecordMetadata
from fluss_py.client.options import parse_acks
from fluss_py.config import CLIENT_BATCH_SIZE, Range

READ_CHUNK = 256 * 1024


def register(subparsers: argparse._SubParsersAction) -> None:
    p = add_connection_args(subparsers.add_parser("produce", help="write stdin lines as records (one record per line)"))
    p.add_argument("table", help="db.table or table (database fluss)")
    p.add_argument("--acks", choices=("all", "1", "0"), default="all", help="default: %(default)s")
    p.add_argument("--no-idempotence", action="store_true", help="turn off the idempotent writer")
    p.add_argument("--key-separator", metavar="SEP", help="split each line into KEY SEP VALUE at the first SEP")
    batch = CLIENT_BATCH_SIZE.allowed
    assert isinstance(batch, Range) and batch.lo is not None and batch.hi is not None
    p.add_argument("--batch-size", type=int_in(int(batch.lo), int(batch.hi)), default=64 * 1024, metavar="BYTES",
                   help="default: %(default)s")  # fmt: skip
    p.add_argument("--linger-ms", type=finite(0.0, 60_000.0, lo_open=False), default=0.0, metavar="MS",
                   help="default: %(default)s")  # fmt: skip
    p.add_argument("--print-offsets", action="store_true", help="print <bucket>\\t<offset>\\t<line> per ack")
    p.set_defaults(func=client_command(cmd_produce))


class Tally:
    """Counts, latencies and the --print-offsets output of one produce run (callbacks on the loop)."""

    def __init__(self, print_offsets: bool) -> None:
        self.print_offsets = print_offsets
        self.sent = self.acked = self.failed = 0
        self.max_latency = 0.0
        self.first_error: BaseException | None = None
        self.out = sys.stdout.buffer

    def done(self, line: bytes, started: float, fut: asyncio.Future[RecordMetadata]) -> None:
        self.max_latency = max(self.max_latency, time.monotonic() - started)
        if fut.cancelled() or fut.exception() is not None:
            self.failed += 1
            if self.first_error is None:
                self.first_error = fut.exception() if not fut.cancelled() else asyncio.CancelledError()
            return
        self.acked += 1
        if self.print_offsets:
            md = fut.result()
            self.out.write(b"%d\t%d\t%s\n" % (md.bucket.bucket, md.offset, line))

    def summary(self) -> str:
        text = (
            f"sent {self.sent}, acknowledged {self.acked}, failed {self.failed}, "
            f"max latency {self.max_latency * 1000:.1f} ms"
        )
        if self.first_error is not None:
            text += f"; first error: {self.first_error}"
        return text


async def _lines(fd: int) -> AsyncIterator[bytes]:
    """stdin lines without their newline, read in chunks off the loop (a pipe or a terminal)."""
    loop = asyncio.get_running_loop()
    pending = b""
    while True:
        chunk = await loop.run_in_executor(None, os.read, fd, READ_CHUNK)
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r")
    if pending:
        yield pending.rstrip(b"\r")


async def cmd_produce(args: argparse.Namespace, ctx: Context) -> int:
    path = table_path(args.table)
    acks = parse_acks(args.acks)
    try:
        options = ProducerOptions(
            acks=acks,
            idempotence=False if args.no_idempotence or acks == 0 else None,
            batch_size=args.batch_size,
            linger=args.linger_ms / 1000.0,
        )
    except ValueError as e:
        raise CliError(str(e), EXIT_USAGE) from None
    sep = args.key_separator.encode() if args.key_separator else None
    producer = Producer(ctx.bootstrap, options, security=ctx.security)
    ctx.own(producer.close)
    await ctx.connect(producer.metadata)
    await producer.metadata.wait_for_table(path, ctx.connect_timeout)
    tally = Tally(args.print_offsets)
    pending: set[asyncio.Future[RecordMetadata]] = set()
    try:
        async for line in _lines(sys.stdin.fileno()):
            key, value = None, line
            if sep is not None:
                k, found, v = line.partition(sep)
                if found:
                    key, value = k, v
            started = time.monotonic()
            fut = await producer.send(path, value, key=key)
            tally.sent += 1
            fut.add_done_callback(lambda f, line=line, started=started: tally.done(line, started, f))
            pending.add(fut)
            fut.add_done_callback(pending.discard)
        await producer.close()
        if pending:  # our callbacks were added first, so they have run when this returns
            await asyncio.wait(pending)
    finally:
        sys.stdout.flush()
        print(tally.summary(), file=sys.stderr)
    return EXIT_FAILED if tally.failed or tally.acked < tally.sent else EXIT_OK
