"""The client side of a verify run, as a process of its own on the client test host.

``python -m fluss_py.verify.workload MODE ...``:

    run      --bootstrap A,B --table fluss.verify --producers 3 --rate 50 --buckets 3 --t0 T --stop FILE
             --out history.jsonl      N idempotent acks=all producers, each sending ``p<n>-<seq>`` to bucket
                                      seq % buckets every 1/rate s without waiting; one consumer tails every
                                      bucket from the start. Until FILE exists; then every producer flushes
                                      (each record is answered within the delivery timeout) and it exits.
    create   --bootstrap ... --table ... --buckets 3 --rf 3          create the table (idempotent)
    final    --bootstrap ... --table ... --out final.json           {"table_id": id, "hw": {b: HW},
                                                                     "log": {b: [[o, v], ...]}}: every
                                                                     record below each bucket's HW

``--workload kv`` runs the primary-key workload instead (kv_workload.py): ``--producers`` writers upserting and
deleting ``--keys`` keys one write at a time, one reader looking them up; ``create`` makes a primary-key table;
``final`` writes ``{"table_id", "hw", "final": {key: [p, s] | null}, "committed": [[p, s], ...]}``.

Every event goes to the history as one JSON line (history.py), written as it happens, so a history of a
workload that was killed is still readable. Times are ``time.monotonic() - t0`` (CLOCK_MONOTONIC is
shared by every process of the machine, namespaces included).

Who calls: the verify runner and the network fault tests, as a subprocess under ``ip netns exec``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import IO, Any

from fluss_py.client import Admin, Consumer, ConsumerOptions, Producer, ProducerOptions, RecordMetadata
from fluss_py.client.admin import OffsetSpec
from fluss_py.verify.history import ACK, FAIL, READ, SEND, encode, value_of
from fluss_py.verify.kv_workload import create_kv, final_kv, run_kv

POLL = 0.2


class History:
    """Owns the history file of one workload process; written from the event loop's thread only."""

    def __init__(self, path: Path, t0: float) -> None:
        self.t0 = t0
        self._out: IO[str] = open(path, "a", buffering=1)  # noqa: SIM115 (closed by close())

    def now(self) -> float:
        return round(time.monotonic() - self.t0, 4)

    def write(self, **event: Any) -> None:
        self._out.write(encode({"t": self.now(), **event}))

    def close(self) -> None:
        self._out.close()


async def produce(args: argparse.Namespace, n: int, history: History, stop: Path) -> None:
    options = ProducerOptions(
        acks=-1, idempotence=True, request_timeout=args.request_timeout, delivery_timeout=args.delivery_timeout
    )
    async with Producer(args.bootstrap, options) as producer:
        seq = 0
        interval = 1.0 / args.rate
        next_at = time.monotonic()
        while not stop.exists():
            bucket = seq % args.buckets
            history.write(k=SEND, p=n, s=seq, b=bucket)
            fut = await producer.send(args.table, value_of(n, seq).encode(), bucket=bucket)
            fut.add_done_callback(lambda f, s=seq, b=bucket: _answered(history, n, s, b, f))
            seq += 1
            next_at += interval
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        await producer.flush(timeout=args.delivery_timeout + args.request_timeout)


def _answered(history: History, n: int, seq: int, bucket: int, fut: asyncio.Future[RecordMetadata]) -> None:
    if fut.cancelled():
        history.write(k=FAIL, p=n, s=seq, b=bucket, e="cancelled")
    elif fut.exception() is not None:
        history.write(k=FAIL, p=n, s=seq, b=bucket, e=repr(fut.exception())[:200])
    else:
        history.write(k=ACK, p=n, s=seq, b=bucket, o=fut.result().offset)


async def tail(args: argparse.Namespace, history: History, done: asyncio.Event) -> None:
    async with Consumer(args.bootstrap, ConsumerOptions(auto_offset_reset="earliest")) as consumer:
        await consumer.assign(args.table)
        while not done.is_set():
            for r in await consumer.poll(timeout=POLL):
                history.write(k=READ, b=r.bucket.bucket, o=r.offset, v=(r.value or b"").decode())


async def run(args: argparse.Namespace) -> int:
    history = History(Path(args.out), args.t0)
    stop = Path(args.stop)
    done = asyncio.Event()
    if args.workload == "kv":
        try:
            await run_kv(args, history, stop)
        finally:
            history.close()
        return 0
    try:
        consumer = asyncio.create_task(tail(args, history, done))
        await asyncio.gather(*(produce(args, n, history, stop) for n in range(args.producers)))
        done.set()
        await consumer
    finally:
        history.close()
    return 0


async def create(args: argparse.Namespace) -> int:
    if args.workload == "kv":
        await create_kv(args)
        return 0
    async with Admin(args.bootstrap, request_timeout=args.request_timeout) as admin:
        await admin.create_table(
            args.table, num_buckets=args.buckets, replication_factor=args.rf, ignore_if_exists=True
        )
        await admin.list_offsets(args.table, timeout=args.request_timeout)  # every bucket has a leader
    return 0


async def final(args: argparse.Namespace) -> int:
    """Read every bucket from the start up to its high watermark (asked once, after healing)."""
    if args.workload == "kv":
        Path(args.out).write_text(json.dumps(await final_kv(args)))
        return 0
    async with Admin(args.bootstrap, request_timeout=args.request_timeout) as admin:
        offsets = await admin.list_offsets(args.table, spec=OffsetSpec.LATEST, timeout=args.request_timeout)
    hw = {b: o.high_watermark for b, o in offsets.items()}
    log: dict[int, list[tuple[int, str]]] = {b: [] for b in hw}
    async with Consumer(args.bootstrap, ConsumerOptions(auto_offset_reset="earliest")) as consumer:
        await consumer.assign(args.table)
        table_id = next(iter(consumer.assignment())).table_id
        deadline = time.monotonic() + args.request_timeout * 4
        while any((log[b][-1][0] + 1 if log[b] else 0) < hw[b] for b in hw):
            if time.monotonic() > deadline:
                print(f"final read incomplete: have {[len(v) for v in log.values()]}, hw {hw}", file=sys.stderr)
                return 1
            for r in await consumer.poll(timeout=POLL):
                if r.offset < hw[r.bucket.bucket]:
                    log[r.bucket.bucket].append((r.offset, (r.value or b"").decode()))
    Path(args.out).write_text(json.dumps({"table_id": table_id, "hw": hw, "log": log}))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fluss_py.verify.workload")
    p.add_argument("mode", choices=["run", "create", "final"])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--table", default="fluss.verify")
    p.add_argument("--producers", type=int, default=3)
    p.add_argument("--rate", type=float, default=50.0, help="records per second per producer")
    p.add_argument("--buckets", type=int, default=3)
    p.add_argument("--rf", type=int, default=3)
    p.add_argument("--t0", type=float, default=None, help="time.monotonic() of the run's start")
    p.add_argument("--stop", default="stop", help="file whose existence ends the run")
    p.add_argument("--out", default="history.jsonl")
    p.add_argument("--request-timeout", type=float, default=10.0)
    p.add_argument("--delivery-timeout", type=float, default=60.0)
    p.add_argument("--workload", choices=["log", "kv"], default="log", help="log table, or primary-key table")
    p.add_argument("--keys", type=int, default=300, help="keys of the kv workload")
    args = p.parse_args(argv)
    if args.t0 is None:
        args.t0 = time.monotonic()
    return asyncio.run({"run": run, "create": create, "final": final}[args.mode](args))


if __name__ == "__main__":
    sys.exit(main())
