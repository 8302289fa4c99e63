"""Consumer(subscribe=...) against the fake cluster with the coordinator's real group rules: members split
the buckets, a revoked bucket is committed before it moves (the new owner starts exactly there), callbacks
see the changes, and a fenced member's commit is refused, it drops everything and joins again."""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.client.consumer import Consumer
from fluss_py.client.options import ConsumerOptions
from fluss_py.errors import (
    AuthorizationFailedError,
    InvalidRequestError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)
from fluss_py.types import TableBucket
from tests.unit.client.fake_cluster import FakeCluster
from tests.unit.client.fake_groups import FakeGroups
from tests.unit.client.helpers import FAST, fill

pytestmark = pytest.mark.timeout(30)


def member(cluster, events: list, name: str) -> Consumer:
    return Consumer(
        cluster.servers[0], ConsumerOptions(retry=FAST, fetch_max_wait=0.01), transport=cluster, group="g",
        subscribe=["t"], on_assigned=lambda b: events.append((name, "assigned", b)),
        on_revoked=lambda b: events.append((name, "revoked", b)),
    )  # fmt: skip


async def poll_until(consumers: list[Consumer], cond, out: dict, timeout: float = 10.0, commit: bool = True) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        assert loop.time() < deadline, "condition not reached"
        for c in consumers:
            records = await c.poll(timeout=0.02)
            out.setdefault(id(c), []).extend(records)
            if records and commit:
                await c.commit()


async def test_two_members_split_and_a_moved_bucket_resumes_at_the_commit() -> None:
    cluster = FakeCluster()
    groups = FakeGroups(cluster)
    cluster.create_table("fluss", "t", num_buckets=4)
    for b in range(4):
        await fill(cluster, 10, bucket=b, prefix=f"b{b}-")
    events: list = []
    read: dict = {}
    a = member(cluster, events, "a")
    try:
        await poll_until([a], lambda: len(read.get(id(a), [])) == 40, read, commit=False)  # poll's own commits only
        assert a.assignment() == {TableBucket(1, b) for b in range(4)}
        b = member(cluster, events, "b")
        try:
            both = lambda: len(a.assignment()) == 2 and len(b.assignment()) == 2  # noqa: E731
            await poll_until([a, b], both, read, commit=False)
            assert not (a.assignment() & b.assignment())
            moved = b.assignment()
            assert ("a", "revoked", moved) in events and ("b", "assigned", moved) in events
            for tb in moved:  # poll committed them before they moved; b starts there, nothing read twice
                assert groups.offsets[("g", tb)] == 10
                assert await b.position(tb) == 10
            assert not read.get(id(b))
        finally:
            await b.close()
        await poll_until([a], lambda: len(a.assignment()) == 4, read)  # b left: its buckets come back at once
    finally:
        await a.close()


async def test_a_fenced_member_commit_is_refused_and_it_rejoins() -> None:
    cluster = FakeCluster()
    groups = FakeGroups(cluster)
    cluster.create_table("fluss", "t", num_buckets=2)
    await fill(cluster, 5, bucket=0)
    events: list = []
    a = member(cluster, events, "a")
    try:
        await poll_until([a], lambda: len(a.assignment()) == 2, {})
        old_id, old_epoch = a.membership.member_id, a.membership.member_epoch
        groups.expire("g", old_id)
        committed = dict(groups.offsets)
        with pytest.raises(UnknownMemberIdError):
            await a.commit({TableBucket(1, 0): 1})
        assert groups.offsets == committed  # the zombie's commit changed nothing
        rejoined = lambda: a.membership.member_epoch > old_epoch and len(a.assignment()) == 2  # noqa: E731
        await poll_until([a], rejoined, {})
        assert ("a", "revoked", {TableBucket(1, 0), TableBucket(1, 1)}) in events  # everything dropped first
        assert a.membership.member_id == old_id  # joined again under the member id the client made (KIP-1082)
    finally:
        await a.close()


async def test_subscribe_needs_a_group_and_excludes_assign() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=1)
    with pytest.raises(InvalidRequestError):
        Consumer(cluster.servers[0], transport=cluster, subscribe=["t"])
    FakeGroups(cluster)
    c = Consumer(cluster.servers[0], transport=cluster, group="g", subscribe=["t"])
    try:
        with pytest.raises(InvalidRequestError):
            await c.assign("t")
    finally:
        await c.close()


async def test_a_member_that_is_not_joined_never_commits_without_its_member_id() -> None:
    cluster = FakeCluster()
    groups = FakeGroups(cluster)
    cluster.create_table("fluss", "t", num_buckets=1)
    a = member(cluster, [], "a")
    try:
        await poll_until([a], lambda: len(a.assignment()) == 1, {})
        a.membership.lost = True  # as after a refused heartbeat, before poll dropped the buckets
        with pytest.raises(UnknownMemberIdError):
            await a.commit({TableBucket(1, 0): 1})
        assert groups.offsets == {} and not any(
            rpc == "CommitOffsets" and not req.member_id for _, rpc, req in cluster.calls
        )  # nothing sent as an offset-only commit
    finally:
        await a.close()


