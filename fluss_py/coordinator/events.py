"""Events of the coordinator leader's single-writer loop.

RPC handlers and ZooKeeper watches never touch ``CoordinatorContext``: they build one of these and put it
on the ``CoordinatorEventLoop``. Events that need an answer carry a ``Future`` (set on the loop's task);
fire-and-forget events (watch notifications) carry none.

Who may call: anyone on the process's asyncio loop may create events; only the event loop completes them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Event:
    """Base: ``future`` is None for notifications, else completed with the handler's result or error."""

    future: asyncio.Future | None = field(default=None, kw_only=True, repr=False)


@dataclass(eq=False)
class CreateDatabase(Event):
    name: str
    ignore_if_exists: bool = False


@dataclass(eq=False)
class DropDatabase(Event):
    name: str
    ignore_if_not_exists: bool = False
    cascade: bool = False


@dataclass(eq=False)
class ListDatabases(Event):
    pass


@dataclass(eq=False)
class TabletServersChanged(Event):
    """The children of ``tabletservers/ids`` changed (None: the parent node is absent)."""

    children: list[str] | None


@dataclass(eq=False)
class LoadContext(Event):
    """First event of every leadership: read databases from ZooKeeper into the context."""


@dataclass(eq=False)
class TabletServerDeathProven(Event):
    """The liveness monitor proved this registration's process dead (docs/failure-detection.md).

    Applied only while ``registration`` is still the server's current one: idempotent with the session
    expiry that follows and with a re-registration (a restart) that overtook it.
    """

    server_id: int
    registration: Any
    reason: str = ""


@dataclass(eq=False)
class TabletServerAliveAgain(Event):
    """A registration proven dead answered the liveness stream again: the proof was wrong (a forged refusal).

    Applied only while that registration is still the one in ZooKeeper and still counted as proven dead.
    """

    server_id: int
    registration: Any
