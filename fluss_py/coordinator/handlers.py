"""Event handlers of the coordinator leader for databases and tablet-server membership.

The split with ``processor.py`` (docs/control-plane.md §1.1): these handlers own ``CoordinatorContext`` (who
is in the cluster: fence, databases, live servers); ``TableProcessor`` owns ``ClusterView`` (what the cluster
holds) and hears of membership changes through the ``ServersListener`` it registers here.

Every ZooKeeper write here is ``zk.commit(ops, fence=context.fence)``: a transaction that first checks the
epoch node's version, so a fenced (zombie) leader writes nothing. Handlers run on the event loop's task
only (single writer of ``CoordinatorContext``).

``MetadataStore`` is the narrow ZooKeeper edge the handlers use (``ZkClient`` implements it; unit tests use
an in-memory fake).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

from fluss_py.coordinator.context import CoordinatorContext
from fluss_py.coordinator.event_loop import CoordinatorEventLoop
from fluss_py.coordinator.events import (
    CreateDatabase,
    DropDatabase,
    ListDatabases,
    LoadContext,
    TabletServerAliveAgain,
    TabletServerDeathProven,
    TabletServersChanged,
)
from fluss_py.errors import (
    DatabaseAlreadyExistError,
    DatabaseNotEmptyError,
    DatabaseNotExistError,
)
from fluss_py.types import validate_name
from fluss_py.zk.codecs import TabletServerRegistration
from fluss_py.zk.paths import DatabaseZNode, TabletServerZNode, TableZNode
from fluss_py.zk.values import CreateOp, DeleteOp, EpochFence, NodeExistsError, NoNodeError, Op, ZnodeStat

# not __name__: the runbook shows its lines by this name, docs/coordinator-ha.md (the membership lines)
log = logging.getLogger("fluss_py.coordinator.CoordinatorEventProcessor")

DEFAULT_DATABASE = "fluss"

ServersListener = Callable[[dict[int, TabletServerRegistration], list[int]], Awaitable[None]]
LivenessListener = Callable[[dict[int, TabletServerRegistration], dict[int, TabletServerRegistration]], None]


class MetadataStore(Protocol):
    """The ZooKeeper operations the leader's handlers need."""

    root: str

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None: ...

    async def get_children(self, path: str) -> list[str]: ...

    async def commit(self, ops: Sequence[Op], fence: EpochFence | None = None) -> list[Any]: ...


async def znode_subtree(store: MetadataStore, path: str) -> list[str]:
    """``path`` and its descendants, parents before children (delete them in reverse)."""
    result = [path]
    try:
        children = await store.get_children(path)
    except NoNodeError:
        return result
    for child in sorted(children):
        result.extend(await znode_subtree(store, f"{path}/{child}"))
    return result