async def test_a_commit_naming_a_dropped_table_commits_the_others() -> None:
    cluster = FakeCluster()
    groups = FakeGroups(cluster)
    cluster.create_table("fluss", "t", num_buckets=1)
    cluster.create_table("fluss", "u", num_buckets=1)
    a = Consumer(cluster.servers[0], ConsumerOptions(retry=FAST, fetch_max_wait=0.01), transport=cluster,
                 group="g", subscribe=["t", "u"])  # fmt: skip
    try:
        await poll_until([a], lambda: len(a.assignment()) == 2, {})
        t, u = sorted(a.assignment())
        del cluster.tables[("fluss", "u")]  # dropped (a partition retention dropped) before the revocation
        assert await a.commit({t: 3, u: 4}) == {t: 3}  # no error: the live table's offset is written
        assert groups.offsets[("g", t)] == 3 and ("g", u) not in groups.offsets
    finally:
        await a.close()


async def test_an_application_that_stops_polling_leaves_and_its_buckets_go_to_the_others() -> None:
    """max_poll_interval: the stuck consumer's heartbeat task leaves the group (-1) while its application is
    outside poll; the other member takes every bucket; the next poll of the stuck one drops its buckets
    (as lost, no commit) and joins again."""
    cluster = FakeCluster()
    groups = FakeGroups(cluster)
    cluster.create_table("fluss", "t", num_buckets=4)
    events: list = []
    options = ConsumerOptions(retry=FAST, fetch_max_wait=0.01, max_poll_interval=0.3)
    stuck = Consumer(cluster.servers[0], options, transport=cluster, group="g", subscribe=["t"],
                     on_revoked=lambda b: events.append(("stuck", "revoked", b)))  # fmt: skip
    other = member(cluster, events, "other")
    try:
        split = lambda: len(stuck.assignment()) == 2 and len(other.assignment()) == 2  # noqa: E731
        await poll_until([stuck, other], split, {})
        stuck_id, held = stuck.membership.member_id, stuck.assignment()
        await poll_until([other], lambda: len(other.assignment()) == 4, {})  # only `other` polls now
        assert stuck_id not in groups.groups["g"].members and stuck.membership.lost
        committed = dict(groups.offsets)
        with pytest.raises(UnknownMemberIdError):  # it cannot commit what it held
            await stuck.commit({tb: 1 for tb in held})
        assert groups.offsets == committed
        await poll_until([stuck, other], split, {})  # its next poll drops everything, then it joins again
        assert ("stuck", "revoked", held) in events
        assert not stuck.assignment() & other.assignment()
    finally:
        await stuck.close()
        await other.close()


async def test_a_second_consumer_with_an_active_instance_id_fails_and_takes_nothing() -> None:
    cluster = FakeCluster()
    groups = FakeGroups(cluster)
    cluster.create_table("fluss", "t", num_buckets=2)
    options = ConsumerOptions(retry=FAST, fetch_max_wait=0.01)
    first = Consumer(cluster.servers[0], options, transport=cluster, group="g", subscribe=["t"], instance_id="i")
    try:
        await poll_until([first], lambda: len(first.assignment()) == 2, {})
        second = Consumer(cluster.servers[0], options, transport=cluster, group="g", subscribe=["t"], instance_id="i")
        try:
            with pytest.raises(UnreleasedInstanceIdError, match="instance id 'i'"):
                await poll_until([second], lambda: False, {}, timeout=5.0)
            with pytest.raises(UnreleasedInstanceIdError):  # every later poll says it again
                await second.poll(0.01)
            assert not second.assignment() and second.membership.member_id == ""
        finally:
            await second.close()
        assert list(groups.groups["g"].members) == [first.membership.member_id]
        await poll_until([first], lambda: len(first.assignment()) == 2, {})  # the first went on undisturbed
    finally:
        await first.close()


async def test_a_commit_naming_a_table_the_principal_may_not_read_writes_the_others_and_raises() -> None:
    cluster = FakeCluster()
    groups = FakeGroups(cluster)
    cluster.create_table("fluss", "t", num_buckets=1)
    cluster.create_table("fluss", "u", num_buckets=1)
    c = Consumer(cluster.servers[0], ConsumerOptions(retry=FAST, fetch_max_wait=0.01), transport=cluster, group="g")
    try:
        t, u = TableBucket(1, 0), TableBucket(2, 0)
        groups.unreadable.add(u.table_id)
        with pytest.raises(AuthorizationFailedError, match="table id 2"):
            await c.commit({t: 3, u: 4})
        assert groups.offsets == {("g", t): 3}  # the readable table's offset is written, the other's not
        assert c._committed == {t: 3}  # so a later commit() sends u again, not t
    finally:
        await c.close()
