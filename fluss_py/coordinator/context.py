"""The coordinator's lifecycle state machine and the leader's in-memory view of the cluster.

Coordinator lifecycle (``docs/coordinator-ha.md``)::

    (start) ──▶ Standby ──elect──▶ Electing ──smallest + fenced + services up──▶ Leader
                   ▲                  │                                          │
                   └──not smallest────┘ (watch predecessor)                       │
                   ▲──fence/init failed (release)─┘                                │
                   └─────────────── session lost / fenced / released ◀────────────┘
    Standby | Electing | Leader ──stop──▶ Down

``CoordinatorState.VALID_PREVIOUS`` lists the legal predecessors of each state; ``StateMachine.transition``
refuses (and logs) any other move. ``CoordinatorContext`` is the leader's view (epoch fence, databases,
live tablet servers); it exists only while leader and is mutated only by the event loop's task (by
``handlers.MetadataHandlers``; the tables and buckets are ``tables.ClusterView``, docs/control-plane.md §1.1).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from fluss_py.common.state_machine import check_transition
from fluss_py.zk.codecs import TabletServerRegistration
from fluss_py.zk.values import EpochFence

# not __name__: the runbook shows its lines by this name, docs/operations.md (the coordinator state lines)
log = logging.getLogger("fluss_py.coordinator.CoordinatorServer")


class CoordinatorState(enum.Enum):
    STANDBY = "Standby"
    ELECTING = "Electing"
    LEADER = "Leader"
    DOWN = "Down"


# target -> legal current states (None: the initial state before the first transition)
VALID_PREVIOUS: dict[CoordinatorState, frozenset[CoordinatorState | None]] = {
    CoordinatorState.STANDBY: frozenset({None, CoordinatorState.ELECTING, CoordinatorState.LEADER}),
    CoordinatorState.ELECTING: frozenset({CoordinatorState.STANDBY}),
    CoordinatorState.LEADER: frozenset({CoordinatorState.ELECTING}),
    CoordinatorState.DOWN: frozenset(
        {None, CoordinatorState.STANDBY, CoordinatorState.ELECTING, CoordinatorState.LEADER}
    ),
}


def is_legal(current: CoordinatorState | None, target: CoordinatorState) -> bool:
    return current in VALID_PREVIOUS[target]


class StateMachine:
    """Owns the current CoordinatorState. Only the lifecycle task calls ``transition``; anyone may read."""

    def __init__(self, on_change: Callable[[CoordinatorState], None] | None = None) -> None:
        self.current: CoordinatorState | None = None
        self._on_change = on_change

    def transition(self, target: CoordinatorState, reason: str = "") -> None:
        if self.current is target:
            return
        check_transition(f"coordinator ({reason})" if reason else "coordinator", self.current, target,
                         VALID_PREVIOUS[target], log)  # fmt: skip
        log.info("Coordinator state %s -> %s%s", _name(self.current), target.value, f" ({reason})" if reason else "")
        self.current = target
        if self._on_change is not None:
            self._on_change(target)

    @property
    def name(self) -> str:
        return _name(self.current)


def _name(state: CoordinatorState | None) -> str:
    return state.value if state is not None else "Starting"


@dataclass
class CoordinatorContext:
    """The leader's in-memory view, rebuilt from ZooKeeper on every election win.

    Owned by the CoordinatorEventLoop task: only event handlers mutate it (single writer).
    """

    coordinator_id: int
    fence: EpochFence
    host: str
    port: int
    databases: set[str] = field(default_factory=set)
    tablet_servers: dict[int, TabletServerRegistration] = field(default_factory=dict)

    @property
    def epoch(self) -> int:
        return self.fence.epoch
