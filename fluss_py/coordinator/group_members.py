"""One consumer group's membership and its reconciliation: pure state transitions, no I/O.

docs/consumer-groups.md has the protocol, the member state machine and the invariants. In short: members
heartbeat; the group epoch moves on every membership or subscription change and then the target ``T`` is
recomputed (``group_assignor.assign``); a member's ownership ``A`` loses a bucket only when the member's
heartbeat shows it dropped it (or the member left or expired) and gains a bucket only when no other
member's ``A`` holds it, so the ``A`` sets of a group are always disjoint.

The subscribed tables are resolved by the caller into a **layout** (``subscribed table id -> {table id:
bucket count}``): a plain table stands for its own buckets, the logical table of a partitioned table for
the buckets of its live partitions. A heartbeat whose layout differs from the one the target was computed
from (a partition created or dropped, a table dropped) moves the group epoch like a membership change.

Every method validates first and raises before changing anything (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
INVALID_SESSION_TIMEOUT, BUCKET_NOT_OWNED, INVALID_REQUEST). ``encode``/``decode`` give the ZooKeeper form
(``GroupMembersZNode``); the time of each member's last heartbeat is kept only in memory (``decode`` sets
it to the load time: a new coordinator leader gives every member a fresh session).

Who calls it: ``GroupCoordinator`` on the coordinator event loop (one writer); unit tests.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass, field

from fluss_py.coordinator.group_assignor import assign_units
from fluss_py.errors import (
    BucketNotOwnedError,
    FencedMemberEpochError,
    InvalidRequestError,
    UnknownMemberIdError,
)
from fluss_py.types import TableBucket

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2

# subscribed table id -> {table id whose buckets it stands for: bucket count}; a table that no longer
# exists is absent. A plain table maps to itself, a partitioned table to its live partitions.
Layout = Mapping[int, Mapping[int, int]]


def plain_layout(counts: Mapping[int, int]) -> dict[int, dict[int, int]]:
    """The layout of plain (unpartitioned) tables: table id -> its own bucket count."""
    return {t: {t: n} for t, n in counts.items()}


@dataclass
class Member:
    member_id: str
    instance_id: str
    client_host: str
    session_timeout_ms: int
    subscribed: frozenset[int]
    epoch: int = 0
    previous_epoch: int = -1
    assigned: set[TableBucket] = field(default_factory=set)  # A(m): what the member may own now
    leaving: bool = False  # a static member that left (epoch -2) and may come back within its session
    last_heartbeat_ms: int = 0  # memory only

    def expired(self, now_ms: int) -> bool:
        return now_ms > self.last_heartbeat_ms + self.session_timeout_ms


@dataclass(frozen=True)
class Heartbeat:
    member_id: str
    member_epoch: int
    instance_id: str
    client_host: str
    session_timeout_ms: int
    subscribed: frozenset[int]
    owned: frozenset[TableBucket]


@dataclass(frozen=True)
class HeartbeatAnswer:
    member_id: str
    member_epoch: int
    assignment: frozenset[TableBucket]


@dataclass
class GroupMembers:
    """Owns one group's members, epochs, target and ownership (module docstring)."""

    epoch: int = 0
    target_epoch: int = 0
    counts: dict[int, int] = field(default_factory=dict)  # table id -> bucket count the target was computed from
    members: dict[str, Member] = field(default_factory=dict)
    target: dict[str, set[TableBucket]] = field(default_factory=dict)

    # ---------------------------------------------------------------- queries
    @property
    def state(self) -> str:
        if not self.members:
            return "EMPTY"
        stable = all(m.assigned == self.target.get(m.member_id, set()) for m in self.members.values())
        return "STABLE" if stable else "RECONCILING"

    def owner(self, tb: TableBucket) -> str | None:
        return next((m.member_id for m in self.members.values() if tb in m.assigned), None)

    def subscribed_tables(self) -> set[int]:
        return {t for m in self.members.values() for t in m.subscribed}

    # ---------------------------------------------------------------- transitions
    def expire(self, now_ms: int) -> list[str]:
        """Remove the members whose session ran out; their buckets become free. Returns their ids."""
        gone = [mid for mid, m in self.members.items() if m.expired(now_ms)]
        for mid in gone:
            self._remove(mid)
        return gone

    def heartbeat(
        self, hb: Heartbeat, now_ms: int, layout: Layout, new_member_id: Callable[[], str]
    ) -> HeartbeatAnswer:
        """Apply one heartbeat (join, leave, static leave or a regular one); see the docs for the steps.

        ``layout``: the current layout (module docstring) of every table subscribed by the group or by
        ``hb`` (a table missing from it no longer exists). Expired members are removed first.
        """
        if hb.member_epoch not in (JOIN_EPOCH, LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            self._check_member(hb.member_id, hb.member_epoch)
        elif hb.member_epoch != JOIN_EPOCH:
            self._check_member(hb.member_id, None)
            if hb.member_epoch == STATIC_LEAVE_EPOCH and not self.members[hb.member_id].instance_id:
                raise InvalidRequestError("a static leave (epoch -2) needs a member with an instance id")
        self.expire(now_ms)
        if hb.member_epoch == LEAVE_EPOCH:
            if hb.member_id in self.members:
                self._remove(hb.member_id)
            return HeartbeatAnswer(hb.member_id, LEAVE_EPOCH, frozenset())
        if hb.member_epoch == STATIC_LEAVE_EPOCH:
            if hb.member_id in self.members:
                self.members[hb.member_id].leaving = True
            return HeartbeatAnswer(hb.member_id, STATIC_LEAVE_EPOCH, frozenset())
        if hb.member_epoch == JOIN_EPOCH:
            member = self._join(hb, new_member_id())
        else:
            member = self.members.get(hb.member_id)
            if member is None:  # it expired just now: the heartbeat came too late
                raise UnknownMemberIdError(f"member {hb.member_id} expired (no heartbeat within its session)")
            if member.subscribed != hb.subscribed:
                member.subscribed = hb.subscribed
                self.epoch += 1
            member.session_timeout_ms = hb.session_timeout_ms
        member.last_heartbeat_ms = now_ms
        member.leaving = False
        self._refresh_target(layout)
        return self._reconcile(member, hb.owned)

    def check_commit(self, member_id: str, member_epoch: int, buckets: Set[TableBucket], now_ms: int) -> None:
        """Raise unless ``member_id`` at ``member_epoch`` may commit ``buckets`` (owns them all now)."""
        self._check_member(member_id, member_epoch)
        member = self.members[member_id]
        if member.expired(now_ms):
            raise UnknownMemberIdError(f"member {member_id} expired (no heartbeat within its session)")
        foreign = sorted(buckets - member.assigned, key=lambda tb: (tb.table_id, tb.bucket))
        if foreign:
            names = ", ".join(map(str, foreign))
            raise BucketNotOwnedError(f"member {member_id} does not own bucket(s) {names}")

    # ---------------------------------------------------------------- internals
    def _check_member(self, member_id: str, member_epoch: int | None) -> None:
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(f"no member {member_id!r} in the group (expired, left or never joined)")
        if member_epoch is not None and member_epoch not in (member.epoch, member.previous_epoch):
            raise FencedMemberEpochError(
                f"member {member_id} is at epoch {member.epoch}, the request carries epoch {member_epoch}"
            )

    def _join(self, hb: Heartbeat, member_id: str) -> Member:
        old = next((m for m in self.members.values() if hb.instance_id and m.instance_id == hb.instance_id), None)
        member = Member(member_id, hb.instance_id, hb.client_host, hb.session_timeout_ms, hb.subscribed)
        if old is None:
            self.epoch += 1
            member.epoch = self.epoch  # never 0: a member's regular heartbeats must not read as joins
        else:  # the same static member, restarted: it takes over the old incarnation's buckets, no rebalance
            del self.members[old.member_id]
            member.epoch, member.assigned = old.epoch + 1, old.assigned
            self.target[member_id] = self.target.pop(old.member_id, set())
            if old.subscribed != hb.subscribed:
                self.epoch += 1
        self.members[member_id] = member
        return member

    def _remove(self, member_id: str) -> None:
        del self.members[member_id]
        self.target.pop(member_id, None)
        self.epoch += 1

    def _refresh_target(self, layout: Layout) -> None:
        units = {t: layout[t] for t in sorted(self.subscribed_tables()) if t in layout}
        wanted = {table: n for unit in units.values() for table, n in unit.items()}
        if wanted != self.counts:  # a table or partition appeared or went, or a table grew
            self.counts = dict(sorted(wanted.items()))
            self.epoch += 1
        if self.target_epoch != self.epoch:
            subscriptions = {mid: m.subscribed for mid, m in self.members.items()}
            buckets = {u: [TableBucket(t, b) for t, n in sorted(ts.items()) for b in range(n)]
                       for u, ts in units.items()}  # fmt: skip
            self.target = assign_units(subscriptions, buckets, self.target)
            self.target_epoch = self.epoch

    def _reconcile(self, member: Member, owned: frozenset[TableBucket]) -> HeartbeatAnswer:
        target = self.target.get(member.member_id, set())
        revoking = member.assigned - target
        if revoking and not (owned & revoking):
            member.assigned &= target  # acknowledged: the member stopped reading them
            revoking = set()
        if not revoking:
            taken = {tb for m in self.members.values() if m is not member for tb in m.assigned}
            adding = target - member.assigned - taken
            if adding:
                member.assigned |= adding
                member.previous_epoch, member.epoch = member.epoch, self.epoch
        return HeartbeatAnswer(member.member_id, member.epoch, frozenset(member.assigned - revoking))

    # ---------------------------------------------------------------- ZooKeeper form
    def encode(self) -> bytes:
        doc = {
            "version": 1,
            "epoch": self.epoch,
            "target_epoch": self.target_epoch,
            "counts": {str(t): n for t, n in sorted(self.counts.items())},
            "members": [_member_doc(m, self.target.get(m.member_id, set())) for _, m in sorted(self.members.items())],
        }
        return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, data: bytes, now_ms: int) -> GroupMembers:
        doc = json.loads(data)
        if doc.get("version") != 1:
            raise ValueError(f"unsupported group members version {doc.get('version')!r}")
        group = cls(int(doc["epoch"]), int(doc["target_epoch"]), {int(t): int(n) for t, n in doc["counts"].items()})
        for d in doc["members"]:
            m = Member(
                str(d["id"]), str(d["instance_id"]), str(d["host"]), int(d["session_timeout_ms"]),
                frozenset(int(t) for t in d["subscribed"]), int(d["epoch"]), int(d["previous_epoch"]),
                {TableBucket(int(t), int(b)) for t, b in d["assigned"]}, bool(d["leaving"]), now_ms,
            )  # fmt: skip
            group.members[m.member_id] = m
            group.target[m.member_id] = {TableBucket(int(t), int(b)) for t, b in d["target"]}
        return group


def _tbs(buckets: Set[TableBucket]) -> list[list[int]]:
    return sorted([tb.table_id, tb.bucket] for tb in buckets)


def _member_doc(m: Member, target: Set[TableBucket]) -> dict[str, object]:
    return {
        "id": m.member_id,
        "instance_id": m.instance_id,
        "host": m.client_host,
        "session_timeout_ms": m.session_timeout_ms,
        "subscribed": sorted(m.subscribed),
        "epoch": m.epoch,
        "previous_epoch": m.previous_epoch,
        "assigned": _tbs(m.assigned),
        "target": _tbs(target),
        "leaving": m.leaving,
    }
