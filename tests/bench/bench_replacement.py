"""Replacement of a server gone for good (issue 37, docs/rebalance.md §12): time to restore the replication
factor after kill -9 of one of 4 tablet servers holding ``REPLACEMENT_BENCH_BYTES`` (default 1 GiB of records,
RF 3) in 300 buckets, and a steady acks=all producer's latency (one record every 10 ms, waiting for each)
before the kill versus during the replacement.

The victim holds 3/4 of the buckets (225 replicas, ~3/4 GiB); ``fluss-py server tag N permanent-offline``
(here ``Admin.set_server_tag``) is sent once the coordinator has taken it out of every ISR; the replacement
ends when every bucket has 3 replicas on the survivors, all in its ISR (read from ZooKeeper every 0.2 s).

Environment: ``REPLACEMENT_BENCH_BYTES``, ``REPLACEMENT_BENCH_THROTTLE`` (tablet-server.rebalance.throttle-
bytes-per-second per leader server; default the option's default, 10 MiB/s; 0 = unthrottled).
Rows: the replacement's status, time from the tag to full RF, from the kill to full RF, replica moves, bytes
moved (the replacement's own count: segment bytes reported by the leaders), copy rate, producer p50/p99 before
and during, failed sends.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

import uvloop

from fluss_py import config as cfg
from fluss_py.client import ProducerOptions, SyncAdmin
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from fluss_py.zk.paths import TableAssignmentZNode
from tests.bench.bench_cluster import SETTINGS
from tests.bench.bench_rebalance import RECORD, _load
from tests.bench.common import p50_p99_ms, row
from tests.fault.replication_support import SteadyProducer, bootstrap, create_table, leader_isr

TABLE = "bench_replacement"
BUCKETS = 300
VICTIM = 4
WINDOW_S = 10.0


def _state(zk: ZkView, cluster: LocalCluster, table_id: int) -> tuple[bool, bool]:
    """(the victim is out of every ISR, every bucket has 3 replicas off the victim, all in its ISR)."""
    data = zk.get_bytes(TableAssignmentZNode.path(cluster.zk_root, table_id))
    assert data is not None
    out_of_isrs, healed = True, True
    for b, replicas in TableAssignmentZNode.decode(data).items():
        lai = leader_isr(zk, cluster, TableBucket(table_id, b))
        if lai is None:
            return False, False
        out_of_isrs &= VICTIM not in lai.isr
        healed &= len(replicas) == 3 and VICTIM not in replicas and sorted(lai.isr) == sorted(replicas)
    return out_of_isrs, healed


def run() -> list[dict]:
    total = int(os.environ.get("REPLACEMENT_BENCH_BYTES", str(1024**3)))
    throttle = int(os.environ.get("REPLACEMENT_BENCH_THROTTLE", str(cfg.REBALANCE_THROTTLE.default)))
    coordinator = {"coordinator.rebalance.auto": "false"}
    tablet = {"tablet-server.rebalance.throttle-bytes-per-second": str(throttle)}
    with tempfile.TemporaryDirectory(prefix="bench-replacement-") as d:
        cluster = LocalCluster(Path(d), coordinators=1, tablet_servers=4, overrides=SETTINGS, die_with_parent=True,
                               coordinator_overrides=coordinator, tablet_overrides=tablet)  # fmt: skip
        try:
            cluster.start(timeout=60)
            table_id = create_table(cluster, TABLE, buckets=BUCKETS, rf=3)
            servers = bootstrap(cluster)
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                load_mb_s = runner.run(_load(servers, f"fluss.{TABLE}", total // RECORD, BUCKETS))
            options = ProducerOptions(acks=-1, request_timeout=30.0, delivery_timeout=120.0)
            producer = SteadyProducer(servers, f"fluss.{TABLE}", options, interval=0.01,
                                      bucket_of=lambda seq: seq % BUCKETS).start()  # fmt: skip
            try:
                with ZkView(cluster.zookeeper_address) as zk, SyncAdmin(servers, request_timeout=30.0) as admin:
                    t0 = time.monotonic()
                    time.sleep(WINDOW_S)
                    killed = time.monotonic()
                    cluster.kill(f"tablet-server-{VICTIM}")
                    while not _state(zk, cluster, table_id)[0]:
                        time.sleep(0.2)
                    tagged = time.monotonic()
                    admin.set_server_tag(VICTIM, "permanent-offline")
                    while not _state(zk, cluster, table_id)[1]:
                        time.sleep(0.2)
                    healed = time.monotonic()
                    tags = admin.describe_server_tags()
            finally:
                sent = producer.stop()
        finally:
            cluster.close()
    replacement = tags.replacement
    before = [s.latency_ms / 1e3 for s in sent if t0 <= s.start < killed and s.error is None]
    during = [s.latency_ms / 1e3 for s in sent if tagged <= s.start < healed and s.error is None]
    b50, b99 = p50_p99_ms(before) if before else (0.0, 0.0)
    d50, d99 = p50_p99_ms(during) if during else (0.0, 0.0)
    seconds = healed - tagged
    moved = replacement.bytes_moved if replacement is not None else 0
    limit = f"throttle {throttle / 1024**2:g} MiB/s" if throttle else "no throttle"
    what = f"replace 1 of 4 servers, {total / 1024**3:.2f} GiB RF3 in {BUCKETS} buckets, {limit}"
    done = replacement is not None and replacement.status == "COMPLETED" and tags.to_replace == 0
    failed = sum(1 for s in sent if s.error)
    return [
        row(f"{what}: status", 1.0 if done else 0.0, "completed", "1", done),
        row(f"{what}: tag -> full RF", seconds, "s"),
        row(f"{what}: kill -> full RF", healed - killed, "s"),
        row(f"{what}: replica moves", replacement.moves_done if replacement else 0, "moves"),
        row(f"{what}: bytes moved", moved / 1e6, "MB"),
        row(f"{what}: copy rate", moved / 1e6 / seconds if seconds else 0.0, "MB/s"),
        row(f"{what}: load rate (acks=all, 16 KiB records)", load_mb_s, "MB/s"),
        row(f"{what}: producer p50 before", b50, "ms"),
        row(f"{what}: producer p99 before", b99, "ms"),
        row(f"{what}: producer p50 during", d50, "ms"),
        row(f"{what}: producer p99 during", d99, "ms"),
        row(f"{what}: failed sends", failed, "sends", "0", failed == 0),
    ]


if __name__ == "__main__":
    for r in run():
        print(r)
