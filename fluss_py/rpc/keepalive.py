"""HTTP/2 keepalive of a process's gRPC connections: ``Keepalive(time, timeout)`` and its channel arguments.

Both ends of every connection ping it ``time`` after the last ping, even with no call open, and close it when
no ack arrives within ``timeout``, failing its calls and streams: a peer that vanished without FIN or RST
(powered off, partitioned away) is noticed within ``time + timeout`` (docs/failure-detection.md "Vanished
peers"). The values come from ``rpc.keepalive.time`` / ``rpc.keepalive.timeout`` (every role reads them).
The timeout is also gRPC's ping timeout: grpcio 1.85 closes a connection whose ping went unanswered only when
``grpc.http2.ping_timeout_ms`` (default 1 min) runs out, ``grpc.keepalive_timeout_ms`` alone closes nothing.

A gRPC server answers a client that pings more often than it permits with GOAWAY ``too_many_pings``, which
fails every call on the connection. A server here permits pings every ``PERMITTED_PING_INTERVAL_S`` (half the
smallest ``rpc.keepalive.time`` any process accepts), whatever its own ``time``: a client or peer configured
with a shorter time than this server (a tuned client, a rolling change of the key) is never sent one.

Pure: no gRPC import; ``fluss_py.rpc.channels`` and ``fluss_py.rpc.server`` put the arguments on channels
and servers. Who may call: anyone; immutable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fluss_py import config as cfg
from fluss_py.errors import ConfigError

PERMITTED_PING_INTERVAL_S: float = cfg.MIN_RPC_KEEPALIVE_TIME / 2
"""Pings a server accepts without a strike: twice as often as the most frequent valid sender (margin for
timer jitter and pings bunched by a slow network)."""


@dataclass(frozen=True, slots=True)
class Keepalive:
    """Ping interval ``time`` and ack deadline ``timeout`` (seconds) of every connection of one channel or
    server. Values outside the options' ranges raise ``ConfigError`` naming the option."""

    time: float = cfg.RPC_KEEPALIVE_TIME.default
    timeout: float = cfg.RPC_KEEPALIVE_TIMEOUT.default

    def __post_init__(self) -> None:
        for option, value in ((cfg.RPC_KEEPALIVE_TIME, self.time), (cfg.RPC_KEEPALIVE_TIMEOUT, self.timeout)):
            if isinstance(value, bool) or not isinstance(value, int | float) or not option.admits(value):
                raise ConfigError(option.key, f"{value!r} is out of range (allowed: {option.allowed_text()})")

    @classmethod
    def from_config(cls, config: cfg.Config) -> Keepalive:
        return cls(config[cfg.RPC_KEEPALIVE_TIME], config[cfg.RPC_KEEPALIVE_TIMEOUT])

    @property
    def detection_s(self) -> float:
        """How long after a peer's last traffic its connection is closed at the latest (timers' jitter aside)."""
        return self.time + self.timeout

    def channel_args(self) -> list[tuple[str, Any]]:
        """The arguments of a client channel (also part of a server's)."""
        return [
            ("grpc.keepalive_time_ms", round(self.time * 1000)),
            ("grpc.keepalive_timeout_ms", round(self.timeout * 1000)),
            ("grpc.http2.ping_timeout_ms", round(self.timeout * 1000)),  # see the module docstring
            ("grpc.keepalive_permit_without_calls", 1),  # ping idle connections too (a parked peer's)
            ("grpc.http2.max_pings_without_data", 0),  # no cap on pings while no data flows (default 2)
        ]

    def server_args(self) -> list[tuple[str, Any]]:
        """The arguments of a server: its own pings, and the pings it permits (see the module docstring).
        ``grpc.http2.min_ping_interval_without_data_ms`` is gRPC's MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS;
        ``grpc.keepalive_permit_without_calls`` on a server also permits pings on a connection without calls."""
        return [
            *self.channel_args(),
            ("grpc.http2.min_ping_interval_without_data_ms", round(PERMITTED_PING_INTERVAL_S * 1000)),
        ]


DEFAULT_KEEPALIVE = Keepalive()
