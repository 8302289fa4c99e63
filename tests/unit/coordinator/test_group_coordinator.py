"""Group membership on the coordinator (coordinator/group_coordinator.py + groups.py) against the in-memory
store: each kind of bad input has its error code and changes nothing in ZooKeeper; fenced commits; the
state survives a new leader (a new GroupOffsets on the same store); delete refuses live members."""

from __future__ import annotations

import pytest

from fluss_py.coordinator import group_coordinator
from fluss_py.coordinator.events import CommitOffsets, ConsumerHeartbeat, DeleteGroup, DescribeGroup, ListGroups
from fluss_py.coordinator.group_coordinator import GroupLimits
from fluss_py.coordinator.groups import GroupOffsets
from fluss_py.errors import (
    BucketNotOwnedError,
    FencedMemberEpochError,
    GroupNotEmptyError,
    GroupNotExistError,
    InvalidRequestError,
    InvalidSessionTimeoutError,
    TableNotExistError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)
from fluss_py.zk.paths import GroupMembersZNode
from fluss_py.zk.values import EpochFencedError
from tests.unit.coordinator.fake_zk import FakeStore

TABLES = {1: 12}
LIMITS = GroupLimits(min_session_timeout_ms=1000, max_session_timeout_ms=30_000, heartbeat_interval_ms=500)


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def make(store: FakeStore, fence_box: list, clock: Clock) -> GroupOffsets:
    async def num_buckets(table_id: int) -> int | None:
        return TABLES.get(table_id)

    groups = GroupOffsets(store, lambda: fence_box[0], num_buckets, LIMITS)
    groups.members._clock = clock
    return groups


@pytest.fixture
def store() -> FakeStore:
    store = FakeStore()
    store.ensure("/fluss/coordinator")
    return store


def _hb(member_id: str = "", epoch: int = 0, owned: frozenset = frozenset(), **kw) -> ConsumerHeartbeat:
    kw.setdefault("session_timeout_ms", 10_000)
    kw.setdefault("subscribed", frozenset({1}))
    return ConsumerHeartbeat("g", member_id, epoch, owned=owned, client_host="ipv4:127.0.0.1:1", **kw)


async def _settle(groups: GroupOffsets, members: dict[str, tuple[int, frozenset]]) -> None:
    for _ in range(4):
        for mid in list(members):
            _, owned = members[mid]
            answer = await groups.members.heartbeat(_hb(mid, members[mid][0], owned))
            members[mid] = (answer.member_epoch, answer.assignment)


async def _join(groups: GroupOffsets, members: dict, **kw) -> str:
    answer = await groups.members.heartbeat(_hb(**kw))
    members[answer.member_id] = (answer.member_epoch, answer.assignment)
    return answer.member_id


async def test_join_split_commit_and_reload_on_a_new_leader(store: FakeStore) -> None:
    fence, clock = [store.bump_epoch()], Clock()
    groups = make(store, fence, clock)
    members: dict[str, tuple[int, frozenset]] = {}
    for _ in range(3):
        await _join(groups, members)
    await _settle(groups, members)
    assert sorted(len(owned) for _, owned in members.values()) == [4, 4, 4]
    a = sorted(members)[0]
    epoch, owned = members[a]
    tb = sorted(owned, key=lambda tb: tb.bucket)[0]
    await groups.commit(CommitOffsets("g", {tb: 3}, a, epoch))
    assert await groups.list_groups(ListGroups()) == [("g", "STABLE", 3)]

    # a new leader: loads the same group from ZooKeeper, the same members own the same buckets
    successor = make(store, [store.bump_epoch()], clock)
    view = await successor.members.describe(DescribeGroup("g"))
    assert {m.member_id: m.assigned for m in view.members} == {mid: owned for mid, (_, owned) in members.items()}
    await successor.commit(CommitOffsets("g", {tb: 4}, a, epoch))
    with pytest.raises(EpochFencedError):  # the deposed leader can change nothing
        await groups.members.heartbeat(_hb())


