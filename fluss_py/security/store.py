"""Users and ACLs in ZooKeeper: a watched cache for servers, and the writes the CLI makes.

``SecurityCache`` keeps every ``UserZNode`` and ``AclZNode`` of the cluster in memory: a children watch on
each parent and a data watch on each child, so a ``fluss-py user|acl`` change reaches every server within
a watch round trip and no request ever waits on ZooKeeper. ``generation`` grows with every change (the
authenticator drops verified passwords of an older generation). The first read at start-up waits out a
lost ZooKeeper session like the servers' other start-up reads (``retry_session_lost``): it changes nothing,
so it starts over from empty until ``zookeeper.connection-timeout`` has passed.

The write helpers (``put_user``, ``delete_user``, ``add_acls``, ``remove_acls``) change one znode by
compare-and-set on its version and retry on a concurrent change.

Who may call: the server wiring (``start``/``stop``) and request handlers (readers) on the server's loop;
the helpers from the CLI's loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from functools import partial
from typing import Protocol

from fluss_py.security_types import Acl, PatternType, ResourceType, ScramCredential
from fluss_py.zk.client import ZkClient, retry_session_lost
from fluss_py.zk.paths import AclZNode, UserZNode
from fluss_py.zk.values import BadVersionError, NodeExistsError, NoNodeError, ZnodeStat

log = logging.getLogger(__name__)


class Watch(Protocol):
    def cancel(self) -> None: ...


class SecurityZk(Protocol):
    """What ``SecurityCache`` uses of ``ZkClient`` (an in-memory fake in unit tests)."""

    connection_timeout: float

    async def ensure_path(self, path: str) -> None: ...

    async def get_children(self, path: str) -> list[str]: ...

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None: ...

    def watch_children(self, path: str, on_change: Callable[[list[str] | None], None]) -> Watch: ...

    def watch_data(self, path: str, on_change: Callable[[tuple[bytes, ZnodeStat] | None], None]) -> Watch: ...


class SecurityCache:
    """Owns the in-memory copy of users and ACLs and the ZooKeeper watches that keep it current."""

    def __init__(self, zk: SecurityZk, root: str) -> None:
        self._zk = zk
        self._root = root
        self._users: dict[str, ScramCredential] = {}
        self._acl_nodes: dict[str, list[Acl]] = {}
        self._acls: tuple[Acl, ...] = ()
        self._watchers: dict[str, Watch] = {}
        self._parents: list[Watch] = []
        self.generation = 0

    async def start(self) -> None:
        """Read every user and ACL once (so the first request already sees them), then keep them watched.
        SessionLostError once ``zookeeper.connection-timeout`` has passed without a complete read."""
        await retry_session_lost(self._load, self._zk.connection_timeout, "reading users and ACLs")
        self._parents = [
            self._zk.watch_children(UserZNode.parent(self._root), partial(self._on_children, "user")),
            self._zk.watch_children(AclZNode.parent(self._root), partial(self._on_children, "acl")),
        ]

    async def _load(self) -> None:
        """One complete read, from empty: what an attempt cut short by a lost session read is dropped (a
        user deleted before the next attempt must not stay behind: no watch would ever remove it)."""
        self._users, self._acl_nodes, self._acls = {}, {}, ()
        for kind, parent in (("user", UserZNode.parent(self._root)), ("acl", AclZNode.parent(self._root))):
            await self._zk.ensure_path(parent)
            for child in await self._zk.get_children(parent):
                self._apply(kind, child, await self._zk.get(f"{parent}/{child}"))

    def stop(self) -> None:
        for w in [*self._parents, *self._watchers.values()]:
            w.cancel()
        self._parents, self._watchers = [], {}

    # ---------------------------------------------------------------- readers
    def credential(self, user: str) -> ScramCredential | None:
        return self._users.get(user)

    def acls(self) -> tuple[Acl, ...]:
        return self._acls

    def user_count(self) -> int:
        return len(self._users)

    # ---------------------------------------------------------------- watch callbacks (loop)
    def _on_children(self, kind: str, children: list[str] | None) -> None:
        parent = UserZNode.parent(self._root) if kind == "user" else AclZNode.parent(self._root)
        wanted = {f"{kind}/{c}" for c in children or ()}
        for key in [k for k in self._watchers if k.startswith(f"{kind}/") and k not in wanted]:
            self._watchers.pop(key).cancel()
            self._apply(kind, key.split("/", 1)[1], None)
        for key in sorted(wanted - set(self._watchers)):
            child = key.split("/", 1)[1]
            self._watchers[key] = self._zk.watch_data(f"{parent}/{child}", partial(self._apply, kind, child))

    def _apply(self, kind: str, child: str, value: tuple[bytes, ZnodeStat] | None) -> None:
        try:
            if kind == "user":
                if value is None:
                    self._users.pop(child, None)
                else:
                    self._users[child] = UserZNode.decode(value[0])
            else:
                if value is None:
                    self._acl_nodes.pop(child, None)
                else:
                    self._acl_nodes[child] = AclZNode.decode(child, value[0])
                self._acls = tuple(a for acls in self._acl_nodes.values() for a in acls)
        except (ValueError, KeyError) as e:
            log.error("unreadable %s znode %s ignored: %s", kind, child, e)
            return
        self.generation += 1


# ---------------------------------------------------------------- writes (CLI)
async def put_user(zk: ZkClient, root: str, name: str, credential: ScramCredential) -> None:
    """Create or replace user ``name``'s keys."""
    path = UserZNode.path(root, name)
    await zk.ensure_path(UserZNode.parent(root))
    try:
        await zk.create(path, UserZNode.encode(credential), private=True)
    except NodeExistsError:
        await zk.set(path, UserZNode.encode(credential))


