"""The primary-key workload (issue 34's acceptance), shared by ``fluss-py verify --workload kv`` and the fault
tests: writers upsert and delete random keys, a reader looks keys up, everything goes to the history in the
events of ``kv_checker.py``; after healing ``kv_final`` reads what the cluster holds.

    row: k INT (the key), p INT (the writer), s BIGINT (its write sequence), pad STRING   primary key k

Writer ``p`` owns the keys ``k % writers == p`` and writes one at a time (the next write is sent once the last
is answered), so a key's writes are ordered by their sequence, and with acks=all an acknowledgement means
committed. Its sequence numbers all of its writes, deletes included. ``emit(**event)`` records an event; the
caller stamps nothing: events carry ``t`` (seconds since ``t0``, CLOCK_MONOTONIC).

Coroutines of one event loop; each client object is its own (its own producer: its own writer id).
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from typing import Any

from fluss_py.client import Admin, Consumer, ConsumerOptions, LookupOptions, ProducerOptions
from fluss_py.client.admin import OffsetSpec
from fluss_py.client.kv import Lookuper, Upserter
from fluss_py.errors import FlussError
from fluss_py.schema.changelog import change_rows, decode_change
from fluss_py.schema.row import row_codec
from fluss_py.schema.schema import parse_schema
from fluss_py.security.identity import PeerIdentity
from fluss_py.verify.kv_checker import KV_ACK, KV_FAIL, KV_READ, KV_SEND, Write

KV_SCHEMA = parse_schema("k INT, p INT NOT NULL, s BIGINT NOT NULL, pad STRING", primary_key="k")
PAD = "x" * 64

Emit = Callable[..., None]


class Clock:
    def __init__(self, t0: float) -> None:
        self.t0 = t0

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 4)


async def kv_writer(
    bootstrap: str,
    table: str,
    p: int,
    writers: int,
    keys: int,
    emit: Emit,
    clock: Clock,
    stopping: Callable[[], bool],
    *,
    rate: float = 0.0,
    delete_ratio: float = 0.2,
    options: ProducerOptions | None = None,
    security: PeerIdentity | None = None,
    seed: int = 0,
) -> int:
    """Writer ``p`` until ``stopping()``; returns how many writes it sent. ``rate`` 0: as fast as answered."""
    rng = random.Random(seed * 1000 + p)
    own = [k for k in range(keys) if k % writers == p]
    s = 0
    async with Upserter(bootstrap, table, options or ProducerOptions(), security=security) as up:
        next_at = time.monotonic()
        while not stopping():
            key = rng.choice(own)
            op = "d" if rng.random() < delete_ratio else "u"
            emit(k=KV_SEND, t=clock.now(), p=p, s=s, key=key, op=op)
            try:
                if op == "u":
                    md = await up.upsert_and_wait({"k": key, "p": p, "s": s, "pad": PAD})
                else:
                    md = await up.delete_and_wait(key)
                emit(k=KV_ACK, t=clock.now(), p=p, s=s, b=md.bucket.bucket, o=md.offset)
            except FlussError as e:
                emit(k=KV_FAIL, t=clock.now(), p=p, s=s, e=repr(e)[:200])
            s += 1
            if rate > 0:
                next_at += 1.0 / rate
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
    return s


async def kv_reader(
    bootstrap: str,
    table: str,
    keys: int,
    emit: Emit,
    clock: Clock,
    stopping: Callable[[], bool],
    *,
    batch: int = 8,
    rate: float = 0.0,
    options: LookupOptions | None = None,
    security: PeerIdentity | None = None,
    seed: int = 0,
) -> tuple[int, int]:
    """Look up ``batch`` random keys at a time until ``stopping()``: (lookups answered, lookups failed). A
    failed lookup (e.g. timed out during a failover) is no violation and is not recorded."""
    rng = random.Random(seed * 1000 + 999)
    answered = failed = 0
    async with Lookuper(bootstrap, options or LookupOptions(), security=security) as lk:
        next_at = time.monotonic()
        while not stopping():
            ks = rng.sample(range(keys), min(batch, keys))
            t0 = clock.now()
            try:
                rows = await lk.lookup_many(table, ks)
            except FlussError:
                failed += len(ks)
            else:
                t1 = clock.now()
                for key, row in zip(ks, rows, strict=True):
                    w = None if row is None else [row["p"], row["s"]]
                    emit(k=KV_READ, t0=t0, t=t1, key=key, w=w)
                answered += len(ks)
            if rate > 0:
                next_at += 1.0 / rate
                await asyncio.sleep(max(0.0, next_at - time.monotonic()))
            else:
                await asyncio.sleep(0)
    return answered, failed


def write_of(row: dict[str, Any] | None) -> Write | None:
    return None if row is None else (int(row["p"]), int(row["s"]))


async def kv_final(
    bootstrap: str, table: str, keys: int, timeout: float, security: PeerIdentity | None = None
) -> dict[str, Any]:
    """After healing: every key's row (lookups through the leaders), the committed changelog's new rows and
    each bucket's high watermark: ``{"table_id", "hw": {b: hw}, "final": {k: (p, s) | None}, "committed"}``."""
    async with Admin(bootstrap, request_timeout=timeout, security=security) as admin:
        offsets = await admin.list_offsets(table, spec=OffsetSpec.LATEST, timeout=timeout)
        info = await admin.get_table_info(table)
    hw = {b: o.high_watermark for b, o in offsets.items()}
    async with Lookuper(bootstrap, LookupOptions(request_timeout=timeout), security=security) as lk:
        rows = await lk.lookup_many(table, range(keys))
    committed: set[Write] = set()
    codec = row_codec(KV_SCHEMA)
    async with Consumer(bootstrap, ConsumerOptions(auto_offset_reset="earliest"), security=security) as consumer:
        await consumer.assign(table)
        read = dict.fromkeys(hw, 0)
        deadline = time.monotonic() + timeout
        while any(read[b] < hw[b] for b in hw):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the changelog read stopped at {read}, high watermarks {hw}")
            for r in await consumer.poll(timeout=0.2):
                b = r.bucket.bucket
                if r.offset >= hw[b]:
                    continue
                read[b] = max(read[b], r.offset + 1)
                for label, row in change_rows(decode_change(r.value or b"")):
                    if label in ("+I", "+U"):
                        _, values = codec.decode_row(row)
                        committed.add((values[1], values[2]))
    return {
        "table_id": info.table_id,
        "hw": hw,
        "final": {k: write_of(row) for k, row in enumerate(rows)},
        "committed": committed,
    }


