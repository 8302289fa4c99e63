"""The one place gRPC channels are made: ``open_channel(address, identity, options)``; and ``ChannelPool``.
Their options are named here once: ``server_channel_options()`` (server to server) and
``client_channel_options(keepalive)`` (the client's transport).

``open_channel`` makes a TLS channel (trusting ``security.tls.ca-file``, presenting the process's certificate)
or a plaintext one, per the ``PeerIdentity``; a user + password identity adds an interceptor that sends them
with every call. Server-to-server callers (coordinator -> tablet server, follower fetchers, AdjustIsr,
ControlledShutdown) pass no identity and no options: they use the process's own identity and keepalive
(``rpc.keepalive.*``, docs/failure-detection.md "Vanished peers"), set once at start by the server wiring with
``set_server_identity`` and ``set_server_keepalive`` (plaintext and the default keepalive until then).

``ChannelPool`` caches one channel per ``host:port`` for the coordinator leader's calls to tablet servers:
created when it becomes leader, closed (every channel) when it loses leadership. Channels use big message
limits and a short reconnect backoff so a restarted server is reached again quickly.

Who may call: coroutines on the owning loop; ``set_server_identity`` and ``set_server_keepalive`` once, before
any channel is made.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import grpc
import grpc.aio

from fluss_py.config import MAX_RPC_MESSAGE_BYTES
from fluss_py.rpc.keepalive import DEFAULT_KEEPALIVE, Keepalive
from fluss_py.security.identity import PLAINTEXT, PeerIdentity
from fluss_py.security.tls import channel_credentials

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = MAX_RPC_MESSAGE_BYTES  # the registry bounds sizes that must fit in one message


def channel_options(reconnect_backoff_ms: int, keepalive: Keepalive = DEFAULT_KEEPALIVE) -> list[tuple[str, Any]]:
    """The options of every channel: message limits of the registry, no gRPC retries (callers retry with
    their own backoff), a reconnect backoff of ``reconnect_backoff_ms`` growing to 1 s, subchannels of
    their own (gRPC shares them process-wide by default, and a shared one still waiting out its reconnect
    backoff makes a fresh channel to a restarted server fail too), and ``keepalive``'s pings."""
    return [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.initial_reconnect_backoff_ms", reconnect_backoff_ms),
        ("grpc.min_reconnect_backoff_ms", reconnect_backoff_ms),
        ("grpc.max_reconnect_backoff_ms", 1000),
        ("grpc.enable_retries", 0),
        ("grpc.use_local_subchannel_pool", 1),
        *keepalive.channel_args(),
    ]


def client_channel_options(keepalive: Keepalive = DEFAULT_KEEPALIVE) -> list[tuple[str, Any]]:
    """The client's transport: it drops a channel that failed to connect and retries on its own backoff, so a
    shorter first reconnect reaches a restarted server sooner."""
    return channel_options(50, keepalive)


CLIENT_CHANNEL_OPTIONS = client_channel_options()
"""``client_channel_options()`` with the default keepalive."""

_server_identity: PeerIdentity = PLAINTEXT
_server_keepalive: Keepalive = DEFAULT_KEEPALIVE


def set_server_identity(identity: PeerIdentity) -> None:
    """The identity this server presents to other servers (called once by the server wiring at start)."""
    global _server_identity
    _server_identity = identity


def server_identity() -> PeerIdentity:
    return _server_identity


def set_server_keepalive(keepalive: Keepalive) -> None:
    """This server's keepalive (``rpc.keepalive.*``): its RPC server's and its channels to other servers'
    (called once by the server wiring at start)."""
    global _server_keepalive
    _server_keepalive = keepalive


def server_keepalive() -> Keepalive:
    return _server_keepalive


def server_channel_options() -> list[tuple[str, Any]]:
    """Server to server (coordinator -> tablet server, follower fetchers, AdjustIsr, ControlledShutdown)."""
    return channel_options(100, _server_keepalive)


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
    options: Sequence[tuple[str, Any]] | None = None,
    *,
    send_credentials: bool = True,
) -> grpc.aio.Channel:
    """A new channel to ``address`` secured per ``identity`` (default: this server's own identity), with
    ``options`` (default: ``server_channel_options()``).

    ``send_credentials=False``: the caller passes ``identity.metadata()`` with each call itself (the client
    transport does: an aio client interceptor costs an extra task per call)."""
    identity = identity or _server_identity
    options = server_channel_options() if options is None else options
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
