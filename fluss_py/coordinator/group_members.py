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

A member leaves the group by a leave heartbeat, by its session expiring, or by being **fenced** for not
acknowledging a revocation within its rebalance timeout (``Heartbeat.rebalance_timeout_ms``, the server's
``group.rebalance.timeout``): all three free its buckets at once. A static member's instance id is held by
one member at a time (KIP-848): a join naming an instance id that an active member holds is refused with
UNRELEASED_INSTANCE_ID; it is released when that member leaves (``-2`` keeps its buckets for the next
incarnation, ``-1`` frees them) or is removed.

A joining member may name its own member id (KIP-1082: the client makes one per consumer), so a join that is
sent again (its answer was lost) or a member that joins again after it was fenced is the same member, never
a second one: its record is taken over, not duplicated.

Every method validates first and raises before changing anything (UNKNOWN_MEMBER_ID, FENCED_MEMBER_EPOCH,
UNRELEASED_INSTANCE_ID, INVALID_SESSION_TIMEOUT, BUCKET_NOT_OWNED, INVALID_REQUEST). ``encode``/``decode``
give the ZooKeeper form (``GroupMembersZNode``); the time of each member's last heartbeat and the deadline
of its pending revocation are kept only in memory (``decode`` sets the first to the load time and clears the
second: a new coordinator leader gives every member a fresh session and a fresh rebalance timeout).

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
    UnreleasedInstanceIdError,
)
from fluss_py.types import TableBucket

JOIN_EPOCH = 0
LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2
DEFAULT_REBALANCE_TIMEOUT_MS = 60_000  # config group.rebalance.timeout
REVOCATION_OVERDUE = "it did not acknowledge the revocation of its buckets within the rebalance timeout"
MAX_GONE = 256  # member ids remembered with the reason of their removal (memory only, for error messages)

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
    revoke_deadline_ms: int | None = None  # memory only: a revocation is pending, to be acknowledged by then

    def expired(self, now_ms: int) -> bool:
        return now_ms > self.last_heartbeat_ms + self.session_timeout_ms

    def removal(self, now_ms: int) -> str | None:
        """Why the member must be removed now (its session ran out, or it did not acknowledge a revocation
        in time), None while it may stay."""
        if self.expired(now_ms):
            return f"its session of {self.session_timeout_ms} ms expired (no heartbeat)"
        if self.revoke_deadline_ms is not None and now_ms > self.revoke_deadline_ms:
            return REVOCATION_OVERDUE
        return None


