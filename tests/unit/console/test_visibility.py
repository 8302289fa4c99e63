"""console/visibility.py: a principal's cut of a console snapshot (tables, buckets, timeline, groups, servers)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from fluss_py.console.visibility import visible

pytestmark = pytest.mark.unit


@dataclass
class FakeViewer:
    tables: set[str] = field(default_factory=set)
    groups: set[str] = field(default_factory=set)
    sees_all: bool = False

    def table(self, name: str) -> bool:
        return name in self.tables

    def group(self, name: str) -> bool:
        return name in self.groups


def bucket(table_id: int, b: int, leader: int, replicas: list[int], under: bool = False) -> dict:
    return {"table_id": table_id, "bucket": b, "leader": leader, "replicas": replicas, "under_replicated": under}


SNAPSHOT = {
    "ts": 1.0,
    "coordinator": {"id": 1},
    "coordinators": [{"id": 1}],
    "tables": [{"id": 7, "name": "db.a"}, {"id": 8, "name": "db.secret"}],
    "buckets": [bucket(7, 0, 1, [1, 2]), bucket(8, 0, 1, [1, 2], True), bucket(8, 1, 2, [2, 1])],
    "servers": [
        {"id": 1, "leaders": 2, "replicas": 3, "under_replicated": 1, "held": 10},
        {"id": 2, "leaders": 1, "replicas": 3, "under_replicated": 0, "held": 10},
    ],
    "timeline": [{"table": "db.a", "bucket": 0}, {"table": "db.secret", "bucket": 1}, {"table": "8", "bucket": 0}],
    "groups": [
        {
            "name": "g",
            "members": [{"id": "m", "b": [[7, 0], [8, 0]]}],
            "offsets": [[7, 0, 1, 2, 1, []], [8, 0, 1, 1, 0, []]],
        },
        {"name": "other", "members": [], "offsets": [[7, 0, 1, 2, 1, []]]},
    ],
    "rebalance": {"status": "COMPLETED", "moves": [{"table_id": 8}]},
}


def test_a_viewer_of_everything_gets_the_snapshot_itself() -> None:
    assert visible(SNAPSHOT, FakeViewer(sees_all=True)) is SNAPSHOT


def test_a_viewer_of_one_table_sees_that_table_only() -> None:
    cut = visible(SNAPSHOT, FakeViewer({"db.a"}, {"g"}))
    assert [t["name"] for t in cut["tables"]] == ["db.a"]
    assert {b["table_id"] for b in cut["buckets"]} == {7}
    assert cut["timeline"] == [{"table": "db.a", "bucket": 0}]  # an unnamed id ("8") names nothing it may see
    assert [g["name"] for g in cut["groups"]] == ["g"]
    assert cut["groups"][0]["members"][0]["b"] == [[7, 0]] and [r[0] for r in cut["groups"][0]["offsets"]] == [7]
    assert cut["rebalance"] is None  # GET /rebalance needs DESCRIBE on the cluster
    assert [(s["id"], s["leaders"], s["replicas"], s["under_replicated"]) for s in cut["servers"]] == [
        (1, 1, 1, 0), (2, 0, 1, 0)]  # fmt: skip
    assert cut["coordinators"] == SNAPSHOT["coordinators"] and "8" not in str(cut["tables"])
    assert SNAPSHOT["tables"][1]["name"] == "db.secret"  # the shared snapshot is not changed


def test_a_viewer_of_nothing_sees_no_table_and_an_error_snapshot_stays_an_error() -> None:
    cut = visible(SNAPSHOT, FakeViewer())
    assert cut["tables"] == [] and cut["buckets"] == [] and cut["groups"] == [] and cut["timeline"] == []
    assert visible({"ts": 2.0, "error": "KeyError: x"}, FakeViewer()) == {"ts": 2.0, "error": "KeyError: x"}
