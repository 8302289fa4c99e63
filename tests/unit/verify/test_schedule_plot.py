"""The fault schedule is a pure function of its seed; the timeline shows every fault and every answer."""

import itertools

import pytest

from fluss_py.cli.main import main
from fluss_py.verify.plot import timeline_svg
from fluss_py.verify.schedule import KINDS, make_schedule

ZK = ["zookeeper-1", "zookeeper-2", "zookeeper-3"]
COORDS = ["coordinator-1", "coordinator-2"]
TS = ["tablet-server-1", "tablet-server-2", "tablet-server-3"]


def test_same_seed_same_schedule_and_every_fault_ends_in_time():
    a = make_schedule(7, 300, KINDS, ZK, COORDS, TS)
    assert a == make_schedule(7, 300, KINDS, ZK, COORDS, TS)
    assert a != make_schedule(8, 300, KINDS, ZK, COORDS, TS)
    assert all(p.at + p.duration <= 300 for p in a)
    assert all(b.at >= a_.at + a_.duration for a_, b in itertools.pairwise(a))  # one at a time
    assert {p.kind for p in a} == set(KINDS)


def test_only_the_asked_kinds_and_sensible_targets():
    plan = make_schedule(3, 600, ("zookeeper", "term"), ZK, COORDS, TS)
    assert {p.kind for p in plan} == {"zookeeper", "term"}
    for p in plan:
        if p.kind == "term":
            assert p.targets[0] in COORDS + TS  # SIGTERM: servers only
        elif p.variant == "quorum-loss":
            assert len(p.targets) == 2 and set(p.targets) <= set(ZK)
    with pytest.raises(ValueError, match="unknown fault kinds"):
        make_schedule(1, 60, ("flood",), ZK, COORDS, TS)


def test_timeline_has_a_band_per_fault_and_a_mark_per_answer():
    history = [
        {"k": "send", "t": 0.0, "p": 0, "s": 0, "b": 0},
        {"k": "ack", "t": 0.01, "p": 0, "s": 0, "b": 0, "o": 0},
        {"k": "send", "t": 1.0, "p": 0, "s": 1, "b": 0},
        {"k": "fail", "t": 9.0, "p": 0, "s": 1, "b": 0, "e": "timeout"},
        {"k": "fault", "start": 0.5, "end": 4.0, "kind": "partition", "what": "partition/isolate <ts-1>"},
    ]
    svg = timeline_svg(history)
    assert svg.count("<circle") == 1 and svg.count(">x</text>") == 1
    assert "partition/isolate &lt;ts-1&gt;" in svg


def test_verify_cli_rejects_unknown_fault_kinds(capsys):
    assert main(["verify", "--faults", "kill,flood"]) == 2
    assert "kill,pause,term" in capsys.readouterr().out
