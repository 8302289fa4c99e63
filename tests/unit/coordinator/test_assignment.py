"""Replica assignment (pure): distinct servers, balanced replicas and leaders, rack spread."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluss_py.coordinator.assignment import assign_replicas, rack_alternated
from fluss_py.errors import InvalidReplicationFactorError, InvalidRequestError


def counts(assignment, servers):
    replicas = Counter(s for r in assignment.values() for s in r)
    leaders = Counter(r[0] for r in assignment.values())
    return [replicas[s] for s in servers], [leaders[s] for s in servers]


def spread(values):
    return max(values) - min(values)


def test_three_servers_rf3_one_bucket():
    a = assign_replicas({1: "", 2: "", 3: ""}, 1, 3)
    assert a == {0: (1, 2, 3)} or sorted(a[0]) == [1, 2, 3]


def test_replication_factor_above_live_servers_is_refused():
    with pytest.raises(InvalidReplicationFactorError, match=r"replication factor 4 .* live tablet servers \(3\)"):
        assign_replicas({1: "", 2: "", 3: ""}, 2, 4)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas({1: ""}, 1, 0)
    with pytest.raises(InvalidReplicationFactorError):
        assign_replicas({}, 1, 1)
    with pytest.raises(InvalidRequestError):
        assign_replicas({1: ""}, 0, 1)


def test_start_index_rotates_leaders():
    servers = {1: "", 2: "", 3: ""}
    assert [assign_replicas(servers, 1, 1, start_index=i)[0][0] for i in range(4)] == [1, 2, 3, 1]


def test_rack_alternated_order():
    assert rack_alternated({1: "a", 2: "a", 3: "b", 4: "c", 5: "c"}) == [1, 3, 4, 2, 5]
    assert rack_alternated({3: "a", 1: "", 2: "b"}) == [1, 2, 3]  # a server without rack: racks ignored


def test_followers_of_one_leader_spread_over_several_servers():
    # Kafka's shifting: the buckets led by server 0 do not all pick the same follower.
    a = assign_replicas({i: "" for i in range(5)}, 20, 2)
    followers_of_0 = {r[1] for r in a.values() if r[0] == 0}
    assert len(followers_of_0) >= 3


def test_racks_two_replicas_never_share_a_rack():
    servers = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    a = assign_replicas(servers, 12, 3)
    assert all(len({servers[s] for s in r}) == 3 for r in a.values())
    replicas, leaders = counts(a, servers)
    assert spread(replicas) <= 1 and spread(leaders) <= 1


@st.composite
def plain_cluster(draw):
    n = draw(st.integers(1, 12))
    ids = draw(st.lists(st.integers(0, 1000), min_size=n, max_size=n, unique=True))
    rf = draw(st.integers(1, n))
    return {i: "" for i in ids}, draw(st.integers(1, 64)), rf, draw(st.integers(0, 100)), draw(st.integers(0, 10))


@settings(max_examples=300, deadline=None)
@given(plain_cluster())
def test_without_racks_replicas_and_leaders_are_balanced_within_one(case):
    servers, buckets, rf, start, shift = case
    a = assign_replicas(servers, buckets, rf, start_index=start, first_shift=shift)
    assert sorted(a) == list(range(buckets))
    assert all(len(r) == rf and len(set(r)) == rf and set(r) <= set(servers) for r in a.values())
    replicas, leaders = counts(a, servers)
    assert spread(replicas) <= 1 and spread(leaders) <= 1


@st.composite
def rack_cluster(draw, equal_racks):
    num_racks = draw(st.integers(1, 5))
    if equal_racks:
        per_rack = draw(st.integers(1, 4))
        servers = {i: f"rack-{i % num_racks}" for i in range(num_racks * per_rack)}
    else:
        n = draw(st.integers(num_racks, 12))
        servers = {i: f"rack-{draw(st.integers(0, num_racks - 1))}" for i in range(n)}
    rf = draw(st.integers(1, len(servers)))
    return servers, draw(st.integers(1, 64)), rf, draw(st.integers(0, 100)), draw(st.integers(0, 10))


@settings(max_examples=300, deadline=None)
@given(rack_cluster(equal_racks=False))
def test_racks_every_bucket_uses_as_many_racks_as_possible(case):
    servers, buckets, rf, start, shift = case
    a = assign_replicas(servers, buckets, rf, start_index=start, first_shift=shift)
    num_racks = len(set(servers.values()))
    for r in a.values():
        assert len(set(r)) == rf
        assert len({servers[s] for s in r}) == min(rf, num_racks)
    _, leaders = counts(a, servers)
    assert spread(leaders) <= 1


@settings(max_examples=300, deadline=None)
@given(rack_cluster(equal_racks=True))
def test_equal_racks_and_rf_within_racks_are_balanced_within_one(case):
    servers, buckets, rf, start, shift = case
    if rf > len(set(servers.values())):
        rf = len(set(servers.values()))
    a = assign_replicas(servers, buckets, rf, start_index=start, first_shift=shift)
    assert all(len({servers[s] for s in r}) == rf for r in a.values())
    replicas, leaders = counts(a, servers)
    assert spread(replicas) <= 1 and spread(leaders) <= 1
