"""The AutoPartitionManager: creates partitions ahead of time and drops expired ones (design:
docs/partitioning.md; the rules are ``fluss_py/partitioning.py``).

    tick (every coordinator.auto-partition.check-interval, and once the leadership's first reconciliation
    is done: ``on_started``; a tick before that is skipped, as no replica can be placed before the live
    tablet servers are known)
      ──▶ AutoPartitionCheck on the event loop ──▶ per auto-partitioned table:
             wanted(now) - existing  ──▶ CreateTable <t>$<slot>   (one fenced transaction each)
             expired(existing, now)  ──▶ DropTable   <t>$<slot>
          partitions whose logical table is gone ──▶ DropTable (first; a partition belongs to its logical
                                                   table by id, not name: ``owned_partitions``)

Level-triggered on what exists in the view (loaded from ZooKeeper), so a leader that took over mid-way
finishes what its predecessor started and nothing is done twice.

Who may call: LeaderServices (``install``/``start``/``close``); ``check`` and ``on_started`` (a
ProcessorListener of the TableProcessor) run on the event loop task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from fluss_py.coordinator.event_loop import Ticker
from fluss_py.coordinator.events import AutoPartitionCheck, CreateTable, DropTable
from fluss_py.errors import ApiError
from fluss_py.partitioning import (
    creation_lag,
    creation_lateness,
    expired,
    owned_partitions,
    spec_of,
    wanted,
)
from fluss_py.types import PARTITION_SEPARATOR, TablePath

log = logging.getLogger(__name__)


class AutoPartitionManager:
    """Owns the check tick task. ``processor`` is the TableProcessor (view, create_table, drop_table)."""

    def __init__(self, processor: Any, check_interval: float, clock: Callable[[], datetime] | None = None) -> None:
        self._p = processor
        self.check_interval = check_interval
        self._clock = clock or (lambda: datetime.now(UTC))
        self._ticker = Ticker("auto-partition-tick", check_interval, AutoPartitionCheck, immediately=True)
        self._loop: Any = None  # the event loop (install)
        self.created = 0  # during this leadership (metrics, tests)
        self.dropped = 0
        self.failures = 0  # tables whose partitions could not be created in a check (logged each time)
        # the latest check that created partitions: the most seconds after its slot started that one of them
        # was created (0: all made ahead of their slots); a check creating nothing leaves it unchanged
        self.last_creation_late = 0.0

    def lag(self) -> float:
        """Seconds behind schedule now (``creation_lag``, the worst partitioned table; metrics)."""
        now = self._clock()
        existing = self.partitions()
        worst = 0.0
        for info in list(self._p.view.tables.values()):
            spec = spec_of(info.properties)
            if spec is not None and PARTITION_SEPARATOR not in info.path.table:
                worst = max(worst, creation_lag(existing.get(info.path, {}), now, spec.unit, spec.num_precreate))
        return worst

    def install(self, loop: Any) -> None:
        loop.register(AutoPartitionCheck, self.check)
        self._p.listeners.append(self)
        self._loop = loop

    # ProcessorListener: the first check of a leadership runs once the live servers are known, as an event
    # of its own (its failure is the check's, logged by the loop, not the startup's)
    async def on_started(self) -> None:
        self._loop.put(AutoPartitionCheck())

    async def on_isr_changed(self, buckets: list[Any]) -> None:
        return None

    async def on_servers_changed(self, joined: set[int], died: list[int]) -> None:
        return None

    def start(self, loop: Any) -> None:
        self._ticker.start(loop)

    async def close(self) -> None:
        await self._ticker.close()

    def partitions(self) -> dict[TablePath, dict[str, TablePath]]:
        """Logical table path -> {partition name: partition table path} of the partitions that belong to it
        (``owned_partitions``; orphans, dropped by the next check, are not counted)."""
        return owned_partitions(self._p.view.by_path)[0]

    async def check(self, _event: AutoPartitionCheck | None = None) -> None:
        if not self._p.started:
            log.info("Partition check deferred: the leadership has not started yet (live servers unknown)")
            return  # on_started runs it
        now = self._clock()
        view = self._p.view
        existing, orphans = owned_partitions(view.by_path)
        for path in orphans:  # first: a table created again under its name must not adopt its partitions
            await self._drop(path, "its logical table was dropped (or created again under the same name)")
        late: list[float] = []
        for table_id, info in list(view.tables.items()):
            spec = spec_of(info.properties)
            if spec is None or PARTITION_SEPARATOR in info.path.table:
                continue
            have = existing.get(info.path, {})
            try:  # one table's refusal (e.g. RF above the live servers) must not stop the others
                late.extend(await self._create_wanted(table_id, info, spec, have, now))
            except ApiError as e:  # (ZooKeeper errors, fencing among them, end the check: they are not per table)
                self.failures += 1
                log.warning("Partitions of table %s not created: %s (again at the next check)", info.path, e)
            for name in expired(have, now, spec.unit, spec.num_retention):
                await self._drop(have[name], f"expired (retention {spec.num_retention} {spec.unit.value}s)")
        if late:
            self.last_creation_late = max(late)

    async def _create_wanted(self, table_id: int, info: Any, spec: Any, have: dict, now: datetime) -> list[float]:
        """Create the partitions ``info``'s table wants at ``now`` and lacks; how late each one came."""
        late = []
        for name in wanted(now, spec.unit, spec.num_precreate):
            if name not in have:
                path = TablePath(info.path.database, f"{info.path.table}{PARTITION_SEPARATOR}{name}")
                props = dict(info.properties)
                await self._p.create_table(
                    CreateTable(path, info.num_buckets, info.replication_factor, props, ignore_if_exists=True)
                )
                self.created += 1
                late.append(creation_lateness(self._clock(), name, spec.unit))
                log.info("Created partition %s of table %s (id %d)", name, info.path, table_id)
        return late

    async def _drop(self, path: TablePath, why: str) -> None:
        await self._p.drop_table(DropTable(path, ignore_if_not_exists=True))
        self.dropped += 1
        log.info("Dropped partition table %s: %s", path, why)
