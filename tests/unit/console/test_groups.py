"""The console's consumer-groups panel: membership from memory, committed offsets, lag and its history."""

from __future__ import annotations

import pytest

from fluss_py.console.groups import LagHistory, groups_view
from fluss_py.console.snapshot import ConsoleSource, build_snapshot
from fluss_py.coordinator.group_members import GroupMembers, Member
from fluss_py.coordinator.tables import ClusterView, TableRegistration
from fluss_py.types import LeaderAndIsr, TableBucket, TablePath

pytestmark = pytest.mark.unit

A, B = TableBucket(7, 0), TableBucket(7, 1)


def _group() -> GroupMembers:
    m1 = Member("m-1", "", "10.0.0.1", 10_000, frozenset({7}), epoch=3, assigned={B, A})
    m2 = Member("m-2", "", "10.0.0.2", 10_000, frozenset({7}), epoch=3)
    return GroupMembers(epoch=3, members={"m-2": m2, "m-1": m1}, target={"m-1": {A, B}, "m-2": set()})


def test_a_group_shows_its_state_members_and_lag_per_committed_bucket():
    hws = {A: 100, B: -1}  # B's leader has not reported yet
    rows = groups_view({"g": _group()}, {"g": {B: 5, A: 40}, "idle": {A: 100}}, lambda tb: hws.get(tb, -1))
    assert [g["name"] for g in rows] == ["g", "idle"]  # a group with offsets but not in memory is listed too
    g, idle = rows
    assert g["state"] == "STABLE" and idle == {"name": "idle", "state": "EMPTY", "members": [],
                                               "offsets": [[7, 0, 100, 100, 0]]}  # fmt: skip
    assert g["members"] == [{"id": "m-1", "host": "10.0.0.1", "b": [[7, 0], [7, 1]]},
                            {"id": "m-2", "host": "10.0.0.2", "b": []}]  # fmt: skip
    assert g["offsets"] == [[7, 0, 40, 100, 60], [7, 1, 5, -1, None]]


def test_the_lag_history_gains_a_point_per_offsets_read_and_forgets_old_ones():
    history = LagHistory(window_s=300.0, points=3)

    def observe(lag: int, read_at: float | None, now: float) -> list:
        rows = [{"name": "g", "offsets": [[7, 0, 10, 10 + lag, lag]]}]
        history.observe(rows, read_at, now)
        return rows[0]["offsets"][0][5]

    assert observe(5, None, 0.0) == []  # never read: no point
    assert observe(5, 1.0, 1.0) == [5]
    assert observe(7, 1.0, 2.0) == [5]  # the same read seen again by the next sample: no new point
    assert observe(7, 6.0, 6.0) == [5, 7]
    assert observe(9, 11.0, 11.0) == [5, 7, 9]
    assert observe(2, 16.0, 16.0) == [7, 9, 2]  # at most ``points``
    assert observe(3, 400.0, 400.0) == [3]  # older than the window


def test_the_snapshot_takes_each_buckets_hw_from_its_current_leader():
    view = ClusterView()
    view.add_table(TableRegistration(7, TablePath("fluss", "orders"), 2, 2), {0: (1, 2), 1: (1, 2)})
    view.buckets[A].leader_and_isr = LeaderAndIsr(2, 1, (1, 2), 1, 0)
    source = ConsoleSource({"id": 0, "state": "Leader"}, view, {1, 2}, {},
                           offsets={1: {A: (90, 90)}, 2: {A: (120, 125)}},  # 1 was A's leader before
                           groups={"g": _group()}, committed={"g": {A: 100, B: 0, TableBucket(99, 0): 3}},  # 99 dropped
                           committed_at=50.0)  # fmt: skip
    snap = build_snapshot(source, now=55.0)
    assert snap["groups"][0]["offsets"] == [[7, 0, 100, 120, 20], [7, 1, 0, -1, None]]  # B has no leader
    assert snap["groups_read"] == 50.0


def test_offsets_are_read_only_while_a_console_watches():
    import time

    from fluss_py.console.routes import WATCHED_S, ConsoleFeed

    async def no_leader() -> None:
        return None

    feed = ConsoleFeed(lambda: ConsoleSource({"id": 0, "state": "Leader"}), no_leader)
    assert not feed.watched  # nobody connected: no ZooKeeper reads for the groups panel
    feed.subscribers = 1
    assert feed.watched
    feed.subscribers, feed._polled = 0, time.monotonic()  # a /console/snapshot read just now
    assert feed.watched
    feed._polled = time.monotonic() - WATCHED_S - 1
    assert not feed.watched
