"""The supervisor's decisions and state file (fluss_py/testing/supervision.py): pure, no processes."""

import json
import signal

import pytest

from fluss_py.common.state_machine import IllegalStateTransition
from fluss_py.testing.cluster_file import ClusterRecord, ProcessRecord
from fluss_py.testing.supervision import (
    FINAL_STATES,
    VALID_PREVIOUS,
    ExitStatus,
    RestartPolicy,
    SupervisorRecord,
    SupervisorState,
    after_exit,
    transition,
)

POLICY = RestartPolicy(initial_delay=1.0, max_delay=5.0, max_restarts=4, window=60.0)
KILLED = ExitStatus(None, signal.SIGKILL)


def test_a_clean_exit_and_a_bad_config_are_never_restarted():
    for restarts in ([], [99.0, 99.5]):
        clean = after_exit(POLICY, ExitStatus(0, None), restarts, 100.0)
        assert (clean.state, clean.delay) == (SupervisorState.EXITED, None)
        assert "exited with code 0" in clean.reason and "not restarted" in clean.reason
        bad = after_exit(POLICY, ExitStatus(2, None), restarts, 100.0)
        assert (bad.state, bad.delay) == (SupervisorState.BAD_CONFIG, None)
        assert "code 2 (configuration error" in bad.reason and "not restarted" in bad.reason


@pytest.mark.parametrize("status", [KILLED, ExitStatus(1, None), ExitStatus(3, None), ExitStatus(None, 6)])
def test_every_other_exit_is_a_crash_restarted_with_a_doubling_delay_up_to_the_cap(status):
    restarts: list[float] = []
    delays = []
    now = 1000.0
    for _ in range(POLICY.max_restarts):
        verdict = after_exit(POLICY, status, restarts, now)
        assert verdict.state is SupervisorState.BACKOFF
        assert status.describe() in verdict.reason and f"restarting in {verdict.delay:g} s" in verdict.reason
        delays.append(verdict.delay)
        now += verdict.delay
        restarts.append(now)
        now += 0.5  # it ran half a second, then crashed again
    assert delays == [1.0, 2.0, 4.0, 5.0]
    limit = after_exit(POLICY, status, restarts, now)
    assert (limit.state, limit.delay) == (SupervisorState.GIVEN_UP, None)
    assert "crash loop (4 restarts within 60 s)" in limit.reason and "given up" in limit.reason


def test_restarts_older_than_the_window_count_neither_for_the_limit_nor_for_the_delay():
    old = [0.0, 1.0, 2.0, 3.0]  # four restarts, long ago: a process that then ran for a whole window
    verdict = after_exit(POLICY, KILLED, old, 63.0)
    assert (verdict.state, verdict.delay) == (SupervisorState.BACKOFF, 1.0)
    edge = after_exit(POLICY, KILLED, old, 62.9)  # restart at 3.0 is still within (now - 60, now]
    assert (edge.state, edge.delay) == (SupervisorState.BACKOFF, 2.0)
    assert after_exit(POLICY, KILLED, old, 59.0).state is SupervisorState.GIVEN_UP


def test_a_zero_initial_delay_restarts_at_once():
    policy = RestartPolicy(initial_delay=0.0, max_delay=0.0, max_restarts=1, window=1.0)
    assert after_exit(policy, KILLED, [], 5.0).delay == 0.0
    assert after_exit(policy, KILLED, [4.5], 5.0).state is SupervisorState.GIVEN_UP


