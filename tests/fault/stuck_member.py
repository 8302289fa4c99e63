"""A consumer-group member process whose application can get stuck (tests/fault/test_group_fencing.py).

    python tests/fault/stuck_member.py --bootstrap H:P --table T --group G --stuck-file F
                                       [--session-timeout S] [--max-poll-interval S]

It reads as ``fluss-py consume --group G --print-offsets`` does (stdout ``<bucket>\\t<offset>\\t<value>``,
stderr ``assigned: ...`` / ``revoked: ...`` with the member id and epoch, commits after each batch it
printed), except that while the file F exists the application stops calling ``poll``: it prints ``stuck``
and waits on ``asyncio.sleep``, so its heartbeat task, on the same event loop, goes on (the case of an
application stuck in its processing). When F is removed it prints ``unstuck`` and polls again.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from pathlib import Path

from fluss_py.client import Consumer, ConsumerOptions
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.types import TableBucket

_REFUSED = (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.BUCKET_NOT_OWNED)


async def run(args: argparse.Namespace) -> None:
    me: list[Consumer] = []

    def report(what: str) -> Callable[[set[TableBucket]], None]:
        def callback(buckets: set[TableBucket]) -> None:
            m = me[0].membership
            assert m is not None
            names = " ".join(str(tb) for tb in sorted(buckets, key=lambda tb: (tb.table_id, tb.bucket)))
            print(f"{what}: {names} (member {m.member_id} epoch {m.member_epoch})", file=sys.stderr, flush=True)

        return callback

    options = ConsumerOptions(auto_offset_reset="earliest", max_poll_interval=args.max_poll_interval)
    consumer = Consumer(
        args.bootstrap, options, group=args.group, subscribe=[args.table], on_assigned=report("assigned"),
        on_revoked=report("revoked"), session_timeout=args.session_timeout,
    )  # fmt: skip
    me.append(consumer)
    stuck = Path(args.stuck_file)
    try:
        while True:
            if stuck.exists():
                print("stuck", file=sys.stderr, flush=True)
                while stuck.exists():
                    await asyncio.sleep(0.05)
                print("unstuck", file=sys.stderr, flush=True)
            records = await consumer.poll(0.2)
            if not records:
                continue
            sys.stdout.write("".join(f"{r.bucket.bucket}\t{r.offset}\t{(r.value or b'').decode()}\n" for r in records))
            sys.stdout.flush()
            try:
                await consumer.commit()
            except FlussError as e:
                if e.code not in _REFUSED:
                    raise
                print(f"commit refused: {e}", file=sys.stderr, flush=True)
    finally:
        await consumer.close()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--group", required=True)
    p.add_argument("--stuck-file", required=True)
    p.add_argument("--session-timeout", type=float, default=6.0)
    p.add_argument("--max-poll-interval", type=float, default=300.0)
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