class MetadataHandlers:
    """Database DDL and tablet-server membership for one leadership. Owns nothing but its context view."""

    def __init__(self, store: MetadataStore, context: CoordinatorContext) -> None:
        self._store = store
        self._root = store.root
        self.context = context
        self._servers_listeners: list[ServersListener] = []
        # Registrations proven dead before their session expired (docs/failure-detection.md): while such a
        # node is still in ZooKeeper it is not a live server; it is forgotten once the node is gone.
        self._proven_dead: dict[int, TabletServerRegistration] = {}
        self._liveness_listeners: list[LivenessListener] = []

    def install(self, loop: CoordinatorEventLoop) -> None:
        loop.register(LoadContext, self.load_context)
        loop.register(CreateDatabase, self.create_database)
        loop.register(DropDatabase, self.drop_database)
        loop.register(ListDatabases, self.list_databases)
        loop.register(TabletServersChanged, self.tablet_servers_changed)
        loop.register(TabletServerDeathProven, self.tablet_server_death_proven)
        loop.register(TabletServerAliveAgain, self.tablet_server_alive_again)

    def add_servers_listener(self, listener: ServersListener) -> None:
        """``listener(joined, died_ids)`` runs on the event loop after membership changed (e.g. UpdateMetadata)."""
        self._servers_listeners.append(listener)

    def add_liveness_listener(self, listener: LivenessListener) -> None:
        """``listener(live, proven_dead)`` (registrations by id) after every membership event, on the loop."""
        self._liveness_listeners.append(listener)

    def _liveness_changed(self) -> None:
        for listener in self._liveness_listeners:
            listener(dict(self.context.tablet_servers), dict(self._proven_dead))

    # ---------------------------------------------------------------- context
    async def load_context(self, _event: LoadContext) -> None:
        try:
            self.context.databases = set(await self._store.get_children(DatabaseZNode.parent(self._root)))
        except NoNodeError:
            self.context.databases = set()
        log.info("Loaded coordinator context: %d database(s)", len(self.context.databases))

    # ---------------------------------------------------------------- databases
    async def create_database(self, event: CreateDatabase) -> bool:
        """True when created, False when it existed and ``ignore_if_exists``."""
        name = validate_name(event.name, what="database")
        if name in self.context.databases:
            if event.ignore_if_exists:
                return False
            raise DatabaseAlreadyExistError(f"database {name} already exists")
        created_ms = int(time.time() * 1000)
        try:
            await self._store.commit(
                [CreateOp(DatabaseZNode.path(self._root, name), DatabaseZNode.encode(created_ms))],
                fence=self.context.fence,
            )
        except NodeExistsError:
            self.context.databases.add(name)
            if event.ignore_if_exists:
                return False
            raise DatabaseAlreadyExistError(f"database {name} already exists") from None
        self.context.databases.add(name)
        log.info("Created database %s (coordinator epoch %d)", name, self.context.epoch)
        return True

    async def drop_database(self, event: DropDatabase) -> bool:
        """True when dropped, False when absent and ``ignore_if_not_exists``."""
        name = event.name
        if name not in self.context.databases:
            if event.ignore_if_not_exists:
                return False
            raise DatabaseNotExistError(f"database {name} does not exist")
        db_path = DatabaseZNode.path(self._root, name)
        try:
            tables = await self._store.get_children(TableZNode.parent(self._root, name))
        except NoNodeError:
            tables = []
        if tables and not event.cascade:
            raise DatabaseNotEmptyError(f"database {name} holds {len(tables)} table(s); drop them or use cascade")
        subtree = await znode_subtree(self._store, db_path)
        await self._store.commit([DeleteOp(p) for p in reversed(subtree)], fence=self.context.fence)
        self.context.databases.discard(name)
        log.info("Dropped database %s (%d znode(s), coordinator epoch %d)", name, len(subtree), self.context.epoch)
        return True

    async def list_databases(self, _event: ListDatabases) -> list[str]:
        return sorted(self.context.databases)

    # ---------------------------------------------------------------- cluster membership
    async def tablet_servers_changed(self, event: TabletServersChanged) -> None:
        current = {int(c) for c in (event.children or []) if c.isdigit()}
        known = set(self.context.tablet_servers)
        for sid in set(self._proven_dead) - current:
            del self._proven_dead[sid]  # the dead incarnation's node is gone at last
        joined: dict[int, TabletServerRegistration] = {}
        for sid in sorted(current - known):
            got = await self._store.get(TabletServerZNode.path(self._root, sid))
            if got is None:
                continue  # gone again before we read it; a later change event follows
            reg = TabletServerZNode.decode(got[0])
            if self._proven_dead.get(sid) == reg:
                continue  # the node of an incarnation proven dead, waiting for its session to expire
            self._proven_dead.pop(sid, None)
            self.context.tablet_servers[sid] = reg
            joined[sid] = reg
            log.info("Tablet server %d joined at %s (rack %r)", sid, reg.address, reg.rack)
        died = sorted(known - current)
        for sid in died:
            reg = self.context.tablet_servers.pop(sid)
            log.warning("Tablet server %d at %s died: its registration node is gone", sid, reg.address)
        # A server that restarted between two reads of the children (same id, new registration) is reported
        # as died and joined, so it loses its ISR places and is told its roles again (Kafka's bounced brokers).
        for sid in sorted(current & known):
            got = await self._store.get(TabletServerZNode.path(self._root, sid))
            if got is None:
                continue  # gone: the next change event reports it
            reg = TabletServerZNode.decode(got[0])
            if reg != self.context.tablet_servers[sid]:
                log.warning("Tablet server %d re-registered at %s (restarted): treating it as died and joined",
                            sid, reg.address)  # fmt: skip
                self.context.tablet_servers[sid] = reg
                died.append(sid)
                joined[sid] = reg
        if joined or died:
            await self._membership_changed(joined, died)
        self._liveness_changed()

    async def tablet_server_death_proven(self, event: TabletServerDeathProven) -> bool:
        """Apply a proof of death if it is about the current registration; True when applied."""
        sid, reg = event.server_id, event.registration
        if self.context.tablet_servers.get(sid) != reg:
            log.info("Ignoring proof of death of tablet server %d (%s): that registration is no longer current",
                     sid, reg.address)  # fmt: skip
            return False
        del self.context.tablet_servers[sid]
        self._proven_dead[sid] = reg
        log.warning("Tablet server %d at %s died: proof of death (%s); its ZooKeeper node waits for session expiry",
                    sid, reg.address, event.reason or "port refuses connections")  # fmt: skip
        self._liveness_changed()
        await self._membership_changed({}, [sid])
        return True

    async def tablet_server_alive_again(self, event: TabletServerAliveAgain) -> bool:
        """Undo a wrong proof of death: the same registration answers again; True when it rejoined."""
        sid, reg = event.server_id, event.registration
        if self._proven_dead.get(sid) != reg or sid in self.context.tablet_servers:
            return False
        got = await self._store.get(TabletServerZNode.path(self._root, sid))
        if got is None or TabletServerZNode.decode(got[0]) != reg:
            return False  # gone or replaced: the change event that follows handles it
        del self._proven_dead[sid]
        self.context.tablet_servers[sid] = reg
        log.warning("Tablet server %d at %s answers again with the incarnation proven dead: that proof was wrong "
                    "(a refusal not sent by its host?); it rejoins as a new member", sid, reg.address)  # fmt: skip
        self._liveness_changed()
        await self._membership_changed({sid: reg}, [])
        return True

    async def _membership_changed(self, joined: dict[int, TabletServerRegistration], died: list[int]) -> None:
        log.info("Live tablet servers: %s", sorted(self.context.tablet_servers) or "none")
        for listener in self._servers_listeners:
            await listener(joined, died)