async def delete_user(zk: ZkClient, root: str, name: str) -> bool:
    """Remove user ``name``; False when there was none."""
    if await zk.exists(UserZNode.path(root, name)) is None:
        return False
    await zk.delete(UserZNode.path(root, name))
    return True


async def list_users(zk: ZkClient, root: str) -> list[str]:
    if await zk.exists(UserZNode.parent(root)) is None:
        return []
    return sorted(await zk.get_children(UserZNode.parent(root)))


async def list_acls(zk: ZkClient, root: str) -> list[Acl]:
    parent = AclZNode.parent(root)
    if await zk.exists(parent) is None:
        return []
    out: list[Acl] = []
    for child in sorted(await zk.get_children(parent)):
        got = await zk.get(f"{parent}/{child}")
        if got is not None:
            out.extend(AclZNode.decode(child, got[0]))
    return out


def _key(acl: Acl) -> tuple[ResourceType, PatternType, str]:
    return acl.resource_type, acl.pattern, acl.name


async def add_acls(zk: ZkClient, root: str, acls: Iterable[Acl]) -> None:
    """Add ACLs (already present ones are kept once)."""
    acls = list(acls)
    await zk.ensure_path(AclZNode.parent(root))
    for key in {_key(a) for a in acls}:
        mine = [a for a in acls if _key(a) == key]
        await _update(zk, root, key, lambda current, mine=mine: current + [a for a in mine if a not in current])


async def remove_acls(zk: ZkClient, root: str, acls: Iterable[Acl]) -> None:
    """Remove the given ACLs (absent ones are ignored); a resource left without ACLs loses its znode."""
    acls = list(acls)
    for key in {_key(a) for a in acls}:
        gone = [a for a in acls if _key(a) == key]
        await _update(zk, root, key, lambda current, gone=gone: [a for a in current if a not in gone])


async def _update(
    zk: ZkClient, root: str, key: tuple[ResourceType, PatternType, str], change: Callable[[list[Acl]], list[Acl]]
) -> None:
    path = AclZNode.path(root, *key)
    child = AclZNode.child(*key)
    while True:
        got = await zk.get(path)
        current = AclZNode.decode(child, got[0]) if got is not None else []
        new = change(current)
        try:
            if got is None:
                if new:
                    await zk.create(path, AclZNode.encode(new))
            elif not new:
                await zk.delete(path, got[1].version)
            else:
                await zk.set(path, AclZNode.encode(new), got[1].version)
            return
        except (BadVersionError, NodeExistsError, NoNodeError):
            continue  # someone else changed it meanwhile: read again