async def test_bad_input_has_its_code_and_changes_nothing(store: FakeStore) -> None:
    fence, clock = [store.bump_epoch()], Clock()
    groups = make(store, fence, clock)
    members: dict[str, tuple[int, frozenset]] = {}
    a, b = await _join(groups, members), await _join(groups, members)
    await _settle(groups, members)
    path = GroupMembersZNode.path("/fluss", "g")
    before = store.nodes[path]
    epoch_a, owned_a = members[a]
    theirs = next(iter(members[b][1]))
    cases = [
        (_hb("nobody", 5), UnknownMemberIdError),
        (_hb(a, epoch_a + 7, owned_a), FencedMemberEpochError),
        (_hb(session_timeout_ms=10), InvalidSessionTimeoutError),
        (_hb(session_timeout_ms=999_999), InvalidSessionTimeoutError),
        (_hb(subscribed=frozenset({99})), TableNotExistError),
        (_hb(subscribed=frozenset()), InvalidRequestError),
        (_hb(a, -3), InvalidRequestError),
    ]
    for event, error in cases:
        with pytest.raises(error):
            await groups.members.heartbeat(event)
    for commit, error in [
        (CommitOffsets("g", {theirs: 1}, a, epoch_a), BucketNotOwnedError),
        (CommitOffsets("g", {next(iter(owned_a)): 1}, a, epoch_a + 7), FencedMemberEpochError),
        (CommitOffsets("g", {next(iter(owned_a)): 1}, "nobody", 1), UnknownMemberIdError),
        (CommitOffsets("g", {next(iter(owned_a)): 1}), GroupNotEmptyError),  # offset-only commit, live members
    ]:
        with pytest.raises(error):
            await groups.commit(commit)
    with pytest.raises(GroupNotExistError):
        await groups.members.describe(DescribeGroup("unknown"))
    with pytest.raises(GroupNotExistError):
        await groups.members.delete(DeleteGroup("unknown"))
    with pytest.raises(GroupNotEmptyError):
        await groups.members.delete(DeleteGroup("g"))
    assert store.nodes[path] == before
    assert not any("/offsets/" in p for p in store.nodes)


async def test_expired_member_commit_refused_then_group_deletable(store: FakeStore) -> None:
    fence, clock = [store.bump_epoch()], Clock()
    groups = make(store, fence, clock)
    members: dict[str, tuple[int, frozenset]] = {}
    a = await _join(groups, members)
    await _settle(groups, members)
    epoch, owned = members[a]
    clock.now += 10_001
    with pytest.raises(UnknownMemberIdError):
        await groups.commit(CommitOffsets("g", {next(iter(owned)): 1}, a, epoch))
    view = await groups.members.describe(DescribeGroup("g"))
    assert view.state == "EMPTY" and view.members == []
    await groups.commit(CommitOffsets("g", {next(iter(owned)): 1}))  # offset-only use works again
    await groups.members.delete(DeleteGroup("g"))
    assert not any(p.startswith("/fluss/consumers/g") for p in store.nodes)


async def test_a_dropped_subscribed_table_only_loses_its_buckets(store: FakeStore) -> None:
    fence, clock = [store.bump_epoch()], Clock()
    groups = make(store, fence, clock)
    members: dict[str, tuple[int, frozenset]] = {}
    for _ in range(2):
        await _join(groups, members)
    await _settle(groups, members)
    TABLES.pop(1)
    try:
        await _settle(groups, members)  # no TABLE_NOT_EXIST: the heartbeats go on, the buckets are revoked
    finally:
        TABLES[1] = 12
    assert all(owned == frozenset() for _, owned in members.values())
    assert all(not m.assigned for m in groups.members._groups["g"].members.values())


def test_a_partitioned_table_stands_for_the_buckets_of_its_live_partitions() -> None:
    from fluss_py import config as cfg
    from fluss_py.coordinator.group_coordinator import bucket_layout
    from fluss_py.coordinator.tables import TableRegistration as TableInfo
    from fluss_py.types import TablePath

    spec = {cfg.TABLE_AUTO_PARTITION_UNIT.key: "day", cfg.TABLE_PARTITION_KEY.key: "dt"}
    tables = {
        1: TableInfo(1, TablePath("fluss", "events"), 3, 1, spec),
        2: TableInfo(2, TablePath("fluss", "events$20261201"), 3, 1, spec),
        3: TableInfo(3, TablePath("fluss", "events$20261202"), 3, 1, spec),
        4: TableInfo(4, TablePath("other", "events$20261201"), 3, 1, spec),  # another database's table
        5: TableInfo(5, TablePath("fluss", "events2"), 2, 1),
    }
    assert bucket_layout(tables, 1) == {2: 3, 3: 3}
    assert bucket_layout(tables, 2) == {2: 3}  # a partition subscribed by name is a plain table
    assert bucket_layout(tables, 5) == {5: 2}
    assert bucket_layout(tables, 9) is None
    del tables[2]  # retention dropped it
    assert bucket_layout(tables, 1) == {3: 3}


@pytest.mark.parametrize("instance_id", ["i" * 256, "i" * 2_000_000, "i\U0001f600", "i\n", "i/j", ".."])
async def test_an_instance_id_is_bounded_like_a_group_name(store: FakeStore, instance_id: str) -> None:
    # stored in the group's members znode: a 2 MB one made the znode larger than ZooKeeper's 1 MiB limit
    groups = make(store, [store.bump_epoch()], Clock())
    with pytest.raises(InvalidRequestError):
        await groups.members.heartbeat(_hb(instance_id=instance_id))
    assert GroupMembersZNode.path("/fluss", "g") not in store.nodes
    await groups.members.heartbeat(_hb(instance_id="i" * 255))


