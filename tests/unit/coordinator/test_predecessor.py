"""Fast coordinator failover, pure parts (docs/coordinator-ha.md "Fast failover"): the proof rule, which
registration belongs to a candidate, the takeover transaction, and the watch loop against fake edges."""

import asyncio

import pytest

from fluss_py.coordinator import predecessor as pm
from fluss_py.coordinator.liveness import ProbeResult
from fluss_py.coordinator.predecessor import (
    Ended,
    Predecessor,
    PredecessorWatch,
    decide,
    registration_for,
    takeover_ops,
)
from fluss_py.zk.codecs import CoordinatorRegistration
from fluss_py.zk.values import DeleteOp, ZnodeStat

ROOT = "/fluss"
REG = CoordinatorRegistration(7, "127.0.0.1", 9123, 9124)


def stat(owner: int, version: int = 0) -> ZnodeStat:
    return ZnodeStat(version, owner, 0, 0, 0)


@pytest.mark.parametrize("rpc", list(ProbeResult))
@pytest.mark.parametrize("http", [*ProbeResult, None])
def test_only_every_registered_address_refusing_is_proof(rpc, http):
    expected = rpc is ProbeResult.REFUSED and http in (ProbeResult.REFUSED, None)
    assert decide(rpc, http) is expected


def test_the_registration_is_the_one_of_the_candidates_session():
    other = CoordinatorRegistration(8, "127.0.0.1", 9200, 9201)
    servers = [(other, stat(0x22)), (REG, stat(0x11))]
    assert registration_for(0x11, servers) == REG
    assert registration_for(0x22, servers) == other
    assert registration_for(0x33, servers) is None  # no registration in that session: nothing to probe


def test_takeover_deletes_the_candidate_and_only_a_leader_node_of_the_same_session():
    pred = Predecessor("candidate_0000000004", 0x11, REG)
    candidate = DeleteOp(f"{ROOT}/coordinator/election/candidate_0000000004", 0)
    assert takeover_ops(ROOT, pred, None) == [candidate]
    assert takeover_ops(ROOT, pred, (b"{}", stat(0x99, 3))) == [candidate]  # another session leads
    assert takeover_ops(ROOT, pred, (b"{}", stat(0x11, 3))) == [candidate, DeleteOp(f"{ROOT}/coordinator/leader", 3)]


# ---------------------------------------------------------------- the watch loop
class FakeFollower:
    """Each follow() plays one scripted outcome: an Ended, or "hang" (a stopped process keeps the connection)."""

    def __init__(self, script):
        self.script = list(script)
        self.opened = 0

    async def follow(self, address):
        self.opened += 1
        step = self.script.pop(0) if self.script else "hang"
        if step == "hang":
            await asyncio.Event().wait()
        return step


class FakeProber:
    def __init__(self, results):
        self.results = dict(results)  # port -> list of results, last one repeats
        self.calls = []

    async def __call__(self, host, port, timeout=1.0):
        self.calls.append(port)
        seq = self.results[port]
        return seq.pop(0) if len(seq) > 1 else seq[0]


async def _watch(monkeypatch, follower, prober, until):
    async def fake_resolve(zk, root, candidate):
        return Predecessor(candidate, 0x11, REG)

    monkeypatch.setattr(pm, "resolve", fake_resolve)
    proofs = []
    watch = PredecessorWatch(None, ROOT, proofs.append, follower, prober, retry_initial=0.001, retry_max=0.002)
    watch.follow("candidate_0000000001")
    for _ in range(2000):
        if until(proofs):
            break
        await asyncio.sleep(0.001)
    await watch.close()
    return proofs


async def test_a_broken_connection_and_refused_ports_prove_the_predecessor_dead(monkeypatch):
    follower = FakeFollower([Ended(True, "connection went IDLE")])
    prober = FakeProber({9123: [ProbeResult.REFUSED], 9124: [ProbeResult.REFUSED]})
    proofs = await _watch(monkeypatch, follower, prober, lambda p: p)
    assert [p.predecessor.candidate for p in proofs] == ["candidate_0000000001"]
    assert proofs[0].why == "connection went IDLE"


async def test_a_listening_http_port_is_no_proof(monkeypatch):
    # the RPC port refuses but the HTTP port still listens: the process is not gone, connect again
    follower = FakeFollower([Ended(True, "connection went IDLE")] * 3)
    prober = FakeProber({9123: [ProbeResult.REFUSED], 9124: [ProbeResult.CONNECTED]})
    proofs = await _watch(monkeypatch, follower, prober, lambda p: follower.opened >= 4)
    assert proofs == [] and follower.opened >= 4


async def test_a_stopped_process_gives_no_proof(monkeypatch):
    # SIGSTOP: the connection stays up (the follower never returns), no probe is ever made
    follower = FakeFollower(["hang"])
    prober = FakeProber({9123: [ProbeResult.REFUSED], 9124: [ProbeResult.REFUSED]})
    proofs = await _watch(monkeypatch, follower, prober, lambda p: follower.opened >= 1)
    await asyncio.sleep(0.01)
    assert proofs == [] and prober.calls == []


async def test_a_timeout_then_a_refusal_proves_it_on_the_second_round(monkeypatch):
    follower = FakeFollower([Ended(False, "not connected"), Ended(False, "not connected")])
    prober = FakeProber({9123: [ProbeResult.TIMEOUT, ProbeResult.REFUSED], 9124: [ProbeResult.REFUSED]})
    proofs = await _watch(monkeypatch, follower, prober, lambda p: p)
    assert len(proofs) == 1 and follower.opened == 2
