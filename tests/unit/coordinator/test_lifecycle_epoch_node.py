"""A candidate that meets an invalid epoch node logs one ERROR, stays Standby and waits for the node to change."""

from __future__ import annotations

import logging

from fluss_py import config as cfg
from fluss_py.coordinator.context import CoordinatorState
from fluss_py.coordinator.lifecycle import Signal
from fluss_py.coordinator.server import CoordinatorServer
from fluss_py.zk.paths import CoordinatorEpochZNode

from ..session_zk import SessionZk


async def test_an_invalid_epoch_node_is_refused_once_without_a_retry_loop(caplog):
    zk = SessionZk()
    s = CoordinatorServer(cfg.load_config(cfg.COORDINATOR, None, {"zookeeper.root": "/fluss", "coordinator.id": "1"}))
    s.zk = s.election._zk = zk  # type: ignore[assignment]
    zk.nodes[CoordinatorEpochZNode.path("/fluss")] = (b"-5", 0)
    s.state.transition(CoordinatorState.STANDBY, "test")
    caplog.set_level(logging.ERROR)
    for _ in range(2):
        await s._handle(Signal("elect"))
        assert s.state.current is CoordinatorState.STANDBY
    assert s._signals.empty() and not s._tasks  # no back-off timer: the epoch node's watch re-elects
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "/fluss/coordinator/epoch" in errors[0] and "'-5'" in errors[0]
