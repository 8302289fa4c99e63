"""Replica metrics of a tablet server, computed at scrape time from one ``ReplicaManager.stats()`` call.

Nothing is updated per request or per record: a scrape of ``/metrics`` calls ``stats()`` once (one pass
over the replicas) and renders (docs/observability.md has the full list)

    fluss_replica_leader_count                       buckets this server leads
    fluss_replica_follower_count                     buckets this server follows
    fluss_replica_under_replicated_buckets           led buckets whose ISR is smaller than their assignment
    fluss_replica_under_min_isr                      led buckets whose ISR is below min.insync.replicas
    fluss_replica_isr_shrinks_total / _expands_total ISR changes of led buckets since the process started
  per led bucket {table_id,bucket}:
    fluss_replica_isr_count                          ISR size
    fluss_replica_under_replicated                   1 while the ISR is smaller than the assignment, else 0
    fluss_replica_follower_lag{...,follower}         leader LEO - the follower's LEO (messages)
  per hosted replica {table_id,bucket} (leader or follower):
    fluss_log_end_offset, fluss_log_high_watermark, fluss_log_size_bytes

Who may call: prometheus-client's ``generate_latest`` from the HTTP handler on the server's loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from fluss_py.replica.manager import ReplicaStats

BUCKET_LABELS = ["table_id", "bucket"]


def follower_lag(leader_leo: int, follower_leo: int) -> int:
    """Messages the follower is behind; a follower that has not fetched in this leader term (LEO unknown,
    -1) counts as holding nothing, so a frozen follower shows its full lag instead of hiding."""
    return max(leader_leo - max(follower_leo, 0), 0)


class ReplicaStatsCollector(Collector):
    """Renders ``stats()`` (None while the replica manager does not exist yet: nothing is rendered)."""

    def __init__(self, stats: Callable[[], ReplicaStats | None]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        s = self._stats()
        if s is None:
            return
        yield GaugeMetricFamily("fluss_replica_leader_count", "Buckets this server leads", value=s.leader_count)
        yield GaugeMetricFamily("fluss_replica_follower_count", "Buckets this server follows", value=s.follower_count)
        yield GaugeMetricFamily(
            "fluss_replica_under_replicated_buckets",
            "Led buckets whose ISR is smaller than their assignment (sum of fluss_replica_under_replicated)",
            value=s.under_replicated,
        )
        yield GaugeMetricFamily(
            "fluss_replica_under_min_isr", "Led buckets whose ISR is below min.insync.replicas", value=s.under_min_isr
        )
        yield CounterMetricFamily(
            "fluss_replica_isr_shrinks", "ISR shrinks of buckets led here (since start)", value=s.isr_shrinks
        )
        yield CounterMetricFamily(
            "fluss_replica_isr_expands", "ISR expansions of buckets led here (since start)", value=s.isr_expands
        )
        isr = GaugeMetricFamily(
            "fluss_replica_isr_count", "ISR size of each bucket this server leads", labels=BUCKET_LABELS
        )
        under = GaugeMetricFamily(
            "fluss_replica_under_replicated",
            "1 while a bucket led here has an ISR smaller than its assignment, else 0",
            labels=BUCKET_LABELS,
        )
        lag = GaugeMetricFamily(
            "fluss_replica_follower_lag",
            "Leader LEO minus the follower's LEO as of its last fetch (messages), per follower of a led bucket",
            labels=[*BUCKET_LABELS, "follower"],
        )
        leo = GaugeMetricFamily(
            "fluss_log_end_offset", "Log end offset of each replica hosted here", labels=BUCKET_LABELS
        )
        hw = GaugeMetricFamily(
            "fluss_log_high_watermark", "High watermark of each replica hosted here", labels=BUCKET_LABELS
        )
        size = GaugeMetricFamily(
            "fluss_log_size_bytes", "Segment bytes of each replica hosted here", labels=BUCKET_LABELS
        )
        for b in s.buckets:
            labels = [str(b.table_bucket.table_id), str(b.table_bucket.bucket)]
            leo.add_metric(labels, b.log_end_offset)
            hw.add_metric(labels, b.high_watermark)
            size.add_metric(labels, b.size_bytes)
            if b.is_leader:
                isr.add_metric(labels, b.isr_size)
                under.add_metric(labels, 1 if b.under_replicated else 0)
                for follower, follower_leo in b.follower_leos:
                    lag.add_metric([*labels, str(follower)], follower_lag(b.log_end_offset, follower_leo))
        yield isr
        yield under
        yield lag
        yield leo
        yield hw
        yield size