def test_exit_status_from_popen_returncode():
    assert ExitStatus.from_returncode(-9) == ExitStatus(None, 9)
    assert ExitStatus.from_returncode(2) == ExitStatus(2, None)
    assert ExitStatus(None, 9).describe() == "killed by signal 9 (SIGKILL)"
    assert ExitStatus(None, 200).describe() == "killed by signal 200 (unknown signal)"
    assert ExitStatus(1, None).describe() == "exited with code 1"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"initial_delay": -1.0}, "initial_delay must be >= 0"),
        ({"window": 0.0}, "window > 0"),
        ({"initial_delay": 10.0, "max_delay": 5.0}, "max_delay (5 s) is below initial_delay (10 s)"),
        ({"max_restarts": 0}, "max_restarts must be an integer >= 1"),
        ({"max_restarts": 2.5}, "max_restarts must be an integer >= 1"),
        ({"max_restarts": True}, "max_restarts must be an integer >= 1"),
        ({"max_delay": float("inf")}, "max_delay must be a finite number"),
        ({"window": "60"}, "window must be a finite number"),
    ],
)
def test_a_bad_policy_is_refused_when_made(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        RestartPolicy(**kwargs)


def test_policy_round_trips_and_refuses_unknown_keys():
    assert RestartPolicy.from_dict(POLICY.to_dict()) == POLICY
    with pytest.raises(ValueError, match="unknown key"):
        RestartPolicy.from_dict({**POLICY.to_dict(), "forever": True})


def test_state_transitions_follow_the_diagram():
    s = SupervisorState
    legal = [
        (None, s.RUNNING), (s.RUNNING, s.BACKOFF), (s.BACKOFF, s.RUNNING), (s.RUNNING, s.STOPPING),
        (s.STOPPING, s.STOPPED), (s.BACKOFF, s.STOPPED), (None, s.STOPPED), (s.RUNNING, s.EXITED),
        (s.RUNNING, s.BAD_CONFIG), (s.RUNNING, s.GIVEN_UP), (s.BACKOFF, s.GIVEN_UP), (None, s.GIVEN_UP),
    ]  # fmt: skip
    for current, target in legal:
        assert transition("tablet-server-1", current, target) is target
    for target, allowed in VALID_PREVIOUS.items():
        for current in [None, *SupervisorState]:
            if current not in allowed:
                assert (current, target) not in legal
                with pytest.raises(IllegalStateTransition):
                    transition("tablet-server-1", current, target)
    assert len(legal) == sum(len(a) for a in VALID_PREVIOUS.values())
    for final in FINAL_STATES:  # nothing leaves a final state: the supervisor exits there
        assert all(final not in allowed for allowed in VALID_PREVIOUS.values())


def test_state_file_round_trips_atomically_and_checks_its_version(tmp_path):
    rec = SupervisorRecord("tablet-server-2", 4100, 88120, SupervisorState.BACKOFF, POLICY, restarts=1,
                           last_exit={"code": None, "signal": 9, "pid": 4101, "at": 1.5}, restart_at=2.5,
                           reason="r", updated_at=1.5)  # fmt: skip
    rec.save(tmp_path)
    assert SupervisorRecord.load(tmp_path) == rec
    assert [p.name for p in tmp_path.iterdir()] == ["supervisor.json"]
    data = json.loads((tmp_path / "supervisor.json").read_text())
    assert data["state"] == "backoff" and data["policy"]["max_restarts"] == 4
    assert rec.last_exit_text() == "killed by signal 9 (SIGKILL)" and not rec.final
    assert SupervisorRecord.load(tmp_path / "nowhere") is None
    with pytest.raises(ValueError, match="version"):
        SupervisorRecord.from_json(json.dumps({**data, "version": 2}))
    with pytest.raises(ValueError):
        SupervisorRecord.from_json(json.dumps({**data, "state": "sleeping"}))


def test_cluster_json_records_the_policy_and_each_supervisor_and_still_reads_older_files(tmp_path):
    server = ProcessRecord("tablet-server-1", "tablet-server", 1, "127.0.0.1:2001", "127.0.0.1:2002", "/d/l", "/d/o",
                           "/d/data", ["python"], supervisor_pid=41, supervisor_start_ticks=7)  # fmt: skip
    record = ClusterRecord("/d", "127.0.0.1:2000", "/fluss", [server], supervise=POLICY.to_dict())
    record.save(tmp_path)
    loaded = ClusterRecord.load(tmp_path)
    assert loaded == record and RestartPolicy.from_dict(loaded.supervise) == POLICY
    assert loaded.get("tablet-server-1").pid is None  # the server's own PID lives in its supervisor.json
    older = json.loads(record.to_json())
    del older["supervise"]
    for p in older["processes"]:
        del p["supervisor_pid"], p["supervisor_start_ticks"]
    plain = ClusterRecord.from_json(json.dumps(older))
    assert plain.supervise is None and plain.get("tablet-server-1").supervisor_pid is None
