"""cluster.json codec and the /health readiness and leader decisions (pure, no processes)."""

import pytest

from fluss_py.testing.cluster_file import ClusterRecord, ProcessRecord
from fluss_py.testing.health import is_ready, leader_of


def _record() -> ClusterRecord:
    zk = ProcessRecord(
        "zookeeper", "zookeeper", None, "127.0.0.1:2000", None, "/d/zk.log", "/d/zk.log", "/d/zk", ["java"]
    )
    c1 = ProcessRecord(
        "coordinator-1", "coordinator", 1, "127.0.0.1:2001", "127.0.0.1:2002", "/d/c1.log", "/d/c1.out", "/d/c1",
        ["python", "coordinator"], pid=42, start_ticks=7,
    )  # fmt: skip
    return ClusterRecord("/d", "127.0.0.1:2000", "/fluss", [zk, c1])


def test_cluster_json_round_trips_and_is_saved_atomically(tmp_path):
    rec = _record()
    path = rec.save(tmp_path)
    assert ClusterRecord.load(tmp_path) == rec
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temp file left behind
    c1 = rec.get("coordinator-1")
    assert (c1.rpc_port, c1.http_port, c1.http_url) == (2001, 2002, "http://127.0.0.1:2002")
    assert rec.get("zookeeper").http_port is None
    with pytest.raises(KeyError, match="tablet-server-9"):
        rec.get("tablet-server-9")


def test_cluster_json_rejects_other_versions_and_roles(tmp_path):
    text = _record().to_json()
    with pytest.raises(ValueError, match="version"):
        ClusterRecord.from_json(text.replace('"version": 1', '"version": 2'))
    with pytest.raises(ValueError, match="role"):
        ClusterRecord.from_json(text.replace('"role": "coordinator"', '"role": "broker"'))
    with pytest.raises(FileNotFoundError, match="cluster up"):
        ClusterRecord.load(tmp_path)


@pytest.mark.parametrize(
    ("role", "health", "ready"),
    [
        ("coordinator", {"state": "Leader"}, True),
        ("coordinator", {"state": "Standby"}, True),
        ("coordinator", {"state": "Electing"}, False),
        ("coordinator", {"state": "Down"}, False),
        ("coordinator", None, False),
        ("tablet-server", {"state": "Running", "registered": True}, True),
        ("tablet-server", {"state": "Running", "registered": False}, False),
        ("zookeeper", {"state": "Running"}, False),
    ],
)
def test_readiness_follows_the_contract(role, health, ready):
    assert is_ready(role, health) is ready


def _c(state, epoch):
    return {"role": "coordinator", "state": state, "coordinator_epoch": epoch}


def test_leader_is_the_one_leader_or_the_highest_epoch_and_ambiguity_is_none():
    assert leader_of({"a": _c("Standby", 3), "b": _c("Leader", 3), "c": None}) == "b"
    assert leader_of({"a": _c("Standby", 3), "b": _c("Standby", 3)}) is None
    assert leader_of({"zombie": _c("Leader", 3), "new": _c("Leader", 4)}) == "new"
    assert leader_of({"x": _c("Leader", 4), "y": _c("Leader", 4)}) is None
