"""The guard before every leader event: a lost session or an unverifiable stall stops the leader acting."""

import time
from types import SimpleNamespace

import pytest

from fluss_py import config as cfg
from fluss_py.coordinator.server import CoordinatorServer, stable_coordinator_id
from fluss_py.errors import NotCoordinatorLeaderError
from fluss_py.zk.values import SessionLostError


def server(session_id: int = 7, connected: bool = True, sync_error: Exception | None = None):
    s = CoordinatorServer(cfg.load_config(cfg.COORDINATOR, None, {"zookeeper.session-timeout": "3s"}))
    synced = []

    async def sync(path: str) -> None:
        synced.append(path)
        if sync_error is not None:
            raise sync_error

    s.zk = SimpleNamespace(connected=connected, session_id=session_id, sync=sync)
    s._leader = object()
    s._leader_session = 7
    s._last_tick = time.monotonic()
    return s, synced


async def test_a_healthy_leader_passes_without_a_round_trip():
    s, synced = server()
    await s._leader_guard()
    assert synced == []


@pytest.mark.parametrize("kwargs", [{"connected": False}, {"session_id": 8}])
async def test_a_lost_or_replaced_session_refuses(kwargs):
    s, _ = server(**kwargs)
    with pytest.raises(NotCoordinatorLeaderError):
        await s._leader_guard()


async def test_no_leader_services_refuses():
    s, _ = server()
    s._leader = None
    with pytest.raises(NotCoordinatorLeaderError):
        await s._leader_guard()


async def test_after_a_stall_the_session_is_verified_first():
    s, synced = server()
    s._last_tick -= 2.0  # paused for longer than a third of the 3 s session timeout
    await s._leader_guard()
    assert synced == [s.root]

    z, _ = server(sync_error=SessionLostError("expired"))
    z._last_tick -= 2.0
    with pytest.raises(NotCoordinatorLeaderError):
        await z._leader_guard()


def test_coordinator_id_is_stable_for_an_address():
    assert stable_coordinator_id("127.0.0.1", 9123) == stable_coordinator_id("127.0.0.1", 9123)
    assert stable_coordinator_id("127.0.0.1", 9123) != stable_coordinator_id("127.0.0.1", 9124)
    s, _ = server()
    assert s.server_id == stable_coordinator_id("127.0.0.1", 9123)
