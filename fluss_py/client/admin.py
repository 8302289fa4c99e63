"""``Admin``: databases, tables, their placement and offsets.

DDL goes to the coordinator leader through ``CoordinatorGateway`` (retried across coordinator failovers).
``describe_table`` asks the coordinator for the authoritative placement (leader, leader epoch, replicas,
ISR per bucket) and then each bucket leader for its offsets (one ListOffsets per leader server), which also
carries a primary-key table's KV size and rows on that leader.

Owned by one event loop. ``Admin`` owns its metadata and transport unless they were passed in.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from fluss_py.client import transport as rpcs
from fluss_py.client.gateway import CoordinatorGateway
from fluss_py.client.groups import (
    GroupMembers,
    GroupSummary,
    commit_offsets,
    delete_group,
    describe_members,
    fetch_offsets,
    list_groups,
    raise_refused,
)
from fluss_py.client.metadata import (
    BucketLocation,
    ClusterMetadata,
    TableInfo,
    bucket_from_pb,
    refuse_partitioned,
    table_info_from_pb,
)
from fluss_py.client.options import DEFAULT_RETRY, Backoff, RetryOptions
from fluss_py.client.server_tags import ServerTags, TagChange, alter_server_tag, describe_server_tags
from fluss_py.client.transport import GrpcTransport, Transport
from fluss_py.errors import (
    ApiError,
    ErrorCode,
    GroupNotExistError,
    InvalidRequestError,
    LeaderNotAvailableError,
    TableNotExistError,
)
from fluss_py.rpc.convert import column_to_pb, raise_for_client, schema_to_pb, to_client_exception
from fluss_py.rpc.keepalive import DEFAULT_KEEPALIVE, Keepalive
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, tablet_pb2
from fluss_py.schema.schema import Column, TableSchema, parse_column
from fluss_py.security.identity import PLAINTEXT, PeerIdentity
from fluss_py.types import OffsetSpec, TableBucket, TablePath


@dataclass(frozen=True, slots=True)
class BucketOffsets:
    """One ListOffsets answer: the looked-up ``offset`` (-1 if no record matches a timestamp) and the
    bucket's log start offset, high watermark and log end offset; for a primary-key table's bucket, the
    leader's KV size on disk and row estimate (-1: not a primary-key table, or a server that does not say)."""

    offset: int
    log_start_offset: int
    high_watermark: int
    log_end_offset: int
    kv_size_bytes: int = -1
    kv_rows: int = -1


@dataclass(frozen=True, slots=True)
class BucketDescription:
    """Placement and offsets of one bucket (offsets are -1 when its leader did not answer); a primary-key
    table's KV size and rows on its leader (-1: unknown)."""

    location: BucketLocation
    log_start_offset: int = -1
    high_watermark: int = -1
    log_end_offset: int = -1
    error: str = ""
    kv_size_bytes: int = -1
    kv_rows: int = -1


@dataclass(frozen=True, slots=True)
class TableDescription:
    info: TableInfo
    buckets: tuple[BucketDescription, ...]


@dataclass(frozen=True, slots=True)
class GroupBucketOffset:
    """One bucket of a consumer group: committed offset, the bucket's high watermark and the lag
    (HW - committed; -1 when the HW is unknown). ``path`` is None for a table that no longer exists."""

    path: TablePath | None
    table_bucket: TableBucket
    committed: int
    high_watermark: int
    lag: int


RESET_TARGETS = ("earliest", "latest", "offset", "timestamp")


def _path_pb(path: TablePath) -> common_pb2.TablePath:
    return common_pb2.TablePath(database=path.database, table=path.table)


