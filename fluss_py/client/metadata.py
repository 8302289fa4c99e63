"""``ClusterMetadata``: the client's view of the cluster (servers, coordinator, tables, bucket leaders).

Any server answers GetMetadata: bootstrap addresses may be coordinators or tablet servers (the kind of an
address is learnt by trying the tablet service first and the coordinator service on INVALID_REQUEST, then
remembered). A refresh tries the servers it knows, then the bootstrap list, until one answers; a standby
coordinator's NOT_COORDINATOR_LEADER hint is followed at once.

Freshness rules:
- ``request_update()`` starts a refresh now (coalesced with one already waiting to start) and returns a
  future resolved when a refresh *started after the call* has been applied.
- A bucket's leader and epoch follow the rule of docs/client.md ("Bucket leader and epoch"): the last
  *answered* location (from GetMetadata) moves only forwards in epoch, and an answer at an epoch >= the
  answered one replaces the entry, hint or not, so a guess can always be corrected. An error's leader
  hint (``apply_leader_hint``) moves the leader at once with the guessed epoch answered + 1; it never
  changes the answered location, and a hint naming the answered leader simply drops the guess.

Owned by one event loop; every method is called from tasks of that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from fluss_py.client.options import DEFAULT_RETRY, Backoff, RetryOptions
from fluss_py.client.transport import COORDINATOR_GET_METADATA, TABLET_GET_METADATA, Transport
from fluss_py.config import split_host_port
from fluss_py.errors import (
    REFUSED,
    ApiError,
    ErrorCode,
    FlussError,
    PartitionedTableError,
    RequestTimedOutError,
    TableNotExistError,
)
from fluss_py.partitioning import routing_unit
from fluss_py.rpc.convert import schema_from_pb, to_client_exception
from fluss_py.rpc.pb import common_pb2
from fluss_py.schema.schema import TableSchema
from fluss_py.types import NO_LEADER, ServerNode, TableBucket, TablePath

log = logging.getLogger(__name__)

_CALL_TIMEOUT = 3.0  # GetMetadata is cheap: a server silent this long (paused, partitioned) is skipped
_FAILED_RECENTLY = 10.0


@dataclass(frozen=True, slots=True)
class TableInfo:
    """A table as clients see it. ``schema``: its columns and keys, every version (None: a log table without
    a schema; docs/primary-key-tables.md §2)."""

    table_id: int
    path: TablePath
    num_buckets: int
    replication_factor: int
    properties: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    comment: str = ""
    created_ms: int = 0
    schema: TableSchema | None = field(default=None, compare=False, hash=False)

    @property
    def is_primary_key_table(self) -> bool:
        return self.schema is not None and self.schema.is_primary_key_table


@dataclass(frozen=True, slots=True)
class BucketLocation:
    """Where one bucket lives: its leader (``NO_LEADER`` when none), epochs, assignment and ISR.

    ``hinted``: leader and epoch come from an error's hint (epoch = the last answered one + 1, a guess), not
    from an answer.
    """

    table_bucket: TableBucket
    leader: int
    leader_epoch: int
    bucket_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    hinted: bool = False


def is_partitioned(info: TableInfo) -> bool:
    """The logical table of a partitioned table: no buckets of its own, its data is in ``<table>$<slot>``."""
    return routing_unit(info.path.table, info.properties) is not None


def refuse_partitioned(info: TableInfo) -> TableInfo:
    """``info`` unless it is the logical table of a partitioned table (reads, offsets: name a partition)."""
    if is_partitioned(info):
        raise PartitionedTableError(
            f"{info.path} is partitioned and has no buckets of its own: name a partition ({info.path}$<slot>, "
            "see `table list-partitions`), or produce to it and let each record's timestamp pick one"
        )
    return info


def table_info_from_pb(pb: common_pb2.TableInfo) -> TableInfo:
    d = pb.descriptor
    return TableInfo(
        table_id=pb.table_id,
        path=TablePath(pb.path.database, pb.path.table),
        num_buckets=d.num_buckets,
        replication_factor=d.replication_factor,
        properties=dict(d.properties),
        comment=d.comment,
        created_ms=pb.created_ms,
        schema=schema_from_pb(d.schema) if d.HasField("schema") else None,
    )


def bucket_from_pb(pb: common_pb2.BucketLeaderAndIsr) -> BucketLocation:
    return BucketLocation(
        TableBucket(pb.table_bucket.table_id, pb.table_bucket.bucket),
        pb.leader,
        pb.leader_epoch,
        pb.bucket_epoch,
        tuple(pb.replicas),
        tuple(pb.isr),
    )


def node_from_pb(pb: common_pb2.ServerNode) -> ServerNode:
    return ServerNode(pb.id, pb.host, pb.port, pb.rack)


def parse_bootstrap(servers: str | Iterable[str]) -> list[str]:
    """``"h1:p1,h2:p2"`` (or a list) -> ``["h1:p1", "h2:p2"]``; each must be host:port with a port 1..65535."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    result = [s.strip() for s in items if s.strip()]
    for s in result:
        try:
            split_host_port(s)
        except ValueError as e:
            raise ValueError(f"bootstrap server {e}") from None
    if not result:
        raise ValueError("no bootstrap servers given")
    return result


