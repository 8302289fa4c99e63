"""Bucket and replica state machines: every legal move is accepted, every other one refused and logged."""

import itertools
import logging

import pytest

from fluss_py.common.state_machine import IllegalStateTransition
from fluss_py.coordinator.state import (
    BUCKET_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    BucketState,
    ReplicaState,
    StateTable,
    transition,
)
from fluss_py.errors import ErrorCode
from fluss_py.types import TableBucket

B = BucketState
R = ReplicaState

# The legal moves, written out independently of the module's maps (a typo in either fails the test).
LEGAL_BUCKET = {
    (B.NON_EXISTENT, B.NEW),
    (B.NEW, B.ONLINE),
    (B.NEW, B.OFFLINE),
    (B.ONLINE, B.ONLINE),
    (B.ONLINE, B.OFFLINE),
    (B.OFFLINE, B.ONLINE),
    (B.OFFLINE, B.OFFLINE),
    (B.NEW, B.NON_EXISTENT),
    (B.ONLINE, B.NON_EXISTENT),
    (B.OFFLINE, B.NON_EXISTENT),
}
LEGAL_REPLICA = {
    (R.NON_EXISTENT, R.NEW),
    (R.NEW, R.ONLINE),
    (R.ONLINE, R.ONLINE),
    (R.OFFLINE, R.ONLINE),
    (R.NEW, R.OFFLINE),
    (R.ONLINE, R.OFFLINE),
    (R.OFFLINE, R.OFFLINE),
    (R.OFFLINE, R.DELETION_STARTED),
    (R.DELETION_STARTED, R.DELETION_STARTED),
    (R.DELETION_STARTED, R.DELETION_SUCCESSFUL),
    (R.OFFLINE, R.MIGRATION_STARTED),
    (R.MIGRATION_STARTED, R.MIGRATION_STARTED),
    (R.DELETION_SUCCESSFUL, R.NON_EXISTENT),
    (R.MIGRATION_STARTED, R.NON_EXISTENT),
}


@pytest.mark.parametrize(
    ("enum_type", "legal"), [(BucketState, LEGAL_BUCKET), (ReplicaState, LEGAL_REPLICA)], ids=["bucket", "replica"]
)
def test_every_pair_of_states(enum_type, legal):
    for current, target in itertools.product(enum_type, enum_type):
        if (current, target) in legal:
            assert transition("x", current, target) is target
        else:
            with pytest.raises(IllegalStateTransition) as info:
                transition("x", current, target)
            assert info.value.current is current and info.value.target is target


def test_maps_cover_every_state():
    assert set(BUCKET_VALID_PREVIOUS) == set(BucketState)
    assert set(REPLICA_VALID_PREVIOUS) == set(ReplicaState)


def test_illegal_transition_logs_subject_and_both_states(caplog):
    tb = TableBucket(7, 3)
    with caplog.at_level(logging.ERROR, logger="fluss_py.coordinator.state"), pytest.raises(IllegalStateTransition):
        transition(tb, B.NON_EXISTENT, B.ONLINE)
    assert "7-3" in caplog.text and "NON_EXISTENT" in caplog.text and "ONLINE" in caplog.text


def test_illegal_transition_is_an_api_error_with_a_clear_message():
    err = IllegalStateTransition(TableBucket(1, 0), B.NEW, B.NEW)
    assert err.code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert "1-0" in str(err) and "NEW -> NEW" in str(err)


def test_state_table_moves_and_removes():
    table: StateTable[TableBucket, BucketState] = StateTable(B.NON_EXISTENT)
    tb = TableBucket(1, 0)
    assert table.get(tb) is B.NON_EXISTENT and tb not in table
    assert table.move(tb, B.NEW) is B.NON_EXISTENT
    table.move(tb, B.ONLINE)
    assert table.keys_in(B.ONLINE) == [tb] and len(table) == 1
    with pytest.raises(IllegalStateTransition):
        table.move(tb, B.NEW)
    assert table.get(tb) is B.ONLINE  # a refused move changes nothing
    table.move(tb, B.NON_EXISTENT)
    assert tb not in table and len(table) == 0


def test_state_table_force_skips_the_check_for_reloads():
    table: StateTable[tuple[TableBucket, int], ReplicaState] = StateTable(R.NON_EXISTENT)
    key = (TableBucket(1, 0), 2)
    table.force(key, R.OFFLINE)
    assert table.get(key) is R.OFFLINE and list(table) == [key]
    table.force(key, R.NON_EXISTENT)
    assert key not in table
    table.force(key, R.ONLINE)
    table.clear()
    assert len(table) == 0
