"""Auto-partition rules (docs/partitioning.md): names, slots, pre-creation and retention, exhaustively over
slot boundaries (hour, day, month, year and leap day)."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from fluss_py.coordinator.auto_partition import (
    TimeUnit,
    expired,
    parse_partition,
    partition_name,
    shift,
    slot_start,
    wanted,
)

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
