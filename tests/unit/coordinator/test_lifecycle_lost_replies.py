"""The coordinator lifecycle when a ZooKeeper reply is lost: a ConnectionLoss with the session alive never
orphans our candidate or our coordinator/servers node, and never leaves two of them or none."""

from __future__ import annotations

import pytest

from fluss_py import config as cfg
from fluss_py.coordinator.context import CoordinatorState
from fluss_py.coordinator.lifecycle import Signal
from fluss_py.coordinator.server import CoordinatorServer
from fluss_py.zk.paths import CandidateZNode, CoordinatorServerZNode
from fluss_py.zk.values import SessionLostError, SessionState

from ..session_zk import SessionZk

ROOT = "/fluss"
SERVERS = CoordinatorServerZNode.parent(ROOT)
ELECTION = CandidateZNode.parent(ROOT)


def _server(zk: SessionZk) -> CoordinatorServer:
    s = CoordinatorServer(cfg.load_config(cfg.COORDINATOR, None, {"zookeeper.root": ROOT, "coordinator.id": "1"}))
    s.zk = zk  # type: ignore[assignment]
    s.election._zk = zk  # type: ignore[assignment]
    return s


async def test_a_release_that_meets_a_connection_loss_keeps_the_candidate_and_the_next_check_wins():
    zk = SessionZk()
    s = _server(zk)
    assert (await s.election.check()).leader
    own = s.election.candidate
    zk.session_state = SessionState.SUSPENDED  # the fence's ConnectionLoss; _release fails the same way
    await s._release()
    assert s.election.candidate == own
    zk.reconnect()
    decision = await s.election.check()
    assert decision.leader and zk.owned(ELECTION) == [own]


async def test_a_release_after_the_session_expired_forgets_the_candidate():
    zk = SessionZk()
    s = _server(zk)
    await s.election.check()
    zk.session_state = SessionState.LOST
    await s._release()
    assert s.election.candidate is None


async def test_a_candidate_create_whose_reply_was_lost_is_adopted_not_doubled():
    zk = SessionZk()
    s = _server(zk)
    zk.lose = ["after"]
    with pytest.raises(SessionLostError):
        await s.election.check()
    assert s.election.candidate is None and len(zk.owned(ELECTION)) == 1
    zk.reconnect()
    assert (await s.election.check()).leader
    assert zk.owned(ELECTION) == [s.election.candidate]


async def test_an_orphan_candidate_of_our_session_ahead_of_ours_is_deleted():
    zk = SessionZk()
    s = _server(zk)
    orphan, ours = [await zk.create(f"{ELECTION}/{CandidateZNode.PREFIX}", b"1", ephemeral=True, sequence=True)
                    for _ in range(2)]  # fmt: skip
    orphan, ours = orphan.rsplit("/")[-1], ours.rsplit("/")[-1]
    s.election.candidate = ours
    assert (await s.election.check()).leader
    assert zk.owned(ELECTION) == [ours] and orphan not in zk.owned(ELECTION)


async def test_server_node_create_refused_by_a_connection_loss_is_retried_on_reconnect():
    zk = SessionZk(0x2)
    s = _server(zk)
    s._session = 0x1
    zk.lose = ["before"]
    await s._on_connected(0x2)  # the new session's registration fails: nothing written
    assert zk.owned(SERVERS) == []
    zk.reconnect()
    await s._on_connected(0x2)  # the same session again: registered now
    assert len(zk.owned(SERVERS)) == 1


async def test_server_node_create_whose_reply_was_lost_is_adopted_on_reconnect():
    zk = SessionZk(0x2)
    s = _server(zk)
    s._session = 0x1
    zk.lose = ["after"]
    await s._on_connected(0x2)
    zk.reconnect()
    await s._on_connected(0x2)
    assert len(zk.owned(SERVERS)) == 1
    assert s._server_node_session == 0x2


async def test_elect_registers_the_server_node_first_and_backs_off_while_it_fails():
    zk = SessionZk(0x2, first_sequence=1)
    s = _server(zk)
    s._fast_failover = False
    zk.nodes[f"{ELECTION}/{CandidateZNode.PREFIX}0000000000"] = (b"9", 0x9)  # the leader, another session
    s.state.transition(CoordinatorState.STANDBY, "test")
    zk.lose = ["before"]
    await s._handle(Signal("elect"))
    assert zk.owned(ELECTION) == []  # no candidate without a registration
    zk.reconnect()
    await s._handle(Signal("elect"))
    assert len(zk.owned(SERVERS)) == 1 and len(zk.owned(ELECTION)) == 1