class ClusterMetadata:
    """Cached cluster view plus the refresh machinery (see module docstring)."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        transport: Transport,
        *,
        request_timeout: float = 30.0,
        retry: RetryOptions = DEFAULT_RETRY,
    ) -> None:
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self._transport = transport
        self._request_timeout = request_timeout
        self._retry = retry
        self.servers: dict[int, ServerNode] = {}
        self.coordinator: ServerNode | None = None
        self.coordinator_epoch = 0
        self._tables: dict[TablePath, TableInfo] = {}
        self._tables_by_id: dict[int, TableInfo] = {}
        self._buckets: dict[TableBucket, BucketLocation] = {}  # what requests use: answered, or hinted
        self._answered: dict[TableBucket, BucketLocation] = {}  # the newest GetMetadata answer per bucket
        self._address_kind: dict[str, str] = {}  # address -> "tablet" | "coordinator"
        self._last_good: str | None = None
        self._failed_at: dict[str, float] = {}  # address -> when GetMetadata to it last failed
        self._pending: asyncio.Future[None] | None = None  # resolved by the next refresh to start
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self.updated_at = 0.0
        self.version = 0

    # ---------------------------------------------------------------- queries
    @property
    def bootstrap_servers(self) -> list[str]:
        return list(self._bootstrap)

    def table(self, path: TablePath) -> TableInfo | None:
        return self._tables.get(path)

    def table_by_id(self, table_id: int) -> TableInfo | None:
        return self._tables_by_id.get(table_id)

    def bucket(self, tb: TableBucket) -> BucketLocation | None:
        return self._buckets.get(tb)

    def leader_for(self, tb: TableBucket) -> ServerNode | None:
        loc = self._buckets.get(tb)
        if loc is None or loc.leader == NO_LEADER:
            return None
        return self.servers.get(loc.leader)

    def leader_epoch(self, tb: TableBucket) -> int:
        loc = self._buckets.get(tb)
        return -1 if loc is None else loc.leader_epoch

    def buckets_of(self, table_id: int) -> list[BucketLocation]:
        info = self._tables_by_id.get(table_id)
        if info is None:
            return []
        return [self._buckets[tb] for b in range(info.num_buckets) if (tb := TableBucket(table_id, b)) in self._buckets]

    # ---------------------------------------------------------------- updates
    def request_update(self) -> asyncio.Future[None]:
        """Refresh as soon as possible; the future resolves after a refresh that started after this call."""
        if self._closed:
            raise RuntimeError("metadata closed")
        if self._pending is None:
            self._pending = asyncio.get_running_loop().create_future()
            self._pending.add_done_callback(_consume_exception)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._refresh_loop(), name="metadata-refresh")
        return self._pending

    async def update(self, timeout: float | None = None) -> None:
        """Refresh now and wait for it (raises REQUEST_TIMED_OUT after ``timeout``)."""
        fut = self.request_update()
        try:
            async with asyncio.timeout(timeout or self._request_timeout * 2):
                await asyncio.shield(fut)
        except TimeoutError:
            raise RequestTimedOutError("no server answered GetMetadata in time") from None

    async def wait_for_table(self, path: TablePath, timeout: float) -> TableInfo:
        """The table's info once it and a location for each of its buckets are known.

        Refreshes metadata with backoff (a tablet server's cache may lag a just-created table). When the
        coordinator leader itself answers without the table, TABLE_NOT_EXIST is raised at once; otherwise
        after ``timeout``.
        """
        deadline = time.monotonic() + timeout
        backoff = Backoff(self._retry)
        while True:
            info = self._tables.get(path)
            if info is not None and (
                len(self.buckets_of(info.table_id)) == info.num_buckets or is_partitioned(info)
            ):  # a partitioned table's logical table has no buckets of its own
                return info
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                if info is None:
                    raise TableNotExistError(f"table {path} does not exist")
                return info
            if backoff.attempts:
                await asyncio.sleep(min(backoff.next_delay(), remaining))
            else:
                backoff.next_delay()
            await self.update(max(remaining, 0.001))
            if self._tables.get(path) is None and await self._coordinator_lacks(path):
                raise TableNotExistError(f"table {path} does not exist")

    async def _coordinator_lacks(self, path: TablePath) -> bool:
        """Ask the coordinator leader (authoritative) directly; True if it answered without the table."""
        if self.coordinator is None:
            return False
        address = self.coordinator.address
        self._address_kind[address] = "coordinator"
        try:
            md = await self._fetch(address)
        except FlussError:
            return False
        self.apply(md)
        return self._tables.get(path) is None

    def apply_leader_hint(self, tb: TableBucket, leader_id: int, leader_address: str) -> bool:
        """Follow the leader an error named. True if the bucket now goes to a server other than the answered
        leader (retry there at once); False if nothing moved or the hint named the answered leader, in which
        case any guess is dropped and the caller should refresh and back off (docs/client.md)."""
        if leader_id < 0:
            return False
        if leader_address and leader_id not in self.servers:
            host, _, port = leader_address.rpartition(":")
            if host and port.isdigit():
                self.servers[leader_id] = ServerNode(leader_id, host, int(port))
        loc = self._buckets.get(tb)
        answered = self._answered.get(tb)
        if loc is None or answered is None or leader_id not in self.servers:
            return False
        if leader_id == answered.leader:
            if loc.hinted:  # back to what the cluster last said; the guess is dropped, never compounded
                self._buckets[tb] = answered
                self.version += 1
            return False
        if loc.hinted and loc.leader == leader_id:
            return False
        self._buckets[tb] = replace(answered, leader=leader_id, leader_epoch=answered.leader_epoch + 1, hinted=True)
        self.version += 1
        return True

    def apply_servers(self, md: common_pb2.ClusterMetadata) -> None:
        """Take the live servers and the coordinator leader from a GetMetadata answer."""
        if md.tablet_servers:
            self.servers = {n.id: node_from_pb(n) for n in md.tablet_servers}
        # The coordinator leader only moves forwards: a deposed leader that has not noticed yet, or a server
        # with an older view, cannot send the client back to it.
        if md.HasField("coordinator") and md.coordinator.port and md.coordinator_epoch >= self.coordinator_epoch:
            self.coordinator = node_from_pb(md.coordinator)
            self.coordinator_epoch = md.coordinator_epoch

    def apply(self, md: common_pb2.ClusterMetadata) -> None:
        """Merge a GetMetadata answer (tables absent from a full answer are forgotten)."""
        self.apply_servers(md)
        tables: dict[TablePath, TableInfo] = {}
        for tm in md.tables:
            info = table_info_from_pb(tm.info)
            tables[info.path] = info
            for b in tm.buckets:
                loc = bucket_from_pb(b)
                old = self._answered.get(loc.table_bucket)
                if old is None or loc.leader_epoch >= old.leader_epoch:  # a guess never outranks an answer
                    self._answered[loc.table_bucket] = loc
                    self._buckets[loc.table_bucket] = loc
        gone = {i.table_id for i in self._tables.values()} - {i.table_id for i in tables.values()}
        self._buckets = {tb: loc for tb, loc in self._buckets.items() if tb.table_id not in gone}
        self._answered = {tb: loc for tb, loc in self._answered.items() if tb.table_id not in gone}
        self._tables = tables
        self._tables_by_id = {i.table_id: i for i in tables.values()}
        self.updated_at = time.monotonic()
        self.version += 1

    def note_failure(self, address: str) -> None:
        """A call to ``address`` failed or went unanswered (any RPC): refreshes ask it last for a while."""
        self._failed_at[address] = time.monotonic()

    # ---------------------------------------------------------------- refresh machinery
    def _candidates(self) -> list[str]:
        seen: list[str] = []
        known = [n.address for n in self.servers.values()]
        if self.coordinator is not None:
            known.append(self.coordinator.address)
        for address in [self._last_good, *known, *self._bootstrap]:
            if address and address not in seen:
                seen.append(address)
        # Servers that failed recently go last (stable sort keeps the order otherwise).
        now = time.monotonic()
        return sorted(seen, key=lambda a: now - self._failed_at.get(a, -1e9) < _FAILED_RECENTLY)

    async def _refresh_loop(self) -> None:
        """Run refreshes while someone waits for one; back off between rounds in which no server answered."""
        backoff = Backoff(self._retry)
        while self._pending is not None and not self._closed:
            waiter, self._pending = self._pending, None
            try:
                refreshed = await self._refresh_once()
            except ApiError as e:  # credentials or certificate refused: no other server will take them
                if not waiter.done():
                    waiter.set_exception(e)
                continue
            if refreshed:
                backoff.reset()
                if not waiter.done():
                    waiter.set_result(None)
                continue
            # Nobody answered: this waiter is satisfied by the next successful round.
            if self._pending is None:
                self._pending = waiter
            else:
                self._pending.add_done_callback(lambda f, w=waiter: _chain(f, w))
            await asyncio.sleep(backoff.next_delay())

    async def _refresh_once(self) -> bool:
        last_error: FlussError | None = None
        for address in self._candidates():
            try:
                md = await self._fetch(address)
            except FlussError as e:
                if e.code in REFUSED:
                    raise
                log.debug("GetMetadata from %s failed: %s", address, e)
                self._failed_at[address] = time.monotonic()
                last_error = e
                continue
            self._failed_at.pop(address, None)
            self.apply(md)
            self._last_good = address
            return True
        log.info("no server answered GetMetadata (last error: %s)", last_error)
        return False

    async def _fetch(self, address: str, follow_hint: bool = True) -> common_pb2.ClusterMetadata:
        request = common_pb2.MetadataRequest()
        kind = self._address_kind.get(address, "tablet")
        rpc = TABLET_GET_METADATA if kind == "tablet" else COORDINATOR_GET_METADATA
        try:
            response = await self._transport.call(address, rpc, request, min(self._request_timeout, _CALL_TIMEOUT))
        except ApiError as e:
            if e.code != ErrorCode.INVALID_REQUEST or address in self._address_kind:
                raise
            # Not a tablet server: it must be a coordinator.
            self._address_kind[address] = "coordinator"
            return await self._fetch(address, follow_hint)
        self._address_kind.setdefault(address, kind)
        if response.error.code != ErrorCode.NONE:
            error = to_client_exception(response.error)
            if follow_hint and error.leader_address and error.leader_address != address:
                self._address_kind.setdefault(error.leader_address, "coordinator")
                return await self._fetch(error.leader_address, follow_hint=False)
            raise error
        return response.metadata

    async def close(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._pending is not None and not self._pending.done():
            self._pending.set_exception(RuntimeError("metadata closed"))


def _chain(source: asyncio.Future[None], target: asyncio.Future[None]) -> None:
    if target.done():
        return
    if source.exception() is not None:
        target.set_exception(source.exception())  # type: ignore[arg-type]
    else:
        target.set_result(None)


class RefreshThrottle:
    """Rate-limits the metadata refreshes a background loop (the producer's sender, the consumer's fetcher)
    asks for while a bucket has no leader or a request stalls: the first goes at once, the next after
    ``retry.backoff``, doubling up to ``retry.backoff_max`` (as Kafka's clients back off, KIP-580), until
    ``reset`` (a round that found every leader). Each refresh's end calls ``wakeup``. Owned by one loop."""

    def __init__(self, metadata: ClusterMetadata, retry: RetryOptions, wakeup: Callable[[], None]) -> None:
        self._metadata = metadata
        self._backoff = Backoff(retry)
        self._wakeup = wakeup
        self._retry_at = 0.0

    def request(self, now: float) -> float:
        """Ask for a refresh unless the last one was too recent; returns when to look again."""
        if now >= self._retry_at:
            self._metadata.request_update().add_done_callback(lambda _f: self._wakeup())
            self._retry_at = now + self._backoff.next_delay()
        return self._retry_at

    def reset(self) -> None:
        self._backoff.reset()


def _consume_exception(fut: asyncio.Future[None]) -> None:
    if not fut.cancelled():
        fut.exception()
