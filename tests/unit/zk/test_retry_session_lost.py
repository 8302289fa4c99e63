"""A startup step that meets a connection loss (a ZooKeeper member died mid-request) is retried, not fatal."""

import pytest

from fluss_py.zk.client import retry_session_lost
from fluss_py.zk.values import NoNodeError, SessionLostError


async def test_retried_after_session_lost_until_it_succeeds():
    calls = []

    async def op():
        calls.append(1)
        if len(calls) < 3:
            raise SessionLostError("ZooKeeper session lost: ConnectionLoss")
        return "registered"

    assert await retry_session_lost(op, timeout=5.0, what="registering", interval=0.001) == "registered"
    assert len(calls) == 3


async def test_gives_up_at_the_deadline_and_never_retries_other_errors():
    async def lost():
        raise SessionLostError("ZooKeeper session lost: ConnectionLoss")

    with pytest.raises(SessionLostError):
        await retry_session_lost(lost, timeout=0.05, what="x", interval=0.01)

    calls = []

    async def missing():
        calls.append(1)
        raise NoNodeError("no node")

    with pytest.raises(NoNodeError):
        await retry_session_lost(missing, timeout=5.0, what="x")
    assert calls == [1]