# ---------------------------------------------------------------- as the verify workload process's modes
async def run_kv(args: Any, history: Any, stop: Any) -> None:
    """``workload run --workload kv``: ``args.producers`` writers at ``args.rate`` writes/s each and one reader,
    until the file ``stop`` exists; every write is answered before it returns (one at a time)."""
    clock = Clock(args.t0)
    stopping = stop.exists
    options = ProducerOptions(acks=-1, request_timeout=args.request_timeout, delivery_timeout=args.delivery_timeout)
    writers = [
        kv_writer(
            args.bootstrap,
            args.table,
            p,
            args.producers,
            args.keys,
            history.write,
            clock,
            stopping,
            rate=args.rate,
            options=options,
        )
        for p in range(args.producers)
    ]
    reader = kv_reader(args.bootstrap, args.table, args.keys, history.write, clock, stopping, rate=args.rate,
                       options=LookupOptions(request_timeout=args.request_timeout))  # fmt: skip
    await asyncio.gather(*writers, reader)


async def create_kv(args: Any) -> None:
    async with Admin(args.bootstrap, request_timeout=args.request_timeout) as admin:
        await admin.create_table(args.table, num_buckets=args.buckets, replication_factor=args.rf,
                                 schema=KV_SCHEMA, ignore_if_exists=True)  # fmt: skip
        await admin.list_offsets(args.table, timeout=args.request_timeout)  # every bucket has a leader


async def final_kv(args: Any) -> dict[str, Any]:
    """``workload final --workload kv``: ``kv_final`` as JSON (keys as strings, writes as lists)."""
    got = await kv_final(args.bootstrap, args.table, args.keys, args.request_timeout * 4)
    return {
        "table_id": got["table_id"],
        "hw": got["hw"],
        "final": {str(k): None if w is None else list(w) for k, w in got["final"].items()},
        "committed": sorted(list(w) for w in got["committed"]),
    }
