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

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from fluss_py.coordinator.rebalance.progress import MoveStatus

STATES = ("idle", "rebalancing", "completed", "failed", "canceled")


class RebalanceCollector(Collector):
    """Reads ``executor()`` (the leader's RebalanceExecutor, or None) on every scrape."""

    def __init__(self, executor: Callable[[], Any]) -> None:
        self._executor = executor

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ex = self._executor()
        progress = ex.progress if ex is not None else None
        current = progress.status.value.lower() if progress is not None else "idle"
        state = GaugeMetricFamily("fluss_rebalance_state", "Rebalance state (1 = current)", labels=["state"])
        for s in STATES:
            state.add_metric([s], 1.0 if s == current else 0.0)
        yield state
        if ex is None:
            return
        if progress is not None:
            done_batches = progress.batch if progress.running else len(progress.plan.batches)
            for name, value, doc in (
                ("batches_total", len(progress.plan.batches), "Batches of the current or last plan"),
                ("batches_done", done_batches, "Finished batches"),
                ("moves_total", len(progress.plan.moves), "Moves of the current or last plan"),
                ("moves_done", progress.count(MoveStatus.DONE), "Finished moves"),
                ("moves_in_flight", progress.count(MoveStatus.ADDING) if progress.running else 0, "Moves in flight"),
                ("moves_rolled_back", progress.count(MoveStatus.ROLLED_BACK), "Moves rolled back"),
                ("bytes_planned", progress.plan.moved_bytes, "Bytes the plan moves"),
                ("bytes_moved", progress.bytes_moved, "Bytes moved so far"),
            ):
                yield GaugeMetricFamily(f"fluss_rebalance_{name}", doc, value=float(value))
        per_server = GaugeMetricFamily(
            "fluss_rebalance_server_migrations", "In-flight moves touching a server", labels=["server"]
        )
        for server, n in sorted(ex.migrations_per_server().items()):
            per_server.add_metric([str(server)], float(n))
        yield per_server
        yield GaugeMetricFamily(
            "fluss_rebalance_server_migrations_peak",
            "Most in-flight moves seen touching one server",
            value=float(ex.peak_server_migrations),
        )