class Admin:
    """Cluster administration (see module docstring). Use ``async with Admin(...)`` or call ``close()``."""

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        transport: Transport | None = None,
        metadata: ClusterMetadata | None = None,
        security: PeerIdentity | None = None,
        request_timeout: float = 30.0,
        retry: RetryOptions = DEFAULT_RETRY,
        keepalive: Keepalive = DEFAULT_KEEPALIVE,
    ) -> None:
        self._owns_transport = transport is None
        self._transport = transport or GrpcTransport(  # TLS + credentials (docs/security.md)
            security or PLAINTEXT, keepalive=keepalive
        )
        self._owns_metadata = metadata is None
        self.metadata = metadata or ClusterMetadata(
            bootstrap_servers, self._transport, request_timeout=request_timeout, retry=retry
        )
        self._gateway = CoordinatorGateway(self.metadata, self._transport, request_timeout=request_timeout, retry=retry)
        self._request_timeout = request_timeout
        self._retry = retry

    async def __aenter__(self) -> Admin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_metadata:
            await self.metadata.close()
        if self._owns_transport:
            await self._transport.close()

    # ---------------------------------------------------------------- databases
    async def create_database(self, name: str, *, ignore_if_exists: bool = False) -> None:
        await self._gateway.call(
            rpcs.CREATE_DATABASE, coordinator_pb2.CreateDatabaseRequest(name=name, ignore_if_exists=ignore_if_exists)
        )

    async def drop_database(self, name: str, *, ignore_if_not_exists: bool = False, cascade: bool = False) -> None:
        request = coordinator_pb2.DropDatabaseRequest(
            name=name, ignore_if_not_exists=ignore_if_not_exists, cascade=cascade
        )
        await self._gateway.call(rpcs.DROP_DATABASE, request)

    async def list_databases(self) -> list[str]:
        response = await self._gateway.call(rpcs.LIST_DATABASES, coordinator_pb2.ListDatabasesRequest())
        return list(response.databases)

    # ---------------------------------------------------------------- tables
    async def create_table(
        self,
        path: TablePath | str,
        *,
        num_buckets: int = 0,
        replication_factor: int = 0,
        properties: Mapping[str, str] | None = None,
        comment: str = "",
        ignore_if_exists: bool = False,
        schema: TableSchema | None = None,
    ) -> int:
        """Create a table (0 buckets/replication factor: the cluster defaults); returns its table id. ``schema``
        (``fluss_py.schema.parse_schema``): its columns and primary key (docs/primary-key-tables.md §2)."""
        path = _as_path(path)
        descriptor = common_pb2.TableDescriptor(
            num_buckets=num_buckets,
            replication_factor=replication_factor,
            properties=dict(properties or {}),
            comment=comment,
        )
        if schema is not None:
            descriptor.schema.CopyFrom(schema_to_pb(schema))
        request = coordinator_pb2.CreateTableRequest(
            path=_path_pb(path), descriptor=descriptor, ignore_if_exists=ignore_if_exists
        )
        response = await self._gateway.call(rpcs.CREATE_TABLE, request)
        return response.table_id

    async def drop_table(self, path: TablePath | str, *, ignore_if_not_exists: bool = False) -> None:
        request = coordinator_pb2.DropTableRequest(
            path=_path_pb(_as_path(path)), ignore_if_not_exists=ignore_if_not_exists
        )
        await self._gateway.call(rpcs.DROP_TABLE, request)

    async def add_buckets(self, path: TablePath | str, num_buckets: int) -> None:
        """Grow ``path`` to ``num_buckets`` buckets (never shrinks; docs/operations.md "Adding buckets"). Keys
        hashed by producers that see the new count may land in other buckets than before."""
        request = coordinator_pb2.AlterTableRequest(path=_path_pb(_as_path(path)), num_buckets=num_buckets)
        await self._gateway.call(rpcs.ALTER_TABLE, request)

    async def add_column(self, path: TablePath | str, column: Column | str) -> None:
        """Add a nullable column at the end of ``path``'s schema (``Column`` or ``"name TYPE"``): schema id + 1,
        nothing rewritten (docs/primary-key-tables.md §2). A column that exists exactly so changes nothing."""
        column = parse_column(column) if isinstance(column, str) else column
        request = coordinator_pb2.AlterTableRequest(path=_path_pb(_as_path(path)), add_column=column_to_pb(column))
        await self._gateway.call(rpcs.ALTER_TABLE, request)

    async def list_tables(self, database: str) -> list[str]:
        response = await self._gateway.call(rpcs.LIST_TABLES, coordinator_pb2.ListTablesRequest(database=database))
        return list(response.tables)

    async def get_table_placement(self, path: TablePath | str) -> tuple[TableInfo, list[BucketLocation]]:
        """Authoritative TableInfo and per-bucket leader/epochs/replicas/ISR, from the coordinator leader."""
        path = _as_path(path)
        return (await self.get_table_placements([path]))[path]

    async def get_table_placements(
        self, paths: Sequence[TablePath | str]
    ) -> dict[TablePath, tuple[TableInfo, list[BucketLocation]]]:
        """``get_table_placement`` of several tables in one GetMetadata (one consistent view of them all)."""
        wanted = [_as_path(p) for p in paths]
        request = common_pb2.MetadataRequest(tables=[_path_pb(p) for p in wanted])
        response = await self._gateway.call(rpcs.COORDINATOR_GET_METADATA, request)
        found: dict[TablePath, tuple[TableInfo, list[BucketLocation]]] = {}
        for tm in response.metadata.tables:
            info = table_info_from_pb(tm.info)
            if info.path in wanted:
                found[info.path] = info, sorted((bucket_from_pb(b) for b in tm.buckets), key=lambda x: x.table_bucket)
        missing = [str(p) for p in wanted if p not in found]
        if missing:
            raise TableNotExistError(f"table {', '.join(missing)} does not exist")
        self.metadata.apply_servers(response.metadata)
        return found

    async def get_table_info(self, path: TablePath | str) -> TableInfo:
        return (await self.get_table_placement(path))[0]

    async def describe_table(self, path: TablePath | str) -> TableDescription:
        """TableInfo, and per bucket: leader, epochs, replicas, ISR, log start offset, HW and LEO."""
        info, locations = await self.get_table_placement(path)
        offsets = await self._list_offsets_once(
            {loc.table_bucket: loc.leader for loc in locations}, OffsetSpec.LATEST, 0
        )
        buckets = []
        for loc in locations:
            got = offsets.get(loc.table_bucket)
            if isinstance(got, BucketOffsets):
                buckets.append(BucketDescription(loc, got.log_start_offset, got.high_watermark, got.log_end_offset,
                                                 kv_size_bytes=got.kv_size_bytes, kv_rows=got.kv_rows))  # fmt: skip
            else:
                buckets.append(BucketDescription(loc, error=str(got) if got else "no leader"))
        return TableDescription(info, tuple(buckets))

    # ---------------------------------------------------------------- consumer groups
    async def list_groups(self) -> list[str]:
        """Names of the groups (with committed offsets or members)."""
        return [s.group for s in await list_groups(self._gateway)]

    async def list_group_summaries(self) -> list[GroupSummary]:
        """Every group with its state (EMPTY, RECONCILING, STABLE) and live member count."""
        return await list_groups(self._gateway)

    async def describe_group_members(self, group: str) -> GroupMembers:
        """``group``'s members (id, instance id, client host, epoch, buckets, time since last heartbeat)."""
        return await describe_members(self._gateway, group)

    async def delete_group(self, group: str) -> None:
        """Delete ``group`` (offsets and membership); refused with GROUP_NOT_EMPTY while it has live members."""
        await delete_group(self._gateway, group)

    async def describe_group(self, group: str) -> list[GroupBucketOffset]:
        """Per committed bucket of ``group``: committed offset, HW and lag. GROUP_NOT_EXIST without commits."""
        committed = await fetch_offsets(self._gateway, group)
        if not committed:
            raise GroupNotExistError(f"consumer group {group!r} has no committed offsets")
        await self.metadata.update()
        out: list[GroupBucketOffset] = []
        for table_id in sorted({tb.table_id for tb in committed}):
            info = self.metadata.table_by_id(table_id)
            tbs = sorted(tb for tb in committed if tb.table_id == table_id)
            hws: dict[int, BucketOffsets] = {}
            if info is not None:
                hws = await self.list_offsets(info.path, [tb.bucket for tb in tbs], OffsetSpec.HIGH_WATERMARK)
            for tb in tbs:
                hw = hws[tb.bucket].high_watermark if tb.bucket in hws else -1
                lag = max(hw - committed[tb], 0) if hw >= 0 else -1
                out.append(GroupBucketOffset(info.path if info else None, tb, committed[tb], hw, lag))
        return out

    async def reset_group(
        self,
        group: str,
        path: TablePath | str,
        to: str,
        value: int = 0,
        *,
        buckets: Iterable[int] | None = None,
        dry_run: bool = False,
    ) -> dict[int, int]:
        """Set ``group``'s committed offsets of ``path`` (all buckets, or ``buckets``) and return them.

        ``to``: "earliest" (log start), "latest" (high watermark), "offset" (``value``, clamped into
        [log start, HW]) or "timestamp" (first record with timestamp >= ``value`` ms, else the HW).
        Only sensible while no consumer of the group runs (its next commit would overwrite the reset).
        """
        if to not in RESET_TARGETS:
            raise InvalidRequestError(f"reset target {to!r} is not one of {', '.join(RESET_TARGETS)}")
        path = _as_path(path)
        info = refuse_partitioned(await self.metadata.wait_for_table(path, self._request_timeout))
        wanted = list(range(info.num_buckets)) if buckets is None else list(buckets)
        spec = OffsetSpec.TIMESTAMP if to == "timestamp" else OffsetSpec.HIGH_WATERMARK
        found = await self.list_offsets(path, wanted, spec, value if to == "timestamp" else 0)
        targets: dict[int, int] = {}
        for b, o in found.items():
            if to == "earliest":
                targets[b] = o.log_start_offset
            elif to == "latest":
                targets[b] = o.high_watermark
            elif to == "offset":
                targets[b] = min(max(value, o.log_start_offset), o.high_watermark)
            else:
                targets[b] = o.offset if o.offset >= 0 else o.high_watermark
        if not dry_run:
            offsets = {TableBucket(info.table_id, b): o for b, o in targets.items()}
            raise_refused(group, await commit_offsets(self._gateway, group, offsets))
        return dict(sorted(targets.items()))

    # ---------------------------------------------------------------- cluster
    async def describe_cluster(self) -> common_pb2.ClusterMetadata:
        """The coordinator leader's full metadata: live tablet servers, itself, every table and bucket."""
        response = await self._gateway.call(rpcs.COORDINATOR_GET_METADATA, common_pb2.MetadataRequest())
        self.metadata.apply_servers(response.metadata)
        return response.metadata

    async def set_server_tag(self, server_id: int, tag: str) -> TagChange:
        """Tag a tablet server ``permanent-offline``, ``temporary-offline`` or ``none`` (docs/rebalance.md §12)."""
        return await alter_server_tag(self._gateway, server_id, tag)

    async def describe_server_tags(self) -> ServerTags:
        """Every known tablet server with its tag, and the running or last replacement."""
        return await describe_server_tags(self._gateway)

    async def coordinator_info(self, address: str, timeout: float = 3.0) -> coordinator_pb2.GetCoordinatorInfoResponse:
        """GetCoordinatorInfo of the coordinator at ``address`` (any coordinator answers: state, leader, epoch)."""
        request = coordinator_pb2.GetCoordinatorInfoRequest()
        return await self._transport.call(address, rpcs.GET_COORDINATOR_INFO, request, timeout)

    # ---------------------------------------------------------------- offsets
    async def list_offsets(
        self,
        path: TablePath | str,
        buckets: Iterable[int] | None = None,
        spec: OffsetSpec = OffsetSpec.LATEST,
        timestamp_ms: int = 0,
        *,
        timeout: float | None = None,
    ) -> dict[int, BucketOffsets]:
        """Offsets per bucket number, asked of each bucket's leader; retried across leader changes."""
        path = _as_path(path)
        info = refuse_partitioned(await self.metadata.wait_for_table(path, self._request_timeout))
        wanted = [TableBucket(info.table_id, b) for b in (buckets if buckets is not None else range(info.num_buckets))]
        result = await list_offsets(
            self.metadata, self._transport, wanted, spec, timestamp_ms, timeout or self._request_timeout, self._retry
        )
        return {tb.bucket: offsets for tb, offsets in result.items()}

    async def _list_offsets_once(
        self, leaders: Mapping[TableBucket, int], spec: OffsetSpec, timestamp_ms: int
    ) -> dict[TableBucket, BucketOffsets | ApiError]:
        by_server: dict[int, list[TableBucket]] = defaultdict(list)
        for tb, leader in leaders.items():
            by_server[leader].append(tb)
        results: dict[TableBucket, BucketOffsets | ApiError] = {}

        async def one(server_id: int, tbs: list[TableBucket]) -> None:
            node = self.metadata.servers.get(server_id)
            if node is None:
                for tb in tbs:
                    results[tb] = LeaderNotAvailableError(f"leader {server_id} of {tb} is not a live server")
                return
            try:
                got = await list_offsets_request(
                    self._transport, node.address, tbs, spec, timestamp_ms, self._request_timeout
                )
            except ApiError as e:
                got = dict.fromkeys(tbs, e)
            results.update(got)

        await asyncio.gather(*(one(s, tbs) for s, tbs in by_server.items()))
        return results


