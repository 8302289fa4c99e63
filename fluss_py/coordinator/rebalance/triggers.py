"""When to start a rebalance by itself (docs/rebalance.md). Pure: the executor calls ``decide`` on the event
loop after every membership change and every ``coordinator.rebalance.check-interval``.

    new server    a live tablet server that hosts no replica (a restarted server still hosts its
                  replicas, so a restart is never mistaken for growth); an empty server is worth a plan
                  only if the plan would move something onto it, which the planner decides
    imbalance     replicas per live server: stddev / mean > coordinator.rebalance.trigger-threshold,
                  and counts not already as even as whole numbers allow (max - min <= 1)

Nothing is triggered when automatic triggering is off, a rebalance is running, a server hosting replicas
is down (the plan would be refused; the cluster heals first), or there is nothing to place.

Who may call: anyone (no I/O, no clock).
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass

from fluss_py.coordinator.rebalance.planner import is_balanced, spread


class Reason(enum.Enum):
    NEW_SERVER = "new-server"
    IMBALANCE = "imbalance"
    OPERATOR = "operator"


@dataclass(frozen=True, slots=True)
class Trigger:
    reason: Reason
    detail: str


def replica_counts(assignment: Mapping[object, Iterable[int]], live: Iterable[int]) -> dict[int, int]:
    """Replicas per live server (0 for a live server hosting none)."""
    c = Counter(s for replicas in assignment.values() for s in replicas)
    return {s: c[s] for s in sorted(live)}


def empty_servers(counts: Mapping[int, int]) -> list[int]:
    """Live servers hosting no replica while others host some: new capacity."""
    if not any(counts.values()):
        return []
    return sorted(s for s, n in counts.items() if n == 0)


def imbalanced(counts: Mapping[int, int], threshold: float) -> float | None:
    """The spread when it exceeds ``threshold`` and whole numbers allow better; else None."""
    values = list(counts.values())
    if is_balanced(values, threshold):
        return None
    return spread(values)


def decide(
    assignment: Mapping[object, Iterable[int]],
    live: Set[int],
    threshold: float,
    *,
    auto: bool,
    running: bool,
) -> Trigger | None:
    """Whether to start a rebalance now, and why (None: do nothing)."""
    if not auto or running or not assignment:
        return None
    hosting = {s for replicas in assignment.values() for s in replicas}
    down = sorted(hosting - set(live))
    if down:
        return None  # the cluster is not healthy: heal first (replicas on dead servers cannot be planned)
    counts = replica_counts(assignment, live)
    empty = empty_servers(counts)
    if empty and not is_balanced(list(counts.values()), threshold):
        return Trigger(Reason.NEW_SERVER, f"tablet server(s) {empty} host no replica")
    value = imbalanced(counts, threshold)
    if value is not None:
        return Trigger(Reason.IMBALANCE, f"replica spread {value:.3f} > threshold {threshold}")
    return None
