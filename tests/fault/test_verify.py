"""``fluss-py verify`` end to end: a short run (~2 minutes) of every fault kind on test hosts finds no violation,
and its files say what happened. The long run (>= 300 faults, 3 ZooKeeper + 3 coordinators + 5 tablet
servers) is ``make chaos``; its figures are in docs/fault-testing.md."""

import json
import os
from pathlib import Path

import pytest

from fluss_py.testing.netns import namespaces_of
from fluss_py.verify.runner import Verify, VerifyOptions
from fluss_py.verify.schedule import KINDS

pytestmark = pytest.mark.fault

SEED = 38  # a 75 s schedule with every kind, three kinds of partition, loss and latency
KV_SEED = 197  # 45 s of kill/term/pause: a coordinator, ZooKeeper and a tablet server killed, two tablet servers
# SIGSTOPped, a tablet server and a coordinator SIGTERMed


@pytest.mark.timeout(480)
def test_short_verify_run_under_every_fault_kind(netns_hosts, tmp_path: Path):
    options = VerifyOptions(time=75, seed=SEED, zookeepers=3, coordinators=2, tablet_servers=3, producers=2, rate=20)
    verify = Verify(options, tmp_path / "verify")
    report = verify.run()
    summary = json.loads((tmp_path / "verify" / "report.json").read_text())
    assert report.ok, summary["examples"]
    assert summary["crashes"] == []
    assert set(summary["faults_by_kind"]) == set(KINDS)
    assert report.acked > 1000 and report.unanswered == 0
    assert report.reads >= report.acked  # the tailing consumer saw every acknowledged record
    assert (tmp_path / "verify" / "timeline.svg").read_text().count("<rect") > len(verify.faults)
    assert namespaces_of(verify.cluster.net.prefix) == []


@pytest.mark.slow
@pytest.mark.timeout(7200)
def test_chaos_run(netns_hosts, tmp_path: Path):
    """``make chaos``: the long run; FLUSS_PY_CHAOS_TIME / _SEED / _OUT change its length, seed and output."""
    out = Path(os.environ.get("FLUSS_PY_CHAOS_OUT", tmp_path / "chaos"))
    options = VerifyOptions(
        time=float(os.environ.get("FLUSS_PY_CHAOS_TIME", "1800")),
        seed=int(os.environ.get("FLUSS_PY_CHAOS_SEED", "1")),
        zookeepers=3,
        coordinators=3,
        tablet_servers=5,
        fault_s=(1.5, 5.0),
        gap_s=(0.5, 2.0),
    )
    report = Verify(options, out).run()
    summary = json.loads((out / "report.json").read_text())
    assert report.ok, summary["examples"]
    assert summary["crashes"] == []
    print(json.dumps({k: v for k, v in summary.items() if k != "examples"}, indent=1))


@pytest.mark.timeout(480)
def test_short_verify_run_of_the_primary_key_workload(tmp_path: Path):
    """``fluss-py verify --workload kv --no-netns``: kill -9, SIGTERM and SIGSTOP of any process under writers
    upserting and deleting and a reader looking up; no lost update, resurrected delete, stale, lost or phantom
    read, and every replica's KV equals the final rows and its own log's replay. A tablet server resumed after
    losing its leadership answers no lookup until it learns of its demotion (the read fence,
    docs/primary-key-tables.md §1 invariant 5; ``test_kv_failover.py``'s zombie test is its direct check)."""
    options = VerifyOptions(
        time=45, seed=KV_SEED, faults=("kill", "term", "pause"), zookeepers=1, coordinators=2, tablet_servers=3,
        producers=3, rate=40, netns=False, workload="kv", keys=200, table="fluss.verify_kv",
    )  # fmt: skip
    verify = Verify(options, tmp_path / "verify")
    report = verify.run()
    summary = json.loads((tmp_path / "verify" / "report.json").read_text())
    assert report.ok, summary["examples"]
    assert summary["crashes"] == [] and summary["workload"] == "kv"
    assert set(summary["faults_by_kind"]) == {"kill", "term", "pause"}
    assert report.acked > 1000 and report.unanswered == 0
    assert report.reads > 1000 and report.final_records > 0
    assert (tmp_path / "verify" / "timeline.svg").read_text().count("<circle") > 1000
