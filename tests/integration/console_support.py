"""Helpers shared by the console's integration test and its Chromium test (not a test module)."""

from __future__ import annotations

from fluss_py.client import ProducerOptions, SyncProducer

TABLE = "fluss.console_t"


def produce_keyed(bootstrap: str, start: int, count: int, table: str = TABLE) -> None:
    """Records ``v<i>`` with keys ``k<i>`` for i in [start, start + count), acknowledged by the full ISR (the
    keys spread them over the buckets)."""
    with SyncProducer(bootstrap, ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)) as p:
        futures = [p.send(table, f"v{i}".encode(), key=f"k{i}".encode()) for i in range(start, start + count)]
        p.flush()
        for f in futures:
            f.result(timeout=60)
