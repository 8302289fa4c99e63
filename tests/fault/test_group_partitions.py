"""A consumer group subscribed to a partitioned table follows its partitions, on real processes
(docs/consumer-groups.md "Partitioned tables").

Real ZooKeeper, three coordinators, one tablet server, and three ``fluss-py consume fluss.events --group``
member processes (tests/fault/group_support.py). The table is partitioned by day, and the coordinators'
AutoPartitionManager checks only when a leadership starts (the check interval is an hour), so the test
decides when partitions appear and go:

1. the members join while the table has no partition: nothing to assign;
2. yesterday's partition (kept by retention) and one of 2020 (expired) are created by hand: their buckets
   are assigned, the second without moving any bucket of the first;
3. kill -9 of the coordinator leader; the next leader's first check creates today's and tomorrow's
   partitions and drops the 2020 one (retention): the new buckets are assigned, the dropped ones revoked,
   and the group goes on with the same members (nobody fenced, nobody joins again).

Checked all along: the coordinator's ownership sets are disjoint at every look; at the end, every bucket
was ever assigned to one process only and every record of every partition was printed exactly once.
"""

from __future__ import annotations

import collections
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from fluss_py.client import ProducerOptions, SyncAdmin, SyncProducer
from fluss_py.client.groups import GroupMembers
from fluss_py.partitioning import TimeUnit, partition_name, shift, slot_start
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.procs import wait_until
from fluss_py.types import TableBucket
from tests.fault.group_support import Member, Members

pytestmark = pytest.mark.fault

TABLE = "fluss.events"
BUCKETS = 2
GROUP = "daily"
SESSION = 10.0
EXPIRED = "20200101"


class Watch:
    """Every look at the group (``describe``) checks that no bucket has two owners on the coordinator."""

    def __init__(self, admin: SyncAdmin) -> None:
        self.admin = admin
        self.looks = 0

    def describe(self) -> GroupMembers:
        view = self.admin.describe_group_members(GROUP)
        owners = collections.Counter(tb for m in view.members for tb in m.assigned)
        assert all(n == 1 for n in owners.values()), f"a bucket with two owners: {view}"
        self.looks += 1
        return view

    def table_ids(self, slots: set[str]) -> set[int]:
        tables = {t.info.path.table: t.info.table_id for t in self.admin.describe_cluster().tables}
        return {tables[f"events${slot}"] for slot in slots}

    def settled(self, live: list[Member], slots: set[str], timeout: float = 60.0) -> GroupMembers:
        """Wait until the group is STABLE with ``live`` members owning, together and by their own account,
        exactly the buckets of the partitions ``slots``."""

        def check() -> GroupMembers | None:
            expected = {TableBucket(t, b) for t in self.table_ids(slots) for b in range(BUCKETS)}
            view = self.describe()
            server = sorted(sorted(m.assigned) for m in view.members)
            accounts = sorted(sorted(m.owns_table_buckets()) for m in live)
            ok = view.state == "STABLE" and len(view.members) == len(live) and _owned(view) == expected
            return view if ok and accounts == server else None

        return wait_until(check, timeout, interval=0.1, message=lambda: f"group settled on {slots}: {self.describe()}")  # type: ignore[return-value]


def _produce(bootstrap: str, slot: str, count: int, start: int = 0) -> set[str]:
    values = [f"{slot}-{i:05d}" for i in range(start, start + count)]
    with SyncProducer(bootstrap, ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)) as p:
        futures = [p.send(f"{TABLE}${slot}", v.encode(), key=v.encode()) for v in values]
        p.flush()
        for f in futures:
            f.result(timeout=60)
    return set(values)


def _owned(view: GroupMembers) -> set[TableBucket]:
    return {tb for m in view.members for tb in m.assigned}


def _printed(group: Members) -> collections.Counter[str]:
    return collections.Counter(value for m in group.started for _, _, value in m.records())


def test_a_group_follows_the_partitions_of_its_table_across_a_coordinator_kill(
    cluster_factory, members, tmp_path: Path
) -> None:
    cluster: LocalCluster = cluster_factory(
        coordinators=3, tablet_servers=1, coordinator_overrides={"coordinator.auto-partition.check-interval": "1h"}
    )
    leader = cluster.wait_for_leader(30)
    bootstrap = cluster.get(cluster.names()[-1]).rpc_address
    with SyncAdmin(bootstrap, request_timeout=20.0) as admin:
        _scenario(cluster, leader, bootstrap, Watch(admin), members, tmp_path)


