"""Automatic rebalance triggers (pure)."""

from hypothesis import given
from hypothesis import strategies as st

from fluss_py.coordinator.assignment import assign_replicas
from fluss_py.coordinator.rebalance.planner import is_balanced
from fluss_py.coordinator.rebalance.triggers import Reason, decide, empty_servers, imbalanced, replica_counts

BALANCED = assign_replicas({1: "", 2: "", 3: ""}, 30, 3)


def test_balanced_cluster_does_not_trigger():
    assert decide(BALANCED, {1, 2, 3}, 0.1, auto=True, running=False) is None


def test_new_servers_trigger():
    t = decide(BALANCED, {1, 2, 3, 4, 5}, 0.1, auto=True, running=False)
    assert t is not None and t.reason is Reason.NEW_SERVER and "[4, 5]" in t.detail


def test_imbalance_over_threshold_triggers():
    skewed = {b: (1, 2) for b in range(10)} | {10 + b: (2, 3) for b in range(2)}
    t = decide(skewed, {1, 2, 3}, 0.1, auto=True, running=False)
    assert t is not None and t.reason is Reason.IMBALANCE and "> threshold 0.1" in t.detail
    assert decide(skewed, {1, 2, 3}, 0.9, auto=True, running=False) is None


def test_nothing_when_off_running_unhealthy_or_empty():
    args = (BALANCED, {1, 2, 3, 4}, 0.1)
    assert decide(*args, auto=False, running=False) is None
    assert decide(*args, auto=True, running=True) is None
    assert decide(BALANCED, {1, 2, 4}, 0.1, auto=True, running=False) is None  # server 3 hosts replicas, down
    assert decide({}, {1, 2}, 0.1, auto=True, running=False) is None


def test_tiny_clusters_as_even_as_possible_do_not_trigger():
    # 3 replicas on 4 servers: spread 0.58 but nothing better exists
    assert decide({0: (1, 2, 3)}, {1, 2, 3, 4}, 0.1, auto=True, running=False) is None


def test_helpers():
    counts = replica_counts({0: (1, 2), 1: (2, 3)}, {1, 2, 3, 4})
    assert counts == {1: 1, 2: 2, 3: 1, 4: 0}
    assert empty_servers(counts) == [4] and empty_servers({1: 0, 2: 0}) == []
    assert imbalanced({1: 1, 2: 1}, 0.1) is None and imbalanced({1: 5, 2: 1}, 0.1) > 0.1


@given(st.dictionaries(st.integers(0, 30), st.lists(st.integers(1, 6), min_size=1, max_size=3, unique=True)),
       st.sampled_from([0.0, 0.1, 0.5]))  # fmt: skip
def test_property_trigger_iff_not_balanced_when_healthy(assignment, threshold):
    live = {1, 2, 3, 4, 5, 6}
    t = decide(assignment, live, threshold, auto=True, running=False)
    counts = list(replica_counts(assignment, live).values())
    assert (t is None) == (not assignment or is_balanced(counts, threshold))
