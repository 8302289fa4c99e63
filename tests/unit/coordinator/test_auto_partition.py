"""Auto-partition rules (docs/partitioning.md): names, slots, pre-creation and retention, exhaustively over
slot boundaries (hour, day, month, year and leap day)."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from fluss_py.coordinator.events import CreateTable, DropTable
from fluss_py.coordinator.partition_manager import AutoPartitionManager
from fluss_py.coordinator.tables import ClusterView, TableRegistration
from fluss_py.errors import InvalidReplicationFactorError, InvalidRequestError, InvalidTableNameError
from fluss_py.partitioning import (
    PartitionSpec,
    TimeUnit,
    check_partition,
    creation_lag,
    creation_lateness,
    expired,
    parse_partition,
    partition_for,
    partition_name,
    routing_unit,
    shift,
    slot_start,
    spec_of,
    wanted,
)
from fluss_py.types import TablePath, split_partition

NOW = datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC)


def test_names_per_unit_and_timezone():
    assert partition_name(NOW, TimeUnit.HOUR) == "2026123123"
    assert partition_name(NOW, TimeUnit.DAY) == "20261231"
    assert partition_name(NOW, TimeUnit.MONTH) == "202612"
    east = NOW.astimezone(timezone(timedelta(hours=8)))  # the same instant in another zone
    assert partition_name(east, TimeUnit.DAY) == "20261231"


@pytest.mark.parametrize("unit", list(TimeUnit))
def test_parse_is_the_inverse_of_the_name_and_refuses_foreign_names(unit):
    start = slot_start(NOW, unit)
    assert parse_partition(partition_name(NOW, unit), unit) == start
    for foreign in ("", "2026", "2026-12-31", "20261332", "2026123124", "abcdefgh", "99999999999"):
        assert parse_partition(foreign, unit) is None


def test_precreation_crosses_year_and_leap_day_boundaries():
    assert wanted(NOW, TimeUnit.HOUR, 3) == ["2026123123", "2027010100", "2027010101"]
    assert wanted(NOW, TimeUnit.DAY, 2) == ["20261231", "20270101"]
    assert wanted(NOW, TimeUnit.MONTH, 3) == ["202612", "202701", "202702"]
    leap = datetime(2028, 2, 28, 12, tzinfo=UTC)
    assert wanted(leap, TimeUnit.DAY, 3) == ["20280228", "20280229", "20280301"]
    assert wanted(NOW, TimeUnit.DAY, 0) == ["20261231"]  # the current slot always exists


def test_retention_keeps_exactly_the_last_n_slots_and_the_future():
    existing = ["20261227", "20261228", "20261229", "20261230", "20261231", "20270101", "not-ours", "202612"]
    assert expired(existing, NOW, TimeUnit.DAY, 3) == ["20261227"]
    assert expired(existing, NOW, TimeUnit.DAY, 0) == ["20261227", "20261228", "20261229", "20261230"]
    assert expired(["202610", "202611", "202612", "202701"], NOW, TimeUnit.MONTH, 1) == ["202610"]


@pytest.mark.parametrize("unit", list(TimeUnit))
@pytest.mark.parametrize("retention", [0, 1, 2, 5])
def test_nothing_inside_retention_is_ever_expired(unit, retention):
    current = slot_start(NOW, unit)
    names = [shift(current, unit, i).strftime(unit.pattern) for i in range(-10, 4)]
    gone = set(expired(names, NOW, unit, retention))
    for i, name in zip(range(-10, 4), names, strict=True):
        assert (name in gone) is (i < -retention), (unit, retention, i, name)


# ---------------------------------------------------------------- spec, manual partitions, the manager
SPEC = {"table.auto-partition.time-unit": "day", "table.auto-partition.num-precreate": "2",
        "table.auto-partition.num-retention": "1"}  # fmt: skip


def test_spec_and_which_partitions_may_be_created():
    assert spec_of(SPEC) == PartitionSpec(TimeUnit.DAY, 2, 1)
    assert spec_of({"table.auto-partition.time-unit": "hour"}) == PartitionSpec(TimeUnit.HOUR, 2, 7)  # defaults
    assert spec_of({}) is None
    check_partition(SPEC, "20261231")
    for logical, name in ((SPEC, "2026123123"), (SPEC, "x"), ({}, "20261231"), (None, "20261231")):
        with pytest.raises(InvalidRequestError):
            check_partition(logical, name)


def test_partition_table_names():
    assert split_partition("events$20261231") == ("events", "20261231")
    assert split_partition("events") == ("events", None)
    assert str(TablePath.parse("db.events$20261231")) == "db.events$20261231"
    for bad in ("events$", "$20261231", "events$a$b", "events$2026/12", "events$20261231\n", "events\n"):
        with pytest.raises(InvalidTableNameError):
            TablePath.parse(f"db.{bad}")
    assert split_partition("events$20261231\n") == ("events$20261231\n", None)  # not a partition name


class FakeProcessor:
    """The TableProcessor surface the manager uses: a view of tables, create_table, drop_table."""

    def __init__(self, tables: dict[str, dict[str, str]]) -> None:
        self.view = ClusterView()
        self.next_id = 1
        self.started = True  # the leadership's first reconciliation ran (live servers known)
        self.listeners: list = []
        for name, props in tables.items():
            self._add(TablePath("db", name), props)

    def _add(self, path: TablePath, props: dict[str, str]) -> None:
        self.view.add_table(TableRegistration(self.next_id, path, 1, 1, props), {0: (1,)})
        self.next_id += 1

    async def create_table(self, event: CreateTable) -> int:
        if not self.started:  # as the real one: no live server known, no replica can be placed
            raise InvalidReplicationFactorError("replication factor 1 is larger than the number of live servers (0)")
        if event.path not in self.view.by_path:
            self._add(event.path, event.properties)
        return self.view.by_path[event.path]

    async def drop_table(self, event: DropTable) -> bool:
        table_id = self.view.by_path.get(event.path)
        if table_id is not None:
            self.view.remove_table(table_id)
        return table_id is not None

    def names(self) -> set[str]:
        return {p.table for p in self.view.by_path}


async def test_the_manager_creates_ahead_drops_expired_and_orphans_and_is_idempotent():
    proc = FakeProcessor({"events": SPEC, "plain": {}, "events$20261201": SPEC, "events$20261230": SPEC,
                          "gone$20261231": SPEC})  # fmt: skip
    manager = AutoPartitionManager(proc, 1.0, clock=lambda: NOW)
    await manager.check()
    assert proc.names() == {"events", "plain", "events$20261230", "events$20261231", "events$20270101"}
    assert (manager.created, manager.dropped) == (2, 2)  # the expired slot and the orphan of "gone"
    await manager.check()  # a new leader re-running the same check changes nothing
    assert (manager.created, manager.dropped) == (2, 2)


def test_creation_lag_counts_only_started_slots_without_a_partition():
    now = datetime(2026, 12, 1, 5, 30, tzinfo=UTC)
    assert creation_lag(["20261201", "20261202"], now, TimeUnit.DAY, 2) == 0.0
    assert creation_lag(["20261201"], now, TimeUnit.DAY, 3) == 0.0  # tomorrow missing: not late yet
    assert creation_lag(["20261202"], now, TimeUnit.DAY, 2) == 5.5 * 3600  # today missing since midnight
    assert creation_lag([], now, TimeUnit.HOUR, 1) == 30 * 60
    assert creation_lag([], datetime(2026, 12, 1, tzinfo=UTC), TimeUnit.MONTH, 1) == 0.0  # slot just began


def test_creation_lateness_is_zero_ahead_and_the_delay_after_the_slot_start():
    midnight = datetime(2026, 12, 1, tzinfo=UTC)
    assert creation_lateness(midnight - timedelta(hours=3), "20261201", TimeUnit.DAY) == 0.0
    assert creation_lateness(midnight + timedelta(minutes=2), "20261201", TimeUnit.DAY) == 120.0
    assert creation_lateness(midnight, "not-a-slot", TimeUnit.DAY) == 0.0


def test_records_are_routed_by_the_coordinators_slot_rule():
    assert routing_unit("events", SPEC) is TimeUnit.DAY
    assert routing_unit("events$20261231", SPEC) is None  # a partition inherits the spec but is not routed
    assert routing_unit("plain", {}) is None
    ts = int(NOW.timestamp() * 1000)
    for unit in TimeUnit:
        assert partition_for("events", ts, unit) == f"events${partition_name(NOW, unit)}"
    assert partition_for("events", ts + 1000, TimeUnit.DAY) == "events$20270101"  # the next second: new year
    assert partition_for("events", 0, TimeUnit.HOUR) == "events$1970010100"


async def test_the_manager_reports_its_lag_and_how_late_its_last_creation_was():
    now = datetime(2026, 12, 31, 6, 0, tzinfo=UTC)
    proc = FakeProcessor({"events": SPEC, "events$20261231": SPEC})
    manager = AutoPartitionManager(proc, 1.0, clock=lambda: now)
    assert manager.lag() == 0.0
    proc = FakeProcessor({"events": SPEC})  # today's partition missing: six hours behind
    manager = AutoPartitionManager(proc, 1.0, clock=lambda: now)
    assert manager.lag() == 6 * 3600
    await manager.check()
    assert manager.lag() == 0.0
    assert manager.last_creation_late == 6 * 3600  # today's was made six hours into its slot
    assert proc.names() == {"events", "events$20261231", "events$20270101"}
    now = datetime(2026, 12, 31, 23, 0, tzinfo=UTC)
    await proc.drop_table(DropTable(TablePath("db", "events$20261231")))  # lost: re-made 23 hours late
    await manager.check()
    assert manager.last_creation_late == 23 * 3600
    await manager.check()  # nothing to create: unchanged
    assert manager.last_creation_late == 23 * 3600


async def test_a_check_before_the_leadership_started_waits_for_the_start():
    # A new leader's first check may run before the live tablet servers are known: it must not fail (and
    # wait for the next tick, an interval later) but run once the leadership's first reconciliation is done.
    proc = FakeProcessor({"events": SPEC, "events$20261201": SPEC})
    proc.started = False
    manager = AutoPartitionManager(proc, 3600.0, clock=lambda: NOW)
    loop = FakeLoop()
    manager.install(loop)
    await manager.check()
    assert proc.names() == {"events", "events$20261201"}  # nothing done yet, nothing raised
    proc.started = True
    for listener in proc.listeners:
        await listener.on_started()
    for event in loop.queued:  # the check the start queued, run as the loop would
        await loop.handlers[type(event)](event)
    assert proc.names() == {"events", "events$20261231", "events$20270101"}


class FakeLoop:
    def __init__(self) -> None:
        self.handlers: dict = {}
        self.queued: list = []

    def register(self, event_type: type, handler: object) -> None:
        self.handlers[event_type] = handler

    def put(self, event: object) -> None:
        self.queued.append(event)


# ---------------------------------------------------------------- a partition belongs to its table's instance
HOUR = {"table.auto-partition.time-unit": "hour", "table.auto-partition.num-retention": "1"}


def recreate(proc: FakeProcessor, name: str, props: dict[str, str]) -> None:
    """The logical table dropped without its partitions (a drop interrupted, or made before DropTable dropped
    them) and a table of the same name created before the next check: a newer table id."""
    proc.view.remove_table(proc.view.by_path[TablePath("db", name)])
    proc._add(TablePath("db", name), props)


@pytest.mark.parametrize("props", [HOUR, {}])
async def test_partitions_of_a_dropped_table_go_when_a_table_of_that_name_is_created_again(props):
    proc = FakeProcessor({"events": SPEC, "events$20261230": SPEC, "events$20261231": SPEC})
    recreate(proc, "events", props)
    manager = AutoPartitionManager(proc, 1.0, clock=lambda: NOW)
    await manager.check()
    assert not {"events$20261230", "events$20261231"} & proc.names()
    assert manager.partitions() == ({TablePath("db", "events"): {"2026123123": TablePath("db", "events$2026123123"),
                                     "2027010100": TablePath("db", "events$2027010100")}} if props else {})  # fmt: skip


async def test_a_table_created_again_with_the_same_unit_does_not_adopt_the_old_partitions():
    proc = FakeProcessor({"events": SPEC, "events$20261230": SPEC, "events$20261231": SPEC})
    old = {p: proc.view.by_path[TablePath("db", p)] for p in ("events$20261230", "events$20261231")}
    recreate(proc, "events", SPEC)
    manager = AutoPartitionManager(proc, 1.0, clock=lambda: NOW)
    assert manager.lag() > 0  # the old partition of today does not count as today's
    await manager.check()
    assert "events$20261230" not in proc.names()  # inside retention, but not this table's
    today = proc.view.by_path[TablePath("db", "events$20261231")]
    assert today != old["events$20261231"] and today > proc.view.by_path[TablePath("db", "events")]
    await manager.check()
    assert proc.view.by_path[TablePath("db", "events$20261231")] == today  # a partition of its own is kept


_DAY = {"table.auto-partition.time-unit": "day", "table.auto-partition.num-precreate": "2",
        "table.auto-partition.num-retention": "1"}  # fmt: skip
_LONG_MONTHS = {"table.auto-partition.time-unit": "month", "table.auto-partition.num-retention": "30000"}


def test_a_month_retention_reaching_before_year_one_expires_nothing() -> None:
    """30 000 months is inside the option's range; the boundary would lie before year 1 (it used to raise
    ValueError on every check)."""
    assert expired(["202612", "202611"], NOW, TimeUnit.MONTH, 30_000) == []
    assert wanted(datetime(9999, 11, 5, tzinfo=UTC), TimeUnit.MONTH, 5) == ["999911", "999912"]


class _RefusingFor(FakeProcessor):
    """create_table refuses the partitions of one table (e.g. RF 3 on a cluster shrunk to 2 servers)."""

    async def create_table(self, event: CreateTable) -> int:
        if event.path.table.startswith("a_rf3$"):
            raise InvalidReplicationFactorError("replication factor 3 is larger than the number of live servers (2)")
        return await super().create_table(event)


async def test_one_table_that_cannot_be_placed_or_checked_does_not_stop_the_others() -> None:
    proc = _RefusingFor({"a_rf3": _DAY, "a_rf3$20261201": _DAY, "b_ok": _DAY, "b_ok$20261201": _DAY})
    manager = AutoPartitionManager(proc, 1.0, clock=lambda: NOW)
    await manager.check()
    assert {"b_ok$20261231", "b_ok$20270101"} <= proc.names()
    assert "b_ok$20261201" not in proc.names() and "a_rf3$20261201" not in proc.names()  # drops still run
    assert manager.failures == 1
    months = FakeProcessor({"a_month": _LONG_MONTHS, "b_day": _DAY, "b_day$20261201": _DAY})
    await AutoPartitionManager(months, 1.0, clock=lambda: NOW).check()
    assert "b_day$20261231" in months.names() and "b_day$20261201" not in months.names()
