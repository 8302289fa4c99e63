"""The shared state-machine helper and the enums that use it: the tablet server's lifecycle and the one
OffsetSpec (its numbers are the wire enum)."""

import itertools
import logging

import pytest

from fluss_py.common.state_machine import IllegalStateTransition, check_transition
from fluss_py.errors import ErrorCode
from fluss_py.rpc.pb import tablet_pb2
from fluss_py.tablet.lifecycle import VALID_PREVIOUS, TabletServerState, transition
from fluss_py.types import OffsetSpec

T = TabletServerState
LEGAL = {(T.STARTING, T.RUNNING), (T.RUNNING, T.SHUTTING_DOWN)} | {(s, T.STOPPING) for s in T}


def test_tablet_server_moves_are_exactly_the_lifecycle():
    for current, target in itertools.product(T, T):
        if (current, target) in LEGAL:
            assert transition(1, current, target) is target
        else:
            with pytest.raises(IllegalStateTransition):
                transition(1, current, target)
    assert set(VALID_PREVIOUS) == set(T)


def test_tablet_server_state_is_reported_as_its_old_text():
    assert [str(s) for s in T] == ["Starting", "Running", "ShuttingDown", "Stopping"]


def test_refused_move_logs_subject_and_both_states_and_is_an_unknown_server_error(caplog):
    log = logging.getLogger("test.state_machine")
    with caplog.at_level(logging.ERROR, logger="test.state_machine"), pytest.raises(IllegalStateTransition) as info:
        check_transition("thing 7", T.STARTING, T.SHUTTING_DOWN, VALID_PREVIOUS[T.SHUTTING_DOWN], log)
    assert "thing 7" in caplog.text and "STARTING" in caplog.text and "SHUTTING_DOWN" in caplog.text
    assert info.value.code is ErrorCode.UNKNOWN_SERVER_ERROR and isinstance(info.value, RuntimeError)
    assert info.value.current is T.STARTING and info.value.target is T.SHUTTING_DOWN


def test_offset_spec_numbers_are_the_wire_enum():
    assert {s.name: int(s) for s in OffsetSpec} == {n: v for n, v in tablet_pb2.OffsetSpec.items()}
