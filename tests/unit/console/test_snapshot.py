"""The console's snapshot, failover timeline and rates, decided from an in-memory ClusterView."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from fluss_py.console.leader_view import LeaderView
from fluss_py.console.snapshot import ConsoleSource, Rates, Timeline, build_snapshot
from fluss_py.coordinator.state import BucketState
from fluss_py.coordinator.tables import ClusterView, TableRegistration
from fluss_py.types import LeaderAndIsr, TableBucket, TablePath
from fluss_py.zk.codecs import TabletServerRegistration

pytestmark = pytest.mark.unit


def _view(leaders: dict[int, tuple[int, tuple[int, ...]]], epoch: int = 0) -> ClusterView:
    view = ClusterView()
    view.add_table(TableRegistration(7, TablePath("fluss", "orders"), 3, 3), {b: (1, 2, 3) for b in range(3)})
    for b, (leader, isr) in leaders.items():
        tb = TableBucket(7, b)
        view.buckets[tb].leader_and_isr = LeaderAndIsr(leader, epoch, isr, 1, 0)
        view.bucket_states.force(tb, BucketState.ONLINE)
    return view


def _source(view: LeaderView, live: set[int], sizes: dict[TableBucket, int] | None = None) -> ConsoleSource:
    servers = {s: TabletServerRegistration("127.0.0.1", 9000 + s, rack=f"r{s}") for s in (1, 2, 3)}
    return ConsoleSource({"id": 0, "state": "Leader"}, view, live, servers, sizes or {})


def test_buckets_are_marked_under_replicated_and_offline():
    view = _view({0: (1, (1, 2, 3)), 1: (2, (2, 3)), 2: (3, (3,))})
    snap = build_snapshot(_source(view, live={1, 2}), now=100.0)
    rows = {b["bucket"]: b for b in snap["buckets"]}
    assert (rows[0]["under_replicated"], rows[0]["offline"]) == (False, False)
    assert (rows[1]["under_replicated"], rows[1]["offline"]) == (True, False)
    assert rows[2]["offline"] is True  # its leader 3 is not live
    (table,) = snap["tables"]
    assert (table["name"], table["under_replicated"], table["offline"]) == ("fluss.orders", 1, 1)
    servers = {s["id"]: s for s in snap["servers"]}
    assert [servers[s]["alive"] for s in (1, 2, 3)] == [True, True, False]
    assert (servers[1]["leaders"], servers[2]["leaders"], servers[2]["under_replicated"]) == (1, 1, 1)
    assert all(s["replicas"] == 3 for s in servers.values())


def test_a_bucket_the_state_machine_holds_offline_is_offline_though_its_last_leader_is_live():
    view = _view({0: (1, (1, 2, 3)), 1: (2, (2, 3))})
    view.bucket_states.force(TableBucket(7, 1), BucketState.OFFLINE)  # ClusterView.is_offline
    rows = {b["bucket"]: b for b in build_snapshot(_source(view, live={1, 2, 3}), now=1.0)["buckets"]}
    assert (rows[0]["offline"], rows[1]["offline"], rows[1]["under_replicated"]) == (False, True, False)


@dataclass
class _Table:
    path: TablePath
    num_buckets: int
    replication_factor: int


@dataclass
class _Bucket:
    replicas: tuple[int, ...]
    leader_and_isr: LeaderAndIsr | None


@dataclass
class _PlainView:
    """Not a ClusterView: the console reads the leader only through console/leader_view.py's LeaderView."""

    tables: dict[int, _Table]
    buckets: dict[TableBucket, _Bucket]
    offline: set[TableBucket] = field(default_factory=set)
    on_leader_and_isr: object = None
    tagged: dict[int, str] = field(default_factory=dict)

    def is_offline(self, tb: TableBucket) -> bool:
        return tb in self.offline


def test_any_view_of_the_leader_view_shape_builds_the_snapshot():
    tb0, tb1 = TableBucket(3, 0), TableBucket(3, 1)
    view = _PlainView(
        {3: _Table(TablePath("db", "t"), 2, 2)},
        {tb0: _Bucket((1, 2), LeaderAndIsr(1, 4, (1, 2), 1, 0)), tb1: _Bucket((2, 1), None)},
        offline={tb1},
    )
    snap = build_snapshot(_source(view, live={1, 2}), now=1.0)  # type: ignore[arg-type]
    assert [(b["bucket"], b["leader"], b["leader_epoch"], b["offline"]) for b in snap["buckets"]] == [
        (0, 1, 4, False),
        (1, -1, -1, True),
    ]
    assert [(t["name"], t["buckets"], t["offline"]) for t in snap["tables"]] == [("db.t", 2, 1)]


def test_a_dead_unregistered_server_with_replicas_is_shown_not_alive():
    view = _view({0: (1, (1, 2))})
    source = _source(view, live={1, 2})
    source.servers = {s: r for s, r in source.servers.items() if s != 3}  # 3's registration is gone
    servers = {s["id"]: s for s in build_snapshot(source, now=1.0)["servers"]}
    assert (servers[3]["alive"], servers[3]["host"], servers[3]["replicas"]) == (False, "", 3)


def test_servers_show_their_tag_and_a_tagged_server_holding_nothing_is_listed():
    view = _view({0: (1, (1, 2, 3))})
    view.tagged = {3: "temporary-offline", 9: "permanent-offline"}  # 9: replaced, holds nothing, unregistered
    servers = {s["id"]: s for s in build_snapshot(_source(view, live={1, 2, 3}), now=1.0)["servers"]}
    assert {s: servers[s]["tag"] for s in servers} == {1: "none", 2: "none", 3: "temporary-offline",
                                                       9: "permanent-offline"}  # fmt: skip
    assert (servers[9]["alive"], servers[9]["replicas"]) == (False, 0)


