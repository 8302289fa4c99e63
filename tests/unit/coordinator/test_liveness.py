"""Proof-of-death failure detection, pure parts: the probe rule, the watcher loop against fake edges, and
the idempotence of the membership handler with session expiry and re-registration (docs/failure-detection.md)."""

import asyncio
import errno

import pytest

from fluss_py.coordinator.context import CoordinatorContext
from fluss_py.coordinator.events import TabletServerAliveAgain, TabletServerDeathProven, TabletServersChanged
from fluss_py.coordinator.handlers import MetadataHandlers
from fluss_py.coordinator.liveness import (
    CONNECTED_RECHECKS,
    LivenessMonitor,
    ProbeResult,
    classify_connect_error,
    decide,
)
from fluss_py.tablet.liveness import is_own_stale_registration
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.zk.codecs import TabletServerRegistration
from fluss_py.zk.paths import TabletServerZNode, persistent_parents

from .fake_zk import FakeStore


def reg(sid: int, incarnation: str = "a", registered_ms: int = 1) -> TabletServerRegistration:
    return TabletServerRegistration("127.0.0.1", 9000 + sid, 9100 + sid, "", registered_ms, incarnation)


# ---------------------------------------------------------------- the rule
@pytest.mark.parametrize("probe", list(ProbeResult))
def test_only_a_refused_connect_is_proof(probe):
    assert decide(probe) is (probe is ProbeResult.REFUSED)


def test_connect_errors_are_classified():
    assert classify_connect_error(ConnectionRefusedError()) is ProbeResult.REFUSED
    assert classify_connect_error(OSError(errno.ECONNREFUSED, "refused")) is ProbeResult.REFUSED
    assert classify_connect_error(TimeoutError()) is ProbeResult.TIMEOUT
    for code in (errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ECONNRESET, errno.EADDRNOTAVAIL):
        assert classify_connect_error(OSError(code, "x")) is ProbeResult.UNREACHABLE


def test_a_restart_takes_over_only_its_own_dead_predecessors_registration():
    old = reg(1, incarnation="old")
    assert is_own_stale_registration(old, "127.0.0.1", 9001, "new", port_bound=True)
    assert not is_own_stale_registration(old, "127.0.0.1", 9001, "new", port_bound=False)  # port not ours yet
    assert not is_own_stale_registration(old, "127.0.0.1", 9002, "new", port_bound=True)  # another address
    assert not is_own_stale_registration(old, "127.0.0.2", 9001, "new", port_bound=True)
    assert not is_own_stale_registration(old, "127.0.0.1", 9001, "old", port_bound=True)  # our own node


# ---------------------------------------------------------------- the watcher loop
class FakeStream:
    """Each follow() plays one scripted outcome: ("beats", n) heartbeats then a break, or "hang" (paused)."""

    def __init__(self, script):
        self.script = list(script)
        self.opened = 0

    async def follow(self, server_id, registration, on_heartbeat):
        self.opened += 1
        step = self.script.pop(0) if self.script else "hang"
        if step == "hang":
            await asyncio.Event().wait()  # a SIGSTOPped server: the stream just goes quiet
        for _ in range(step[1]):
            on_heartbeat()
        return "UNAVAILABLE: Socket closed"


class FakeProber:
    def __init__(self, results):
        self.results = list(results)
        self.calls = []

    async def __call__(self, host, port, timeout=1.0):
        self.calls.append((host, port))
        return self.results.pop(0)


async def wait_for(cond, timeout=2.0):
    await wait_until(cond, timeout)


async def test_broken_stream_and_refused_port_report_once():
    reports = []
    stream, prober = FakeStream([("beats", 3)]), FakeProber([ProbeResult.REFUSED])
    monitor = LivenessMonitor(stream, lambda *a: reports.append(a), prober, retry_initial=0.001)
    monitor.sync({2: reg(2)}, {})
    await wait_for(lambda: reports)
    await asyncio.sleep(0.01)
    assert reports == [(2, reg(2), "UNAVAILABLE: Socket closed")]  # once: the watcher idles after its proof
    assert prober.calls == [("127.0.0.1", 9002)] and stream.opened == 1
    monitor.sync({}, {2: reg(2)})  # the handler applied it; without report_alive there is no dead mode
    assert monitor.watched() == {} and monitor.watched_dead() == {}
    await monitor.close()