def _scenario(cluster: LocalCluster, leader: str, bootstrap: str, watch: Watch, members: list[Members],
              tmp_path: Path) -> None:  # fmt: skip
    admin = watch.admin
    today = slot_start(datetime.now(UTC), TimeUnit.DAY)
    day = lambda n: partition_name(shift(today, TimeUnit.DAY, n), TimeUnit.DAY)  # noqa: E731
    props = {"table.partition.key": "dt", "table.auto-partition.time-unit": "day",
             "table.auto-partition.num-precreate": "2", "table.auto-partition.num-retention": "3"}  # fmt: skip
    admin.create_table(TABLE, num_buckets=BUCKETS, replication_factor=1, properties=props)
    group = Members(tmp_path, cluster.directory, TABLE, GROUP)
    members.append(group)

    # 1. three members on a table without partitions yet (the leader checked before the table existed)
    live = [group.start(name, session_timeout=SESSION) for name in "abc"]
    watch.settled(live, set())

    # 2. partitions made by hand: each one's buckets are assigned, the existing ones stay where they are
    admin.create_table(f"{TABLE}${day(-1)}", num_buckets=BUCKETS, replication_factor=1)
    first = watch.settled(live, {day(-1)})
    produced = _produce(bootstrap, day(-1), 200)
    created_at = time.monotonic()
    admin.create_table(f"{TABLE}${EXPIRED}", num_buckets=BUCKETS, replication_factor=1)
    second = watch.settled(live, {day(-1), EXPIRED})
    print(f"a partition created -> its buckets owned by the members in {time.monotonic() - created_at:.2f} s")
    before = {m.member_id: set(m.assigned) for m in first.members}
    assert all(before[m.member_id] <= set(m.assigned) for m in second.members)  # sticky
    produced |= _produce(bootstrap, EXPIRED, 200)
    wait_until(lambda: set(_printed(group)) >= produced, 60, message="the first partitions' records read")
    expired_buckets = {tb for m in second.members for tb in m.assigned if tb not in _owned(first)}

    # 3. kill -9 of the coordinator leader; the next one's first check creates today's and tomorrow's
    # partitions and drops the expired one while the members keep heartbeating and reading
    killed_at = time.monotonic()
    cluster.kill(leader)
    produced |= _produce(bootstrap, day(-1), 200, start=200)
    cluster.wait_for_leader(30, exclude=[leader])
    third = watch.settled(live, {day(-1), day(0), day(1)}, timeout=90)
    print(f"coordinator kill -9 -> the next leader's partitions owned, the expired one revoked in "
          f"{time.monotonic() - killed_at:.2f} s")  # fmt: skip
    assert {m.member_id for m in third.members} == {m.member_id for m in second.members}  # the same members
    assert third.group_epoch > second.group_epoch
    assert not any("fenced" in m.text() for m in live)
    kept = {m.member_id: set(m.assigned) - expired_buckets for m in second.members}
    assert all(kept[m.member_id] <= set(m.assigned) for m in third.members)  # sticky across the failover
    revoked = {tb for m in live for what, tbs, _, _ in m.table_changes() if what == "revoked" for tb in tbs}
    assert revoked == expired_buckets  # the dropped partition's buckets were revoked, nothing else
    for slot in (day(0), day(1)):
        produced |= _produce(bootstrap, slot, 200)
    wait_until(lambda: set(_printed(group)) >= produced, 60, message="every partition's records read")

    printed = _printed(group)
    assert {v: n for v, n in printed.items() if n != 1} == {}  # each record read by exactly one member, once
    assert set(printed) == produced
    holders = collections.defaultdict(set)
    for m in live:
        for what, tbs, _, _ in m.table_changes():
            for tb in tbs:
                if what == "assigned":
                    holders[tb].add(m.name)
    assert all(len(names) == 1 for names in holders.values()), holders  # no bucket ever had two processes
    assert watch.looks > 0
