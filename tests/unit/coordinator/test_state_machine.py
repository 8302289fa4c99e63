"""Coordinator lifecycle states: only the moves of the design are legal."""

import pytest

from fluss_py.common.state_machine import IllegalStateTransition
from fluss_py.coordinator.context import VALID_PREVIOUS, CoordinatorState, StateMachine, is_legal

S, E, L, D = CoordinatorState.STANDBY, CoordinatorState.ELECTING, CoordinatorState.LEADER, CoordinatorState.DOWN

LEGAL = {(None, S), (None, D), (S, E), (E, S), (E, L), (L, S), (S, D), (E, D), (L, D)}


def test_legal_moves_are_exactly_the_design():
    for current in [None, *CoordinatorState]:
        for target in CoordinatorState:
            if current is target:
                continue
            assert is_legal(current, target) == ((current, target) in LEGAL), (current, target)


def test_leader_only_through_electing_and_down_is_final():
    assert VALID_PREVIOUS[L] == {E}
    assert all(D not in prev for prev in VALID_PREVIOUS.values())


def test_transition_refuses_illegal_moves_and_reports_changes():
    seen = []
    sm = StateMachine(on_change=seen.append)
    sm.transition(S)
    with pytest.raises(IllegalStateTransition):
        sm.transition(L)  # Standby -> Leader skips the election
    assert sm.current is S
    sm.transition(E)
    sm.transition(L)
    sm.transition(S)
    sm.transition(D)
    with pytest.raises(IllegalStateTransition):
        sm.transition(S)
    assert seen == [S, E, L, S, D]
    assert sm.name == "Down"


def test_same_state_is_a_no_op():
    sm = StateMachine()
    sm.transition(S)
    sm.transition(S)
    assert sm.current is S
