"""/metrics of every process of a real local cluster (real ZooKeeper, one coordinator, four tablet-server
processes) checked against what the cluster itself answers (docs/observability.md):

- per bucket, the leader's ``fluss_replica_isr_count``, ``fluss_replica_under_replicated``,
  ``fluss_log_end_offset`` / ``fluss_log_high_watermark`` equal ``Admin.describe_table`` (leader, ISR, HW,
  LEO); every follower's ``fluss_log_end_offset`` equals the leader's; ``fluss_replica_leader_count`` and
  the coordinator's ``fluss_tablet_distribution`` match the placement;
- request counters move: produce and follower fetches after producing, client fetches after consuming;
- every process reports a connected ZooKeeper session and exports only metrics the catalogue declares;
- SIGSTOP of a follower past replica.lag.time.max.ms (its ZooKeeper session outlives the pause): the
  leaders' ``fluss_replica_under_replicated`` becomes 1 for exactly the buckets the stopped server follows
  (0 for the others), its ``fluss_replica_follower_lag`` is the number of records written meanwhile, the
  ISR shrink counters moved; after SIGCONT everything returns to 0 and the expand counters moved.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from fluss_py.client import ConsumerOptions, ProducerOptions, SyncAdmin, SyncConsumer, SyncProducer
from fluss_py.metric_catalogue import BY_NAME
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER
from fluss_py.testing.faults import paused
from fluss_py.testing.health import fetch_text

pytestmark = pytest.mark.integration

TABLE = "fluss.metrics_t"
BUCKETS = 8
PER_BUCKET = 20
IN_PAUSE = 5  # records written to each bucket the stopped server follows, while it is stopped
LAG_MS = 1500
# the follower must leave the ISR by lag (the leader's AdjustIsr), not by death: the session outlives the pause
OVERRIDES = {"zookeeper.session-timeout": "8s"}
TABLET_OVERRIDES = {"replica.lag.time.max.ms": str(LAG_MS), "replica.fetch.wait.max.ms": "250"}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(cluster: LocalCluster, name: str) -> Samples:
    out: Samples = {}
    text = fetch_text(cluster.get(name).http_url + "/metrics", timeout=5.0)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def undeclared_families(cluster: LocalCluster, name: str) -> set[str]:
    """Families on the process's /metrics that fluss_py/metric_catalogue.py does not declare (a counter's and
    a histogram's ``_created`` companion series belong to it)."""
    text = fetch_text(cluster.get(name).http_url + "/metrics", timeout=5.0)
    out = set()
    for family in text_string_to_metric_families(text):
        base = family.name.removesuffix("_created")
        if family.name not in BY_NAME and f"{base}_total" not in BY_NAME and base not in BY_NAME:
            out.add(family.name)
    return out


def value(samples: Samples, name: str, **labels: Any) -> float | None:
    return samples.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))))


def per_bucket(samples: Samples, name: str, table_id: int, **extra: Any) -> dict[int, float]:
    """bucket -> value of ``name`` for ``table_id`` (only samples whose other labels equal ``extra``)."""
    out = {}
    for (n, labels), v in samples.items():
        d = dict(labels)
        if n == name and d.get("table_id") == str(table_id) and all(d.get(k) == str(x) for k, x in extra.items()):
            out[int(d["bucket"])] = v
    return out


def request_count(cluster: LocalCluster, servers: list[str], request: str) -> float:
    return sum(
        value(scrape(cluster, n), "fluss_tablet_request_latency_seconds_count", request=request) or 0 for n in servers
    )


def total(cluster: LocalCluster, servers: list[str], name: str) -> float:
    return sum(value(scrape(cluster, n), name) or 0 for n in servers)


def name_of(server_id: int) -> str:
    return f"{TABLET_SERVER}-{server_id}"


