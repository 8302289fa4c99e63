"""Coordinator-side lifecycle states of buckets and replicas, with their legal predecessors.

Diagrams and the meaning of each state: ``docs/control-plane.md``. This module is pure (no I/O): it
decides whether a move is legal and records it; the side effects of a move (ZooKeeper writes,
NotifyLeaderAndIsr / StopReplica requests) belong to ``coordinator/processor.py``.

Bucket (``BucketState``)::

                  create             elect ok
    NonExistent ─────────▶ New ──────────────────▶ Online ◀─┐ leader moved,
         ▲                  │                      │  ▲ └────┘ ISR changed
         │                  │ no live replica      │  │
         │                  │        leader died,  │  │ a live ISR member
         │                  ▼        nobody to lead▼  │ can lead again
         │                Offline ◀────────────────┘  │
         │                  └─────────────────────────┘
         └── drop: from New, Online or Offline

Replica (``ReplicaState``), for one (bucket, server)::

    NonExistent ─▶ New ─▶ Online ⇄ Offline ─▶ DeletionStarted ─▶ DeletionSuccessful ─▶ NonExistent
                    └────────────▶ Offline ─▶ MigrationStarted ─────────────────────────▶ NonExistent
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Hashable, Iterator
from typing import Generic, TypeVar

from fluss_py.common.state_machine import check_transition

log = logging.getLogger(__name__)


class BucketState(enum.Enum):
    """Lifecycle of a bucket as the coordinator leader sees it (Fluss's TableBucketStateMachine)."""

    NON_EXISTENT = "NonExistent"  # no such bucket (not yet created, or deleted)
    NEW = "New"  # assignment written, no leader elected yet
    ONLINE = "Online"  # has a live leader
    OFFLINE = "Offline"  # its leader died and no live ISR member could take over yet

    @property
    def valid_previous(self) -> frozenset[BucketState]:
        return BUCKET_VALID_PREVIOUS[self]


BUCKET_VALID_PREVIOUS: dict[BucketState, frozenset[BucketState]] = {
    BucketState.NON_EXISTENT: frozenset({BucketState.NEW, BucketState.ONLINE, BucketState.OFFLINE}),
    BucketState.NEW: frozenset({BucketState.NON_EXISTENT}),
    BucketState.ONLINE: frozenset({BucketState.NEW, BucketState.ONLINE, BucketState.OFFLINE}),
    BucketState.OFFLINE: frozenset({BucketState.NEW, BucketState.ONLINE, BucketState.OFFLINE}),
}
"""Legal predecessors. Unlike Fluss (``NonExistent <- Offline`` only) a table drop may remove an Online
or New bucket directly: the drop handler stops all replicas itself, there is no leaderless detour."""


class ReplicaState(enum.Enum):
    """Lifecycle of one replica (a bucket on one tablet server) as the coordinator leader sees it."""

    NON_EXISTENT = "NonExistent"
    NEW = "New"  # assigned, NotifyLeaderAndIsr not yet acknowledged
    ONLINE = "Online"  # its server is live and was told its role
    OFFLINE = "Offline"  # its server died or is shutting down; left the ISR (unless it was the last member)
    DELETION_STARTED = "DeletionStarted"  # StopReplica(delete=True) sent (table dropped)
    DELETION_SUCCESSFUL = "DeletionSuccessful"  # the server confirmed deletion
    MIGRATION_STARTED = "MigrationStarted"  # rebalance moved the replica away; local files being deleted

    @property
    def valid_previous(self) -> frozenset[ReplicaState]:
        return REPLICA_VALID_PREVIOUS[self]


REPLICA_VALID_PREVIOUS: dict[ReplicaState, frozenset[ReplicaState]] = {
    ReplicaState.NON_EXISTENT: frozenset({ReplicaState.DELETION_SUCCESSFUL, ReplicaState.MIGRATION_STARTED}),
    ReplicaState.NEW: frozenset({ReplicaState.NON_EXISTENT}),
    ReplicaState.ONLINE: frozenset({ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.OFFLINE}),
    ReplicaState.OFFLINE: frozenset({ReplicaState.NEW, ReplicaState.ONLINE, ReplicaState.OFFLINE}),
    ReplicaState.DELETION_STARTED: frozenset({ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED}),
    ReplicaState.DELETION_SUCCESSFUL: frozenset({ReplicaState.DELETION_STARTED}),
    ReplicaState.MIGRATION_STARTED: frozenset({ReplicaState.OFFLINE, ReplicaState.MIGRATION_STARTED}),
}
"""Legal predecessors, as Fluss's ReplicaStateMachine."""


S = TypeVar("S", BucketState, ReplicaState)
K = TypeVar("K", bound=Hashable)


def transition(subject: object, current: S, target: S) -> S:
    """Return ``target`` if ``current`` is one of its legal predecessors; else log and raise
    ``IllegalStateTransition`` (``common/state_machine.py``).

    ``subject`` names what moves (a TableBucket, or (TableBucket, server id)) for the log line.
    """
    check_transition(subject, current, target, target.valid_previous, log)
    if current is not target:
        log.debug("%s: %s -> %s", subject, current.name, target.name)
    return target


class StateTable(Generic[K, S]):
    """The current state of every key (bucket or replica); moves go through ``transition()``.

    A key absent from the table is NON_EXISTENT; moving a key to NON_EXISTENT removes it. Owned by the
    coordinator's event-processor task: only that task reads or writes it.
    """

    def __init__(self, non_existent: S) -> None:
        self._non_existent = non_existent
        self._states: dict[K, S] = {}

    def get(self, key: K) -> S:
        return self._states.get(key, self._non_existent)

    def move(self, key: K, target: S) -> S:
        """Move ``key`` to ``target`` (raises IllegalStateTransition); returns the previous state."""
        previous = self.get(key)
        transition(key, previous, target)
        if target is self._non_existent:
            self._states.pop(key, None)
        else:
            self._states[key] = target
        return previous

    def force(self, key: K, state: S) -> None:
        """Set a state without a predecessor check: only while rebuilding the table from ZooKeeper."""
        if state is self._non_existent:
            self._states.pop(key, None)
        else:
            self._states[key] = state

    def keys_in(self, *states: S) -> list[K]:
        return [k for k, s in self._states.items() if s in states]

    def clear(self) -> None:
        self._states.clear()

    def __iter__(self) -> Iterator[K]:
        return iter(self._states)

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: object) -> bool:
        return key in self._states
