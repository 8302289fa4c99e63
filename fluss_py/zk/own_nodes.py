"""Our session's ephemeral-sequential node, found again after a create whose reply was lost.

A sequential create that meets a ConnectionLoss may have been applied by ZooKeeper: the node exists, owned
by our (still live) session, and we never learnt its name. Creating again would leave two; assuming none
would leave an orphan that lives as long as the session. So before creating, we list the directory and
adopt the node our session already owns (``ephemeral_owner`` is our session id), deleting any extra one.

``pick_own`` is the pure rule; ``ensure_own_sequential`` does the I/O. Callers: the coordinator's
lifecycle task (its election candidate and its ``coordinator/servers`` registration), one at a time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from fluss_py.zk.client import ZkClient
from fluss_py.zk.codecs import sequence_of
from fluss_py.zk.values import NoNodeError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class OwnNodes:
    """Which of a directory's sequential children are ours: the one to ``keep`` and the ``extras`` to delete."""

    keep: str | None
    extras: tuple[str, ...] = ()


def pick_own(children: Iterable[tuple[str, int]], prefix: str, session_id: int) -> OwnNodes:
    """Among ``(name, ephemeral_owner)`` children, keep the smallest ``prefix`` node owned by ``session_id``."""
    if not session_id:
        return OwnNodes(None)
    own = sorted((n for n, owner in children if n.startswith(prefix) and owner == session_id), key=sequence_of)
    return OwnNodes(own[0], tuple(own[1:])) if own else OwnNodes(None)


async def own_children(zk: ZkClient, parent: str, prefix: str) -> OwnNodes:
    """Read ``parent``'s children and their owners; ``pick_own`` with the current session."""
    try:
        names = await zk.get_children(parent)
    except NoNodeError:
        return OwnNodes(None)
    owned: list[tuple[str, int]] = []
    for name in names:
        stat = await zk.exists(f"{parent}/{name}")
        if stat is not None:
            owned.append((name, stat.ephemeral_owner))
    return pick_own(owned, prefix, zk.session_id)


async def ensure_own_sequential(zk: ZkClient, parent: str, prefix: str, data: bytes, what: str) -> tuple[str, bool]:
    """The name of our session's ``parent/prefix<seq>`` node: adopted when it exists, else created.

    Returns ``(name, adopted)``. Extra nodes of our session are deleted. Raises ZkError (a ConnectionLoss
    here is safe to retry: the next call finds what this one may have created).
    """
    found = await own_children(zk, parent, prefix)
    for extra in found.extras:
        try:
            await zk.delete(f"{parent}/{extra}")
            log.warning("Deleted %s %s: a second node of our session (a create whose reply was lost)", what, extra)
        except NoNodeError:
            pass
    if found.keep is not None:
        log.warning("Adopted %s %s: our session already owns it (a create whose reply was lost)", what, found.keep)
        return found.keep, True
    path = await zk.create(f"{parent}/{prefix}", data, ephemeral=True, sequence=True, makepath=True)
    return path.rsplit("/", 1)[1], False
