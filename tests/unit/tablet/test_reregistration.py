"""Registering again after a session expiry: a connection loss during the attempt does not end it for good."""

from __future__ import annotations

import asyncio

import pytest

from fluss_py import config as cfg
from fluss_py.tablet import server as tablet_server
from fluss_py.tablet.server import TabletServer
from fluss_py.zk.paths import TabletServerZNode
from fluss_py.zk.values import SessionEvent, SessionState

from ..session_zk import SessionZk

IDS = TabletServerZNode.parent("/fluss")


def _server(zk: SessionZk) -> TabletServer:
    s = TabletServer(cfg.load_config(cfg.TABLET, None, {"tablet-server.id": "1", "zookeeper.session-timeout": "2s"}))
    s.zk = zk  # type: ignore[assignment]
    s._session = 0x1  # the session that expired
    return s


@pytest.mark.parametrize("loss", ["before", "after"])  # the create refused / applied with its reply lost
async def test_registration_resumes_on_a_reconnect_within_the_new_session(monkeypatch, loss):
    monkeypatch.setattr(tablet_server, "REREGISTER_BACKOFF", 0.01)
    zk = SessionZk(0x2)
    zk.lose = [loss]
    s = _server(zk)
    q = s._signals
    q.put_nowait(SessionEvent(SessionState.LOST, 0))
    q.put_nowait(SessionEvent(SessionState.CONNECTED, 0x2, new_session=True))  # the attempt: ConnectionLoss
    q.put_nowait(None)  # ends this run once the attempt gave up (disconnected)
    await asyncio.wait_for(s._lifecycle(), 5)
    assert not s.registered and not zk.connected
    zk.reconnect()  # within session 0x2
    q.put_nowait(SessionEvent(SessionState.CONNECTED, 0x2, new_session=False))
    q.put_nowait(None)
    await asyncio.wait_for(s._lifecycle(), 5)
    assert s.registered
    assert zk.owned(IDS) == ["1"]


async def test_a_reconnect_while_registered_writes_nothing():
    zk = SessionZk(0x2)
    s = _server(zk)
    s._session, s.registered = 0x2, True
    s._signals.put_nowait(SessionEvent(SessionState.CONNECTED, 0x2, new_session=False))
    s._signals.put_nowait(None)
    await asyncio.wait_for(s._lifecycle(), 5)
    assert zk.nodes == {}