def test_a_standby_snapshot_has_no_tables():
    snap = build_snapshot(ConsoleSource({"id": 1, "state": "Standby"}), now=1.0)
    assert (snap["servers"], snap["tables"], snap["buckets"]) == ([], [], [])


def test_timeline_records_leader_and_isr_changes_and_forgets_after_the_window():
    timeline = Timeline(window_s=60.0)
    first = LeaderAndIsr(1, 0, (1, 2, 3), 1, 0)
    timeline.record(0.0, "fluss.orders", 0, None, first)  # a new bucket's first leader: no event
    assert timeline.events(0.0) == []
    timeline.record(10.0, "fluss.orders", 0, first, LeaderAndIsr(2, 1, (2, 3), 1, 0))
    kinds = [(e["kind"], e["from"], e["to"], e["leader_epoch"]) for e in timeline.events(10.0)]
    assert kinds == [("leader", 1, 2, 1), ("isr", [1, 2, 3], [2, 3], 1)]
    timeline.record(20.0, "fluss.orders", 1, first, LeaderAndIsr(1, 0, (3, 2, 1), 1, 1))  # same set: no event
    assert len(timeline.events(30.0)) == 2
    assert timeline.events(75.0) == []  # older than 60 s


def test_rates_are_size_growth_over_the_window():
    rates = Rates(window_s=10.0)
    tb = TableBucket(7, 0)
    view = _view({0: (1, (1, 2, 3))})
    first = build_snapshot(_source(view, {1, 2, 3}, {tb: 1000}), now=0.0)
    rates.observe(first)
    assert first["tables"][0]["bytes_per_s"] == 0.0
    later = build_snapshot(_source(view, {1, 2, 3}, {tb: 6000}), now=5.0)
    rates.observe(later)
    assert later["tables"][0]["bytes_per_s"] == 1000.0


def test_records_per_s_is_leo_growth_over_the_window_of_buckets_known_at_both_ends():
    rates = Rates(window_s=10.0)
    view = _view({0: (1, (1, 2, 3)), 1: (1, (1, 2, 3)), 2: (1, (1, 2, 3))})

    def snap(now: float, leos: dict[int, int]) -> dict:
        source = _source(view, {1, 2, 3})
        source.offsets = {1: {TableBucket(7, b): (leo, leo) for b, leo in leos.items()}}
        out = build_snapshot(source, now=now)
        rates.observe(out)
        return out["tables"][0]

    first = snap(0.0, {0: 100, 1: 50, 2: 900})
    assert (first["records"], first["records_per_s"]) == (1050, 0.0)
    # bucket 2's LEO unknown (a failover): no drop counted; buckets 0 and 1 grew by 400 and 100 in 5 s
    later = snap(5.0, {0: 500, 1: 150})
    assert (later["records"], later["records_per_s"]) == (650, 100.0)
    # bucket 2 reported again, lower (a truncating new leader): neither its return nor its drop is a spike
    again = snap(8.0, {0: 500, 1: 150, 2: 880})
    assert again["records_per_s"] == 62.5  # (400 + 100) / 8 s
    # the window slides: from the sample at 5 s (the one at 0 s is over 10 s old), only bucket 0 grew
    assert snap(15.0, {0: 1500, 1: 150, 2: 880})["records_per_s"] == 100.0


def test_coordinators_panel_names_the_leader_its_epoch_and_the_standbys_in_succession_order():
    from fluss_py.console.snapshot import coordinators_view
    from fluss_py.types import CoordinatorLeaderInfo
    from fluss_py.zk.codecs import CoordinatorRegistration

    registered = [CoordinatorRegistration(sid, "127.0.0.1", 9000 + sid, 9100 + sid) for sid in (1, 2, 3, 4)]
    leader = CoordinatorLeaderInfo(2, 7, "127.0.0.1", 9002, 9102)
    rows = coordinators_view(registered, [2, 3, 1], leader)  # 4 registered but not (yet) a candidate
    got = {r["id"]: (r["state"], r["epoch"], r["rank"]) for r in rows}
    assert got == {
        1: ("Standby", None, 2), 2: ("Leader", 7, None), 3: ("Standby", None, 1), 4: ("Registered", None, None)
    }  # fmt: skip
    assert rows[1]["host"] == "127.0.0.1:9002"
    # no leader node (an election in progress): nobody is Leader; an unregistered candidate is still listed
    rows = coordinators_view(registered[:1], [5, 1], None)
    assert {r["id"]: (r["state"], r["host"]) for r in rows} == {1: ("Standby", "127.0.0.1:9001"), 5: ("Standby", "")}
    snap = build_snapshot(ConsoleSource({"id": 1}, coordinators=rows), now=1.0)
    assert snap["coordinators"] == rows  # a standby's snapshot (no view) carries the panel too


def test_hw_and_leo_of_a_bucket_come_from_its_current_leaders_report():
    view = _view({0: (1, (1, 2, 3)), 1: (2, (2, 3)), 2: (3, (3,))})
    source = _source(view, live={1, 2, 3})
    # server 2 still reports bucket 0 from before it lost the leadership: the leader's report counts
    source.offsets = {1: {TableBucket(7, 0): (10, 12)}, 2: {TableBucket(7, 0): (4, 4), TableBucket(7, 1): (5, 6)}}
    rows = {b["bucket"]: b for b in build_snapshot(source, now=1.0)["buckets"]}
    assert [(rows[b]["hw"], rows[b]["leo"]) for b in range(3)] == [(10, 12), (5, 6), (-1, -1)]
