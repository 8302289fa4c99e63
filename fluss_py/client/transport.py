"""The client's only network edge: ``Transport.call(address, rpc, request, timeout)``.

Everything above this module (metadata, admin, sender, fetcher) talks to servers through the narrow
``Transport`` Protocol, so unit tests plug in an in-memory fake cluster and no socket is ever opened.

``GrpcTransport`` is the real implementation: one ``grpc.aio`` channel per address (created lazily,
cached, 64 MiB messages). A channel that failed to connect (TRANSIENT_FAILURE) is dropped after the failed
call: gRPC would refuse every call on it at once until its reconnect backoff (growing to 1 s) ends, even
after the server is back, so a restarted server is reached by the next call instead (callers back off
themselves). Subchannels are local to each channel for the same reason (gRPC shares them process-wide).
gRPC failures become ``ApiError``s so callers branch on ``retriable``/``invalid_metadata`` only::

    UNAVAILABLE, CANCELLED, UNKNOWN (connection reset)   -> NETWORK_EXCEPTION   (retriable, invalid metadata)
    DEADLINE_EXCEEDED                                    -> REQUEST_TIMED_OUT   (retriable)
    UNIMPLEMENTED (wrong service at that address)        -> INVALID_REQUEST
    UNAVAILABLE after a failed TLS handshake             -> AUTHENTICATION_FAILED (wrong CA, expired cert, ...)
    UNAUTHENTICATED (no or bad credentials)              -> AUTHENTICATION_FAILED
    PERMISSION_DENIED (no ACL allows it)                 -> AUTHORIZATION_FAILED  (names operation and resource)
    anything else                                        -> UNKNOWN_SERVER_ERROR

Application errors travel inside responses (``ErrorInfo``); ``raise_for_error`` turns one into an exception
carrying the server's leader hint.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
import grpc.aio

from fluss_py.config import MAX_RPC_MESSAGE_BYTES
from fluss_py.errors import (
    ApiError,
    AuthenticationFailedError,
    AuthorizationFailedError,
    ErrorCode,
    InvalidRequestError,
    NetworkExceptionError,
    RequestTimedOutError,
    UnknownServerError,
    error_from,
)
from fluss_py.rpc.channels import open_channel
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, tablet_pb2
from fluss_py.security.identity import PLAINTEXT, PeerIdentity

MAX_MESSAGE_BYTES = MAX_RPC_MESSAGE_BYTES  # the registry bounds sizes that must fit in one message

COORDINATOR_SERVICE = "CoordinatorService"
TABLET_SERVICE = "TabletService"


@dataclass(frozen=True, slots=True)
class Rpc:
    """One RPC method: its service, its name and the response message class."""

    service: str
    name: str
    response_type: Any

    @property
    def path(self) -> str:
        return f"/fluss.v1.{self.service}/{self.name}"


# Tablet service (data path).
PRODUCE_LOG = Rpc(TABLET_SERVICE, "ProduceLog", tablet_pb2.ProduceLogResponse)
FETCH_LOG = Rpc(TABLET_SERVICE, "FetchLog", tablet_pb2.FetchLogResponse)
LIST_OFFSETS = Rpc(TABLET_SERVICE, "ListOffsets", tablet_pb2.ListOffsetsResponse)
TABLET_GET_METADATA = Rpc(TABLET_SERVICE, "GetMetadata", common_pb2.MetadataResponse)
# Coordinator service (admin, writer ids, metadata).
COORDINATOR_GET_METADATA = Rpc(COORDINATOR_SERVICE, "GetMetadata", common_pb2.MetadataResponse)
GET_COORDINATOR_INFO = Rpc(COORDINATOR_SERVICE, "GetCoordinatorInfo", coordinator_pb2.GetCoordinatorInfoResponse)
CREATE_DATABASE = Rpc(COORDINATOR_SERVICE, "CreateDatabase", coordinator_pb2.SimpleResponse)
DROP_DATABASE = Rpc(COORDINATOR_SERVICE, "DropDatabase", coordinator_pb2.SimpleResponse)
LIST_DATABASES = Rpc(COORDINATOR_SERVICE, "ListDatabases", coordinator_pb2.ListDatabasesResponse)
CREATE_TABLE = Rpc(COORDINATOR_SERVICE, "CreateTable", coordinator_pb2.CreateTableResponse)
DROP_TABLE = Rpc(COORDINATOR_SERVICE, "DropTable", coordinator_pb2.SimpleResponse)
LIST_TABLES = Rpc(COORDINATOR_SERVICE, "ListTables", coordinator_pb2.ListTablesResponse)
ALLOCATE_WRITER_ID = Rpc(COORDINATOR_SERVICE, "AllocateWriterId", coordinator_pb2.AllocateWriterIdResponse)
COMMIT_OFFSETS = Rpc(COORDINATOR_SERVICE, "CommitOffsets", coordinator_pb2.SimpleResponse)
FETCH_OFFSETS = Rpc(COORDINATOR_SERVICE, "FetchOffsets", coordinator_pb2.FetchOffsetsResponse)
LIST_GROUPS = Rpc(COORDINATOR_SERVICE, "ListGroups", coordinator_pb2.ListGroupsResponse)
CONSUMER_HEARTBEAT = Rpc(COORDINATOR_SERVICE, "ConsumerHeartbeat", coordinator_pb2.ConsumerHeartbeatResponse)
DESCRIBE_GROUP = Rpc(COORDINATOR_SERVICE, "DescribeGroup", coordinator_pb2.DescribeGroupResponse)
DELETE_GROUP = Rpc(COORDINATOR_SERVICE, "DeleteGroup", coordinator_pb2.SimpleResponse)


class EncodedRequest:
    """A request message already serialized (the producer's ProduceLog, see ``producer/request.py``).

    Passed to ``Transport.call`` in place of the message: gRPC sends ``data`` as is (``SerializeToString``);
    in-memory transports read it back with ``decode()``.
    """

    __slots__ = ("data", "message_type")

    def __init__(self, data: bytes, message_type: Any) -> None:
        self.data = data
        self.message_type = message_type

    def SerializeToString(self) -> bytes:
        return self.data

    def decode(self) -> Any:
        return self.message_type.FromString(self.data)


class Transport(Protocol):
    """Sends one request (a message or an ``EncodedRequest``) to one server and returns its response
    message, or raises an ``ApiError``.

    Implementations must be safe to call from many tasks of one event loop at once.
    """

    async def call(self, address: str, rpc: Rpc, request: Any, timeout: float) -> Any: ...

    async def close(self) -> None: ...


def raise_for_error(error: common_pb2.ErrorInfo) -> None:
    """Raise the ApiError described by an ``ErrorInfo`` (with its leader hint); no-op for NONE/unset."""
    if error.code != ErrorCode.NONE:
        raise error_from_info(error)


def error_from_info(error: common_pb2.ErrorInfo) -> ApiError:
    leader_id = error.leader_id if error.leader_address else -1
    return error_from(error.code, error.message, leader_id=leader_id, leader_address=error.leader_address)


_CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.enable_retries", 0),
    # subchannels of their own: gRPC shares them process-wide by default, and a shared one still waiting out
    # its reconnect backoff made a fresh channel to a restarted server fail at once too
    ("grpc.use_local_subchannel_pool", 1),
]


class GrpcTransport:
    """``Transport`` over grpc.aio: one cached channel per address; call from the owning event loop only.

    ``identity``: TLS files and credentials sent to every server (default plaintext, anonymous)."""

    def __init__(self, identity: PeerIdentity = PLAINTEXT) -> None:
        self._identity = identity
        self._metadata = identity.metadata()  # user + password with every call (inside TLS only)
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[tuple[str, str], Any] = {}

    def _stub(self, address: str, rpc: Rpc) -> Any:
        key = (address, rpc.path)
        stub = self._stubs.get(key)
        if stub is None:
            channel = self._channels.get(address)
            if channel is None:
                channel = open_channel(address, self._identity, _CHANNEL_OPTIONS, send_credentials=False)
                self._channels[address] = channel
            stub = channel.unary_unary(
                rpc.path,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=rpc.response_type.FromString,
            )
            self._stubs[key] = stub
        return stub

    async def call(self, address: str, rpc: Rpc, request: Any, timeout: float) -> Any:
        try:
            return await self._stub(address, rpc)(request, timeout=timeout, metadata=self._metadata)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # this task is being cancelled
            # the call was cancelled under us: another task closed its channel (``_drop_if_unreachable``)
            raise NetworkExceptionError(f"{rpc.name} to {address}: the channel was closed") from None
        except grpc.aio.AioRpcError as e:
            if e.code() is grpc.StatusCode.UNAVAILABLE:
                await self._drop_if_unreachable(address)
            raise map_grpc_error(address, rpc, e.code(), e.details()) from None

    async def _drop_if_unreachable(self, address: str) -> None:
        channel = self._channels.get(address)
        if channel is None or channel.get_state() is not grpc.ChannelConnectivity.TRANSIENT_FAILURE:
            return
        del self._channels[address]
        self._stubs = {key: stub for key, stub in self._stubs.items() if key[0] != address}
        await channel.close()  # it has no connection: nothing in flight on it can succeed

    async def close(self) -> None:
        channels, self._channels, self._stubs = list(self._channels.values()), {}, {}
        for channel in channels:
            await channel.close()


def map_grpc_error(address: str, rpc: Rpc, code: grpc.StatusCode, details: str | None) -> ApiError:
    """The ApiError a failed gRPC call becomes (see the module docstring)."""
    text = f"{rpc.name} to {address}: {code.name} {details or ''}".strip()
    if code is grpc.StatusCode.UNAUTHENTICATED:
        return AuthenticationFailedError(details or text)
    if code is grpc.StatusCode.PERMISSION_DENIED:
        return AuthorizationFailedError(details or text)
    if code is grpc.StatusCode.UNAVAILABLE and _tls_failure(details):
        return AuthenticationFailedError(f"TLS handshake with {address} failed: {details}")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN):
        return NetworkExceptionError(text)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimedOutError(text)
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return InvalidRequestError(text)
    return UnknownServerError(text)


def _tls_failure(details: str | None) -> bool:
    """gRPC reports a failed handshake (wrong CA, expired or unknown certificate) as UNAVAILABLE."""
    text = (details or "").lower()
    return "handshake" in text or "ssl" in text or "certificate" in text