def test_metrics_match_the_cluster_and_follow_a_stopped_follower(cluster_factory) -> None:
    cluster: LocalCluster = cluster_factory(
        coordinators=1, tablet_servers=4, overrides=OVERRIDES, tablet_overrides=TABLET_OVERRIDES
    )
    coordinator = cluster.wait_for_leader(15)
    servers = cluster.names(TABLET_SERVER)
    bootstrap = ",".join(cluster.get(n).rpc_address for n in servers)
    with SyncAdmin(bootstrap, request_timeout=10.0) as admin:
        table_id = admin.create_table(TABLE, num_buckets=BUCKETS, replication_factor=3)

        def placement() -> dict[int, Any]:
            return {loc.table_bucket.bucket: loc for loc in admin.get_table_placement(TABLE)[1]}

        def fully_replicated() -> bool:
            p = placement()
            full = all(loc.leader >= 0 and set(loc.isr) == set(loc.replicas) for loc in p.values())
            return len(p) == BUCKETS and full

        cluster.wait_until(fully_replicated, 30, "every bucket has a leader and a full ISR")

        # ---- produce and consume; the request counters move
        before = {r: request_count(cluster, servers, r) for r in ("produce", "fetch_client", "fetch_follower")}
        options = ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)
        with SyncProducer(bootstrap, options) as producer:
            futures = [producer.send(TABLE, b"v%d" % i, bucket=b) for b in range(BUCKETS) for i in range(PER_BUCKET)]
            producer.flush()
            for f in futures:
                f.result(timeout=60)
        assert request_count(cluster, servers, "produce") > before["produce"]
        assert request_count(cluster, servers, "fetch_follower") > before["fetch_follower"]
        with SyncConsumer(bootstrap, ConsumerOptions(fetch_max_wait=0.2)) as consumer:
            consumer.assign(TABLE)
            got: list[Any] = []
            cluster.wait_until(lambda: got.extend(consumer.poll(0.5)) or len(got) >= BUCKETS * PER_BUCKET, 30,
                               "every record consumed")  # fmt: skip
        assert request_count(cluster, servers, "fetch_client") > before["fetch_client"]

        # ---- per-bucket values match describe_table once the followers' next fetches are in
        def matches_describe() -> str:
            desc = admin.describe_table(TABLE)
            scraped = {n: scrape(cluster, n) for n in servers}
            for b in desc.buckets:
                loc, bucket = b.location, b.location.table_bucket.bucket
                lead = scraped[name_of(loc.leader)]
                want = {"isr": len(loc.isr), "under": 0, "leo": b.log_end_offset, "hw": b.high_watermark}
                have = {
                    "isr": per_bucket(lead, "fluss_replica_isr_count", table_id).get(bucket),
                    "under": per_bucket(lead, "fluss_replica_under_replicated", table_id).get(bucket),
                    "leo": per_bucket(lead, "fluss_log_end_offset", table_id).get(bucket),
                    "hw": per_bucket(lead, "fluss_log_high_watermark", table_id).get(bucket),
                }
                if have != want or b.log_end_offset != PER_BUCKET:
                    return f"bucket {bucket}: leader {loc.leader} metrics {have} != describe {want}"
                for f in loc.replicas:
                    if f == loc.leader:
                        continue
                    leo = per_bucket(scraped[name_of(f)], "fluss_log_end_offset", table_id).get(bucket)
                    lag = per_bucket(lead, "fluss_replica_follower_lag", table_id, follower=f).get(bucket)
                    if (leo, lag) != (b.log_end_offset, 0):
                        return f"bucket {bucket}: follower {f} LEO {leo}, lag {lag} (leader LEO {b.log_end_offset})"
            leaders = Counter(b.location.leader for b in desc.buckets)
            for n in servers:
                sid = int(n.rsplit("-", 1)[1])
                if value(scraped[n], "fluss_replica_leader_count") != leaders[sid]:
                    return f"{n}: leader count {value(scraped[n], 'fluss_replica_leader_count')} != {leaders[sid]}"
                if value(scraped[n], "fluss_replica_under_replicated_buckets") != 0:
                    return f"{n}: under-replicated buckets"
            dist = scrape(cluster, coordinator)
            for sid in range(1, 5):
                if value(dist, "fluss_tablet_distribution", server=sid, kind="leaders") != leaders[sid]:
                    return f"fluss_tablet_distribution of server {sid} != {leaders[sid]}"
            return ""

        cluster.wait_until(lambda: matches_describe() == "", 20, matches_describe)

        # ---- every process has a connected ZooKeeper session, and exports only metrics of the catalogue
        for n in [*servers, *cluster.names(COORDINATOR)]:
            assert value(scrape(cluster, n), "fluss_zookeeper_session_state", state="connected") == 1, n
            assert undeclared_families(cluster, n) == set(), n

        # ---- SIGSTOP a follower: exactly the buckets it follows become under-replicated on their leaders
        p = placement()
        led = Counter(loc.leader for loc in p.values())
        victim_id = min(
            (sid for sid in range(1, 5) if any(sid in loc.replicas and loc.leader != sid for loc in p.values())),
            key=lambda sid: led[sid],
        )
        victim = name_of(victim_id)
        live = [n for n in servers if n != victim]
        followed = {b for b, loc in p.items() if victim_id in loc.replicas and loc.leader != victim_id}
        scored = {b for b, loc in p.items() if loc.leader != victim_id}  # buckets the live servers report on
        assert followed and scored - followed, f"placement {p} gives no bucket without server {victim_id}"
        shrinks = total(cluster, live, "fluss_replica_isr_shrinks_total")
        expands = total(cluster, live, "fluss_replica_isr_expands_total")

        def flags() -> dict[int, float]:
            out: dict[int, float] = {}
            for n in live:
                out.update(per_bucket(scrape(cluster, n), "fluss_replica_under_replicated", table_id))
            return out

        live_bootstrap = ",".join(cluster.get(n).rpc_address for n in live)
        with paused(cluster, victim):
            with SyncProducer(live_bootstrap, options) as producer:  # acks=all: answered once the ISR shrank
                futures = [producer.send(TABLE, b"p%d" % i, bucket=b) for b in followed for i in range(IN_PAUSE)]
                producer.flush()
                for f in futures:
                    f.result(timeout=30)
            expected = {b: 1.0 if b in followed else 0.0 for b in scored}
            cluster.wait_until(lambda: flags() == expected, 15, lambda: f"flags {flags()} != {expected}")
            for b in followed:
                lead = scrape(cluster, name_of(p[b].leader))
                assert per_bucket(lead, "fluss_replica_isr_count", table_id)[b] == 2
                assert per_bucket(lead, "fluss_replica_follower_lag", table_id, follower=victim_id)[b] == IN_PAUSE
                assert victim_id not in placement()[b].isr
            assert total(cluster, live, "fluss_replica_isr_shrinks_total") >= shrinks + len(followed)
            assert total(cluster, live, "fluss_replica_under_replicated_buckets") == len(followed)

        # ---- SIGCONT: it catches up and rejoins; every flag returns to 0
        expected = dict.fromkeys(scored, 0.0)
        cluster.wait_until(lambda: flags() == expected, 20, lambda: f"flags {flags()} after SIGCONT")
        cluster.wait_until(fully_replicated, 20, "every ISR is full again")
        assert total(cluster, live, "fluss_replica_isr_expands_total") >= expands + len(followed)
        assert value(scrape(cluster, victim), "fluss_zookeeper_session_state", state="connected") == 1
