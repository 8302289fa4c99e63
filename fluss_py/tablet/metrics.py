"""Replica metrics of a tablet server, computed at scrape time from one ``ReplicaManager.stats()`` call.

Nothing is updated per request: a scrape of ``/metrics`` calls ``stats()`` once (one pass over the
replicas) and renders

    fluss_replica_leader_count            buckets this server leads
    fluss_replica_follower_count          buckets this server follows
    fluss_replica_under_replicated        led buckets whose ISR is smaller than their assignment
    fluss_replica_under_min_isr           led buckets whose ISR is below min.insync.replicas
    fluss_replica_isr_count{table_id,bucket}  ISR size of each led bucket

Who may call: prometheus-client's ``generate_latest`` from the HTTP handler on the server's loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from fluss_py.replica.manager import ReplicaStats


class ReplicaStatsCollector(Collector):
    """Renders ``stats()`` (None while the replica manager does not exist yet: nothing is rendered)."""

    def __init__(self, stats: Callable[[], ReplicaStats | None]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[GaugeMetricFamily]:
        s = self._stats()
        if s is None:
            return
        yield GaugeMetricFamily("fluss_replica_leader_count", "Buckets this server leads", value=s.leader_count)
        yield GaugeMetricFamily("fluss_replica_follower_count", "Buckets this server follows", value=s.follower_count)
        yield GaugeMetricFamily(
            "fluss_replica_under_replicated",
            "Led buckets whose ISR is smaller than their assignment",
            value=s.under_replicated,
        )
        yield GaugeMetricFamily(
            "fluss_replica_under_min_isr", "Led buckets whose ISR is below min.insync.replicas", value=s.under_min_isr
        )
        isr = GaugeMetricFamily(
            "fluss_replica_isr_count", "ISR size of each bucket this server leads", labels=["table_id", "bucket"]
        )
        for tb, n in s.isr_sizes.items():
            isr.add_metric([str(tb.table_id), str(tb.bucket)], n)
        yield isr
