"""The client's only network edge: ``Transport.call(address, rpc, request, timeout)``.

Everything above this module (metadata, admin, sender, fetcher) talks to servers through the narrow
``Transport`` Protocol, so unit tests plug in an in-memory fake cluster and no socket is ever opened.

``GrpcTransport`` is the real implementation: one ``grpc.aio`` channel per address (created lazily,
cached, 64 MiB messages). A channel that failed to connect (TRANSIENT_FAILURE) is dropped after the failed
call: gRPC would refuse every call on it at once until its reconnect backoff (growing to 1 s) ends, even
after the server is back, so a restarted server is reached by the next call instead (callers back off
themselves). Subchannels are local to each channel for the same reason (gRPC shares them process-wide).
gRPC failures become ``ApiError``s (``rpc.convert.map_grpc_error``, with its table) so callers branch on
``retriable``/``invalid_metadata`` only. Application errors travel inside responses (``ErrorInfo``);
``rpc.convert.raise_for_client`` turns one into an exception carrying the server's leader hint.
PRODUCE_LOG calls travel on one ProduceLogStream per address (``client/produce_stream.py``; docs/client.md
"Produce on a stream"), unary ProduceLog for a server without it; a consumer's FETCH_LOG calls travel on a
ConsumerFetchStream per address the same way (``client/lockstep_stream.py``; "Consumer fetches on a stream").
A server refusing this client's TLS credentials only closes the connection (gRPC says "Socket closed", as for
a server that died): a connection that fails so is probed once more with the same TLS files
(``security/tls_refusal.py``, one probe per address at a time), and a refusal becomes AUTHENTICATION_FAILED
at once, naming why (an expired certificate's dates, the server's alert, a certificate of another CA), which
callers do not retry; a server that is down or unreachable stays NETWORK_EXCEPTION.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, Protocol, TypeVar

import grpc
import grpc.aio

from fluss_py.client.lockstep_stream import LockstepStreamClient
from fluss_py.client.produce_stream import ProduceStreamClient
from fluss_py.errors import AuthenticationFailedError, FlussError, NetworkExceptionError
from fluss_py.rpc.channels import client_channel_options, open_channel
from fluss_py.rpc.convert import map_grpc_error, map_stream_error
from fluss_py.rpc.keepalive import DEFAULT_KEEPALIVE, Keepalive
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, tablet_pb2
from fluss_py.rpc.streams import CONSUMER_FETCH_STREAM_ACCEPTED, GrpcStream
from fluss_py.security.identity import PLAINTEXT, PeerIdentity
from fluss_py.security.tls import validity_problem
from fluss_py.security.tls_refusal import handshake_refusal

COORDINATOR_SERVICE = "CoordinatorService"
TABLET_SERVICE = "TabletService"


def _closed_by_peer(details: str | None) -> bool:
    """Whether gRPC's text of a failed connection says the server closed it (or cut the handshake), which is
    all a server refusing a client certificate does; not a refused connect, a timeout, a name not resolved."""
    text = (details or "").lower()
    return any(sign in text for sign in ("socket closed", "connection reset", "handshake", "end of file"))


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
PRODUCE_LOG_STREAM_PATH = f"/fluss.v1.{TABLET_SERVICE}/ProduceLogStream"  # PRODUCE_LOG's stream (GrpcTransport)
FETCH_LOG = Rpc(TABLET_SERVICE, "FetchLog", tablet_pb2.FetchLogResponse)
CONSUMER_FETCH_STREAM_PATH = f"/fluss.v1.{TABLET_SERVICE}/ConsumerFetchStream"  # a consumer's FETCH_LOG stream
LIST_OFFSETS = Rpc(TABLET_SERVICE, "ListOffsets", tablet_pb2.ListOffsetsResponse)
TABLET_GET_METADATA = Rpc(TABLET_SERVICE, "GetMetadata", common_pb2.MetadataResponse)
LOOKUP = Rpc(TABLET_SERVICE, "Lookup", tablet_pb2.LookupResponse)  # primary-key tables (client/kv/)
PREFIX_LOOKUP = Rpc(TABLET_SERVICE, "PrefixLookup", tablet_pb2.PrefixLookupResponse)
SCAN_KV = Rpc(TABLET_SERVICE, "ScanKv", tablet_pb2.ScanKvResponse)
# Coordinator service (admin, writer ids, metadata).
COORDINATOR_GET_METADATA = Rpc(COORDINATOR_SERVICE, "GetMetadata", common_pb2.MetadataResponse)
GET_COORDINATOR_INFO = Rpc(COORDINATOR_SERVICE, "GetCoordinatorInfo", coordinator_pb2.GetCoordinatorInfoResponse)
CREATE_DATABASE = Rpc(COORDINATOR_SERVICE, "CreateDatabase", coordinator_pb2.SimpleResponse)
DROP_DATABASE = Rpc(COORDINATOR_SERVICE, "DropDatabase", coordinator_pb2.SimpleResponse)
LIST_DATABASES = Rpc(COORDINATOR_SERVICE, "ListDatabases", coordinator_pb2.ListDatabasesResponse)
CREATE_TABLE = Rpc(COORDINATOR_SERVICE, "CreateTable", coordinator_pb2.CreateTableResponse)
DROP_TABLE = Rpc(COORDINATOR_SERVICE, "DropTable", coordinator_pb2.SimpleResponse)
ALTER_TABLE = Rpc(COORDINATOR_SERVICE, "AlterTable", coordinator_pb2.SimpleResponse)
LIST_TABLES = Rpc(COORDINATOR_SERVICE, "ListTables", coordinator_pb2.ListTablesResponse)
ALLOCATE_WRITER_ID = Rpc(COORDINATOR_SERVICE, "AllocateWriterId", coordinator_pb2.AllocateWriterIdResponse)
COMMIT_OFFSETS = Rpc(COORDINATOR_SERVICE, "CommitOffsets", coordinator_pb2.CommitOffsetsResponse)
FETCH_OFFSETS = Rpc(COORDINATOR_SERVICE, "FetchOffsets", coordinator_pb2.FetchOffsetsResponse)
LIST_GROUPS = Rpc(COORDINATOR_SERVICE, "ListGroups", coordinator_pb2.ListGroupsResponse)
CONSUMER_HEARTBEAT = Rpc(COORDINATOR_SERVICE, "ConsumerHeartbeat", coordinator_pb2.ConsumerHeartbeatResponse)
DESCRIBE_GROUP = Rpc(COORDINATOR_SERVICE, "DescribeGroup", coordinator_pb2.DescribeGroupResponse)
DELETE_GROUP = Rpc(COORDINATOR_SERVICE, "DeleteGroup", coordinator_pb2.SimpleResponse)
ALTER_SERVER_TAG = Rpc(COORDINATOR_SERVICE, "AlterServerTag", coordinator_pb2.AlterServerTagResponse)
DESCRIBE_SERVER_TAGS = Rpc(COORDINATOR_SERVICE, "DescribeServerTags", coordinator_pb2.DescribeServerTagsResponse)


class EncodedRequest:
    """A request message already serialized (the producer's ProduceLog, see ``producer/request.py``).

    Passed to ``Transport.call`` in place of the message: gRPC sends the bytes as they are
    (``SerializeToString``, which joins ``parts`` once); in-memory transports read it back with ``decode()``.
    ``with_field`` appends an encoded field without copying the parts (a stream's correlation id).
    """

    __slots__ = ("message_type", "parts")

    def __init__(self, parts: list[bytes | bytearray], message_type: Any) -> None:
        self.parts = parts
        self.message_type = message_type

    def SerializeToString(self) -> bytes:
        return b"".join(self.parts)

    def decode(self) -> Any:
        return self.message_type.FromString(self.SerializeToString())

    def with_field(self, encoded: bytes) -> EncodedRequest:
        """The same request with ``encoded`` (a tag and its value) appended: protobuf reads fields in any order."""
        return EncodedRequest([*self.parts, encoded], self.message_type)


class Transport(Protocol):
    """Sends one request (a message or an ``EncodedRequest``) to one server and returns its response
    message, or raises an ``ApiError``.

    Implementations must be safe to call from many tasks of one event loop at once.
    """

    async def call(self, address: str, rpc: Rpc, request: Any, timeout: float) -> Any: ...

    async def close(self) -> None: ...


class _StreamUnsupported(Exception):
    """The server answered UNIMPLEMENTED to a stream (ProduceLogStream, ConsumerFetchStream): it handled
    nothing, send unary."""


STREAM_RETRY_S = 60.0
"""After a server answered UNIMPLEMENTED to a stream, unary calls to it for this long."""


class _StreamClient(Protocol):
    async def call(self, request: Any, timeout: float) -> Any: ...


C = TypeVar("C", bound=_StreamClient)


class _StreamRoute(Generic[C]):
    """One kind of request stream per address (produce, consumer fetch): ``client(address)`` is the address's
    stream client, or None to send unary (the kind is off, or the server answered UNIMPLEMENTED less than
    ``STREAM_RETRY_S`` ago)."""

    def __init__(self, enabled: bool, make: Callable[[str], C], close: Callable[[C], Awaitable[None]]) -> None:
        self._enabled = enabled
        self._make = make
        self._close = close
        self._clients: dict[str, C] = {}
        self._unary_until: dict[str, float] = {}  # address -> loop time: no stream there until then

    @property
    def clients(self) -> Mapping[str, C]:
        """The open stream clients by address (read-only)."""
        return MappingProxyType(self._clients)

    def client(self, address: str) -> C | None:
        if not self._enabled:
            return None
        client = self._clients.get(address)
        if client is None:
            until = self._unary_until.get(address)
            if until is not None and asyncio.get_running_loop().time() < until:
                return None
            client = self._clients[address] = self._make(address)
        return client

    async def unsupported(self, address: str, client: C) -> None:
        """The server has no such stream: unary to it for a while (unless another client replaced this one)."""
        if self._clients.get(address) is client:
            del self._clients[address]
            self._unary_until[address] = asyncio.get_running_loop().time() + STREAM_RETRY_S
            await self._close(client)

    async def drop(self, address: str) -> None:
        client = self._clients.pop(address, None)
        if client is not None:
            await self._close(client)

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            await self._close(client)


async def _close_lockstep(client: LockstepStreamClient) -> None:
    client.close()


async def _close_produce(client: ProduceStreamClient) -> None:
    await client.close()


class GrpcTransport:
    """``Transport`` over grpc.aio: one cached channel per address; call from the owning event loop only.

    ``identity``: TLS files and credentials sent to every server (default plaintext, anonymous).
    ``produce_stream``: PRODUCE_LOG calls travel on one ProduceLogStream per address (docs/client.md
    "Produce on a stream"); off: unary ProduceLog calls. ``fetch_stream``: a consumer's FETCH_LOG calls
    (replica_id -1) travel on ConsumerFetchStreams ("Consumer fetches on a stream"); off: unary FetchLog.
    ``keepalive``: the pings of its connections (``rpc.keepalive.*``, docs/failure-detection.md)."""

    def __init__(
        self,
        identity: PeerIdentity = PLAINTEXT,
        *,
        produce_stream: bool = True,
        fetch_stream: bool = True,
        keepalive: Keepalive = DEFAULT_KEEPALIVE,
    ) -> None:
        self._identity = identity
        self._channel_options = client_channel_options(keepalive)
        self._metadata = identity.metadata()  # user + password with every call (inside TLS only)
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._stubs: dict[tuple[str, str], Any] = {}
        self._produce = _StreamRoute(produce_stream, self._produce_stream, _close_produce)
        self._consumer_fetch = _StreamRoute(fetch_stream, self._consumer_fetch_stream, _close_lockstep)
        self._probes: dict[str, asyncio.Future[str | None]] = {}  # address -> the TLS refusal probe running

    def _channel(self, address: str) -> grpc.aio.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = open_channel(address, self._identity, self._channel_options, send_credentials=False)
            self._channels[address] = channel
        return channel

    @property
    def produce_streams(self) -> Mapping[str, ProduceStreamClient]:
        """The ProduceLogStream clients by address (read-only)."""
        return self._produce.clients

    @property
    def consumer_fetch_streams(self) -> Mapping[str, LockstepStreamClient]:
        """The ConsumerFetchStream clients by address (read-only)."""
        return self._consumer_fetch.clients

    def _produce_stream(self, address: str) -> ProduceStreamClient:
        what = f"ProduceLogStream to {address}"
        opener = self._opener(address, PRODUCE_LOG_STREAM_PATH, tablet_pb2.ProduceLogResponse, "produce stream")
        return ProduceStreamClient(opener, self._broken(address, "ProduceLogStream", what), what)

    def _consumer_fetch_stream(self, address: str) -> LockstepStreamClient:
        what = f"ConsumerFetchStream to {address}"
        opener = self._opener(address, CONSUMER_FETCH_STREAM_PATH, tablet_pb2.FetchLogResponse, "fetch stream")
        broken = self._broken(address, "ConsumerFetchStream", what)
        return LockstepStreamClient(opener, broken, CONSUMER_FETCH_STREAM_ACCEPTED, what)

    def _opener(self, address: str, path: str, response_type: Any, what: str) -> Callable[[], GrpcStream]:
        def open_stream() -> GrpcStream:
            method = self._channel(address).stream_stream(
                path,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response_type.FromString,
            )
            return GrpcStream(method(metadata=self._metadata), what)

        return open_stream

    def _broken(self, address: str, method: str, what: str) -> Callable[[BaseException], BaseException]:
        """What a failure of a ``method`` stream to ``address`` becomes for the requests on it."""

        def broken(cause: BaseException) -> BaseException:
            if isinstance(cause, grpc.aio.AioRpcError):
                if cause.code() is grpc.StatusCode.UNIMPLEMENTED:
                    return _StreamUnsupported(str(cause.details()))
                return map_stream_error(address, method, cause.code(), cause.details())
            if isinstance(cause, FlussError):
                return cause
            return NetworkExceptionError(f"{what}: {cause!r}")

        return broken

    async def _on_stream(
        self, route: _StreamRoute[C], client: C, address: str, rpc: Rpc, request: Any, timeout: float
    ) -> Any:
        try:
            return await client.call(request, timeout)
        except _StreamUnsupported:
            await route.unsupported(address, client)
            return await self.call(address, rpc, request, timeout)
        except NetworkExceptionError as e:
            await self._drop_if_unreachable(address)
            refused = await self._tls_refusal(address, e.message)
            if refused is not None:
                raise refused from None
            raise

    def _stub(self, address: str, rpc: Rpc) -> Any:
        key = (address, rpc.path)
        stub = self._stubs.get(key)
        if stub is None:
            stub = self._channel(address).unary_unary(
                rpc.path,
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=rpc.response_type.FromString,
            )
            self._stubs[key] = stub
        return stub

    async def call(self, address: str, rpc: Rpc, request: Any, timeout: float) -> Any:
        if rpc is PRODUCE_LOG:
            producer = self._produce.client(address)
            if producer is not None:
                return await self._on_stream(self._produce, producer, address, rpc, request, timeout)
        elif rpc is FETCH_LOG and request.replica_id == -1:
            fetcher = self._consumer_fetch.client(address)
            if fetcher is not None:
                return await self._on_stream(self._consumer_fetch, fetcher, address, rpc, request, timeout)
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
                refused = await self._tls_refusal(address, e.details())
                if refused is not None:
                    raise refused from None
            raise map_grpc_error(address, rpc.name, e.code(), e.details()) from None

    async def _tls_refusal(self, address: str, details: str | None) -> AuthenticationFailedError | None:
        """AUTHENTICATION_FAILED when a failed connection to ``address`` was the server refusing this client's
        TLS credentials (see the module docstring), else None."""
        tls = self._identity.tls
        if tls is None:
            return None
        if not _closed_by_peer(details):  # refused, timed out, unreachable: the server said nothing about us
            why = validity_problem(tls)
        else:
            probe = self._probes.get(address)
            if probe is None:
                probe = self._probes[address] = asyncio.ensure_future(handshake_refusal(address, tls))
                probe.add_done_callback(lambda _: self._probes.pop(address, None))
            why = await asyncio.shield(probe)
        return None if why is None else AuthenticationFailedError(f"TLS handshake with {address} failed: {why}")

    async def _drop_if_unreachable(self, address: str) -> None:
        channel = self._channels.get(address)
        if channel is None or channel.get_state() is not grpc.ChannelConnectivity.TRANSIENT_FAILURE:
            return
        del self._channels[address]
        self._stubs = {key: stub for key, stub in self._stubs.items() if key[0] != address}
        await self._produce.drop(address)
        await self._consumer_fetch.drop(address)
        await channel.close()  # it has no connection: nothing in flight on it can succeed

    async def close(self) -> None:
        for probe in list(self._probes.values()):
            probe.cancel()
        await self._produce.close()
        await self._consumer_fetch.close()
        channels, self._channels, self._stubs = list(self._channels.values()), {}, {}
        for channel in channels:
            await channel.close()
