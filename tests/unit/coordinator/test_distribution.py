"""fluss_tablet_distribution: replicas and leaders per server from a ClusterView (pure) and as a collector."""

from prometheus_client import CollectorRegistry, generate_latest

from fluss_py.coordinator.distribution import TabletDistributionCollector, distribution
from fluss_py.coordinator.tables import BucketInfo, ClusterView
from fluss_py.types import LeaderAndIsr, TableBucket


def _view() -> ClusterView:
    view = ClusterView()
    view.buckets[TableBucket(1, 0)] = BucketInfo((1, 2, 3), LeaderAndIsr(1, 0, (1, 2, 3), 1, 0))
    view.buckets[TableBucket(1, 1)] = BucketInfo((2, 3, 1), LeaderAndIsr(2, 0, (2, 3), 1, 0))
    view.buckets[TableBucket(1, 2)] = BucketInfo((3, 1, 2), LeaderAndIsr(-1, 1, (3,), 1, 0))  # leaderless
    view.buckets[TableBucket(2, 0)] = BucketInfo((1, 2), None)  # not elected yet
    return view


def test_counts_replicas_and_leaders_and_lists_idle_live_servers() -> None:
    assert distribution(_view(), live=[1, 2, 3, 4]) == {1: (4, 1), 2: (4, 1), 3: (3, 0), 4: (0, 0)}


def test_collector_exports_per_server_samples_only_on_the_leader() -> None:
    registry = CollectorRegistry()
    source = {"got": (_view(), [1, 2, 3])}
    registry.register(TabletDistributionCollector(lambda: source["got"]))
    text = generate_latest(registry).decode()
    assert 'fluss_tablet_distribution{kind="replicas",server="1"} 4.0' in text
    assert 'fluss_tablet_distribution{kind="leaders",server="2"} 1.0' in text
    source["got"] = None
    assert "fluss_tablet_distribution{" not in generate_latest(registry).decode()