def _as_path(path: TablePath | str) -> TablePath:
    return path if isinstance(path, TablePath) else TablePath.parse(path)


async def list_offsets_request(
    transport: Transport,
    address: str,
    buckets: Iterable[TableBucket],
    spec: OffsetSpec,
    timestamp_ms: int,
    timeout: float,
) -> dict[TableBucket, BucketOffsets | ApiError]:
    """One ListOffsets to one server: per bucket its offsets or its error (transport errors raise)."""
    request = tablet_pb2.ListOffsetsRequest(
        buckets=[
            tablet_pb2.ListOffsetsBucket(
                table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket),
                spec=int(spec),
                timestamp_ms=timestamp_ms,
            )
            for tb in buckets
        ]
    )
    response = await transport.call(address, rpcs.LIST_OFFSETS, request, timeout)
    raise_for_client(response.error)
    out: dict[TableBucket, BucketOffsets | ApiError] = {}
    for r in response.buckets:
        tb = TableBucket(r.table_bucket.table_id, r.table_bucket.bucket)
        if r.error.code != ErrorCode.NONE:
            out[tb] = to_client_exception(r.error)
        else:
            kv = (r.kv.size_bytes, r.kv.rows) if r.HasField("kv") else (-1, -1)
            out[tb] = BucketOffsets(r.offset, r.log_start_offset, r.high_watermark, r.log_end_offset, *kv)
    return out


