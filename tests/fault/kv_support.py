"""The primary-key workload of the fault tests on a thread of its own, and the final checks on the cluster.

``KvWorkload`` runs ``fluss_py.verify.kv_workload``'s writers and reader on one asyncio loop in a thread and
keeps their events in memory; it never touches a process (only the test's thread starts and kills them).
``kv_verdict`` reads the final rows, the committed changelog and every replica's KV (read-only RocksDB, once
each replica applied up to the high watermark) and the KV its own log describes, and judges them
(``fluss_py.verify.kv_checker``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterable
from typing import Any

from fluss_py.client import LookupOptions, ProducerOptions, SyncAdmin
from fluss_py.testing.cluster import LocalCluster
from fluss_py.verify.checker import Report
from fluss_py.verify.kv_checker import KV_ACK, KV_FAIL, KV_SEND, check_kv
from fluss_py.verify.kv_replicas import replica_kvs
from fluss_py.verify.kv_workload import KV_SCHEMA, Clock, kv_final, kv_reader, kv_writer
from tests.fault.replication_support import bootstrap

# acks=all, idempotent; timeouts far above any failover (a kill -9 must be a pause, not an error)
WRITER_OPTIONS = ProducerOptions(acks=-1, linger=0.0, request_timeout=30.0, delivery_timeout=120.0)
READER_OPTIONS = LookupOptions(request_timeout=30.0)


def create_kv_table(cluster: LocalCluster, table: str, buckets: int) -> int:
    cluster.wait_for_leader(15)
    with SyncAdmin(bootstrap(cluster), request_timeout=15.0, security=cluster.client_identity()) as admin:
        table_id = admin.create_table(table, num_buckets=buckets, replication_factor=3, schema=KV_SCHEMA)
        admin.list_offsets(table, timeout=30.0)  # every bucket has a leader that answers
    return table_id


class KvWorkload:
    """``writers`` writers and one reader on ``keys`` keys (see kv_workload.py), on a thread, until ``stop``."""

    def __init__(self, cluster: LocalCluster, table: str, *, writers: int = 3, keys: int = 300) -> None:
        self.bootstrap = bootstrap(cluster)
        self.security = cluster.client_identity()
        self.table = table
        self.writers = writers
        self.keys = keys
        self.events: list[dict[str, Any]] = []
        self.clock = Clock(time.monotonic())
        self._stopping = False
        self._thread = threading.Thread(target=self._main, name="kv-workload", daemon=True)
        self.error: BaseException | None = None
        self.lookups: tuple[int, int] = (0, 0)

    def start(self) -> KvWorkload:
        self._thread.start()
        return self

    def _emit(self, **event: Any) -> None:
        self.events.append(event)

    def _main(self) -> None:
        async def go() -> None:
            stopping = lambda: self._stopping  # noqa: E731
            writers = [
                kv_writer(
                    self.bootstrap,
                    self.table,
                    p,
                    self.writers,
                    self.keys,
                    self._emit,
                    self.clock,
                    stopping,
                    options=WRITER_OPTIONS,
                    security=self.security,
                )
                for p in range(self.writers)
            ]
            reader = kv_reader(self.bootstrap, self.table, self.keys, self._emit, self.clock, stopping,
                               options=READER_OPTIONS, security=self.security)  # fmt: skip
            *_, self.lookups = await asyncio.gather(*writers, reader)

        try:
            asyncio.run(go())
        except BaseException as e:  # surfaced by stop()
            self.error = e

    def acked_after(self, t: float) -> int:
        """Writes acknowledged after monotonic time ``t``."""
        since = t - self.clock.t0
        return sum(1 for e in list(self.events) if e["k"] == KV_ACK and e["t"] > since)

    def wait_acked_after(self, cluster: LocalCluster, t: float, n: int, timeout: float) -> None:
        cluster.wait_until(lambda: self.acked_after(t) >= n, timeout, f"{n} writes acknowledged after the kill")

    def stop(self, timeout: float = 150.0) -> list[dict[str, Any]]:
        self._stopping = True
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise AssertionError("the KV workload did not stop")
        if self.error is not None:
            raise self.error
        return list(self.events)


def write_latencies(events: Iterable[dict[str, Any]]) -> list[tuple[float, float]]:
    """(send time, latency) of every answered write."""
    sent = {(e["p"], e["s"]): e["t"] for e in events if e["k"] == KV_SEND}
    return [
        (sent[(e["p"], e["s"])], e["t"] - sent[(e["p"], e["s"])])
        for e in events
        if e["k"] in (KV_ACK, KV_FAIL) and (e["p"], e["s"]) in sent
    ]


def kv_verdict(cluster: LocalCluster, table: str, table_id: int, events: list[dict[str, Any]], keys: int) -> Report:
    """Final rows, committed changelog, every replica's KV at the high watermark and its log's replay, judged."""
    final = asyncio.run(kv_final(bootstrap(cluster), table, keys, 60.0, security=cluster.client_identity()))
    replicas = replica_kvs(cluster, table_id, final["hw"], keys)
    assert len(replicas) == 3 * len(final["hw"]), sorted(replicas)  # RF 3: every replica read
    lagging = {name: (r.applied, r.hw) for name, r in replicas.items() if r.applied < r.hw}
    assert not lagging, f"replicas whose KV did not apply up to the high watermark within 60 s: {lagging}"
    return check_kv(events, final["final"], final["committed"], replicas)
