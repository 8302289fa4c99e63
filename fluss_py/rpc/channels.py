"""The one place gRPC channels are made: ``open_channel(address, identity, options)``; and ``ChannelPool``.
Their options are named here once: ``CHANNEL_OPTIONS`` (servers) and ``CLIENT_CHANNEL_OPTIONS`` (the client).

``open_channel`` makes a TLS channel (trusting ``security.tls.ca-file``, presenting the process's certificate)
or a plaintext one, per the ``PeerIdentity``; a user + password identity adds an interceptor that sends them
with every call. Server-to-server callers (coordinator -> tablet server, follower fetchers, AdjustIsr,
ControlledShutdown) pass no identity: they use the process's own, set once at start by the server wiring
with ``set_server_identity`` (plaintext until then).

``ChannelPool`` caches one channel per ``host:port`` for the coordinator leader's calls to tablet servers:
created when it becomes leader, closed (every channel) when it loses leadership. Channels use big message
limits and a short reconnect backoff so a restarted server is reached again quickly.

Who may call: coroutines on the owning loop; ``set_server_identity`` once, before any channel is made.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import grpc
import grpc.aio

from fluss_py.config import MAX_RPC_MESSAGE_BYTES
from fluss_py.security.identity import PLAINTEXT, PeerIdentity
from fluss_py.security.tls import channel_credentials

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = MAX_RPC_MESSAGE_BYTES  # the registry bounds sizes that must fit in one message

# HTTP/2 keepalive (docs/failure-detection.md "Vanished peers"): both ends ping every KEEPALIVE_TIME_MS on
# an idle connection, even with no call open, and close it when no ack comes within KEEPALIVE_TIMEOUT_MS,
# failing its streams: a peer that vanished without FIN/RST is detected within time + timeout (~15 s).
KEEPALIVE_TIME_MS = 10_000
KEEPALIVE_TIMEOUT_MS = 5_000
KEEPALIVE_OPTIONS: list[tuple[str, Any]] = [
    ("grpc.keepalive_time_ms", KEEPALIVE_TIME_MS),
    ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_MS),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
]
# The server accepts pings as often as the client sends them (a faster client would get a GOAWAY
# "too_many_pings"): half the keepalive interval leaves margin for timer jitter.
SERVER_KEEPALIVE_OPTIONS: list[tuple[str, Any]] = [
    *KEEPALIVE_OPTIONS,
    ("grpc.http2.min_recv_ping_interval_without_data_ms", KEEPALIVE_TIME_MS // 2),
    ("grpc.http2.min_ping_interval_without_data_ms", KEEPALIVE_TIME_MS // 2),
]


def channel_options(reconnect_backoff_ms: int) -> list[tuple[str, Any]]:
    """The options of every channel: message limits of the registry, no gRPC retries (callers retry with
    their own backoff), a reconnect backoff of ``reconnect_backoff_ms`` growing to 1 s, and subchannels of
    their own: gRPC shares them process-wide by default, and a shared one still waiting out its reconnect
    backoff makes a fresh channel to a restarted server fail too."""
    return [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.initial_reconnect_backoff_ms", reconnect_backoff_ms),
        ("grpc.min_reconnect_backoff_ms", reconnect_backoff_ms),
        ("grpc.max_reconnect_backoff_ms", 1000),
        ("grpc.enable_retries", 0),
        ("grpc.use_local_subchannel_pool", 1),
        *KEEPALIVE_OPTIONS,
    ]


CHANNEL_OPTIONS = channel_options(100)
"""Server to server (coordinator -> tablet server, follower fetchers, AdjustIsr, ControlledShutdown)."""
CLIENT_CHANNEL_OPTIONS = channel_options(50)
"""The client's transport: it drops a channel that failed to connect and retries on its own backoff, so a
shorter first reconnect reaches a restarted server sooner."""

_server_identity: PeerIdentity = PLAINTEXT


def set_server_identity(identity: PeerIdentity) -> None:
    """The identity this server presents to other servers (called once by the server wiring at start)."""
    global _server_identity
    _server_identity = identity


def server_identity() -> PeerIdentity:
    return _server_identity


class _Credentials(grpc.aio.UnaryUnaryClientInterceptor, grpc.aio.UnaryStreamClientInterceptor):
    """Adds the identity's user + password metadata to every call of a channel."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self._metadata = metadata

    def _with_credentials(self, details: grpc.aio.ClientCallDetails) -> grpc.aio.ClientCallDetails:
        metadata = grpc.aio.Metadata(*self._metadata)
        for key, value in details.metadata or ():
            metadata.add(key, value)
        return grpc.aio.ClientCallDetails(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
        )

    async def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with_credentials(details), request)

    async def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return await continuation(self._with_credentials(details), request)


def open_channel(
    address: str,
    identity: PeerIdentity | None = None,
    options: Sequence[tuple[str, Any]] = CHANNEL_OPTIONS,
    *,
    send_credentials: bool = True,
) -> grpc.aio.Channel:
    """A new channel to ``address`` secured per ``identity`` (default: this server's own identity).

    ``send_credentials=False``: the caller passes ``identity.metadata()`` with each call itself (the client
    transport does: an aio client interceptor costs an extra task per call)."""
    identity = identity or _server_identity
    metadata = identity.metadata() if send_credentials else None
    interceptors = [_Credentials(metadata)] if metadata else None
    if identity.tls is None:
        return grpc.aio.insecure_channel(address, options=list(options), interceptors=interceptors)
    opts = list(options)
    if identity.tls.server_name:
        opts.append(("grpc.ssl_target_name_override", identity.tls.server_name))
    return grpc.aio.secure_channel(address, channel_credentials(identity.tls), options=opts, interceptors=interceptors)


class ChannelPool:
    """Owns one channel per address until ``close``; after ``close`` it refuses new channels."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._closed = False

    def get(self, address: str) -> grpc.aio.Channel:
        if self._closed:
            raise RuntimeError("channel pool is closed")
        channel = self._channels.get(address)
        if channel is None:
            channel = open_channel(address)
            self._channels[address] = channel
        return channel

    async def drop(self, address: str) -> None:
        """Close the channel of one address (e.g. a server that died)."""
        channel = self._channels.pop(address, None)
        if channel is not None:
            await channel.close()

    async def close(self) -> None:
        self._closed = True
        channels, self._channels = list(self._channels.values()), {}
        for channel in channels:
            await channel.close()

    def __len__(self) -> int:
        return len(self._channels)