async def test_no_proof_when_something_answers_or_the_probe_times_out():
    reports = []
    connected = [ProbeResult.CONNECTED] * (1 + len(CONNECTED_RECHECKS))  # a connect is probed again first
    outcomes = [*connected, ProbeResult.TIMEOUT, ProbeResult.UNREACHABLE]
    stream, prober = FakeStream([("beats", 1), ("beats", 0), ("beats", 2), "hang"]), FakeProber(outcomes)
    monitor = LivenessMonitor(stream, lambda *a: reports.append(a), prober, retry_initial=0.001)
    monitor.sync({1: reg(1)}, {})
    await wait_for(lambda: stream.opened == 4)  # re-opened after every probe without proof
    assert reports == [] and len(prober.calls) == len(outcomes)
    assert monitor.watched() == {1: reg(1)}
    await monitor.close()


async def test_a_connect_right_after_the_break_is_probed_again_before_the_back_off():
    """kill -9: the stream breaks while the dying process's listener still accepts; the proof comes from the
    probes made again shortly after, not from a re-open after the stream's back-off."""
    reports = []
    stream, prober = FakeStream([("beats", 1), "hang"]), FakeProber([ProbeResult.CONNECTED, ProbeResult.REFUSED])
    monitor = LivenessMonitor(stream, lambda *a: reports.append(a), prober, retry_initial=60.0)
    monitor.sync({2: reg(2)}, {})
    await wait_for(lambda: reports)
    assert reports == [(2, reg(2), "UNAVAILABLE: Socket closed")] and stream.opened == 1
    await monitor.close()


async def test_a_quiet_stream_is_never_proof():
    reports = []
    stream, prober = FakeStream(["hang"]), FakeProber([])
    monitor = LivenessMonitor(stream, lambda *a: reports.append(a), prober)
    monitor.sync({1: reg(1)}, {})
    await wait_for(lambda: stream.opened == 1)
    await asyncio.sleep(0.05)
    assert reports == [] and prober.calls == []
    await monitor.close()


async def test_sync_restarts_watchers_per_registration():
    stream = FakeStream(["hang"] * 4)
    monitor = LivenessMonitor(stream, lambda *a: None, FakeProber([]))
    monitor.sync({1: reg(1), 2: reg(2)}, {})
    await wait_for(lambda: stream.opened == 2)
    monitor.sync({1: reg(1), 2: reg(2)}, {})  # same registrations: the watchers are kept
    monitor.sync({2: reg(2, "b", 2)}, {})  # 1 is gone, 2 restarted
    assert monitor.watched() == {2: reg(2, "b", 2)}
    await wait_for(lambda: stream.opened == 3)
    await monitor.close()
    assert monitor.watched() == {}


async def test_a_wrong_proof_is_undone_when_the_same_incarnation_answers_again():
    reports, alive = [], []
    # normal: break + refused (proof); dead mode: one attempt without heartbeat, then one with; normal: quiet
    stream = FakeStream([("beats", 1), ("beats", 0), ("beats", 1), "hang"])
    monitor = LivenessMonitor(
        stream, lambda *a: reports.append(a), FakeProber([ProbeResult.REFUSED]), retry_initial=0.001,
        report_alive=lambda *a: alive.append(a), dead_recheck=0.001,
    )  # fmt: skip
    monitor.sync({1: reg(1)}, {})
    await wait_for(lambda: reports)
    monitor.sync({}, {1: reg(1)})  # the handler applied the proof
    assert monitor.watched_dead() == {1: reg(1)}
    await wait_for(lambda: alive)
    assert alive == [(1, reg(1))]
    monitor.sync({1: reg(1)}, {})  # the handler applied the revival
    await wait_for(lambda: stream.opened == 4)
    assert monitor.watched() == {1: reg(1)} and monitor.watched_dead() == {}
    await monitor.close()


async def test_a_dead_mode_watcher_ends_with_its_node():
    stream = FakeStream([("beats", 0)] * 1000)
    monitor = LivenessMonitor(stream, lambda *a: None, FakeProber([]), report_alive=lambda *a: None, dead_recheck=0.001)
    monitor.sync({}, {1: reg(1)})
    await wait_for(lambda: stream.opened >= 2)
    monitor.sync({}, {})  # the node of the dead incarnation is gone
    assert monitor.watched() == {} and monitor.watched_dead() == {}
    await asyncio.sleep(0.005)  # an attempt already scheduled may still run
    opened = stream.opened
    await asyncio.sleep(0.02)
    assert stream.opened == opened
    await monitor.close()


async def test_metrics_count_fresh_streams_and_proofs():
    stream, prober = FakeStream([("beats", 2)]), FakeProber([ProbeResult.REFUSED])
    monitor = LivenessMonitor(stream, lambda *a: None, prober, retry_initial=0.001)
    monitor.sync({1: reg(1), 2: reg(2)}, {})  # FakeStream: "hang" once the script is used up, no heartbeat
    await wait_for(lambda: monitor.proofs == 1)
    assert monitor.fresh(60) == 0  # the one that beat is dead now; the other never beat
    monitor.last_heartbeat[2] = 0.0
    assert monitor.fresh(1e12) == 1
    await monitor.close()