async def test_a_full_group_refuses_joins_but_not_a_static_member_rejoining(store: FakeStore) -> None:
    clock = Clock()
    groups = make(store, [store.bump_epoch()], clock)
    groups.members.limits = GroupLimits(1000, 30_000, 500, max_size=2)
    members: dict[str, tuple[int, frozenset]] = {}
    static = await _join(groups, members, instance_id="s")
    await _join(groups, members)
    before = store.nodes[GroupMembersZNode.path("/fluss", "g")]
    with pytest.raises(InvalidRequestError, match=r"group\.max-size"):
        await _join(groups, members)
    with pytest.raises(UnreleasedInstanceIdError):  # "s" is held by an active member
        await _join(groups, members, instance_id="s")
    assert store.nodes[GroupMembersZNode.path("/fluss", "g")] == before
    await groups.members.heartbeat(_hb(static, -2, instance_id="s"))  # a static leave releases "s"
    await _join(groups, members, instance_id="s")  # replaces its old incarnation
    clock.now += 10_001  # every session ran out: room again
    await _join(groups, members)
    assert len((await groups.members.describe(DescribeGroup("g"))).members) == 1


async def test_a_group_whose_znode_would_be_too_large_is_not_written(store: FakeStore, monkeypatch) -> None:
    monkeypatch.setattr(group_coordinator, "MAX_GROUP_ZNODE_BYTES", 20_000)  # 512 KiB: the same, slower
    groups = make(store, [store.bump_epoch()], Clock())
    members: dict[str, tuple[int, frozenset]] = {}
    with pytest.raises(InvalidRequestError, match="bytes"):
        for n in range(1000):
            await _join(groups, members, instance_id=f"{n:0255d}")
    data, _ = store.nodes[GroupMembersZNode.path("/fluss", "g")]
    assert 15_000 < len(data) <= 20_000
    view = await groups.members.describe(DescribeGroup("g"))  # reloaded from ZooKeeper: what was written
    assert len(view.members) == len(members)


@pytest.mark.parametrize("member_id", ["m" * 65, "a b", "m/1", "é", "m\n"])
async def test_a_member_id_chosen_by_the_client_is_checked(store: FakeStore, member_id: str) -> None:
    groups = make(store, [store.bump_epoch()], Clock())
    with pytest.raises(InvalidRequestError, match="member id"):
        await groups.members.heartbeat(_hb(member_id))
    assert GroupMembersZNode.path("/fluss", "g") not in store.nodes


async def test_a_member_that_never_acknowledges_is_fenced_by_the_rebalance_timeout(store: FakeStore) -> None:
    """group.rebalance.timeout: the stuck member is removed in ZooKeeper, its commit of the buckets it was
    asked to give up is refused and writes nothing, the other member gets them."""
    fence, clock = [store.bump_epoch()], Clock()
    groups = make(store, fence, clock)
    groups.members.limits = GroupLimits(1000, 30_000, 500, rebalance_timeout_ms=5_000)
    members: dict[str, tuple[int, frozenset]] = {}
    a = await _join(groups, members)
    await _settle(groups, members)
    b = await _join(groups, members)
    epoch_a, owned_a = members[a]
    answer = await groups.members.heartbeat(_hb(a, epoch_a, owned_a))  # told to give up half: never does
    revoking = owned_a - answer.assignment
    assert len(revoking) == 6
    await groups.commit(CommitOffsets("g", {tb: 1 for tb in revoking}, a, epoch_a))  # in time: accepted
    for _ in range(5):
        clock.now += 1000
        await groups.members.heartbeat(_hb(a, epoch_a, owned_a))
        assert (await groups.members.heartbeat(_hb(b, members[b][0]))).assignment == frozenset()
    clock.now += 1000
    written = {p: v for p, v in store.nodes.items() if "/offsets/" in p}
    with pytest.raises(UnknownMemberIdError, match="rebalance timeout"):
        await groups.commit(CommitOffsets("g", {tb: 2 for tb in revoking}, a, epoch_a))
    assert {p: v for p, v in store.nodes.items() if "/offsets/" in p} == written  # nothing written
    stored = group_coordinator.GroupMembers.decode(store.nodes[GroupMembersZNode.path("/fluss", "g")][0], 0)
    assert list(stored.members) == [b]  # the removal is in ZooKeeper
    with pytest.raises(UnknownMemberIdError, match="rebalance timeout"):
        await groups.members.heartbeat(_hb(a, epoch_a, owned_a))
    await _settle(groups, {b: members[b]})
    assert stored.members[b].assigned == set() and len(groups.members._groups["g"].members[b].assigned) == 12
