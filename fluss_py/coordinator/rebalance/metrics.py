"""``fluss_rebalance_*`` metrics of the coordinator, computed at scrape time from the leader's executor.

    fluss_rebalance_state{state}              1 for the current state: idle, rebalancing, completed,
                                              failed, canceled (the last rebalance's outcome), else 0
    fluss_rebalance_batches_total / _done     batches of the current (or last) plan / finished batches
    fluss_rebalance_moves_total / _done / _in_flight / _rolled_back
    fluss_rebalance_bytes_planned / fluss_rebalance_bytes_moved
    fluss_rebalance_server_migrations{server} in-flight moves touching each server (cap:
                                              tablet-server.rebalance.max-concurrent-migrations)
    fluss_rebalance_server_migrations_peak    the most ever seen on one server by this leader

The tablet distribution (replicas and leaders per server) is ``fluss_tablet_distribution``
(``coordinator/distribution.py``).

A standby coordinator (no executor) reports state idle and nothing else.

Who may call: prometheus-client's registry, from the HTTP handler on the process's loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client.registry import Collector

from fluss_py import metric_catalogue_coordinator as mc
from fluss_py.coordinator.rebalance.progress import MoveStatus
from fluss_py.metric_spec import Family

STATES = ("idle", "rebalancing", "completed", "failed", "canceled")


class RebalanceCollector(Collector):
    """Reads ``executor()`` (the leader's RebalanceExecutor, or None) on every scrape."""

    def __init__(self, executor: Callable[[], Any]) -> None:
        self._executor = executor

    def collect(self) -> Iterator[Family]:
        ex = self._executor()
        progress = ex.progress if ex is not None else None
        current = progress.status.value.lower() if progress is not None else "idle"
        state = mc.REBALANCE_STATE.family()
        for s in STATES:
            state.add_metric([s], 1.0 if s == current else 0.0)
        yield state
        if ex is None:
            return
        if progress is not None:
            done_batches = progress.batch if progress.running else len(progress.plan.batches)
            for spec, value in (
                (mc.REBALANCE_BATCHES_TOTAL, len(progress.plan.batches)),
                (mc.REBALANCE_BATCHES_DONE, done_batches),
                (mc.REBALANCE_MOVES_TOTAL, len(progress.plan.moves)),
                (mc.REBALANCE_MOVES_DONE, progress.count(MoveStatus.DONE)),
                (mc.REBALANCE_MOVES_IN_FLIGHT, progress.count(MoveStatus.ADDING) if progress.running else 0),
                (mc.REBALANCE_MOVES_ROLLED_BACK, progress.count(MoveStatus.ROLLED_BACK)),
                (mc.REBALANCE_BYTES_PLANNED, progress.plan.moved_bytes),
                (mc.REBALANCE_BYTES_MOVED, progress.bytes_moved),
            ):
                yield spec.family(float(value))
        per_server = mc.REBALANCE_SERVER_MIGRATIONS.family()
        for server, n in sorted(ex.migrations_per_server().items()):
            per_server.add_metric([str(server)], float(n))
        yield per_server
        yield mc.REBALANCE_SERVER_MIGRATIONS_PEAK.family(float(ex.peak_server_migrations))
