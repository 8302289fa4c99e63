"""Consumer-group committed offsets on the coordinator leader: CommitOffsets, FetchOffsets, ListGroups.

Membership (heartbeats, describe, delete) is ``GroupCoordinator`` (coordinator/group_coordinator.py),
owned here; a commit naming a member is checked by it first (fenced commits).

Offsets live only in ZooKeeper (``ConsumerOffsetZNode``: ``<root>/consumers/<group>/offsets/<table_id>/<b>``,
JSON ``{"version":1,"offset":N,"committed_ms":T}``), never only in memory, so a new coordinator leader
answers exactly what the last one acknowledged, and no server death loses them. Invariants
(docs/consumer-groups.md):

- a commit is one ZooKeeper transaction, fenced by the coordinator epoch like every coordinator write: a
  deposed leader's commit fails with EpochFenced (answered NOT_COORDINATOR_LEADER, the client retries at the
  new leader) and changes nothing; all buckets of one request are written or none;
- a commit is validated first: the group name is a znode name, every bucket belongs to a table that exists,
  offsets are >= 0; otherwise nothing is written;
- reads go to ZooKeeper each time (FetchOffsets runs once per consumer start, not per record).

Who may call: the CoordinatorEventLoop task (the handlers are registered by ``TableProcessor``), so there is
one writer and a create-vs-set decision made on a read cannot race another commit of this leader.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from fluss_py.coordinator.events import CommitOffsets, Event, FetchOffsets, GroupSummaries, ListGroups
from fluss_py.coordinator.group_coordinator import GroupCoordinator, GroupLimits, validate_group_name
from fluss_py.coordinator.handlers import MetadataStore
from fluss_py.errors import InvalidRequestError, TableNotExistError, UnknownTableOrBucketError
from fluss_py.types import TableBucket
from fluss_py.zk.paths import ConsumerOffsetZNode
from fluss_py.zk.values import CreateOp, EpochFence, NoNodeError, Op, SetOp

log = logging.getLogger(__name__)


def validate_commit(group: str, offsets: dict[TableBucket, int], buckets_of: dict[int, int | None]) -> None:
    """Raise INVALID_REQUEST / TABLE_NOT_EXIST / UNKNOWN_TABLE_OR_BUCKET for a commit that must not be written
    (pure). A table this leader does not have is TABLE_NOT_EXIST, not retriable: the leader's view is the
    authority, and a member reading a partition that retention just dropped must not retry its commit."""
    validate_group_name(group)
    if not offsets:
        raise InvalidRequestError("a commit needs at least one bucket")
    for tb, offset in offsets.items():
        n = buckets_of.get(tb.table_id)
        if n is None:
            raise TableNotExistError(f"table id {tb.table_id} does not exist")
        if not 0 <= tb.bucket < n:
            raise UnknownTableOrBucketError(f"bucket {tb} does not exist (table has {n} buckets)")
        if offset < 0:
            raise InvalidRequestError(f"offset {offset} for {tb} is negative")


def _parent_created(ops: list[Op], path: str) -> bool:
    parent = path.rsplit("/", 1)[0]
    return any(isinstance(op, CreateOp) and op.path == parent for op in ops)


class GroupOffsets:
    """Handlers for the three group events (module docstring). Owns no state besides its store handles."""

    def __init__(
        self,
        store: MetadataStore,
        fence: Callable[[], EpochFence],
        num_buckets: Callable[[int], Awaitable[int | None]],
        limits: GroupLimits | None = None,
        layout: Callable[[int], Awaitable[dict[int, int] | None]] | None = None,
    ) -> None:
        """``layout``: see ``GroupCoordinator``; without it every table is a plain one (its own buckets)."""

        async def plain(table_id: int) -> dict[int, int] | None:
            n = await num_buckets(table_id)
            return None if n is None else {table_id: n}

        self.members = GroupCoordinator(store, fence, layout or plain, limits)
        self._store = store
        self._root = store.root
        self._fence = fence
        self._num_buckets = num_buckets
        self.handlers: dict[type[Event], Callable[[Any], Awaitable[Any]]] = {
            CommitOffsets: self.commit,
            FetchOffsets: self.fetch,
            ListGroups: self.list_groups,
            **self.members.handlers,
        }

    async def commit(self, event: CommitOffsets) -> None:
        buckets_of = {t: await self._num_buckets(t) for t in {tb.table_id for tb in event.offsets}}
        validate_commit(event.group, event.offsets, buckets_of)
        await self.members.check_commit(event.group, event.member_id, event.member_epoch, set(event.offsets))
        now = int(time.time() * 1000)
        ops: list[Op] = []
        group_path = ConsumerOffsetZNode.group_path(self._root, event.group)
        for parent in (ConsumerOffsetZNode.groups(self._root), group_path, f"{group_path}/offsets"):
            await self._missing(parent, ops)
        for table_id in sorted(buckets_of):
            await self._missing(f"{group_path}/offsets/{table_id}", ops)
        for tb, offset in sorted(event.offsets.items()):
            path = ConsumerOffsetZNode.path(self._root, event.group, tb.table_id, tb.bucket)
            data = ConsumerOffsetZNode.encode(offset, now)
            got = None if _parent_created(ops, path) else await self._store.get(path)
            ops.append(CreateOp(path, data) if got is None else SetOp(path, data, got[1].version))
        await self._store.commit(ops, fence=self._fence())
        log.debug("Group %s committed %d bucket offset(s)", event.group, len(event.offsets))

    async def _missing(self, path: str, ops: list[Op]) -> None:
        # A node whose parent this transaction creates cannot exist yet.
        if _parent_created(ops, path) or await self._store.get(path) is None:
            ops.append(CreateOp(path))

    async def fetch(self, event: FetchOffsets) -> list[tuple[TableBucket, int]]:
        """The group's committed offsets of existing tables (one table, or all); [] for an unknown group.
        The name is checked as for a commit: kazoo drops empty path components, so "g/" would read group
        "g" (whose DESCRIBE the authorizer did not check), and ".." would be a plain ValueError."""
        validate_group_name(event.group)
        base = f"{ConsumerOffsetZNode.group_path(self._root, event.group)}/offsets"
        table_ids = [event.table_id] if event.table_id else [int(t) for t in await self._children(base)]
        # a dropped table: its offsets stay in ZooKeeper but are not answered
        return await self._read_offsets(event.group, [t for t in table_ids if await self._num_buckets(t) is not None])

    async def read_committed(self, max_groups: int) -> dict[str, dict[TableBucket, int]]:
        """The committed offsets of the first ``max_groups`` groups by name, of every table (the console,
        which shows those of the tables in its view). ZooKeeper reads only, nothing of the leader's state,
        so it may run beside the event loop: a commit landing meanwhile shows at the next read."""
        names = sorted(await self._children(ConsumerOffsetZNode.groups(self._root)))[:max_groups]
        out = {}
        for name in names:
            base = f"{ConsumerOffsetZNode.group_path(self._root, name)}/offsets"
            out[name] = dict(await self._read_offsets(name, [int(t) for t in await self._children(base)]))
        return out

    async def _read_offsets(self, group: str, table_ids: list[int]) -> list[tuple[TableBucket, int]]:
        base = f"{ConsumerOffsetZNode.group_path(self._root, group)}/offsets"
        out: list[tuple[TableBucket, int]] = []
        for table_id in sorted(table_ids):
            for bucket in sorted(int(b) for b in await self._children(f"{base}/{table_id}")):
                got = await self._store.get(ConsumerOffsetZNode.path(self._root, group, table_id, bucket))
                if got is not None:
                    out.append((TableBucket(table_id, bucket), ConsumerOffsetZNode.decode(got[0])[0]))
        return out

    async def list_groups(self, _event: ListGroups) -> list[tuple[str, str, int]]:
        """(name, state, live member count) of every group."""
        names = sorted(await self._children(ConsumerOffsetZNode.groups(self._root)))
        return await self.members.summaries(GroupSummaries(names))

    async def _children(self, path: str) -> Sequence[str]:
        try:
            return await self._store.get_children(path)
        except NoNodeError:
            return []
