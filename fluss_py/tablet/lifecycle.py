"""The tablet server's lifecycle states (the diagram is in ``tablet/server.py``) with their legal predecessors.

``TabletServerState`` values are what ``/health`` reports in ``state`` (a ``StrEnum``: the JSON is the same
text as before). ``transition`` refuses and logs any move its ``VALID_PREVIOUS`` does not list.
"""

from __future__ import annotations

import enum
import logging

from fluss_py.common.state_machine import check_transition

log = logging.getLogger(__name__)


class TabletServerState(enum.StrEnum):
    STARTING = "Starting"  # ZooKeeper session, logs loaded, replica manager, servers bound, registering
    RUNNING = "Running"  # registered and serving
    SHUTTING_DOWN = "ShuttingDown"  # controlled shutdown: handing leadership away, still serving
    STOPPING = "Stopping"  # RPC intake stopped, replicas and logs closing, session closing


VALID_PREVIOUS: dict[TabletServerState, frozenset[TabletServerState]] = {
    TabletServerState.STARTING: frozenset(),
    TabletServerState.RUNNING: frozenset({TabletServerState.STARTING}),
    TabletServerState.SHUTTING_DOWN: frozenset({TabletServerState.RUNNING}),
    TabletServerState.STOPPING: frozenset(TabletServerState),  # a failed start stops too; stopping is idempotent
}


def transition(server_id: int, current: TabletServerState, target: TabletServerState) -> TabletServerState:
    """``target`` if ``current`` may move to it; else log and raise ``IllegalStateTransition``."""
    check_transition(f"tablet server {server_id}", current, target, VALID_PREVIOUS[target], log)
    return target
