"""Tablet-server side of proof-of-death failure detection (docs/failure-detection.md).

``LivenessBeacon`` answers ``TabletService.WatchLiveness``: a stream the coordinator leader keeps open for
this process's lifetime, carrying a heartbeat at once and then every ``interval_ms``. The heartbeats name
the server id and this process's *incarnation* (a random id drawn once per process start and written into
the ``tabletservers/ids/<id>`` registration), so the coordinator knows which life of the server answers.
The stream changes no state; it exists so that the kernel closing this process's sockets (kill -9, crash,
exit) breaks it at once on the coordinator's side.

``is_own_stale_registration`` is the pure rule a restarting server uses to take over the registration of
its dead predecessor without waiting for that session to expire.

Who may call: grpc.aio on the tablet server's loop (``stream``); the tablet server's registration code.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fluss_py.rpc.pb import tablet_pb2
from fluss_py.zk.paths import TabletServerRegistration

log = logging.getLogger("fluss_py.tablet.LivenessBeacon")

DEFAULT_INTERVAL_MS = 1000
MIN_INTERVAL_MS = 50


def new_incarnation() -> str:
    """A fresh incarnation id (128 random bits, hex)."""
    return uuid.uuid4().hex


def is_own_stale_registration(
    existing: TabletServerRegistration, host: str, port: int, incarnation: str, port_bound: bool
) -> bool:
    """True when ``existing`` (a registration of our id held by another ZooKeeper session) provably belongs
    to a predecessor of this process that can no longer serve.

    It names our advertised ``host:port``, and this process has bound that port (RPC servers bind without
    SO_REUSEPORT): so no other process listens there, and a tablet server registers only after binding its
    port and closes it only when it exits. Its incarnation must differ from ours (else it is our own node).
    """
    return port_bound and (existing.host, existing.port) == (host, port) and existing.incarnation != incarnation


class LivenessBeacon:
    """Serves WatchLiveness streams for one process (one incarnation). Owned by the tablet server."""

    def __init__(self, server_id: int, incarnation: str) -> None:
        self.server_id = server_id
        self.incarnation = incarnation
        self.streams = 0  # open streams (for /health and tests)

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        interval = (request.interval_ms if request.interval_ms > 0 else DEFAULT_INTERVAL_MS) / 1000
        interval = max(interval, MIN_INTERVAL_MS / 1000)
        log.info(
            "Liveness stream opened by coordinator %d (epoch %d), heartbeat every %.0f ms",
            request.coordinator_id, request.coordinator_epoch, interval * 1000,
        )  # fmt: skip
        self.streams += 1
        sequence = 0
        try:
            while True:
                yield tablet_pb2.LivenessHeartbeat(
                    server_id=self.server_id, incarnation=self.incarnation, sequence=sequence
                )
                sequence += 1
                await asyncio.sleep(interval)
        finally:
            self.streams -= 1
            log.debug("Liveness stream of coordinator %d closed", request.coordinator_id)
