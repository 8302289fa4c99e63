"""Time partitions of auto-partitioned tables: which partitions must exist and which have expired (pure).

Design: docs/partitioning.md. A partition is named by the start of its time slot, in UTC::

    hour   2026120105   (yyyyMMddHH)        day    20261201   (yyyyMMdd)        month  202612   (yyyyMM)

Rules, for a check at time ``now`` whose slot is ``current``:

- ``wanted``: ``current`` and the next ``num_precreate - 1`` slots (``num_precreate`` >= 1), so producers
  find the next slot's partition before its first record arrives;
- ``expired``: the partitions whose slot starts before ``current - num_retention`` slots. A partition
  inside retention (``current - num_retention`` .. ``current``) and any future one is never expired, and
  a name that is not a slot of this unit is never touched (it was not made by this manager).

Both are level-triggered: a coordinator leader that took over mid-way re-derives the same answer from the
partitions that exist, so creating and dropping are idempotent across failovers.

``owned_partitions`` tells which partition belongs to which logical table: the table *instance*, by table
id, not its name, so a table dropped and created again under the same name never adopts the old one's
partitions. ``spec_of`` reads a logical table's spec from its properties; ``check_partition`` decides whether a
partition may be created; ``routing_unit``/``partition_for`` pick a record's partition by its timestamp;
``creation_lag``/``creation_lateness`` measure the manager against its schedule (metrics). Who may call:
anyone (no I/O, no clock: ``now`` is an argument): the coordinator's AutoPartitionManager and CreateTable,
and the client (producer routing, consumer/admin refusing the logical table).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from fluss_py import config as cfg
from fluss_py.errors import InvalidRequestError
from fluss_py.types import PARTITION_SEPARATOR, TablePath, split_partition


class TimeUnit(enum.Enum):
    HOUR = "hour"
    DAY = "day"
    MONTH = "month"

    @property
    def pattern(self) -> str:
        return {TimeUnit.HOUR: "%Y%m%d%H", TimeUnit.DAY: "%Y%m%d", TimeUnit.MONTH: "%Y%m"}[self]

    @property
    def width(self) -> int:
        return {TimeUnit.HOUR: 10, TimeUnit.DAY: 8, TimeUnit.MONTH: 6}[self]


def slot_start(ts: datetime, unit: TimeUnit) -> datetime:
    """The start of the slot holding ``ts`` (UTC)."""
    ts = ts.astimezone(UTC)
    if unit is TimeUnit.HOUR:
        return ts.replace(minute=0, second=0, microsecond=0)
    if unit is TimeUnit.DAY:
        return ts.replace(hour=0, minute=0, second=0, microsecond=0)
    return ts.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def shift(start: datetime, unit: TimeUnit, n: int) -> datetime:
    """The slot ``n`` slots after (n < 0: before) the slot starting at ``start``, clamped to the calendar's
    years 1..9999 (a month table's retention may reach back further than year 1: nothing is that old)."""
    first, last = datetime.min.replace(tzinfo=start.tzinfo), datetime.max.replace(tzinfo=start.tzinfo)
    try:
        if unit is TimeUnit.HOUR:
            return start + timedelta(hours=n)
        if unit is TimeUnit.DAY:
            return start + timedelta(days=n)
    except OverflowError:
        return first if n < 0 else slot_start(last, unit)
    months = start.year * 12 + (start.month - 1) + n
    if months < 12:
        return first
    if months // 12 > last.year:
        return slot_start(last, unit)
    return start.replace(year=months // 12, month=months % 12 + 1)


def partition_name(ts: datetime, unit: TimeUnit) -> str:
    """The partition a record with timestamp ``ts`` belongs to."""
    return slot_start(ts, unit).strftime(unit.pattern)


def parse_partition(name: str, unit: TimeUnit) -> datetime | None:
    """The slot start a partition name stands for; None when it is not a slot name of ``unit``."""
    if len(name) != unit.width or not name.isdigit():
        return None
    try:
        return datetime.strptime(name, unit.pattern).replace(tzinfo=UTC)
    except ValueError:
        return None


def wanted(now: datetime, unit: TimeUnit, num_precreate: int) -> list[str]:
    """The partitions that must exist at ``now``: the current slot and the next ``num_precreate - 1``."""
    current = slot_start(now, unit)  # (dict: once each, the calendar's last slot clamps the later ones)
    return list(dict.fromkeys(shift(current, unit, i).strftime(unit.pattern) for i in range(max(1, num_precreate))))


def expired(existing: Iterable[str], now: datetime, unit: TimeUnit, num_retention: int) -> list[str]:
    """The existing partitions to drop at ``now``: slots starting before ``current - num_retention``."""
    oldest_kept = shift(slot_start(now, unit), unit, -max(0, num_retention))
    out = []
    for name in existing:
        start = parse_partition(name, unit)
        if start is not None and start < oldest_kept:
            out.append(name)
    return sorted(out)


def creation_lag(existing: Iterable[str], now: datetime, unit: TimeUnit, num_precreate: int) -> float:
    """Seconds the manager is behind schedule at ``now``: for the oldest wanted slot that has already
    started and has no partition, how long ago it started; 0 when every started wanted slot exists (a
    missing future slot is not late yet). With ``num_precreate`` >= 1 that is only the current slot."""
    have = set(existing)
    late = [
        (now - start).total_seconds()
        for name in wanted(now, unit, num_precreate)
        if name not in have and (start := parse_partition(name, unit)) is not None and start <= now
    ]
    return max(late, default=0.0)


def creation_lateness(created_at: datetime, partition: str, unit: TimeUnit) -> float:
    """Seconds after its slot started that a partition was created; 0 when created ahead of its slot."""
    start = parse_partition(partition, unit)
    return 0.0 if start is None else max(0.0, (created_at - start).total_seconds())


def owned_partitions(
    tables: Mapping[TablePath, int],
) -> tuple[dict[TablePath, dict[str, TablePath]], list[TablePath]]:
    """Split the partitions among ``tables`` (path -> table id) into those of each logical table (logical
    path -> {partition name: path}) and the orphans. A partition belongs to the logical table of its name
    only if it was created after it: table ids only grow (one fenced counter), so a partition whose id is
    smaller than its logical table's is left over from a dropped table of the same name, an orphan as is a
    partition without a logical table. No partition metadata names its logical table's id; this rule needs
    none."""
    owned: dict[TablePath, dict[str, TablePath]] = {}
    orphans: list[TablePath] = []
    for path, table_id in tables.items():
        logical, partition = split_partition(path.table)
        if partition is None:
            continue
        logical_path = TablePath(path.database, logical)
        logical_id = tables.get(logical_path)
        if logical_id is not None and table_id > logical_id:
            owned.setdefault(logical_path, {})[partition] = path
        else:
            orphans.append(path)
    return owned, sorted(orphans, key=str)


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """A logical table's auto-partition spec, from its properties (``table.auto-partition.*``)."""

    unit: TimeUnit
    num_precreate: int
    num_retention: int


def spec_of(properties: Mapping[str, str]) -> PartitionSpec | None:
    """The spec of a table with ``table.auto-partition.time-unit`` set; None for other tables. The values
    were range-checked at CreateTable (validate_properties)."""
    unit = properties.get(cfg.TABLE_AUTO_PARTITION_UNIT.key)
    if not unit:
        return None
    precreate = properties.get(cfg.TABLE_AUTO_PARTITION_PRECREATE.key, cfg.TABLE_AUTO_PARTITION_PRECREATE.default)
    retention = properties.get(cfg.TABLE_AUTO_PARTITION_RETENTION.key, cfg.TABLE_AUTO_PARTITION_RETENTION.default)
    return PartitionSpec(TimeUnit(str(unit).lower()), int(precreate), int(retention))


def check_partition(logical: Mapping[str, str] | None, partition: str) -> None:
    """A partition may be created only of an existing partitioned table and only for a slot of its unit
    (by the manager, or by hand: ``table create db.t$<slot>``). Raises the ApiError to answer."""
    spec = spec_of(logical) if logical is not None else None
    if spec is None:
        raise InvalidRequestError("partitions exist only of a table created with table.auto-partition.time-unit")
    if parse_partition(partition, spec.unit) is None:
        raise InvalidRequestError(f"partition {partition!r} is not a {spec.unit.value} slot name ({spec.unit.pattern})")


def routing_unit(table: str, properties: Mapping[str, str]) -> TimeUnit | None:
    """The time unit by which records written to ``table`` are routed to its partitions: set for the logical
    table of a partitioned table (which has no buckets of its own), None for a partition (its name carries
    ``$<slot>``; it inherits the spec properties) and for any other table."""
    if PARTITION_SEPARATOR in table:
        return None
    unit = properties.get(cfg.TABLE_AUTO_PARTITION_UNIT.key)
    return TimeUnit(str(unit).lower()) if unit else None


def partition_for(table: str, timestamp_ms: int, unit: TimeUnit) -> str:
    """The partition table name (``<table>$<slot>``) a record with ``timestamp_ms`` (UTC epoch ms) goes to."""
    return f"{table}{PARTITION_SEPARATOR}{partition_name(datetime.fromtimestamp(timestamp_ms / 1000, UTC), unit)}"
