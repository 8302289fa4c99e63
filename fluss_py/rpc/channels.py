"""Cached ``grpc.aio`` channels, one per ``host:port``, for server-to-server calls.

The coordinator leader's "RPC client" resource: created when it becomes leader, closed (every channel)
when it loses leadership. Channels use big message limits and a short reconnect backoff so a restarted
server is reached again quickly.

Who may call: coroutines on the owning loop.
"""

from __future__ import annotations

import logging

import grpc.aio

from fluss_py.config import MAX_RPC_MESSAGE_BYTES

log = logging.getLogger("fluss_py.rpc.ChannelPool")

MAX_MESSAGE_BYTES = MAX_RPC_MESSAGE_BYTES  # the registry bounds sizes that must fit in one message
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
    ("grpc.enable_retries", 0),
    # subchannels of their own (as the client's transport): gRPC shares them process-wide by default, and a
    # shared one still waiting out its reconnect backoff makes a fresh channel to a restarted server fail too
    ("grpc.use_local_subchannel_pool", 1),
]


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
            channel = grpc.aio.insecure_channel(address, options=CHANNEL_OPTIONS)
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
