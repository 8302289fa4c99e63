"""Consumer-group membership on the coordinator leader: heartbeats, describe, delete, fenced-commit checks.

The decisions are ``GroupMembers`` (coordinator/group_members.py, pure); this module is the I/O around them:
it validates requests (group name, session timeout within ``group.min/max-session-timeout``, a joining
member's subscribed tables exist), resolves the subscribed tables into their layout on every heartbeat (a
partitioned table stands for the buckets of its live partitions: ``bucket_layout``), loads a group from
``GroupMembersZNode`` on its first use in this leadership (every member gets a fresh session then:
docs/consumer-groups.md, "Where the state lives"), and writes the group back, fenced by the coordinator
epoch, before the request that changed it is answered. A heartbeat that changes nothing writes nothing;
session and revocation deadlines are kept in memory only (monotonic clock). A member removed for either is
logged with the reason (a revocation not acknowledged within ``group.rebalance.timeout`` at WARNING: an
application stuck between two polls).

Who may call: the CoordinatorEventLoop task (handlers registered through ``GroupOffsets``), so one writer
owns the cache and the versions; a failed write drops the group from the cache (reloaded on next use).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fluss_py.coordinator.events import ConsumerHeartbeat, DeleteGroup, DescribeGroup, Event, GroupSummaries
from fluss_py.coordinator.group_members import (
    DEFAULT_REBALANCE_TIMEOUT_MS,
    JOIN_EPOCH,
    LEAVE_EPOCH,
    REVOCATION_OVERDUE,
    STATIC_LEAVE_EPOCH,
    GroupMembers,
    Heartbeat,
    HeartbeatAnswer,
    Member,
)
from fluss_py.coordinator.handlers import MetadataStore, znode_subtree
from fluss_py.coordinator.tables import TableRegistration
from fluss_py.errors import (
    GroupNotEmptyError,
    GroupNotExistError,
    InvalidRequestError,
    InvalidSessionTimeoutError,
    TableNotExistError,
    UnknownMemberIdError,
)
from fluss_py.partitioning import routing_unit
from fluss_py.types import TableBucket, split_partition, znode_name_problem
from fluss_py.zk.paths import ConsumerOffsetZNode, GroupMembersZNode
from fluss_py.zk.values import CreateOp, DeleteOp, EpochFence, Op, SetOp

log = logging.getLogger(__name__)

MAX_GROUP_NAME = 200
MAX_GROUP_ZNODE_BYTES = 512 * 1024  # a group's members znode: half of ZooKeeper's 1 MiB request limit
MAX_INSTANCE_ID = 255  # Kafka's group.instance.id allows 249; a members znode holds one per member
MAX_MEMBER_ID = 64  # a member id a client chose (KIP-1082): letters, digits, '-' and '_'
_MEMBER_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")


@dataclass(frozen=True)
class GroupLimits:
    """Server bounds of the group protocol (config ``group.*``), in milliseconds."""

    min_session_timeout_ms: int = 1000
    max_session_timeout_ms: int = 60_000
    heartbeat_interval_ms: int = 500
    max_size: int = 1000  # members per group (config group.max-size)
    rebalance_timeout_ms: int = DEFAULT_REBALANCE_TIMEOUT_MS  # to acknowledge a revocation (group.rebalance.timeout)

    @classmethod
    def from_config(cls, config: Any) -> GroupLimits:
        from fluss_py import config as cfg

        return cls(
            int(config[cfg.GROUP_MIN_SESSION_TIMEOUT] * 1000),
            int(config[cfg.GROUP_MAX_SESSION_TIMEOUT] * 1000),
            int(config[cfg.GROUP_HEARTBEAT_INTERVAL] * 1000),
            int(config[cfg.GROUP_MAX_SIZE]),
            int(config[cfg.GROUP_REBALANCE_TIMEOUT] * 1000),
        )


@dataclass(frozen=True)
class MemberView:
    member_id: str
    instance_id: str
    client_host: str
    member_epoch: int
    session_timeout_ms: int
    since_heartbeat_ms: int
    assigned: frozenset[TableBucket]
    target: frozenset[TableBucket]
    leaving: bool
    subscribed: frozenset[int] = frozenset()


@dataclass(frozen=True)
class GroupView:
    state: str
    epoch: int
    members: list[MemberView]


def validate_group_name(group: str) -> None:
    """A group name is a znode name (``<root>/consumers/<group>``): 1-MAX_GROUP_NAME characters, none that
    ZooKeeper refuses in a path, no '/', not "." or ".." (``types.znode_name_problem``); nor anything
    unprintable. INVALID_REQUEST otherwise, before any ZooKeeper call (docs/consumer-groups.md, "Names")."""
    problem = _name_problem(group, MAX_GROUP_NAME)
    if problem is not None:
        raise InvalidRequestError(f"group name {group[:64]!r}: {problem}")


def validate_instance_id(instance_id: str) -> None:
    """A static member's instance id (stored in the group's members znode): the group-name rule, at most
    MAX_INSTANCE_ID characters. INVALID_REQUEST otherwise."""
    problem = _name_problem(instance_id, MAX_INSTANCE_ID)
    if problem is not None:
        raise InvalidRequestError(f"instance id {instance_id[:64]!r}: {problem}")


def validate_member_id(member_id: str) -> None:
    """A member id a joining client chose: 1-MAX_MEMBER_ID letters, digits, '-' or '_' (it is stored in the
    members znode and printed in logs). INVALID_REQUEST otherwise."""
    if not 1 <= len(member_id) <= MAX_MEMBER_ID or not set(member_id) <= _MEMBER_ID_CHARS:
        raise InvalidRequestError(
            f"member id {member_id[:64]!r}: must be 1-{MAX_MEMBER_ID} letters, digits, '-' or '_'"
        )


def _name_problem(name: str, max_len: int) -> str | None:
    if not isinstance(name, str) or not 1 <= len(name) <= max_len:
        return f"must be 1-{max_len} characters"
    problem = znode_name_problem(name)
    if problem is None and not name.isprintable():
        problem = "holds an unprintable character"
    if problem is None:
        return None
    return f"{problem}; allowed: 1-{max_len} printable characters ZooKeeper can store, no '/'"


def bucket_layout(tables: Mapping[int, TableRegistration], table_id: int) -> dict[int, int] | None:
    """What a subscription to ``table_id`` stands for (pure): ``{table_id: num_buckets}`` for a plain table or
    a partition, ``{partition table id: num_buckets}`` over the live partitions (``<table>$<slot>`` in the
    same database) for the logical table of a partitioned table, None if the table does not exist."""
    info = tables.get(table_id)
    if info is None:
        return None
    if routing_unit(info.path.table, info.properties) is None:
        return {table_id: info.num_buckets}
    return {
        t.table_id: t.num_buckets
        for t in tables.values()
        if t.path.database == info.path.database and split_partition(t.path.table)[0] == info.path.table
        and t.table_id != table_id
    }  # fmt: skip


def _member_view(m: Member, target: set[TableBucket], now_ms: int) -> MemberView:
    return MemberView(
        m.member_id,
        m.instance_id,
        m.client_host,
        m.epoch,
        m.session_timeout_ms,
        now_ms - m.last_heartbeat_ms,
        frozenset(m.assigned),
        frozenset(target),
        m.leaving,
        m.subscribed,
    )


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class GroupCoordinator:
    """Owns the leader's cache of loaded groups and their znode versions (module docstring)."""

    def __init__(
        self,
        store: MetadataStore,
        fence: Callable[[], EpochFence],
        layout: Callable[[int], Awaitable[dict[int, int] | None]],
        limits: GroupLimits | None = None,
        clock: Callable[[], int] = _now_ms,
    ) -> None:
        """``layout(table_id)``: the tables whose buckets a subscription to ``table_id`` stands for, with
        their bucket counts (``{table_id: n}`` for a plain table, the live partitions for a partitioned
        one), None if the table does not exist."""
        self._store = store
        self._root = store.root
        self._fence = fence
        self._layout = layout
        self.limits = limits or GroupLimits()
        self._clock = clock
        self._groups: dict[str, GroupMembers] = {}
        self._versions: dict[str, int] = {}  # members znode version; -1: not in ZooKeeper yet
        self.handlers: dict[type[Event], Callable[[Any], Awaitable[Any]]] = {
            ConsumerHeartbeat: self.heartbeat,
            DescribeGroup: self.describe,
            DeleteGroup: self.delete,
            GroupSummaries: self.summaries,
        }

    # ---------------------------------------------------------------- handlers
    async def heartbeat(self, event: ConsumerHeartbeat) -> HeartbeatAnswer:
        validate_group_name(event.group)
        if event.member_epoch < STATIC_LEAVE_EPOCH:
            raise InvalidRequestError(f"member epoch {event.member_epoch} is not valid")
        if event.member_epoch not in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            lo, hi = self.limits.min_session_timeout_ms, self.limits.max_session_timeout_ms
            if not lo <= event.session_timeout_ms <= hi:
                raise InvalidSessionTimeoutError(
                    f"session timeout {event.session_timeout_ms} ms is outside [{lo}, {hi}] ms"
                )
            if not event.subscribed:
                raise InvalidRequestError("a member must subscribe to at least one table")
        if event.member_epoch == JOIN_EPOCH:  # later, a dropped table just has no buckets to assign
            for table_id in sorted(event.subscribed):
                if await self._layout(table_id) is None:
                    raise TableNotExistError(f"table id {table_id} does not exist")
        if event.member_epoch == JOIN_EPOCH and event.instance_id:
            validate_instance_id(event.instance_id)
        if event.member_epoch == JOIN_EPOCH and event.member_id:
            validate_member_id(event.member_id)
        group = await self._load(event.group, create=True)
        assert group is not None
        layout = await self._layouts(group.subscribed_tables() | event.subscribed)
        hb = Heartbeat(
            event.member_id, event.member_epoch, event.instance_id, event.client_host, event.session_timeout_ms,
            event.subscribed, event.owned, self.limits.rebalance_timeout_ms,
        )  # fmt: skip
        async with self._saving(event.group, group):
            if event.member_epoch == JOIN_EPOCH:
                self._check_room(event.group, group, hb)
            answer = group.heartbeat(hb, self._clock(), layout, lambda: uuid.uuid4().hex)
        if event.member_epoch == JOIN_EPOCH:
            log.info("Group %s: member %s joined (epoch %d)", event.group, answer.member_id, answer.member_epoch)
        return answer

    def _check_room(self, name: str, group: GroupMembers, hb: Heartbeat) -> None:
        """Refuse a join that would make the group larger than ``group.max-size`` (expired members first
        leave; a member joining again, or a static member replacing its old incarnation, always has room)."""
        group.expire(self._clock())
        group.check_join(hb)
        if hb.member_id in group.members or group.holder(hb.instance_id, hb.member_id) is not None:
            return
        if len(group.members) >= self.limits.max_size:
            raise InvalidRequestError(
                f"group {name} is full: {len(group.members)} member(s), group.max-size is {self.limits.max_size}"
            )

    async def check_commit(self, group_name: str, member_id: str, member_epoch: int, buckets: set[TableBucket]) -> None:
        """Raise unless the commit may be written (docs: fenced commits). Changes nothing but expiries."""
        group = await self._load(group_name, create=False)
        if not member_id:
            if group is not None:
                async with self._saving(group_name, group):
                    group.expire(self._clock())
                if group.members:
                    raise GroupNotEmptyError(
                        f"group {group_name} has {len(group.members)} live member(s): commit as a member"
                    )
            return
        if group is None:
            raise UnknownMemberIdError(f"group {group_name} has no members")
        async with self._saving(group_name, group):  # a member past its session or rebalance timeout goes now
            group.expire(self._clock())
        group.check_commit(member_id, member_epoch, buckets, self._clock())

    async def describe(self, event: DescribeGroup) -> GroupView:
        validate_group_name(event.group)
        if await self._store.get(ConsumerOffsetZNode.group_path(self._root, event.group)) is None:
            raise GroupNotExistError(f"group {event.group} does not exist")
        group = await self._load(event.group, create=True)
        assert group is not None
        now = self._clock()
        async with self._saving(event.group, group):
            group.expire(now)
        members = [_member_view(m, group.target.get(m.member_id, set()), now) for _, m in sorted(group.members.items())]
        return GroupView(group.state, group.epoch, members)

    async def delete(self, event: DeleteGroup) -> None:
        validate_group_name(event.group)
        path = ConsumerOffsetZNode.group_path(self._root, event.group)
        if await self._store.get(path) is None:
            raise GroupNotExistError(f"group {event.group} does not exist")
        group = await self._load(event.group, create=False)
        if group is not None:
            async with self._saving(event.group, group):
                group.expire(self._clock())
            if group.members:
                raise GroupNotEmptyError(f"group {event.group} has {len(group.members)} live member(s)")
        ops: list[Op] = [DeleteOp(p) for p in reversed(await znode_subtree(self._store, path))]
        await self._store.commit(ops, fence=self._fence())
        self._groups.pop(event.group, None)
        self._versions.pop(event.group, None)
        log.info("Deleted group %s (%d znode(s))", event.group, len(ops))

    async def summaries(self, event: GroupSummaries) -> list[tuple[str, str, int]]:
        out = []
        for name in event.groups:
            group = await self._load(name, create=False)
            if group is None:
                out.append((name, "EMPTY", 0))
                continue
            async with self._saving(name, group):
                group.expire(self._clock())
            out.append((name, group.state, len(group.members)))
        return out

    @property
    def loaded(self) -> Mapping[str, GroupMembers]:
        """The groups in this leader's memory (the console reads them; not a copy: read, never change)."""
        return self._groups

    # ---------------------------------------------------------------- state I/O
    async def _layouts(self, tables: Iterable[int]) -> dict[int, dict[int, int]]:
        out = {}
        for table_id in sorted(tables):
            layout = await self._layout(table_id)
            if layout is not None:
                out[table_id] = layout
        return out

    async def _load(self, name: str, *, create: bool) -> GroupMembers | None:
        if name in self._groups:
            return self._groups[name]
        got = await self._store.get(GroupMembersZNode.path(self._root, name))
        if got is None:
            if not create:
                return None
            group, version = GroupMembers(), -1
        else:
            group, version = GroupMembers.decode(got[0], self._clock()), got[1].version
            log.info("Group %s loaded: epoch %d, %d member(s)", name, group.epoch, len(group.members))
        self._groups[name], self._versions[name] = group, version
        return group

    def _saving(self, name: str, group: GroupMembers) -> _Saving:
        return _Saving(self, name, group)

    async def _save(self, name: str, group: GroupMembers) -> None:
        path = GroupMembersZNode.path(self._root, name)
        version = self._versions.get(name, -1)
        data = group.encode()
        if len(data) > MAX_GROUP_ZNODE_BYTES:  # ZooKeeper would drop the connection (1 MiB jute.maxbuffer)
            self._groups.pop(name, None)  # the change is not written: reload what ZooKeeper holds
            self._versions.pop(name, None)
            raise InvalidRequestError(
                f"group {name}'s state would take {len(data)} bytes, more than {MAX_GROUP_ZNODE_BYTES}: "
                "fewer members or subscribed tables"
            )
        ops: list[Op] = []
        if version < 0:
            group_path = ConsumerOffsetZNode.group_path(self._root, name)
            for parent in (ConsumerOffsetZNode.groups(self._root), group_path):
                if await self._store.get(parent) is None:
                    ops.append(CreateOp(parent))
            ops.append(CreateOp(path, data))
        else:
            ops.append(SetOp(path, data, version))
        try:
            await self._store.commit(ops, fence=self._fence())
        except BaseException:
            self._groups.pop(name, None)  # memory may now differ from ZooKeeper: reload on next use
            self._versions.pop(name, None)
            raise
        self._versions[name] = version + 1 if version >= 0 else 0


class _Saving:
    """``async with``: write the group back if the block changed it, also when the block raised."""

    def __init__(self, owner: GroupCoordinator, name: str, group: GroupMembers) -> None:
        self._owner, self._name, self._group = owner, name, group
        self._before = group.encode()

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        for member_id, why in self._group.drain_removed():
            level = logging.WARNING if why == REVOCATION_OVERDUE else logging.INFO
            log.log(level, "Group %s: member %s removed: %s", self._name, member_id, why)
        if self._group.encode() != self._before:
            await self._owner._save(self._name, self._group)
