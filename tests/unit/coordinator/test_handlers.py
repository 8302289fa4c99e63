"""Database DDL and membership handlers against an in-memory store: every write is epoch-fenced."""

import pytest

from fluss_py.coordinator.context import CoordinatorContext
from fluss_py.coordinator.events import CreateDatabase, DropDatabase, ListDatabases, LoadContext, TabletServersChanged
from fluss_py.coordinator.handlers import MetadataHandlers
from fluss_py.errors import (
    DatabaseAlreadyExistError,
    DatabaseNotEmptyError,
    DatabaseNotExistError,
    InvalidDatabaseNameError,
)
from fluss_py.zk.codecs import TabletServerRegistration
from fluss_py.zk.paths import DatabaseZNode, TabletServerZNode, TableZNode, persistent_parents
from fluss_py.zk.values import EpochFencedError

from .fake_zk import FakeStore


def make() -> tuple[FakeStore, MetadataHandlers]:
    store = FakeStore()
    for path in persistent_parents(store.root):
        store.ensure(path)
    fence = store.bump_epoch()
    return store, MetadataHandlers(store, CoordinatorContext(1, fence, "127.0.0.1", 9123))


async def test_create_list_drop_database():
    store, h = make()
    await h.load_context(LoadContext())
    assert await h.create_database(CreateDatabase("fluss")) is True
    assert await h.create_database(CreateDatabase("fluss", ignore_if_exists=True)) is False
    with pytest.raises(DatabaseAlreadyExistError):
        await h.create_database(CreateDatabase("fluss"))
    await h.create_database(CreateDatabase("analytics"))
    assert await h.list_databases(ListDatabases()) == ["analytics", "fluss"]
    assert DatabaseZNode.path(store.root, "analytics") in store.nodes
    assert await h.drop_database(DropDatabase("analytics")) is True
    assert DatabaseZNode.path(store.root, "analytics") not in store.nodes
    assert await h.drop_database(DropDatabase("analytics", ignore_if_not_exists=True)) is False
    with pytest.raises(DatabaseNotExistError):
        await h.drop_database(DropDatabase("analytics"))
    with pytest.raises(InvalidDatabaseNameError):
        await h.create_database(CreateDatabase("no spaces"))


async def test_context_is_rebuilt_from_zookeeper():
    store, h = make()
    store.ensure(DatabaseZNode.path(store.root, "old"))
    await h.load_context(LoadContext())
    assert await h.list_databases(ListDatabases()) == ["old"]


async def test_drop_non_empty_database_needs_cascade_and_removes_the_subtree():
    store, h = make()
    await h.create_database(CreateDatabase("db"))
    store.ensure(TableZNode.path(store.root, "db", "t1") + "/schemas/1")
    with pytest.raises(DatabaseNotEmptyError):
        await h.drop_database(DropDatabase("db"))
    await h.drop_database(DropDatabase("db", cascade=True))
    assert not [p for p in store.nodes if p.startswith(DatabaseZNode.path(store.root, "db"))]


async def test_a_fenced_leader_writes_nothing():
    store, h = make()
    await h.create_database(CreateDatabase("a"))
    before, commits = dict(store.nodes), store.commits
    store.bump_epoch()  # another coordinator won a later election
    with pytest.raises(EpochFencedError):
        await h.create_database(CreateDatabase("b"))
    h.context.databases.add("x")
    store.ensure(DatabaseZNode.path(store.root, "x"))
    before["/fluss/metadata/databases/x"] = store.nodes["/fluss/metadata/databases/x"]
    with pytest.raises(EpochFencedError):
        await h.drop_database(DropDatabase("x"))
    assert {k: v for k, v in store.nodes.items() if "epoch" not in k} == {
        k: v for k, v in before.items() if "epoch" not in k
    }
    assert store.commits == commits


async def test_tablet_servers_join_and_die():
    store, h = make()
    calls = []

    async def listener(joined, died):
        calls.append((sorted(joined), died))

    h.add_servers_listener(listener)
    for sid in (1, 2):
        reg = TabletServerRegistration("127.0.0.1", 9000 + sid, 9100 + sid, "r1", 1)
        store.ensure(TabletServerZNode.path(store.root, sid), TabletServerZNode.encode(reg))
    await h.tablet_servers_changed(TabletServersChanged(["1", "2"]))
    assert sorted(h.context.tablet_servers) == [1, 2]
    assert h.context.tablet_servers[2].port == 9002
    await h.tablet_servers_changed(TabletServersChanged(["2"]))
    await h.tablet_servers_changed(TabletServersChanged(["2"]))  # no change, no listener call
    assert sorted(h.context.tablet_servers) == [2]
    assert calls == [([1, 2], []), ([], [1])]


async def test_a_conflict_in_a_fenced_commit_is_the_conflict_not_fencing():
    # ZooKeeper answers the fence's check with RolledBackError when a later op fails: a database znode that
    # this leader's context missed is DATABASE_ALREADY_EXIST, and the leader keeps its leadership
    store, h = make()
    store.ensure(DatabaseZNode.path(store.root, "late"))
    with pytest.raises(DatabaseAlreadyExistError):
        await h.create_database(CreateDatabase("late"))
    assert await h.create_database(CreateDatabase("late", ignore_if_exists=True)) is False


@pytest.mark.parametrize("name", ["db\n", "fluss\n", "\ndb", "db\r", "db$1", "", "d" * 201, "db\U0001f600"])
async def test_a_name_zookeeper_cannot_store_is_refused_before_any_write(name):
    store, h = make()
    commits = store.commits
    with pytest.raises(InvalidDatabaseNameError):
        await h.create_database(CreateDatabase(name))
    assert store.commits == commits
