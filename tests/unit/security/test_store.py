"""The users-and-ACLs cache at a server's start: a ZooKeeper session lost during the first read is waited out
(security/store.py), and what the cut-short attempt read does not outlive it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from fluss_py.security.scram import make_credential, verify
from fluss_py.security.store import SecurityCache
from fluss_py.security_types import Acl, Operation, PatternType, Permission, ResourceType
from fluss_py.zk.paths import AclZNode, UserZNode
from fluss_py.zk.values import SessionLostError, ZnodeStat

pytestmark = pytest.mark.unit

ROOT = "/fluss"
WRITE_ALL = Acl("alice", ResourceType.CLUSTER, PatternType.LITERAL, "cluster", Operation.WRITE, Permission.ALLOW)


class Watch:
    def __init__(self) -> None:
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeZk:
    """ZooKeeper's nodes in a dict; ``lose_session`` decides, per call, whether the session drops first."""

    def __init__(self, connection_timeout: float = 5.0) -> None:
        self.connection_timeout = connection_timeout
        self.nodes: dict[str, bytes] = {}
        self.calls: list[str] = []
        self.lose_session: Callable[[str], bool] = lambda call: False
        self.watches: list[Watch] = []

    def _call(self, call: str) -> None:
        self.calls.append(call)
        if self.lose_session(call):
            raise SessionLostError(f"ZooKeeper session lost: ConnectionLoss ({call})")

    async def ensure_path(self, path: str) -> None:
        self._call(f"ensure {path}")
        self.nodes.setdefault(path, b"")

    async def get_children(self, path: str) -> list[str]:
        self._call(f"children {path}")
        prefix = path + "/"
        return sorted(p[len(prefix) :] for p in self.nodes if p.startswith(prefix) and "/" not in p[len(prefix) :])

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None:
        self._call(f"get {path}")
        data = self.nodes.get(path)
        return None if data is None else (data, ZnodeStat(0, 0, 0, 0, 0))

    def watch_children(self, path: str, on_change: Callable[[list[str] | None], None]) -> Watch:
        self.watches.append(Watch())
        return self.watches[-1]

    def watch_data(self, path: str, on_change: Callable[[Any], None]) -> Watch:
        self.watches.append(Watch())
        return self.watches[-1]


def with_users_and_acls(zk: FakeZk) -> None:
    zk.nodes[UserZNode.path(ROOT, "alice")] = UserZNode.encode(make_credential("alice-pw"))
    zk.nodes[UserZNode.path(ROOT, "old")] = UserZNode.encode(make_credential("old-pw"))
    key = (ResourceType.CLUSTER, PatternType.LITERAL, "cluster")
    zk.nodes[AclZNode.path(ROOT, *key)] = AclZNode.encode([WRITE_ALL])


async def test_a_session_lost_during_the_first_read_is_waited_out_and_the_read_starts_over() -> None:
    zk = FakeZk()
    with_users_and_acls(zk)
    acl_parent = AclZNode.parent(ROOT)
    lost = []

    def once_at_the_acls(call: str) -> bool:
        if call == f"children {acl_parent}" and not lost:
            lost.append(call)
            del zk.nodes[UserZNode.path(ROOT, "old")]  # deleted while the session was away
            return True
        return False

    zk.lose_session = once_at_the_acls
    cache = SecurityCache(zk, ROOT)
    await cache.start()
    assert lost  # the first attempt did fail
    assert zk.calls.count(f"get {UserZNode.path(ROOT, 'old')}") == 1  # read by the first attempt only
    assert cache.credential("old") is None  # ... and not kept from it
    alice = cache.credential("alice")
    assert alice is not None and verify(alice, "alice-pw")
    assert cache.acls() == (WRITE_ALL,)
    assert len(zk.watches) == 2  # watched once the read is complete


async def test_a_session_that_does_not_come_back_fails_the_start_after_the_connection_timeout() -> None:
    zk = FakeZk(connection_timeout=0.05)
    with_users_and_acls(zk)
    zk.lose_session = lambda call: True
    cache = SecurityCache(zk, ROOT)
    with pytest.raises(SessionLostError):
        await cache.start()
    assert len(zk.calls) >= 2  # tried again before giving up
    assert zk.watches == []
