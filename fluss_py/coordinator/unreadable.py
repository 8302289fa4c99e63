"""Decode a stored znode or report it unreadable: the pure step between a read and the view.

An operator's edit, a half-restored backup or a bug can leave a node that does not decode (not JSON,
a missing key, a wrong type). Loading must not stop at it: every other table still needs its metadata,
DDL and failover. ``decode_or_report`` turns the decoder's exception into an ``Unreadable`` naming the
path, and the caller leaves that table out of the leadership (``view_store.py``, docs/control-plane.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")

DECODE_ERRORS = (ValueError, KeyError, TypeError, AttributeError, IndexError)
"""What a decoder of ``zk/paths.py`` raises on bad bytes (JSONDecodeError and UnicodeDecodeError are
ValueErrors)."""


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A node whose bytes did not decode: its path and why."""

    path: str
    reason: str


def decode_or_report(path: str, data: bytes, decode: Callable[[bytes], T]) -> T | Unreadable:
    """``decode(data)``, or an ``Unreadable`` for ``path`` when the bytes do not decode."""
    try:
        return decode(data)
    except DECODE_ERRORS as e:
        return Unreadable(path, f"{type(e).__name__}: {e}")
