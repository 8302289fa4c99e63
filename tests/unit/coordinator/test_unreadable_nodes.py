"""An unreadable stored node costs its own table, never the load of every other table."""

import json

import pytest

from fluss_py.coordinator.events import CreateTable
from fluss_py.coordinator.unreadable import Unreadable, decode_or_report
from fluss_py.types import TableBucket, TablePath
from fluss_py.zk.paths import LeaderIsrZNode, TableAssignmentZNode, TableZNode

from .harness import ROOT, Harness, fresh_zk

A, B = TablePath("fluss", "a"), TablePath("fluss", "b")
GARBAGE = [b"oops", b"", b"\xff\xfe", b"[]", b"{}", b'{"leader": "x"}', b"null", b"42", json.dumps({"isr": 1}).encode()]


@pytest.mark.parametrize("data", GARBAGE)
@pytest.mark.parametrize("decode", [LeaderIsrZNode.decode, TableAssignmentZNode.decode, TableZNode.decode])
def test_garbage_is_reported_with_its_path_never_raised(data, decode):
    got = decode_or_report("/fluss/some/node", data, decode)
    if not isinstance(got, Unreadable):  # a few of them happen to be valid for some codecs ({} assignment)
        assert decode(data) == got
        return
    assert got.path == "/fluss/some/node" and got.reason


def test_a_good_value_decodes():
    assert decode_or_report("/p", b"7", int) == 7


async def _two_tables():
    zk, fence = fresh_zk()
    h = Harness(zk, {1: "", 2: "", 3: ""}, fence)
    await h.start()
    a = await h.proc.create_table(CreateTable(A, num_buckets=2, replication_factor=3))
    b = await h.proc.create_table(CreateTable(B, num_buckets=1, replication_factor=3))
    await h.channel.close()
    return zk, a, b


def _spoil(zk, path: str) -> None:
    zk.nodes[path] = (b"oops", zk.nodes[path][1])


@pytest.mark.parametrize("what", ["leader_isr", "assignment", "table"])
async def test_the_next_leader_loads_every_other_table_and_names_the_bad_node(what, caplog):
    zk, a, b = await _two_tables()
    bad = {
        "leader_isr": LeaderIsrZNode.path(ROOT, a, 1),
        "assignment": TableAssignmentZNode.path(ROOT, a),
        "table": TableZNode.path(ROOT, A.database, A.table),
    }[what]
    _spoil(zk, bad)
    h2 = Harness(zk, {1: "", 2: "", 3: ""}, zk.fence(2))
    try:
        assert await h2.proc.load_tables() == 1
        view = h2.proc.view
        assert b in view.tables and a not in view.tables
        assert TableBucket(b, 0) in view.buckets and TableBucket(a, 0) not in view.buckets
        assert list(h2.proc.store.unreadable) == [bad]
        assert [r.getMessage() for r in caplog.records if bad in r.getMessage() and r.levelname == "ERROR"]
        assert TableAssignmentZNode.path(ROOT, a) in zk.nodes  # an unknown id is never deleted as debris
    finally:
        await h2.channel.close()