# ---------------------------------------------------------------- the handler: idempotent with ZooKeeper
def handlers() -> tuple[FakeStore, MetadataHandlers, list]:
    store = FakeStore()
    for path in persistent_parents(store.root):
        store.ensure(path)
    h = MetadataHandlers(store, CoordinatorContext(1, store.bump_epoch(), "127.0.0.1", 9123))
    calls: list = []

    async def listener(joined, died):
        calls.append((sorted(joined), list(died)))

    h.add_servers_listener(listener)
    return store, h, calls


def register(store, sid, registration):
    store.nodes.pop(TabletServerZNode.path(store.root, sid), None)
    store.ensure(TabletServerZNode.path(store.root, sid), TabletServerZNode.encode(registration))


async def test_proof_then_session_expiry_is_one_death():
    store, h, calls = handlers()
    register(store, 1, reg(1))
    register(store, 2, reg(2))
    await h.tablet_servers_changed(TabletServersChanged(["1", "2"]))
    assert await h.tablet_server_death_proven(TabletServerDeathProven(2, reg(2), "test")) is True
    assert sorted(h.context.tablet_servers) == [1]
    assert await h.tablet_server_death_proven(TabletServerDeathProven(2, reg(2), "again")) is False
    # the dead incarnation's node is still there: another membership change must not revive it
    await h.tablet_servers_changed(TabletServersChanged(["1", "2"]))
    assert sorted(h.context.tablet_servers) == [1]
    # the session expires: its node goes, nothing more to do
    store.nodes.pop(TabletServerZNode.path(store.root, 2))
    await h.tablet_servers_changed(TabletServersChanged(["1"]))
    assert calls == [([1, 2], []), ([], [2])]


async def test_restart_after_proof_is_a_join():
    store, h, calls = handlers()
    register(store, 1, reg(1))
    await h.tablet_servers_changed(TabletServersChanged(["1"]))
    await h.tablet_server_death_proven(TabletServerDeathProven(1, reg(1)))
    register(store, 1, reg(1, "b", 2))  # the restarted process replaced the stale node
    await h.tablet_servers_changed(TabletServersChanged(["1"]))
    assert h.context.tablet_servers[1] == reg(1, "b", 2)
    assert calls == [([1], []), ([], [1]), ([1], [])]


async def test_a_proof_about_a_replaced_registration_is_ignored():
    store, h, calls = handlers()
    register(store, 1, reg(1))
    await h.tablet_servers_changed(TabletServersChanged(["1"]))
    register(store, 1, reg(1, "b", 2))  # restarted before the proof reached the event loop
    await h.tablet_servers_changed(TabletServersChanged(["1"]))
    assert await h.tablet_server_death_proven(TabletServerDeathProven(1, reg(1))) is False
    assert h.context.tablet_servers[1] == reg(1, "b", 2)
    assert calls == [([1], []), ([1], [1])]  # the restart itself: died and joined


async def test_alive_again_rejoins_only_the_same_registration_still_in_zookeeper():
    store, h, calls = handlers()
    views = []
    h.add_liveness_listener(lambda live, dead: views.append((sorted(live), sorted(dead))))
    register(store, 1, reg(1))
    register(store, 2, reg(2))
    await h.tablet_servers_changed(TabletServersChanged(["1", "2"]))
    await h.tablet_server_death_proven(TabletServerDeathProven(1, reg(1)))
    assert await h.tablet_server_alive_again(TabletServerAliveAgain(1, reg(1))) is True
    assert h.context.tablet_servers[1] == reg(1)
    assert await h.tablet_server_alive_again(TabletServerAliveAgain(1, reg(1))) is False  # not proven dead now
    # proven dead, then its node replaced by a restart: the old life cannot come back
    await h.tablet_server_death_proven(TabletServerDeathProven(2, reg(2)))
    register(store, 2, reg(2, "b", 2))
    assert await h.tablet_server_alive_again(TabletServerAliveAgain(2, reg(2))) is False
    assert 2 not in h.context.tablet_servers
    # proven dead, then its node gone: forgotten
    await h.tablet_server_death_proven(TabletServerDeathProven(1, reg(1)))
    store.nodes.pop(TabletServerZNode.path(store.root, 1))
    await h.tablet_servers_changed(TabletServersChanged(["2"]))
    assert views[-1] == ([2], [])  # 1 is gone for good: nothing to watch
    assert ([2], [1]) in views  # 1 was watched in dead mode meanwhile
    assert calls == [([1, 2], []), ([], [1]), ([1], []), ([], [2]), ([], [1]), ([2], [])]
