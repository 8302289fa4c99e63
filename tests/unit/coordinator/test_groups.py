"""Consumer-group offsets on the coordinator (coordinator/groups.py) against the in-memory store:
commits are validated, atomic and fenced by the coordinator epoch; fetch/list read what was committed."""

from __future__ import annotations

import pytest

from fluss_py.coordinator.events import CommitOffsets, FetchOffsets, ListGroups
from fluss_py.coordinator.groups import GroupOffsets, validate_commit
from fluss_py.errors import InvalidRequestError, TableNotExistError, UnknownTableOrBucketError
from fluss_py.types import TableBucket
from fluss_py.zk.paths import ConsumerOffsetZNode
from fluss_py.zk.values import EpochFencedError
from tests.unit.coordinator.fake_zk import FakeStore

TABLES = {1: 3, 2: 1}  # table id -> buckets


def make(store: FakeStore, fence_box: list) -> GroupOffsets:
    async def num_buckets(table_id: int) -> int | None:
        return TABLES.get(table_id)

    return GroupOffsets(store, lambda: fence_box[0], num_buckets)


@pytest.fixture
def store() -> FakeStore:
    store = FakeStore()
    store.ensure("/fluss/coordinator")
    return store


async def test_commit_then_fetch_and_list(store: FakeStore) -> None:
    fence = [store.bump_epoch()]
    groups = make(store, fence)
    await groups.commit(CommitOffsets("g", {TableBucket(1, 0): 5, TableBucket(1, 2): 7, TableBucket(2, 0): 1}))
    await groups.commit(CommitOffsets("g", {TableBucket(1, 0): 9}))  # set over an existing node
    await groups.commit(CommitOffsets("h", {TableBucket(1, 1): 0}))
    assert await groups.fetch(FetchOffsets("g")) == [
        (TableBucket(1, 0), 9),
        (TableBucket(1, 2), 7),
        (TableBucket(2, 0), 1),
    ]
    assert await groups.fetch(FetchOffsets("g", table_id=2)) == [(TableBucket(2, 0), 1)]
    assert await groups.fetch(FetchOffsets("unknown")) == []
    assert await groups.list_groups(ListGroups()) == [("g", "EMPTY", 0), ("h", "EMPTY", 0)]
    data, _ = store.nodes[ConsumerOffsetZNode.path("/fluss", "g", 1, 0)]
    assert ConsumerOffsetZNode.decode(data)[0] == 9


async def test_a_deposed_leader_cannot_commit(store: FakeStore) -> None:
    old = [store.bump_epoch()]
    await make(store, old).commit(CommitOffsets("g", {TableBucket(1, 0): 5}))
    new = [store.bump_epoch()]  # another coordinator won
    with pytest.raises(EpochFencedError):
        await make(store, old).commit(CommitOffsets("g", {TableBucket(1, 0): 6}))
    assert await make(store, new).fetch(FetchOffsets("g")) == [(TableBucket(1, 0), 5)]


async def test_an_invalid_commit_writes_nothing(store: FakeStore) -> None:
    groups = make(store, [store.bump_epoch()])
    before = dict(store.nodes)
    for offsets, error in (
        ({TableBucket(1, 0): 1, TableBucket(1, 3): 1}, UnknownTableOrBucketError),  # no bucket 3
        ({TableBucket(1, 0): 1, TableBucket(9, 0): 1}, TableNotExistError),  # no table 9 (dropped): not retriable
        ({TableBucket(1, 0): -1}, InvalidRequestError),
    ):
        with pytest.raises(error) as refused:
            await groups.commit(CommitOffsets("g", offsets))
        assert refused.value.retriable == (error is UnknownTableOrBucketError)
    assert store.nodes == before


async def test_offsets_of_a_dropped_table_are_not_answered(store: FakeStore) -> None:
    groups = make(store, [store.bump_epoch()])
    await groups.commit(CommitOffsets("g", {TableBucket(2, 0): 4}))
    TABLES.pop(2)
    try:
        assert await groups.fetch(FetchOffsets("g")) == []
    finally:
        TABLES[2] = 1


BAD_GROUPS = [
    "", "a/b", "g/", "/g", "g//", "x" * 201, ".", "..", "tab\there", "g\n",
    "g\U0001f600", "g\ufffd", "g\ufffc", "g\ue000", "g\x85",  # printable or not, ZooKeeper refuses them in a path
]  # fmt: skip


@pytest.mark.parametrize("group", BAD_GROUPS)
def test_bad_group_names_are_refused(group: str) -> None:
    with pytest.raises(InvalidRequestError):
        validate_commit(group, {TableBucket(1, 0): 0}, {1: 3})


@pytest.mark.parametrize("group", ["g.v1", "Grüße", "名前", "a b", "x" * 200])
def test_names_zookeeper_stores_are_groups(group: str) -> None:
    validate_commit(group, {TableBucket(1, 0): 0}, {1: 3})


@pytest.mark.parametrize("group", ["g/", "/g", "g//", "..", ".", "g\U0001f600"])
async def test_fetch_refuses_what_commit_refuses(store: FakeStore, group: str) -> None:
    # kazoo drops empty path components: "g/" would read group "g", whose DESCRIBE the authorizer did not
    # check (it checked "g/"); ".." would be kazoo's ValueError, an UNKNOWN error on the wire
    groups = make(store, [store.bump_epoch()])
    await groups.commit(CommitOffsets("g", {TableBucket(1, 0): 5}))
    with pytest.raises(InvalidRequestError):
        await groups.fetch(FetchOffsets(group))
    assert await groups.fetch(FetchOffsets("g")) == [(TableBucket(1, 0), 5)]


def test_an_empty_commit_is_refused() -> None:
    with pytest.raises(InvalidRequestError):
        validate_commit("g", {}, {})
