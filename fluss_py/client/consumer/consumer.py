"""``Consumer``: reads assigned buckets from their leaders, up to the high watermark.

    async with Consumer("127.0.0.1:9123") as consumer:
        await consumer.assign("db.events")              # all buckets (or assign(path, [0, 2]))
        consumer.seek_to_beginning()                    # or seek(tb, offset) / seek_to_end / seek_to_timestamp
        for record in await consumer.poll(timeout=1.0):
            ...                                         # record.bucket, .offset, .timestamp_ms, .key, .value

Positions are the next offset to hand out per bucket; ``poll`` advances them.

Consumer groups: with ``group="G"``, ``assign`` starts every bucket that G has a committed offset for at
that offset (the others by ``auto_offset_reset``), and ``commit()`` durably records the current positions
for G on the coordinator (ZooKeeper). Call ``commit()`` after processing what ``poll`` returned: a crash
before the commit re-delivers those records, none is ever skipped (at-least-once).

Shared work (docs/consumer-groups.md): with ``subscribe=[tables]`` (and ``group``) the consumer joins the
group and reads only the buckets the coordinator assigns it; ``poll`` applies assignment changes between
polls: for revoked buckets it calls ``on_revoked(buckets)``, commits their positions (the records ``poll``
returned before count as processed) and stops reading them; for new ones it seeks to the committed offsets
and calls ``on_assigned(buckets)``. Callbacks may be plain functions or coroutines. ``commit()`` then
carries the member id and epoch and is refused once the member was fenced (``UNKNOWN_MEMBER_ID`` /
``FENCED_MEMBER_EPOCH``: the consumer drops its buckets and joins again). ``instance_id`` makes the member
static: a restart within its session after ``close`` keeps its buckets; while another consumer with the
same instance id is a member (it has neither closed nor expired), ``poll`` raises UNRELEASED_INSTANCE_ID
(fatal: the consumer does not join). An application that does not call ``poll`` for
``options.max_poll_interval`` (300 s) leaves the group: its buckets go to the others, the next ``poll``
drops them and joins again (Kafka's max.poll.interval.ms). ``assign`` is not allowed with ``subscribe``.
A partitioned table may be subscribed (not assigned): the coordinator hands out the buckets of its
partitions as they are created and revokes those of partitions retention drops. A member's commit that
names a table dropped meanwhile (TABLE_NOT_EXIST) is split per table: the other tables' offsets are
committed, the dropped table's skipped (there is nothing left to resume).

    async with Consumer(servers, group="g", subscribe=["db.events"], on_assigned=print) as consumer:
        while True:
            records = await consumer.poll(1.0)
            ...                                         # process
            await consumer.commit()

Owned by one event loop; for threads use ``fluss_py.client.sync.SyncConsumer``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Callable, Iterable
from typing import Any

from fluss_py.client.consumer.fetcher import ConsumerRecord, Fetcher
from fluss_py.client.consumer.membership import GroupMembership
from fluss_py.client.consumer.positions import Positions, ResetTo
from fluss_py.client.gateway import CoordinatorGateway
from fluss_py.client.groups import commit_offsets, fetch_offsets, raise_refused, validate_group
from fluss_py.client.metadata import ClusterMetadata, refuse_partitioned
from fluss_py.client.options import ConsumerOptions
from fluss_py.client.transport import GrpcTransport, Transport
from fluss_py.errors import ApiError, ErrorCode, FlussError, InvalidRequestError, UnknownMemberIdError
from fluss_py.security.identity import PLAINTEXT, PeerIdentity
from fluss_py.types import TableBucket, TablePath

log = logging.getLogger(__name__)

Callback = Callable[[set[TableBucket]], Any]


class ConsumerClosedError(FlussError):
    """``poll`` or ``commit`` on a closed consumer, or a ``poll`` still waiting when ``close`` was called."""


async def _call(callback: Callback | None, buckets: set[TableBucket]) -> None:
    if callback is not None:
        result = callback(set(buckets))
        if inspect.isawaitable(result):
            await result


class Consumer:
    """Bucket-assigned reader (see module docstring). Create inside a running event loop."""

    def __init__(
        self,
        bootstrap_servers: str,
        options: ConsumerOptions | None = None,
        *,
        transport: Transport | None = None,
        metadata: ClusterMetadata | None = None,
        security: PeerIdentity | None = None,
        group: str | None = None,
        subscribe: Iterable[TablePath | str] | None = None,
        on_assigned: Callback | None = None,
        on_revoked: Callback | None = None,
        instance_id: str = "",
        session_timeout: float = 10.0,
    ) -> None:
        self.options = opts = options or ConsumerOptions()
        self.group = validate_group(group) if group is not None else None
        self._owns_transport = transport is None
        self._transport = transport or GrpcTransport(  # TLS + credentials (docs/security.md)
            security or PLAINTEXT, keepalive=opts.keepalive, fetch_stream=opts.fetch_stream
        )
        self._owns_metadata = metadata is None
        self.metadata = metadata or ClusterMetadata(
            bootstrap_servers, self._transport, request_timeout=opts.request_timeout, retry=opts.retry
        )
        self._positions = Positions(opts.auto_offset_reset)
        self._fetcher = Fetcher(self._positions, self.metadata, self._transport, opts)
        self._gateway = CoordinatorGateway(
            self.metadata, self._transport, request_timeout=opts.request_timeout, retry=opts.retry
        )
        self._committed: dict[TableBucket, int] = {}  # what this consumer last committed or fetched
        self._fetcher.start()
        self._closed = False
        self._on_assigned, self._on_revoked = on_assigned, on_revoked
        self.membership: GroupMembership | None = None
        if subscribe is not None:
            if self.group is None:
                raise InvalidRequestError("subscribe= needs group=")
            paths = [t if isinstance(t, TablePath) else TablePath.parse(t) for t in subscribe]
            if not paths:
                raise InvalidRequestError("subscribe= needs at least one table")
            self.membership = GroupMembership(
                self._gateway, self.group, lambda: self._table_ids(paths),
                session_timeout_ms=int(session_timeout * 1000), instance_id=instance_id,
                max_poll_interval=opts.max_poll_interval, wakeup=self._fetcher.data.set,
            )  # fmt: skip
            self.membership.start()

    async def _table_ids(self, paths: list[TablePath]) -> set[int]:
        # a partitioned table is subscribed whole: the coordinator assigns the buckets of its partitions
        return {(await self.metadata.wait_for_table(p, self.options.request_timeout)).table_id for p in paths}

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---------------------------------------------------------------- assignment
    async def assign(
        self, table: TablePath | str | Iterable[TableBucket], buckets: Iterable[int] | None = None
    ) -> None:
        """Read ``table`` (all buckets, or the given bucket numbers), or an explicit list of TableBuckets.

        With a group, buckets newly assigned start at the group's committed offsets where it has one.
        """
        if self.membership is not None:
            raise InvalidRequestError("assign() is not allowed on a consumer that subscribed to a group")
        if isinstance(table, TablePath | str):
            path = table if isinstance(table, TablePath) else TablePath.parse(table)
            info = refuse_partitioned(await self.metadata.wait_for_table(path, self.options.request_timeout))
            numbers = range(info.num_buckets) if buckets is None else buckets
            assigned = [TableBucket(info.table_id, b) for b in numbers]
        else:
            assigned = list(table)
        await self._set_assignment(assigned)

    async def _set_assignment(self, assigned: list[TableBucket]) -> None:
        new = [tb for tb in assigned if tb not in self._positions.buckets]
        self._positions.assign(assigned)
        for tb in list(self._committed):
            if tb not in self._positions.buckets:
                del self._committed[tb]
        if self.group is not None and new:
            committed: dict[TableBucket, int] = {}
            for table_id in sorted({tb.table_id for tb in new}):
                committed.update(await fetch_offsets(self._gateway, self.group, table_id))
            for tb in new:
                if tb in committed:
                    self._committed[tb] = committed[tb]
                    self._positions.seek(tb, committed[tb])
        self._fetcher.wakeup.set()

    def assignment(self) -> set[TableBucket]:
        return set(self._positions.buckets)

    def _targets(self, buckets: Iterable[TableBucket] | None) -> list[TableBucket]:
        return list(self._positions.buckets) if buckets is None else list(buckets)

    # ---------------------------------------------------------------- positions
    def seek(self, bucket: TableBucket, offset: int) -> None:
        self._positions.seek(bucket, offset)
        self._fetcher.wakeup.set()

    def seek_to_beginning(self, buckets: Iterable[TableBucket] | None = None) -> None:
        for tb in self._targets(buckets):
            self._positions.request_reset(tb, ResetTo.EARLIEST)
        self._fetcher.wakeup.set()

    def seek_to_end(self, buckets: Iterable[TableBucket] | None = None) -> None:
        """Start after the last record visible now (the high watermark)."""
        for tb in self._targets(buckets):
            self._positions.request_reset(tb, ResetTo.LATEST)
        self._fetcher.wakeup.set()

    def seek_to_timestamp(self, timestamp_ms: int, buckets: Iterable[TableBucket] | None = None) -> None:
        """Start at the first record with timestamp >= ``timestamp_ms`` (the end if there is none)."""
        for tb in self._targets(buckets):
            self._positions.request_reset(tb, ResetTo.TIMESTAMP, timestamp_ms)
        self._fetcher.wakeup.set()

    async def position(self, bucket: TableBucket, timeout: float | None = None) -> int:
        """The next offset ``poll`` returns for ``bucket``, waiting for a pending seek to resolve."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (timeout if timeout is not None else self.options.request_timeout)
        while True:
            offset = self._positions.position(bucket)
            if offset is not None:
                return offset
            if loop.time() >= deadline:
                raise TimeoutError(f"position of {bucket} not resolved")
            self._fetcher.take(0)  # surfaces errors
            await asyncio.sleep(0.005)

    def high_watermark(self, bucket: TableBucket) -> int:
        """The high watermark seen in the last fetch of ``bucket`` (-1 before any)."""
        return self._positions.buckets[bucket].high_watermark

    # ---------------------------------------------------------------- consumer group
    async def commit(self, offsets: dict[TableBucket, int] | None = None) -> dict[TableBucket, int]:
        """Commit ``offsets`` (default: the current position of every positioned bucket that moved since
        the last commit) for the group; returns what was committed. Call after processing."""
        if self.group is None:
            raise InvalidRequestError("commit() needs a consumer created with group=...")
        self._check_open()
        if offsets is None:
            offsets = {
                tb: offset
                for tb in self._positions.positioned()
                if (offset := self._positions.position(tb)) is not None and self._committed.get(tb) != offset
            }
        if offsets:
            m = self.membership
            if m is not None and (not m.member_id or m.lost):  # never an offset-only commit from a member
                raise UnknownMemberIdError(f"not a member of group {self.group} right now (joining or fenced)")
            member = (m.member_id, m.member_epoch) if m is not None else ("", 0)
            try:
                refused = await commit_offsets(self._gateway, self.group, offsets, *member)
            except FlussError as e:
                if m is not None and e.code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
                    m.lost = True  # fenced: the next poll drops every bucket, the member joins again
                if m is None or e.code != ErrorCode.TABLE_NOT_EXIST:
                    raise
                offsets, refused = await self._commit_per_table(offsets, *member)
            written = {tb: o for tb, o in offsets.items() if tb.table_id not in refused}
            self._committed.update(written)
            raise_refused(self.group, refused)  # the principal may not READ those tables: not written
            offsets = written
        return dict(offsets)

    async def _commit_per_table(
        self, offsets: dict[TableBucket, int], member_id: str, epoch: int
    ) -> tuple[dict[TableBucket, int], dict[int, ApiError]]:
        """A member's commit named a dropped table (a partition retention dropped before the revocation
        reached this member): commit each table on its own; a dropped one's positions are kept as if
        committed (not sent again: the bucket is revoked on a next heartbeat). Returns what was sent for
        the live tables and the tables refused on their own (``commit_offsets``)."""
        assert self.group is not None
        written: dict[TableBucket, int] = {}
        refused: dict[int, ApiError] = {}
        for table_id in sorted({tb.table_id for tb in offsets}):
            part = {tb: o for tb, o in offsets.items() if tb.table_id == table_id}
            try:
                refused.update(await commit_offsets(self._gateway, self.group, part, member_id, epoch))
            except FlussError as e:
                if e.code != ErrorCode.TABLE_NOT_EXIST:
                    raise
                log.info("Group %s: table id %d no longer exists, its offsets are not committed", self.group, table_id)
                self._committed.update(part)
                continue
            written.update(part)
        return written, refused

    async def committed(self, table_id: int = 0) -> dict[TableBucket, int]:
        """The group's committed offsets as the coordinator has them (one table, or all with 0)."""
        if self.group is None:
            raise InvalidRequestError("committed() needs a consumer created with group=...")
        return await fetch_offsets(self._gateway, self.group, table_id)

    # ---------------------------------------------------------------- reading
    async def poll(self, timeout: float = 1.0, max_records: int | None = None) -> list[ConsumerRecord]:
        """Records from the assigned buckets (in offset order per bucket), waiting up to ``timeout``."""
        self._check_open()
        if self.membership is None:
            return await self._poll(timeout, max_records)
        self.membership.polling(True)  # the poll timer stops while the application is in here
        try:
            return await self._poll(timeout, max_records)
        finally:
            self.membership.polling(False)

    async def _poll(self, timeout: float, max_records: int | None) -> list[ConsumerRecord]:
        limit = max_records or self.options.max_poll_records
        if self.membership is not None:
            await self._reconcile()
        unpositioned = self._positions.unpositioned()
        if unpositioned:
            names = ", ".join(map(str, unpositioned))
            raise InvalidRequestError(f"no position for bucket(s) {names}: seek first (auto_offset_reset is none)")
        records = self._fetcher.take(limit)
        if records or timeout <= 0:
            return records
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not records:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(remaining):
                    await self._fetcher.data.wait()
            self._check_open()  # ``close`` sets ``data`` to end this wait
            if self.membership is not None:
                await self._reconcile()
            records = self._fetcher.take(limit)
        return records

    async def _reconcile(self) -> None:
        """Apply the group's assignment changes (module docstring): revoke (callback, commit), then add."""
        m = self.membership
        assert m is not None
        m.check()
        revoked, added, lost = m.pending()
        if not (revoked or added or lost):
            return
        if revoked:
            await _call(self._on_revoked, revoked)
            if not lost:
                moved = {tb: o for tb in revoked if (o := self._positions.position(tb)) is not None}
                moved = {tb: o for tb, o in moved.items() if self._committed.get(tb) != o}
                if moved:
                    try:
                        await self.commit(moved)
                    except FlussError as e:
                        log.warning("Group %s: commit of revoked buckets refused: %s", self.group, e)
        keep = [tb for tb in self._positions.buckets if tb not in revoked]
        await self._set_assignment(keep + sorted(added, key=lambda tb: (tb.table_id, tb.bucket)))
        m.apply(revoked, added, lost)
        if added:
            await _call(self._on_assigned, added)

    def _check_open(self) -> None:
        if self._closed:
            raise ConsumerClosedError("the consumer is closed")

    async def close(self) -> None:
        """Stop reading; a ``poll`` waiting meanwhile raises ConsumerClosedError (Kafka: "already closed")."""
        if self._closed:
            return
        self._closed = True
        self._fetcher.data.set()  # wakes a waiting poll, which sees the flag
        if self.membership is not None:
            await self.membership.close()
        await self._fetcher.close()
        if self._owns_metadata:
            await self.metadata.close()
        if self._owns_transport:
            await self._transport.close()