@dataclass(frozen=True)
class Heartbeat:
    member_id: str
    member_epoch: int
    instance_id: str
    client_host: str
    session_timeout_ms: int
    subscribed: frozenset[int]
    owned: frozenset[TableBucket]
    rebalance_timeout_ms: int = DEFAULT_REBALANCE_TIMEOUT_MS  # to acknowledge a revocation, else fenced


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
    # memory only: why recently removed members were removed (for their next request's error message), and
    # the removals the caller has not logged yet (``drain_removed``)
    gone: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    removed: list[tuple[str, str]] = field(default_factory=list, compare=False, repr=False)

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
        """Remove the members whose session ran out or whose revocation is overdue (``Member.removal``);
        their buckets become free. Returns their ids."""
        gone = [(mid, why) for mid, m in self.members.items() if (why := m.removal(now_ms)) is not None]
        for mid, why in gone:
            self._remove(mid, why)
        return [mid for mid, _ in gone]

    def drain_removed(self) -> list[tuple[str, str]]:
        """The (member id, reason) of the members removed since the last call, for the caller to log."""
        out, self.removed = self.removed, []
        return out

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
                self._remove(hb.member_id, "it left the group")
            return HeartbeatAnswer(hb.member_id, LEAVE_EPOCH, frozenset())
        if hb.member_epoch == STATIC_LEAVE_EPOCH:
            if hb.member_id in self.members:
                self.members[hb.member_id].leaving = True
            return HeartbeatAnswer(hb.member_id, STATIC_LEAVE_EPOCH, frozenset())
        if hb.member_epoch == JOIN_EPOCH:
            member = self._join(hb, hb.member_id or new_member_id())
        else:
            member = self.members.get(hb.member_id)
            if member is None:  # removed just now: the heartbeat came too late
                raise UnknownMemberIdError(self._unknown(hb.member_id))
            if member.subscribed != hb.subscribed:
                member.subscribed = hb.subscribed
                self.epoch += 1
            member.session_timeout_ms = hb.session_timeout_ms
        member.last_heartbeat_ms = now_ms
        member.leaving = False
        self._refresh_target(layout)
        return self._reconcile(member, hb.owned, now_ms + hb.rebalance_timeout_ms)

    def check_commit(self, member_id: str, member_epoch: int, buckets: Set[TableBucket], now_ms: int) -> None:
        """Raise unless ``member_id`` at ``member_epoch`` may commit ``buckets`` (owns them all now). A bucket
        being revoked is still owned (the member commits what it processed before it acknowledges) until
        the member's rebalance timeout; past it the member is refused as removed."""
        self._check_member(member_id, member_epoch)
        member = self.members[member_id]
        why = member.removal(now_ms)
        if why is not None:
            raise UnknownMemberIdError(f"member {member_id} is removed from the group: {why}")
        foreign = sorted(buckets - member.assigned, key=lambda tb: (tb.table_id, tb.bucket))
        if foreign:
            names = ", ".join(map(str, foreign))
            raise BucketNotOwnedError(f"member {member_id} does not own bucket(s) {names}")

    # ---------------------------------------------------------------- internals
    def _unknown(self, member_id: str) -> str:
        why = self.gone.get(member_id)
        if why is not None:
            return f"member {member_id} was removed from the group: {why}"
        return f"no member {member_id!r} in the group (expired, left, fenced or never joined)"

    def _check_member(self, member_id: str, member_epoch: int | None) -> None:
        member = self.members.get(member_id)
        if member is None:
            raise UnknownMemberIdError(self._unknown(member_id))
        if member_epoch is not None and member_epoch not in (member.epoch, member.previous_epoch):
            raise FencedMemberEpochError(
                f"member {member_id} is at epoch {member.epoch}, the request carries epoch {member_epoch}"
            )

    def holder(self, instance_id: str, member_id: str) -> Member | None:
        """The member other than ``member_id`` that holds static ``instance_id`` (None for "")."""
        if not instance_id:
            return None
        return next((m for m in self.members.values() if m.instance_id == instance_id and m.member_id != member_id),
                    None)  # fmt: skip

    def check_join(self, hb: Heartbeat) -> None:
        """Raise UNRELEASED_INSTANCE_ID when ``hb`` (a join) names an instance id an active member holds."""
        holder = self.holder(hb.instance_id, hb.member_id)
        if holder is not None and not holder.leaving:
            raise UnreleasedInstanceIdError(
                f"instance id {hb.instance_id!r} is held by member {holder.member_id}, which has neither left "
                f"nor expired: is another consumer with this instance id running? It is released when that "
                f"member leaves or its session of {holder.session_timeout_ms} ms runs out"
            )

    def _join(self, hb: Heartbeat, member_id: str) -> Member:
        """A new member, or the takeover of the member it replaces: the same member id joining again (its
        join was sent twice, or it was fenced), or the static member of the same instance id that left
        with -2. A takeover keeps the old record's buckets and target: no rebalance."""
        self.check_join(hb)
        same, holder = self.members.get(member_id), self.holder(hb.instance_id, member_id)
        if same is not None and holder is not None:  # both: the old incarnation's record wins, ours goes
            self._remove(member_id, "it joined again as the member of another instance id")
        old = holder or same
        member = Member(member_id, hb.instance_id, hb.client_host, hb.session_timeout_ms, hb.subscribed)
        if old is None:
            self.epoch += 1
            member.epoch = self.epoch  # never 0: a member's regular heartbeats must not read as joins
        else:
            del self.members[old.member_id]
            member.epoch, member.assigned = old.epoch + 1, old.assigned
            self.target[member_id] = self.target.pop(old.member_id, set())
            if old.subscribed != hb.subscribed:
                self.epoch += 1
        self.members[member_id] = member
        self.gone.pop(member_id, None)
        return member

    def _remove(self, member_id: str, why: str) -> None:
        del self.members[member_id]
        self.target.pop(member_id, None)
        self.epoch += 1
        self.gone[member_id] = why
        self.removed.append((member_id, why))
        while len(self.gone) > MAX_GONE:
            del self.gone[next(iter(self.gone))]

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

    def _reconcile(self, member: Member, owned: frozenset[TableBucket], deadline_ms: int) -> HeartbeatAnswer:
        """``deadline_ms``: when a revocation that starts now must be acknowledged by."""
        target = self.target.get(member.member_id, set())
        revoking = member.assigned - target
        if revoking and not (owned & revoking):
            member.assigned &= target  # acknowledged: the member stopped reading them
            revoking = set()
        if revoking:
            if member.revoke_deadline_ms is None:
                member.revoke_deadline_ms = deadline_ms
        else:
            member.revoke_deadline_ms = None
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
