"""Group membership and reconciliation (coordinator/group_members.py): protocol steps, bad input, and the
one-owner invariant under random schedules of heartbeats, joins, leaves, expiries and added buckets."""

from __future__ import annotations

import itertools
import random

import pytest

from fluss_py.coordinator.group_members import GroupMembers, Heartbeat, HeartbeatAnswer, plain_layout
from fluss_py.errors import (
    BucketNotOwnedError,
    FencedMemberEpochError,
    InvalidRequestError,
    UnknownMemberIdError,
    UnreleasedInstanceIdError,
)
from fluss_py.types import TableBucket

SESSION = 10_000
REBALANCE = 30_000
T = 7


def _ids() -> itertools.count:
    return itertools.count(1)


class Sim:
    """Members that behave: report what they own, drop revoked buckets before acknowledging."""

    def __init__(self, buckets: int = 12) -> None:
        self.group = GroupMembers()
        self.counts = {T: buckets}
        self.partitions: dict[int, int] | None = None  # set: T is a partitioned table with these partitions
        self.now = 0
        self.local: dict[str, set[TableBucket]] = {}
        self.epochs: dict[str, int] = {}
        self._next = itertools.count(1)

    def _new_id(self) -> str:
        return f"m{next(self._next)}"

    def hb(self, member_id: str = "", epoch: int | None = None, instance: str = "", owned: set | None = None,
           session: int = SESSION) -> HeartbeatAnswer:  # fmt: skip
        epoch = self.epochs.get(member_id, 0) if epoch is None else epoch
        owned = self.local.get(member_id, set()) if owned is None else owned
        hb = Heartbeat(member_id, epoch, instance, "host", session, frozenset({T}), frozenset(owned), REBALANCE)
        layout = plain_layout(self.counts) if self.partitions is None else {T: dict(self.partitions)}
        answer = self.group.heartbeat(hb, self.now, layout, self._new_id)
        if answer.member_epoch >= 0:
            self.local[answer.member_id] = set(answer.assignment)
            self.epochs[answer.member_id] = answer.member_epoch
        return answer

    def join(self, instance: str = "", member_id: str = "") -> str:
        return self.hb(member_id, 0, instance, set()).member_id

    def stuck(self, member_id: str) -> HeartbeatAnswer:
        """A heartbeat of a member whose application stopped polling: it still reports every bucket it had."""
        return self.hb(member_id, owned=self.local[member_id] | self.group.members[member_id].assigned)

    def settle(self, rounds: int = 6, only: list[str] | None = None) -> None:
        for _ in range(rounds):
            for mid in list(self.group.members) if only is None else only:
                if mid in self.group.members:
                    try:
                        self.hb(mid)
                    except UnknownMemberIdError:  # its own heartbeat came after its session ended
                        assert mid not in self.group.members

    def advance(self, ms: int, heartbeating: list[str]) -> None:
        """Let ``ms`` pass while only ``heartbeating`` send heartbeats (every second)."""
        for _ in range(ms // 1000):
            self.now += 1000
            self.settle(1, heartbeating)
        self.now += ms % 1000

    def all_buckets(self) -> set[TableBucket]:
        if self.partitions is None:
            return {TableBucket(T, b) for b in range(self.counts[T])}
        return {TableBucket(p, b) for p, n in self.partitions.items() for b in range(n)}

    def check_one_owner(self) -> None:
        seen: dict[TableBucket, str] = {}
        for m in self.group.members.values():
            for tb in m.assigned:
                assert tb not in seen, f"{tb} owned by {seen[tb]} and {m.member_id}"
                seen[tb] = m.member_id
        for mid, local in self.local.items():
            if mid in self.group.members:
                assert local <= self.group.members[mid].assigned, f"{mid} reads buckets it does not own"


def test_three_members_get_four_buckets_each() -> None:
    sim = Sim(12)
    members = [sim.join() for _ in range(3)]
    sim.settle()
    assert sorted(len(sim.local[m]) for m in members) == [4, 4, 4]
    assert sim.group.state == "STABLE"
    sim.check_one_owner()


def test_a_bucket_moves_only_after_its_owner_acknowledged_the_revocation() -> None:
    sim = Sim(4)
    a = sim.join()
    sim.settle()
    assert len(sim.local[a]) == 4
    b = sim.hb("", 0).member_id
    assert sim.local[b] == set()  # every bucket is still a's
    answer = sim.hb(a, owned=sim.local[a] | sim.group.members[a].assigned)  # a is told to give up 2
    assert len(answer.assignment) == 2
    still = set(sim.group.members[a].assigned)
    assert len(still) == 4  # not acknowledged yet: a still owns all four on the server
    assert sim.hb(b).assignment == frozenset()  # so b gets nothing yet
    sim.hb(a)  # a reports it owns only 2 now: the acknowledgement
    assert len(sim.group.members[a].assigned) == 2
    assert len(sim.hb(b).assignment) == 2
    sim.check_one_owner()


def test_expired_member_buckets_go_to_the_others_and_its_commit_is_refused() -> None:
    sim = Sim(12)
    a, b, c = (sim.join() for _ in range(3))
    sim.settle()
    zombie_epoch, zombie_buckets = sim.epochs[c], set(sim.local[c])
    sim.advance(SESSION + 1000, [a, b])  # c is silent: a heartbeat of a or b removes it
    sim.settle()
    assert c not in sim.group.members
    assert sorted(len(sim.local[m]) for m in (a, b)) == [6, 6]
    with pytest.raises(UnknownMemberIdError):
        sim.group.check_commit(c, zombie_epoch, zombie_buckets, sim.now)
    with pytest.raises(UnknownMemberIdError):
        sim.hb(c)  # the zombie's heartbeat: it must rejoin
    rejoined = sim.join()
    assert rejoined != c and sim.epochs[rejoined] > zombie_epoch


def test_commit_checks_epoch_and_ownership() -> None:
    sim = Sim(4)
    a, b = sim.join(), sim.join()
    sim.settle()
    mine, theirs = next(iter(sim.local[a])), next(iter(sim.local[b]))
    sim.group.check_commit(a, sim.epochs[a], {mine}, sim.now)
    with pytest.raises(FencedMemberEpochError):
        sim.group.check_commit(a, sim.epochs[a] + 5, {mine}, sim.now)
    with pytest.raises(BucketNotOwnedError):
        sim.group.check_commit(a, sim.epochs[a], {mine, theirs}, sim.now)
    with pytest.raises(UnknownMemberIdError):
        sim.group.check_commit("nobody", 1, {mine}, sim.now)


def test_bad_heartbeats_change_nothing() -> None:
    sim = Sim(4)
    a = sim.join()
    sim.settle()
    before = sim.group.encode()
    with pytest.raises(UnknownMemberIdError):
        sim.hb("nobody", 3)
    with pytest.raises(FencedMemberEpochError):
        sim.hb(a, sim.epochs[a] + 1)
    with pytest.raises(UnknownMemberIdError):
        sim.hb("nobody", -1)
    with pytest.raises(InvalidRequestError):
        sim.hb(a, -2)  # a static leave from a dynamic member
    assert sim.group.encode() == before


def test_dynamic_leave_frees_buckets_at_once() -> None:
    sim = Sim(4)
    a, b = sim.join(), sim.join()
    sim.settle()
    sim.hb(a, -1)
    assert a not in sim.group.members
    sim.settle()
    assert len(sim.local[b]) == 4


def test_static_member_restart_keeps_its_buckets_without_a_rebalance() -> None:
    sim = Sim(12)
    a = sim.join("inst-a")
    others = [sim.join() for _ in range(2)]
    sim.settle()
    buckets, epoch = set(sim.local[a]), sim.group.epoch
    sim.hb(a, -2)  # static leave: kept until its session expires
    assert a in sim.group.members and sim.group.members[a].leaving
    sim.advance(SESSION // 2, others)
    a2 = sim.join("inst-a")
    sim.settle()
    assert a2 != a and sim.local[a2] == buckets and sim.group.epoch == epoch
    with pytest.raises(UnknownMemberIdError):
        sim.group.check_commit(a, sim.epochs[a], buckets, sim.now)  # the old incarnation is fenced
    for m in others:
        assert len(sim.local[m]) == 4


def test_static_member_that_stays_away_is_expired() -> None:
    sim = Sim(4)
    a, b = sim.join("inst-a"), sim.join()
    sim.settle()
    sim.hb(a, -2)
    sim.advance(SESSION + 1000, [b])
    sim.settle()
    assert a not in sim.group.members and len(sim.local[b]) == 4


def test_buckets_added_bump_the_epoch_and_are_spread() -> None:
    sim = Sim(6)
    a, b = sim.join(), sim.join()
    sim.settle()
    before = {m: set(sim.local[m]) for m in (a, b)}
    sim.counts[T] = 12
    sim.settle()
    assert all(before[m] <= sim.local[m] and len(sim.local[m]) == 6 for m in (a, b))


def test_lost_answer_previous_epoch_is_accepted() -> None:
    sim = Sim(12)
    for _ in range(3):
        sim.join()
        sim.settle()
    moved = [m for m in sim.group.members.values() if m.previous_epoch not in (-1, m.epoch)]
    assert moved
    for m in moved:
        sim.hb(m.member_id, m.previous_epoch)  # as if the member never saw the answer that moved its epoch
        with pytest.raises(FencedMemberEpochError):
            sim.hb(m.member_id, m.epoch + 1)


def test_encode_decode_round_trip_gives_fresh_sessions() -> None:
    sim = Sim(12)
    for _ in range(3):
        sim.join()
    sim.settle()
    loaded = GroupMembers.decode(sim.group.encode(), now_ms=123)
    assert loaded.encode() == sim.group.encode()
    assert all(m.last_heartbeat_ms == 123 for m in loaded.members.values())


def test_random_schedules_never_give_a_bucket_two_owners() -> None:
    rng = random.Random(848)
    for _ in range(150):
        sim = Sim(rng.randrange(1, 16))
        for _step in range(80):
            roll = rng.random()
            live = sorted(sim.group.members)
            if roll < 0.15 or not live:
                instance = rng.choice(["", "", "s1", "s2"])
                holder = sim.group.holder(instance, "")
                try:
                    sim.join(instance)
                except UnreleasedInstanceIdError:  # held by an active member: refused, nothing changed
                    assert holder is not None and holder.member_id in sim.group.members and not holder.leaving
            elif roll < 0.2:
                sim.hb(rng.choice(live), -1)
            elif roll < 0.22 and any(sim.group.members[m].instance_id for m in live):
                sim.hb(next(m for m in live if sim.group.members[m].instance_id), -2)
            elif roll < 0.25:
                sim.now += rng.choice([1000, SESSION + 1])
            elif roll < 0.27:  # a member whose application is stuck: it heartbeats without giving anything up
                mid = rng.choice(live)
                try:
                    sim.stuck(mid)
                except UnknownMemberIdError:
                    assert mid not in sim.group.members
            elif roll < 0.28:
                sim.counts[T] += 1
            else:
                mid = rng.choice(live)
                try:
                    sim.hb(mid)
                except UnknownMemberIdError:  # expired by this very heartbeat's expiry pass
                    assert mid not in sim.group.members
            sim.check_one_owner()
        sim.now += 1
        for _ in range(3):  # quiet: heartbeats only, every bucket ends owned, the group stable
            sim.settle()
        if sim.group.members:
            assert sim.group.state == "STABLE"
            owned = {tb for m in sim.group.members.values() for tb in m.assigned}
            assert owned == sim.all_buckets()


def _partitioned(partitions: dict[int, int], members: int) -> tuple[Sim, list[str]]:
    sim = Sim()
    sim.partitions = dict(partitions)
    ids = [sim.join() for _ in range(members)]
    sim.settle()
    return sim, ids


def test_a_partitioned_subscription_covers_every_partition_and_balances_over_all_of_them() -> None:
    sim, ids = _partitioned({101: 2, 102: 2, 103: 2}, 3)
    assert sim.group.state == "STABLE"
    assert {tb for m in ids for tb in sim.local[m]} == sim.all_buckets()
    assert sorted(len(sim.local[m]) for m in ids) == [2, 2, 2]  # over the whole table, not per partition
    sim.check_one_owner()


def test_a_new_partition_is_added_without_moving_an_existing_bucket() -> None:
    sim, ids = _partitioned({101: 2, 102: 2}, 3)
    before = {m: set(sim.local[m]) for m in ids}
    epoch = sim.group.epoch
    sim.partitions[103] = 2  # the AutoPartitionManager created a partition
    sim.settle()
    assert sim.group.epoch == epoch + 1 and sim.group.state == "STABLE"
    assert all(before[m] <= sim.local[m] for m in ids)  # sticky: every owner kept its buckets
    assert {tb for m in ids for tb in sim.local[m]} == sim.all_buckets()
    assert sorted(len(sim.local[m]) for m in ids) == [2, 2, 2]
    sim.check_one_owner()


def test_a_dropped_partition_is_revoked_and_acknowledged_like_any_bucket() -> None:
    sim, ids = _partitioned({101: 2, 102: 2, 103: 2}, 3)
    holders = [m for m in ids if any(tb.table_id == 101 for tb in sim.local[m])]
    del sim.partitions[101]  # retention dropped it
    answer = sim.hb(holders[0], owned=sim.local[holders[0]] | sim.group.members[holders[0]].assigned)
    assert not any(tb.table_id == 101 for tb in answer.assignment)  # told to stop reading it ...
    assert any(tb.table_id == 101 for tb in sim.group.members[holders[0]].assigned)  # ... owned until it acks
    sim.settle()
    assert sim.group.state == "STABLE"
    assert {tb for m in ids for tb in sim.group.members[m].assigned} == sim.all_buckets()
    sim.check_one_owner()


def test_random_partition_churn_never_gives_a_bucket_two_owners() -> None:
    rng = random.Random(14)
    for _ in range(80):
        next_id = itertools.count(200)
        sim = Sim()
        sim.partitions = {next(next_id): rng.randrange(1, 4) for _ in range(rng.randrange(0, 3))}
        for _step in range(60):
            roll = rng.random()
            live = sorted(sim.group.members)
            if roll < 0.12 or not live:
                sim.join()
            elif roll < 0.17:
                sim.hb(rng.choice(live), -1)
            elif roll < 0.27:
                sim.partitions[next(next_id)] = rng.randrange(1, 4)
            elif roll < 0.35 and sim.partitions:
                del sim.partitions[rng.choice(sorted(sim.partitions))]
            else:
                sim.hb(rng.choice(live))
            sim.check_one_owner()
        for _ in range(3):
            sim.settle()
        assert sim.group.state == "STABLE"
        assert {tb for m in sim.group.members.values() for tb in m.assigned} == sim.all_buckets()


# ---------------------------------------------------------------- static instance ids (KIP-848)
def test_an_instance_id_held_by_an_active_member_is_refused_and_changes_nothing() -> None:
    sim = Sim(4)
    a, b = sim.join("inst-a"), sim.join()
    sim.settle()
    before = sim.group.encode()
    with pytest.raises(UnreleasedInstanceIdError) as info:
        sim.join("inst-a")
    assert a in info.value.message and "inst-a" in info.value.message
    assert sim.group.encode() == before  # no member added, nobody replaced, no epoch moved
    sim.settle()
    assert sorted(len(sim.local[m]) for m in (a, b)) == [2, 2]


@pytest.mark.parametrize("release", ["static leave", "dynamic leave", "session expired"])
def test_an_instance_id_is_released_when_its_member_left_or_expired(release: str) -> None:
    sim = Sim(4)
    a, b = sim.join("inst-a"), sim.join()
    sim.settle()
    buckets = set(sim.local[a])
    if release == "static leave":
        sim.hb(a, -2)
    elif release == "dynamic leave":
        sim.hb(a, -1)
    else:
        sim.advance(SESSION + 1000, [b])
    a2 = sim.join("inst-a")
    sim.settle()
    assert a2 != a and a not in sim.group.members
    if release == "static leave":  # the next incarnation takes the buckets over, no rebalance
        assert sim.local[a2] == buckets
    assert sorted(len(sim.local[m]) for m in (a2, b)) == [2, 2]
    sim.check_one_owner()


def test_a_join_sent_again_with_the_clients_member_id_is_the_same_member() -> None:
    """The answer of a join was lost and the client sends it again (KIP-1082: its own member id): the
    group keeps one member, static or not; a static member is not refused by its own first join."""
    sim = Sim(4)
    a = sim.join("inst-a", member_id="client-a")
    assert a == "client-a"
    epoch = sim.group.epoch
    assert sim.join("inst-a", member_id="client-a") == "client-a"
    b = sim.join(member_id="client-b")
    assert sim.join(member_id="client-b") == b
    sim.settle()
    assert sorted(sim.group.members) == ["client-a", "client-b"] and sim.group.epoch == epoch + 1
    sim.check_one_owner()


def test_a_fenced_static_member_joins_again_under_its_own_member_id() -> None:
    sim = Sim(4)
    a = sim.join("inst-a", member_id="client-a")
    sim.settle()
    with pytest.raises(FencedMemberEpochError):
        sim.hb(a, sim.epochs[a] + 7)
    sim.local[a] = set()  # the client dropped everything and joins again: not refused by its own record
    assert sim.join("inst-a", member_id=a) == a
    sim.settle()
    assert sim.local[a] == sim.all_buckets()


# ---------------------------------------------------------------- the rebalance timeout
def _stuck_pair() -> tuple[Sim, str, str, set[TableBucket]]:
    """a owns every bucket; b joins; a is asked to give up half but never acknowledges."""
    sim = Sim(4)
    a = sim.join()
    sim.settle()
    b = sim.join()
    answer = sim.stuck(a)
    revoking = sim.group.members[a].assigned - answer.assignment
    assert len(revoking) == 2 and sim.group.members[a].revoke_deadline_ms == sim.now + REBALANCE
    return sim, a, b, revoking


def test_a_member_that_never_acknowledges_a_revocation_is_fenced_after_the_rebalance_timeout() -> None:
    sim, a, b, revoking = _stuck_pair()
    epoch_a = sim.epochs[a]
    for _ in range(REBALANCE // 1000):  # both heartbeat every second; a never gives anything up
        sim.now += 1000
        sim.stuck(a)
        sim.hb(b)
        assert sim.local[b] == set()  # one owner per bucket: b waits while a owns them
        sim.group.check_commit(a, epoch_a, revoking, sim.now)  # a may still commit what it processed
    sim.now += 1000
    with pytest.raises(UnknownMemberIdError) as info:
        sim.stuck(a)
    assert "rebalance timeout" in info.value.message
    assert a not in sim.group.members
    assert sim.group.drain_removed() == [(a, info.value.message.split(": ", 2)[-1])]
    with pytest.raises(UnknownMemberIdError, match="rebalance timeout"):
        sim.group.check_commit(a, epoch_a, revoking, sim.now)  # its commits are refused from now on
    sim.settle(only=[b])
    assert sim.local[b] == sim.all_buckets()  # every bucket went to the other member
    sim.check_one_owner()


def test_a_commit_past_the_rebalance_timeout_is_refused_before_any_heartbeat_removed_the_member() -> None:
    sim, a, _, revoking = _stuck_pair()
    sim.now += REBALANCE + 1
    sim.group.members[a].last_heartbeat_ms = sim.now  # its session is alive: it heartbeats, stuck
    with pytest.raises(UnknownMemberIdError, match="rebalance timeout"):
        sim.group.check_commit(a, sim.epochs[a], revoking, sim.now)


def test_an_acknowledgement_in_time_clears_the_deadline() -> None:
    sim, a, b, _ = _stuck_pair()
    for _ in range(REBALANCE // 1000 - 1):
        sim.now += 1000
        sim.stuck(a)
        sim.hb(b)
    sim.hb(a)  # gives the two buckets up at last
    assert sim.group.members[a].revoke_deadline_ms is None
    sim.advance(REBALANCE + 1000, [a, b])
    assert sorted(len(sim.local[m]) for m in (a, b)) == [2, 2]


def test_a_new_leader_gives_a_pending_revocation_a_fresh_deadline() -> None:
    sim, a, _, _ = _stuck_pair()
    loaded = GroupMembers.decode(sim.group.encode(), now_ms=sim.now + 5000)
    assert loaded.members[a].revoke_deadline_ms is None  # set again by a's next heartbeat on that leader
