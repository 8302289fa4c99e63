"""The one state-machine helper of fluss_py: every lifecycle enum lists its legal predecessors, and a move
goes through ``check_transition``, which refuses (and logs, on the caller's logger) any other.

Used by the coordinator's lifecycle (``coordinator/context.py``), its bucket and replica state tables
(``coordinator/state.py``) and the tablet server's replicas (``replica/replica.py``). Pure: no I/O beyond
the log line.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Set

from fluss_py.errors import ErrorCode, FlussError


def state_name(state: enum.Enum | None) -> str:
    """A state for messages: its enum name, ``None`` for the initial state before any move."""
    return "None" if state is None else state.name


class IllegalStateTransition(FlussError):
    """A move that the target state does not allow from the current one (a bug in the caller's lifecycle).

    A ``RuntimeError`` (through ``FlussError``) with code UNKNOWN_SERVER_ERROR if it ever reaches the wire."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, subject: object, current: enum.Enum | None, target: enum.Enum) -> None:
        super().__init__(f"{subject}: illegal transition {state_name(current)} -> {state_name(target)}")
        self.subject = subject
        self.current = current
        self.target = target


def check_transition(
    subject: object,
    current: enum.Enum | None,
    target: enum.Enum,
    allowed: Set[object],
    logger: logging.Logger,
) -> None:
    """Return if ``current`` is in ``allowed`` (the target's legal predecessors); else log an error naming
    ``subject`` and both states on ``logger``, and raise ``IllegalStateTransition``."""
    if current not in allowed:
        what = type(target).__name__
        logger.error("%s: illegal %s transition %s -> %s", subject, what, state_name(current), state_name(target))
        raise IllegalStateTransition(subject, current, target)
