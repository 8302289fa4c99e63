"""gRPC servicer of ``TabletService``: who is the peer, then delegation to the replica layer.

Control requests (NotifyLeaderAndIsr, StopReplica, UpdateMetadata) are accepted only from the current
coordinator leader: ``tablet/coordinator_fence.py``'s ``CoordinatorFence`` checks their epoch against
ZooKeeper and the leader token they present (docs/peer-trust.md); with mutual TLS the caller's certificate
must first name the coordinator the request claims (``fluss://coordinator/<id>``). A follower fetch
(``replica_id`` >= 0) is passed on only when the ``ReplicaVerifier`` (``rpc/peer.py``) says the caller
proved it is that server; the replica tokens it checks come with each accepted UpdateMetadata. A follower's
``FetchLogStream`` is proven the same way at its first message, then bound to that replica, one fetch session
and one leader epoch per bucket (``replica/fetch_stream.py``, docs/replication.md "Streamed follower fetches").
A ``ProduceLogStream`` carries produce requests, each authorized by the security interceptor like a ProduceLog
(``tablet/produce_stream.py``, docs/client.md "Produce on a stream"); a ``ConsumerFetchStream`` carries a
consumer's fetches the same way, each authorized like a FetchLog (``tablet/consumer_fetch_stream.py``).
Refusals are whole-request errors, logged and counted by a ``RefusalLog``
(``fluss_tablet_peer_refusals_total{kind}``).

Everything else is the replica layer's job, plugged in through the narrow ``ReplicaLayer`` Protocol
(one coroutine per RPC, request in, response out). The server plugs in ``tablet/replica_layer.py``'s
``ManagerReplicaLayer``; the unit tests of the fencing plug in a fake.

Who may call: grpc.aio on the process's loop; ``ReplicaLayer`` methods are called from that loop only.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any, Protocol

import grpc.aio

from fluss_py.errors import (
    CoordinatorNotAuthenticatedError,
    InvalidRequestError,
    ReplicaNotAuthenticatedError,
)
from fluss_py.replica.fetch_stream import FetchStreamGuard
from fluss_py.rpc import convert
from fluss_py.rpc.pb import tablet_pb2, tablet_pb2_grpc
from fluss_py.rpc.peer import (
    COORDINATOR_TOKEN_KEY,
    REPLICA_TOKEN_KEY,
    RefusalLog,
    TokenReplicaVerifier,
    presented,
)
from fluss_py.rpc.streams import CONSUMER_FETCH_STREAM_ACCEPTED, PRODUCE_STREAM_ACCEPTED
from fluss_py.security.interceptor import message_refusal
from fluss_py.security.server_names import COORDINATOR, certificate_refusal
from fluss_py.tablet.consumer_fetch_stream import serve_consumer_fetches
from fluss_py.tablet.coordinator_fence import NOT_LEADER, CoordinatorFence, CoordinatorRefused
from fluss_py.tablet.produce_stream import ProduceStreamHandler

log = logging.getLogger(__name__)


class ReplicaLayer(Protocol):
    """What the tablet service delegates to (the replica manager implements it)."""

    async def produce_log(self, request: Any) -> Any: ...

    async def fetch_log(self, request: Any) -> Any: ...

    async def list_offsets(self, request: Any) -> Any: ...

    async def offsets_for_leader_epoch(self, request: Any) -> Any: ...

    async def get_metadata(self, request: Any) -> Any: ...

    async def lookup(self, request: Any) -> Any: ...

    async def prefix_lookup(self, request: Any) -> Any: ...

    async def scan_kv(self, request: Any) -> Any: ...

    async def notify_leader_and_isr(self, request: Any) -> Any: ...

    async def stop_replica(self, request: Any) -> Any: ...

    async def update_metadata(self, request: Any) -> Any: ...


REPLICA_NOT_AUTHENTICATED = "replica_not_authenticated"
FETCH_STREAM_REFUSED = "fetch_stream_refused"  # a proven replica's stream broke a binding (a bug or a forgery)


class TabletServicer(tablet_pb2_grpc.TabletServiceServicer):
    """Checks who the peer is (coordinator leader, follower), then delegates; owns the refusal log."""

    def __init__(
        self,
        fence: CoordinatorFence,
        layer: ReplicaLayer,
        replicas: TokenReplicaVerifier,
        *,
        coordinator_certificates: bool = False,
    ) -> None:
        self.fence = fence
        self.coordinator_certificates = coordinator_certificates  # mutual TLS: the certificate names the caller
        self.layer = layer
        self.replicas = replicas
        self.refusals = RefusalLog(log)
        self.liveness: Any = None  # tablet.liveness.LivenessBeacon, set by the tablet server before serving

    async def _from_coordinator(self, request: Any, context: Any, response_type: type, what: str, call: Any) -> Any:
        epoch, cid = request.coordinator_epoch, request.coordinator_id
        try:
            if self.coordinator_certificates:
                why = certificate_refusal(context, COORDINATOR, cid)
                if why is not None:
                    raise CoordinatorRefused(NOT_LEADER, CoordinatorNotAuthenticatedError(
                        f"{what} claiming coordinator {cid} at epoch {epoch} refused: {why}"
                    ))  # fmt: skip
            token = presented(context, COORDINATOR_TOKEN_KEY) if context is not None else ""
            await self.fence.check(epoch, cid, token, what)
        except CoordinatorRefused as e:
            self.refusals.refuse(e.kind, f"{what}/{cid}/{epoch}", f"Refused {what} from {_peer(context)}: {e}")
            return response_type(error=convert.error_info(e.error))
        return await call(request)

    # ---------------------------------------------------------------- coordinator -> tablet server
    async def NotifyLeaderAndIsr(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._from_coordinator(
            request, context, tablet_pb2.NotifyLeaderAndIsrResponse, "NotifyLeaderAndIsr",
            self.layer.notify_leader_and_isr,
        )  # fmt: skip

    async def StopReplica(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._from_coordinator(
            request, context, tablet_pb2.StopReplicaResponse, "StopReplica", self.layer.stop_replica
        )

    async def UpdateMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self._from_coordinator(
            request, context, tablet_pb2.UpdateMetadataResponse, "UpdateMetadata", self._update_metadata
        )

    async def _update_metadata(self, request: Any) -> Any:
        self.replicas.update({t.server_id: t.token for t in request.replica_tokens})
        return await self.layer.update_metadata(request)

    async def WatchLiveness(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        """Heartbeat stream for proof-of-death failure detection (docs/failure-detection.md); not fenced."""
        if self.liveness is None:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, "no liveness beacon in this server")
        async for beat in self.liveness.stream(request):
            yield beat

    # ---------------------------------------------------------------- data path
    async def ProduceLog(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.layer.produce_log(request)

    async def ProduceLogStream(self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> None:
        """Produce requests on one stream (docs/client.md "Produce on a stream"): each message authorized as a
        ProduceLog by the security interceptor's per-message check, handled as one, answered with its
        correlation id as soon as it completes (``tablet/produce_stream.py``)."""
        await context.send_initial_metadata(
            (PRODUCE_STREAM_ACCEPTED,)
        )  # the client writes once it knows the stream is taken
        await ProduceStreamHandler(self.layer.produce_log, context.write, message_refusal).run(requests)

    async def FetchLog(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        claimed = request.replica_id
        if claimed < -1:
            error = InvalidRequestError(f"replica_id {claimed}: -1 (a client) or a tablet server id")
            return tablet_pb2.FetchLogResponse(error=convert.error_info(error))
        if claimed >= 0:
            refused = await self._unproven_replica("FetchLog", claimed, context)
            if refused is not None:
                return refused
        return await self.layer.fetch_log(request)

    async def ConsumerFetchStream(self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> None:
        """A consumer's fetches on one stream (docs/client.md "Consumer fetches on a stream"): each message
        authorized as a FetchLog by the interceptor's per-message check, handled as one, answered in order."""
        await context.send_initial_metadata((CONSUMER_FETCH_STREAM_ACCEPTED,))  # the client writes after this
        await serve_consumer_fetches(requests, self.layer.fetch_log, context.write, message_refusal)

    async def FetchLogStream(self, requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> Any:
        """A follower's fetch session on one stream (docs/replication.md "Streamed follower fetches"): the
        first message's replica id is proven like a follower FetchLog's, then each message must keep to the
        stream's bindings (``FetchStreamGuard``) and the token presented at open must still be current. Each
        admitted message is handled as a FetchLog; lockstep: the next is read only after this answer."""
        guard: FetchStreamGuard | None = None
        token = ""
        async for request in requests:
            claimed = request.replica_id
            if guard is None:
                if claimed < 0:
                    error: Any = InvalidRequestError(f"replica_id {claimed}: a fetch stream is for followers only")
                    yield tablet_pb2.FetchLogResponse(error=convert.error_info(error))
                    return
                refused = await self._unproven_replica("FetchLogStream", claimed, context)
                if refused is not None:
                    yield refused
                    return
                guard = FetchStreamGuard(claimed)
                token = presented(context, REPLICA_TOKEN_KEY)
            elif not self.replicas.still_current(guard.replica_id, token):
                why = "its replica token is no longer the server's current one"
                yield self._refuse_replica("FetchLogStream", guard.replica_id, context, why)
                return
            error = guard.admit(
                claimed,
                request.session.id if request.HasField("session") else None,
                (((b.table_bucket.table_id, b.table_bucket.bucket), b.current_leader_epoch) for b in request.buckets),
            )
            if error is not None:
                self.refusals.refuse(
                    FETCH_STREAM_REFUSED, str(claimed), f"Ended the fetch stream of replica {claimed}: {error}"
                )
                yield tablet_pb2.FetchLogResponse(error=convert.error_info(error))
                return
            response = await self.layer.fetch_log(request)
            yield response
            if not guard.answered(response.session_id, not convert.is_ok(response.error)):
                return

    async def _unproven_replica(self, what: str, claimed: int, context: Any) -> Any:
        """None when the caller proves it is tablet server ``claimed``, else the refusal to answer."""
        why = await self.replicas.verify(claimed, context)
        return None if why is None else self._refuse_replica(what, claimed, context, why)

    def _refuse_replica(self, what: str, claimed: int, context: Any, why: str) -> Any:
        message = f"Refused {what} claiming replica {claimed} from {_peer(context)}: {why}"
        self.refusals.refuse(REPLICA_NOT_AUTHENTICATED, str(claimed), message)
        error = ReplicaNotAuthenticatedError(f"fetch as replica {claimed} refused: {why}")
        return tablet_pb2.FetchLogResponse(error=convert.error_info(error))

    async def ListOffsets(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.layer.list_offsets(request)

    async def OffsetsForLeaderEpoch(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.layer.offsets_for_leader_epoch(request)

    async def GetMetadata(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.layer.get_metadata(request)

    # ---------------------------------------------------------------- primary-key tables (docs/primary-key-tables.md)
    async def Lookup(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.layer.lookup(request)

    async def PrefixLookup(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.layer.prefix_lookup(request)

    async def ScanKv(self, request: Any, context: grpc.aio.ServicerContext) -> Any:
        return await self.layer.scan_kv(request)


def _peer(context: Any) -> str:
    """The caller's address as gRPC reports it (for log lines)."""
    try:
        return str(context.peer())
    except Exception:
        return "an unknown peer"