async def list_offsets(
    metadata: ClusterMetadata,
    transport: Transport,
    buckets: Iterable[TableBucket],
    spec: OffsetSpec,
    timestamp_ms: int,
    timeout: float,
    retry: RetryOptions,
) -> dict[TableBucket, BucketOffsets]:
    """ListOffsets for ``buckets`` at their leaders, retrying retriable errors (refreshing metadata or
    following leader hints) until ``timeout``; the first non-retriable error is raised."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    pending = set(buckets)
    done: dict[TableBucket, BucketOffsets] = {}
    backoff = Backoff(retry)
    while pending:
        by_leader: dict[str, list[TableBucket]] = defaultdict(list)
        errors: list[ApiError] = []
        for tb in pending:
            node = metadata.leader_for(tb)
            if node is None:
                errors.append(LeaderNotAvailableError(f"no known leader for {tb}"))
            else:
                by_leader[node.address].append(tb)

        async def one(address: str, tbs: list[TableBucket], errors: list[ApiError] = errors) -> None:
            remaining = max(deadline - loop.time(), 0.001)
            try:
                got = await list_offsets_request(transport, address, tbs, spec, timestamp_ms, remaining)
            except ApiError as exc:
                got = dict.fromkeys(tbs, exc)
            for tb, value in got.items():
                if isinstance(value, BucketOffsets):
                    done[tb] = value
                    pending.discard(tb)
                else:
                    errors.append(value)
                    metadata.apply_leader_hint(tb, value.leader_id, value.leader_address)

        await asyncio.gather(*(one(a, tbs) for a, tbs in by_leader.items()))
        if not pending:
            break
        fatal = next((e for e in errors if not e.retriable), None)
        if fatal is not None:
            raise fatal
        if loop.time() >= deadline:
            raise errors[0] if errors else LeaderNotAvailableError("list offsets timed out")
        if any(e.invalid_metadata for e in errors):
            metadata.request_update()
        await asyncio.sleep(min(backoff.next_delay(), max(deadline - loop.time(), 0)))
    return done
