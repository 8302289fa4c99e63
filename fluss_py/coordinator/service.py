"""gRPC servicer of ``CoordinatorService``: converts and delegates, never decides.

- ``GetCoordinatorInfo`` is answered by every coordinator (state, who leads, the epoch).
- Every other method on a coordinator that is not the fully started leader answers ErrorInfo
  NOT_COORDINATOR_LEADER naming the current leader (``leader_id``/``leader_address``) when known.
- On the leader, database and table DDL, GetMetadata, AdjustIsr, ControlledShutdown and AllocateWriterId
  and the consumer-group offsets (``coordinator/groups.py``) go through the single-writer event loop
  (table events: ``coordinator/processor.py``).
- AdjustIsr, ControlledShutdown and ReportReplicaFaults change ISRs and leaderships on a tablet server's
  word: the caller must prove it is the server it names (``ReplicaVerifier``: its replica token and, with
  mutual TLS, a certificate naming ``fluss://tablet-server/<id>``; docs/peer-trust.md), else
  REPLICA_NOT_AUTHENTICATED, logged and counted (``refusals``).

Who may call: grpc.aio, on the process's loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol

import grpc.aio

from fluss_py.coordinator import group_coordinator as group_members
from fluss_py.coordinator import groups
from fluss_py.coordinator import processor as tables
from fluss_py.coordinator.event_loop import CoordinatorEventLoop
from fluss_py.coordinator.events import AddColumn, AlterTableBuckets, CreateDatabase, DropDatabase, Event, ListDatabases
from fluss_py.coordinator.handlers import DEFAULT_DATABASE
from fluss_py.coordinator.tag_service import ServerTagRpcs
from fluss_py.errors import (
    ErrorCode,
    FlussError,
    InvalidRequestError,
    NotCoordinatorLeaderError,
    ReplicaNotAuthenticatedError,
)
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, coordinator_pb2_grpc
from fluss_py.rpc.peer import RefusalLog, ReplicaVerifier
from fluss_py.types import CoordinatorLeaderInfo

log = logging.getLogger(__name__)


class CoordinatorView(Protocol):
    """What the servicer needs from CoordinatorServer."""

    server_id: int

    @property
    def coordinator_epoch(self) -> int: ...

    @property
    def state(self) -> Any: ...

    def serving_event_loop(self) -> CoordinatorEventLoop | None: ...

    async def current_leader(self) -> CoordinatorLeaderInfo | None: ...


class CoordinatorServicer(ServerTagRpcs, coordinator_pb2_grpc.CoordinatorServiceServicer):
    """Owns nothing; reads the server's state and hands work to its event loop. The server-tag RPCs are in
    ``tag_service.py``."""

    def __init__(
        self,
        server: CoordinatorView,
        replicas: ReplicaVerifier | None = None,
        group_limits: group_members.GroupLimits | None = None,
    ) -> None:
        self._server = server
        self._group_limits = group_limits or group_members.GroupLimits()
        self._replicas = replicas  # None: tablet servers' requests are believed (unit tests of other parts)
        self.refusals = RefusalLog(logging.getLogger(__name__))

    async def _unproven(self, what: str, server_id: int, context: Any) -> common_pb2.ErrorInfo | None:
        """The error to answer when the caller does not prove it is tablet server ``server_id``."""
        if self._replicas is None:
            return None
        why = await self._replicas.verify(server_id, context)
        if why is None:
            return None
        peer = context.peer() if context is not None else "an unknown peer"
        self.refusals.refuse(
            "replica_not_authenticated",
            f"{what}/{server_id}",
            f"Refused {what} claiming tablet server {server_id} from {peer}: {why}",
        )
        return convert.error_info(ReplicaNotAuthenticatedError(f"{what} as tablet server {server_id} refused: {why}"))

    # ---------------------------------------------------------------- helpers
    async def _not_leader(self) -> common_pb2.ErrorInfo:
        leader = await self._server.current_leader()
        if leader is None:
            return convert.error_code(ErrorCode.NOT_COORDINATOR_LEADER, "no coordinator leader is known right now")
        return convert.error_code(
            ErrorCode.NOT_COORDINATOR_LEADER,
            f"coordinator {self._server.server_id} is not the leader; coordinator {leader.server_id} at "
            f"{leader.address} is (epoch {leader.epoch})",
            leader_id=leader.server_id,
            leader_address=leader.address,
        )

    async def _on_leader(self, response_type: type, event: Event, fill: Callable[[Any, Any], None]) -> Any:
        """Answer ``response_type``: NOT_COORDINATOR_LEADER off the leader; else submit ``event`` and ``fill``."""
        loop = self._server.serving_event_loop()
        if loop is None:
            return response_type(error=await self._not_leader())
        try:
            result = await loop.submit(event)
        except NotCoordinatorLeaderError as e:
            info = await self._not_leader()
            info.message = f"{e.message}; {info.message}"
            return response_type(error=info)
        except FlussError as e:
            return response_type(error=convert.error_info(e))
        response = response_type(error=convert.ok())
        fill(response, result)
        return response

    # ---------------------------------------------------------------- every coordinator
    async def GetCoordinatorInfo(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        leader = await self._server.current_leader()
        return coordinator_pb2.GetCoordinatorInfoResponse(
            error=convert.ok(),
            server_id=self._server.server_id,
            state=self._server.state.name,
            leader_id=leader.server_id if leader else -1,
            leader_address=leader.address if leader else "",
            coordinator_epoch=leader.epoch if leader else self._server.coordinator_epoch,
        )

    # ---------------------------------------------------------------- leader: implemented
    async def CreateDatabase(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        event = CreateDatabase(request.name, request.ignore_if_exists)
        return await self._on_leader(coordinator_pb2.SimpleResponse, event, _nothing)

    async def DropDatabase(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        event = DropDatabase(request.name, request.ignore_if_not_exists, request.cascade)
        return await self._on_leader(coordinator_pb2.SimpleResponse, event, _nothing)

    async def ListDatabases(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def fill(response: Any, names: list[str]) -> None:
            response.databases.extend(names)

        return await self._on_leader(coordinator_pb2.ListDatabasesResponse, ListDatabases(), fill)

    async def GetMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def fill(response: Any, metadata: Any) -> None:
            response.metadata.CopyFrom(metadata)

        event = tables.GetMetadata([convert.table_path_from_pb(p) for p in request.tables])
        return await self._on_leader(common_pb2.MetadataResponse, event, fill)

    # ---------------------------------------------------------------- leader: tables, ISR, writer ids
    async def CreateTable(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        d = request.descriptor
        try:
            schema = convert.schema_from_pb(d.schema) if d.HasField("schema") else None
        except FlussError as e:  # a schema that does not parse: nothing to submit
            return coordinator_pb2.CreateTableResponse(error=convert.error_info(e))
        event = tables.CreateTable(
            convert.table_path_from_pb(request.path),
            d.num_buckets,
            d.replication_factor,
            dict(d.properties),
            d.comment,
            request.ignore_if_exists,
            schema,
        )

        def fill(response: Any, table_id: int) -> None:
            response.table_id = table_id

        return await self._on_leader(coordinator_pb2.CreateTableResponse, event, fill)

    async def DropTable(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        event = tables.DropTable(convert.table_path_from_pb(request.path), request.ignore_if_not_exists)
        return await self._on_leader(coordinator_pb2.SimpleResponse, event, _nothing)

    async def AlterTable(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        path = convert.table_path_from_pb(request.path)
        event: Event = AlterTableBuckets(path, request.num_buckets)
        if request.HasField("add_column"):
            try:
                if request.num_buckets:
                    raise InvalidRequestError("one change per AlterTable: a bucket count or a column, not both")
                event = AddColumn(path, convert.column_from_pb(request.add_column))
            except FlussError as e:
                return coordinator_pb2.SimpleResponse(error=convert.error_info(e))
        return await self._on_leader(coordinator_pb2.SimpleResponse, event, _nothing)

    async def ListTables(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def fill(response: Any, names: list[str]) -> None:
            response.tables.extend(names)

        event = tables.ListTables(request.database or DEFAULT_DATABASE)
        return await self._on_leader(coordinator_pb2.ListTablesResponse, event, fill)

    async def AdjustIsr(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def fill(response: Any, result: Any) -> None:
            response.buckets.extend(result.buckets)

        refused = await self._unproven("AdjustIsr", request.server_id, context)
        if refused is not None:
            return coordinator_pb2.AdjustIsrResponse(error=refused)
        return await self._on_leader(coordinator_pb2.AdjustIsrResponse, tables.AdjustIsr(request), fill)

    async def ControlledShutdown(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def fill(response: Any, remaining: list[Any]) -> None:
            response.remaining_leaders.extend(convert.table_bucket_to_pb(tb) for tb in remaining)

        refused = await self._unproven("ControlledShutdown", request.server_id, context)
        if refused is not None:
            return coordinator_pb2.ControlledShutdownResponse(error=refused)
        event = tables.ControlledShutdown(request.server_id)
        return await self._on_leader(coordinator_pb2.ControlledShutdownResponse, event, fill)

    async def ReportReplicaFaults(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """A tablet server's replicas that failed, are corrupt, or are back (docs/storage.md §9-10)."""
        refused = await self._unproven("ReportReplicaFaults", request.server_id, context)
        if refused is not None:
            return coordinator_pb2.SimpleResponse(error=refused)
        kind = {
            coordinator_pb2.REPLICA_OFFLINE: tables.ReplicasFailed,
            coordinator_pb2.REPLICA_CORRUPT: tables.ReplicasCorrupt,
            coordinator_pb2.REPLICA_RECOVERED: tables.ReplicasRecovered,
        }.get(request.fault)
        if kind is None:
            error = InvalidRequestError(f"unknown replica fault {request.fault}")
            return coordinator_pb2.SimpleResponse(error=convert.error_info(error))
        buckets = [convert.table_bucket_from_pb(b) for b in request.buckets]
        log.info("Tablet server %d reports %s for %d bucket(s): %s", request.server_id,
                 coordinator_pb2.ReplicaFault.Name(request.fault), len(buckets), request.reason)  # fmt: skip
        return await self._on_leader(coordinator_pb2.SimpleResponse, kind(request.server_id, buckets), _nothing)

    async def AllocateWriterId(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def fill(response: Any, writer_id: int) -> None:
            response.writer_id = writer_id

        return await self._on_leader(coordinator_pb2.AllocateWriterIdResponse, tables.AllocateWriterId(), fill)

    # ---------------------------------------------------------------- leader: consumer groups
    async def CommitOffsets(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        offsets = {convert.table_bucket_from_pb(o.table_bucket): o.offset for o in request.offsets}
        event = groups.CommitOffsets(request.group, offsets, request.member_id, request.member_epoch)
        return await self._on_leader(coordinator_pb2.CommitOffsetsResponse, event, _nothing)

    async def FetchOffsets(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def fill(response: Any, offsets: list[Any]) -> None:
            response.offsets.extend(
                coordinator_pb2.BucketOffset(table_bucket=convert.table_bucket_to_pb(tb), offset=offset)
                for tb, offset in offsets
            )

        event = groups.FetchOffsets(request.group, request.table_id)
        return await self._on_leader(coordinator_pb2.FetchOffsetsResponse, event, fill)

    async def ListGroups(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def fill(response: Any, summaries: list[tuple[str, str, int]]) -> None:
            response.groups.extend(name for name, _, _ in summaries)
            response.summaries.extend(
                coordinator_pb2.GroupSummary(group=name, state=state, members=n) for name, state, n in summaries
            )

        return await self._on_leader(coordinator_pb2.ListGroupsResponse, groups.ListGroups(), fill)

    async def ConsumerHeartbeat(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        session_ms = max(request.session_timeout_ms, 3)

        def fill(response: Any, answer: Any) -> None:
            response.member_id = answer.member_id
            response.member_epoch = answer.member_epoch
            # at least three beats per session, whatever the configured interval
            response.heartbeat_interval_ms = min(self._group_limits.heartbeat_interval_ms, session_ms // 3)
            response.assignment.extend(convert.table_bucket_to_pb(tb) for tb in _sorted(answer.assignment))

        event = group_members.ConsumerHeartbeat(
            request.group,
            request.member_id,
            request.member_epoch,
            request.instance_id,
            request.session_timeout_ms,
            frozenset(request.subscribed_table_ids),
            frozenset(convert.table_bucket_from_pb(tb) for tb in request.owned),
            context.peer() if context is not None else "",
        )
        return await self._on_leader(coordinator_pb2.ConsumerHeartbeatResponse, event, fill)

    async def DescribeGroup(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        def fill(response: Any, view: Any) -> None:
            response.state = view.state
            response.group_epoch = view.epoch
            for m in view.members:
                response.members.append(
                    coordinator_pb2.GroupMemberInfo(
                        member_id=m.member_id,
                        instance_id=m.instance_id,
                        client_host=m.client_host,
                        member_epoch=m.member_epoch,
                        session_timeout_ms=m.session_timeout_ms,
                        since_heartbeat_ms=m.since_heartbeat_ms,
                        leaving=m.leaving,
                        assigned=[convert.table_bucket_to_pb(tb) for tb in _sorted(m.assigned)],
                        target=[convert.table_bucket_to_pb(tb) for tb in _sorted(m.target)],
                        subscribed_table_ids=sorted(m.subscribed),
                    )
                )

        event = group_members.DescribeGroup(request.group)
        return await self._on_leader(coordinator_pb2.DescribeGroupResponse, event, fill)

    async def DeleteGroup(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        event = group_members.DeleteGroup(request.group)
        return await self._on_leader(coordinator_pb2.SimpleResponse, event, _nothing)


def _nothing(response: Any, result: Any) -> None:
    return None


def _sorted(buckets: Any) -> list[Any]:
    return sorted(buckets, key=lambda tb: (tb.table_id, tb.bucket))
