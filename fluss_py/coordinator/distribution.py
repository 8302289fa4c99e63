"""``fluss_tablet_distribution``: replicas and leaders per tablet server, on the coordinator leader's /metrics.

    fluss_tablet_distribution{server="1",kind="replicas"} 6.0
    fluss_tablet_distribution{server="1",kind="leaders"} 2.0

Computed at scrape time from the leader's ClusterView (one pass over the buckets: O(buckets) per scrape,
nothing per write). Live servers without replicas are listed with 0, so an unbalanced cluster shows. A
standby coordinator exports no samples. The values match ``fluss-py cluster servers`` and the sums of
``fluss-py table describe`` over all tables.

Who may call: prometheus_client's scrape (the HTTP handler on the loop thread): it only reads the view.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator

from prometheus_client.registry import Collector

from fluss_py import metric_catalogue_coordinator as mc
from fluss_py.coordinator.tables import ClusterView
from fluss_py.metric_spec import Family
from fluss_py.types import NO_LEADER

NAME = mc.TABLET_DISTRIBUTION.name


def distribution(view: ClusterView, live: Iterable[int]) -> dict[int, tuple[int, int]]:
    """server id -> (replicas, leaders) over every bucket of the view; live servers appear with zeros."""
    replicas: Counter[int] = Counter()
    leaders: Counter[int] = Counter()
    for bucket in view.buckets.values():
        replicas.update(bucket.replicas)
        lai = bucket.leader_and_isr
        if lai is not None and lai.leader != NO_LEADER:
            leaders[lai.leader] += 1
    servers = set(live) | set(replicas) | set(leaders)
    return {s: (replicas[s], leaders[s]) for s in sorted(servers)}


class TabletDistributionCollector(Collector):
    """Exports ``distribution()`` of the view ``source()`` returns (None on a standby: no samples)."""

    def __init__(self, source: Callable[[], tuple[ClusterView, Iterable[int]] | None]) -> None:
        self._source = source

    def describe(self) -> list[Family]:
        return [self._family()]

    def _family(self) -> Family:
        return mc.TABLET_DISTRIBUTION.family()

    def collect(self) -> Iterator[Family]:
        family = self._family()
        got = self._source()
        if got is not None:
            for server, (replicas, leaders) in distribution(*got).items():
                family.add_metric([str(server), "replicas"], replicas)
                family.add_metric([str(server), "leaders"], leaders)
        yield family
