"""Tablet-server metrics without sockets: the scrape-time replica collector (fake snapshots and real
ReplicaManagers over temp-dir logs), the per-request metered layer, the ZooKeeper session collector, and the
size/time of one scrape with 2000 buckets (printed, never asserted on time)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fluss_py.common.http import metrics_route
from fluss_py.replica.manager import BucketStats, ReplicaStats
from fluss_py.replica.stats import KvBucketStats
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.tablet.metrics import follower_lag, render, replica_metrics_text
from fluss_py.tablet.request_metrics import MeteredReplicaLayer, RequestMetrics
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import TableBucket
from fluss_py.zk.metrics import ZkSessionCollector
from fluss_py.zk.values import SessionEvent, SessionState
from tests.unit.replica.fakes import FakeClock, batch
from tests.unit.replica.harness import LAG_S, ReplicaCluster

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def parse(text: bytes) -> Samples:
    out: Samples = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def scrape(registry: CollectorRegistry) -> tuple[Samples, bytes]:
    text = generate_latest(registry)
    return parse(text), text


def sample(samples: Samples, name: str, **labels: Any) -> float | None:
    return samples.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))))


def rendered(stats: ReplicaStats | None) -> Samples:
    return parse(render(stats))


# ---------------------------------------------------------------- the replica text on fake snapshots


def test_follower_lag_counts_an_unknown_follower_as_holding_nothing() -> None:
    assert follower_lag(10, 10) == 0
    assert follower_lag(10, 4) == 6
    assert follower_lag(10, -1) == 10
    assert follower_lag(3, 5) == 0  # a follower ahead (diverged tail, about to truncate) is not negative lag


def test_collector_renders_counts_and_per_bucket_series() -> None:
    led_ok = BucketStats(TableBucket(1, 0), True, 10, 10, 500, 3, False, ((2, 10), (3, 10)))
    led_under = BucketStats(TableBucket(1, 1), True, 7, 5, 300, 2, True, ((2, 7), (3, -1)))
    followed = BucketStats(TableBucket(1, 2), False, 4, 4, 200)
    stats = ReplicaStats(
        2,
        1,
        1,
        0,
        {led_ok.table_bucket: 3, led_under.table_bucket: 2},
        (led_ok, led_under, followed),
        isr_shrinks=4,
        isr_expands=3,
        fetch_sessions=2,
        fetch_sessions_opened=5,
    )
    s = rendered(stats)
    assert sample(s, "fluss_replica_leader_count") == 2
    assert sample(s, "fluss_replica_follower_count") == 1
    assert sample(s, "fluss_replica_under_replicated_buckets") == 1
    assert sample(s, "fluss_replica_under_min_isr") == 0
    assert sample(s, "fluss_replica_isr_shrinks_total") == 4
    assert sample(s, "fluss_replica_isr_expands_total") == 3
    assert (sample(s, "fluss_replica_fetch_sessions"), sample(s, "fluss_replica_fetch_sessions_opened_total")) == (2, 5)
    assert sample(s, "fluss_replica_under_replicated", table_id=1, bucket=0) == 0
    assert sample(s, "fluss_replica_under_replicated", table_id=1, bucket=1) == 1
    assert sample(s, "fluss_replica_under_replicated", table_id=1, bucket=2) is None  # followed: its leader says
    assert sample(s, "fluss_replica_isr_count", table_id=1, bucket=1) == 2
    assert sample(s, "fluss_replica_follower_lag", table_id=1, bucket=1, follower=2) == 0
    assert sample(s, "fluss_replica_follower_lag", table_id=1, bucket=1, follower=3) == 7
    for b, (leo, hw, size) in enumerate([(10, 10, 500), (7, 5, 300), (4, 4, 200)]):
        assert sample(s, "fluss_log_end_offset", table_id=1, bucket=b) == leo
        assert sample(s, "fluss_log_high_watermark", table_id=1, bucket=b) == hw
        assert sample(s, "fluss_log_size_bytes", table_id=1, bucket=b) == size
    # the per-server count and the per-bucket flags agree
    flags = [v for (n, _), v in s.items() if n == "fluss_replica_under_replicated"]
    assert sum(flags) == sample(s, "fluss_replica_under_replicated_buckets")


def test_primary_key_replicas_report_their_kv() -> None:
    kv = KvBucketStats(applied_offset=40, apply_lag=2, size_bytes=4096, memtable_bytes=512, rows=17, buffered_keys=3)
    pk_leader = BucketStats(TableBucket(2, 0), True, 45, 42, 900, 3, False, (), kv)
    log_follower = BucketStats(TableBucket(1, 0), False, 4, 4, 200)
    stats = ReplicaStats(
        1, 1, 0, 0, {pk_leader.table_bucket: 3}, (pk_leader, log_follower), kv_memory_bytes=1 << 20,
        kv_applied_records=99, kv_apply_cpu_s=0.25,
    )  # fmt: skip
    s = rendered(stats)
    assert sample(s, "fluss_kv_rocksdb_memory_bytes") == 1 << 20
    assert sample(s, "fluss_kv_apply_records_total") == 99
    assert sample(s, "fluss_kv_apply_cpu_seconds_total") == 0.25
    for name, value in (("applied_offset", 40), ("apply_lag", 2), ("size_bytes", 4096), ("memtable_bytes", 512),
                        ("rows", 17), ("buffered_keys", 3)):  # fmt: skip
        assert sample(s, f"fluss_kv_{name}", table_id=2, bucket=0) == value
        assert sample(s, f"fluss_kv_{name}", table_id=1, bucket=0) is None  # a log table has no KV


def test_nothing_is_rendered_before_the_replica_manager_exists() -> None:
    assert render(None) == b""


async def test_the_metrics_route_appends_the_replica_text_to_the_registry() -> None:
    registry = CollectorRegistry()
    Gauge("fluss_tablet_server_registered", "1 while registered", registry=registry).set(1)
    stats = ReplicaStats(0, 1, 0, 0, {}, (BucketStats(TableBucket(3, 1), False, 5, 4, 99),))
    status, ctype, body = await metrics_route(registry, replica_metrics_text(lambda: stats))()
    s = parse(body)
    assert status == 200 and ctype.startswith("text/plain")
    assert sample(s, "fluss_tablet_server_registered") == 1
    assert sample(s, "fluss_replica_follower_count") == 1
    assert sample(s, "fluss_log_end_offset", table_id=3, bucket=1) == 5
    assert sample(s, "fluss_replica_isr_count", table_id=3, bucket=1) is None  # a follower: its leader reports


def test_a_scrape_of_2000_buckets_is_one_pass(capsys: pytest.CaptureFixture[str]) -> None:
    """Worst case for one server: it leads all 2000 buckets of RF 3 (2 followers each) -> 7 series per bucket."""
    buckets = tuple(
        BucketStats(
            TableBucket(1 + b // 500, b % 500),
            True,
            10_000 + b,
            10_000 + b,
            1 << 20,
            3,
            False,
            ((2, 10_000 + b), (3, 9_990 + b)),
        )
        for b in range(2000)
    )
    stats = ReplicaStats(2000, 0, 0, 0, {b.table_bucket: 3 for b in buckets}, buckets)
    calls = []
    text_of = replica_metrics_text(lambda: calls.append(1) or stats)
    t = time.perf_counter()
    text = text_of()
    elapsed = time.perf_counter() - t
    assert len(calls) == 1  # one stats() snapshot per scrape
    s = parse(text)
    per_bucket = {n for (n, labels), _ in s.items() if labels}
    assert per_bucket == {
        "fluss_replica_isr_count",
        "fluss_replica_under_replicated",
        "fluss_replica_follower_lag",
        "fluss_log_end_offset",
        "fluss_log_high_watermark",
        "fluss_log_size_bytes",
    }
    assert sum(1 for (n, labels) in s if labels) == 2000 * 7
    with capsys.disabled():
        print(f"\n2000-bucket scrape (render of a snapshot): {elapsed * 1000:.0f} ms, {len(text) / 1024:.0f} KiB")


# ---------------------------------------------------------------- stats() of real ReplicaManagers

TB = TableBucket(9, 0)
R3 = (1, 2, 3)


@pytest.fixture
async def cluster3(tmp_path: Path):
    c = ReplicaCluster(3, FakeClock(), tmp_path)
    yield c
    await c.close()


async def test_stats_snapshot_matches_the_logs_and_counts_isr_changes(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    leader = cluster3.managers[1]
    await leader.append(-1, 5.0, {TB: batch(b"a", b"b", b"c")})
    s = rendered(leader.stats())
    lg = cluster3.log_managers[1].get(TB)
    assert sample(s, "fluss_log_end_offset", table_id=9, bucket=0) == lg.log_end_offset == 3
    assert sample(s, "fluss_log_high_watermark", table_id=9, bucket=0) == lg.high_watermark == 3
    assert sample(s, "fluss_log_size_bytes", table_id=9, bucket=0) == lg.size_in_bytes > 0
    assert sample(s, "fluss_replica_under_replicated", table_id=9, bucket=0) == 0
    assert sample(s, "fluss_replica_isr_count", table_id=9, bucket=0) == 3
    follower = rendered(cluster3.managers[2].stats())
    assert sample(follower, "fluss_log_end_offset", table_id=9, bucket=0) == 3
    assert sample(follower, "fluss_replica_isr_count", table_id=9, bucket=0) is None

    # server 3 stops; the leader writes on, shrinks the ISR after the lag time, and reports the lag
    await cluster3.kill(3)
    await leader.append(1, 5.0, {TB: batch(b"d", b"e")})
    await wait_until(lambda: dict(leader.stats().buckets[0].follower_leos).get(2) == 5)
    cluster3.clock.advance(LAG_S + 0.1)
    assert leader.maybe_shrink_isr() == 1
    await wait_until(lambda: leader.replica(TB).isr == (1, 2))
    stats = leader.stats()
    s = rendered(stats)
    assert (stats.isr_shrinks, stats.isr_expands) == (1, 0)
    assert sample(s, "fluss_replica_under_replicated", table_id=9, bucket=0) == 1
    assert sample(s, "fluss_replica_under_replicated_buckets") == 1
    assert sample(s, "fluss_replica_isr_count", table_id=9, bucket=0) == 2
    assert sample(s, "fluss_replica_follower_lag", table_id=9, bucket=0, follower=2) == 0
    assert sample(s, "fluss_replica_follower_lag", table_id=9, bucket=0, follower=3) == 2  # 5 - 3

    # it comes back, catches up and rejoins: one expansion, nothing under-replicated
    cluster3.start_server(3)
    await cluster3.notify(TB, R3)
    await wait_until(lambda: leader.replica(TB).isr == (1, 2, 3))
    s = rendered(leader.stats())
    assert (sample(s, "fluss_replica_isr_shrinks_total"), sample(s, "fluss_replica_isr_expands_total")) == (1, 1)
    assert sample(s, "fluss_replica_under_replicated", table_id=9, bucket=0) == 0
    assert sample(s, "fluss_replica_follower_lag", table_id=9, bucket=0, follower=3) == 0


async def test_an_isr_change_from_the_coordinator_is_counted_for_a_led_bucket(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    leader = cluster3.managers[1]
    await cluster3.elect(TB, R3, 1, (1, 2))  # the coordinator drops 3 (e.g. it died); 1 stays leader
    assert leader.replica(TB).isr == (1, 2)
    assert (leader.stats().isr_shrinks, leader.stats().isr_expands) == (1, 0)
    # a new leader is not an ISR change of its own buckets
    await cluster3.elect(TB, R3, 2, (1, 2))
    assert (cluster3.managers[2].stats().isr_shrinks, cluster3.managers[2].stats().isr_expands) == (0, 0)


# ---------------------------------------------------------------- per-request metrics


@dataclass
class FakeLayer:
    fail: bool = False
    calls: list[str] = field(default_factory=list)
    started: bool = True

    async def produce_log(self, request: Any) -> Any:
        self.calls.append("produce")
        error = common_pb2.ErrorInfo(code=5 if self.fail else 0)
        return tablet_pb2.ProduceLogResponse(error=error)

    async def fetch_log(self, request: Any) -> Any:
        self.calls.append("fetch")
        b = tablet_pb2.FetchBucketResult(records=b"x" * 100)
        return tablet_pb2.FetchLogResponse(error=common_pb2.ErrorInfo(code=0), buckets=[b, b])

    async def list_offsets(self, request: Any) -> Any:
        raise RuntimeError("boom")

    async def update_metadata(self, request: Any) -> Any:
        self.calls.append("update_metadata")
        return "updated"


async def test_the_metered_layer_counts_each_request_once_by_kind() -> None:
    registry = CollectorRegistry()
    inner = FakeLayer()
    ticks = iter(range(100))
    layer = MeteredReplicaLayer(inner, RequestMetrics(registry), clock=lambda: next(ticks) * 0.001)
    records = b"r" * 1000
    produce = tablet_pb2.ProduceLogRequest(acks=-1, buckets=[tablet_pb2.ProduceBucket(records=records)] * 3)
    await layer.produce_log(produce)
    await layer.produce_log(produce)
    inner.fail = True
    await layer.produce_log(produce)
    await layer.fetch_log(tablet_pb2.FetchLogRequest(replica_id=-1))
    for _ in range(4):
        await layer.fetch_log(tablet_pb2.FetchLogRequest(replica_id=2))
    with pytest.raises(RuntimeError):
        await layer.list_offsets(tablet_pb2.ListOffsetsRequest())
    assert await layer.update_metadata(None) == "updated"  # delegated untouched
    assert layer.started is True
    s, _ = scrape(registry)

    def count(request: str) -> float | None:
        return sample(s, "fluss_tablet_request_latency_seconds_count", request=request)

    assert (count("produce"), count("fetch_client"), count("fetch_follower"), count("list_offsets")) == (3, 1, 4, 1)
    assert sample(s, "fluss_tablet_request_latency_seconds_sum", request="produce") == pytest.approx(0.003)
    assert sample(s, "fluss_tablet_request_latency_seconds_bucket", request="produce", le="0.001") == 3
    assert sample(s, "fluss_tablet_request_errors_total", request="produce") == 1
    assert sample(s, "fluss_tablet_request_errors_total", request="list_offsets") == 1
    assert sample(s, "fluss_tablet_request_errors_total", request="fetch_follower") == 0


# ---------------------------------------------------------------- ZooKeeper session


class FakeZk:
    def __init__(self) -> None:
        self.session_state = SessionState.LOST
        self.listeners: list[Any] = []

    def add_session_listener(self, fn: Any) -> None:
        self.listeners.append(fn)

    def emit(self, event: SessionEvent) -> None:
        if event.state is SessionState.CONNECTED:
            self.session_state = SessionState.CONNECTED
        else:
            self.session_state = event.state
        for fn in self.listeners:
            fn(event)


def test_zookeeper_session_state_and_events() -> None:
    zk = FakeZk()
    registry = CollectorRegistry()
    registry.register(ZkSessionCollector(zk))  # type: ignore[arg-type]
    s, _ = scrape(registry)
    assert sample(s, "fluss_zookeeper_session_state", state="lost") == 1
    assert sample(s, "fluss_zookeeper_session_state", state="connected") == 0
    zk.emit(SessionEvent(SessionState.CONNECTED, 7, new_session=True))
    zk.emit(SessionEvent(SessionState.SUSPENDED, 0))
    s, _ = scrape(registry)
    assert sample(s, "fluss_zookeeper_session_state", state="suspended") == 1
    assert sample(s, "fluss_zookeeper_session_state", state="connected") == 0
    zk.emit(SessionEvent(SessionState.CONNECTED, 7))
    zk.emit(SessionEvent(SessionState.LOST, 0))
    zk.emit(SessionEvent(SessionState.CONNECTED, 8, new_session=True))
    s, _ = scrape(registry)
    assert sample(s, "fluss_zookeeper_session_state", state="connected") == 1
    events = {
        e: sample(s, "fluss_zookeeper_session_events_total", event=e)
        for e in ("new_session", "reconnected", "suspended", "lost")
    }
    assert events == {"new_session": 2, "reconnected": 1, "suspended": 1, "lost": 1}
