"""Request rates and latencies of a tablet server's data path, counted once per RPC (never per record or
per bucket):

    fluss_tablet_request_latency_seconds{request}  histogram of the time spent in the replica layer
    fluss_tablet_request_errors_total{request}     requests that failed as a whole (response ``error``)

``request`` is ``produce``, ``fetch_client`` (``replica_id`` -1), ``fetch_follower`` (a follower's replica
fetch), ``list_offsets`` or ``offsets_for_leader_epoch``. The rate is ``rate(..._latency_seconds_count)``.
A fetch's latency includes its long poll (up to ``max_wait_ms`` when no data arrives); an acks=all produce's
includes the wait for the followers. Per-bucket errors travel in the bucket results and are not counted.
No byte counts: upb's ``ByteSize()`` encodes the message (75 µs for a 160 KB produce request) and summing
the records per bucket would be per-bucket work on every request.

Who may call: ``TabletServicer`` handlers, on the server's loop (``MeteredReplicaLayer`` wraps the layer).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from prometheus_client import CollectorRegistry

from fluss_py import metric_catalogue as mc

REQUESTS = (
    "produce", "fetch_client", "fetch_follower", "list_offsets", "offsets_for_leader_epoch",
    "lookup", "prefix_lookup", "scan_kv",  # primary-key tables
)  # fmt: skip


class RequestMetrics:
    """Owns the request families in ``registry``; one pre-bound child per request kind (no label lookup
    per request)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        latency = mc.TABLET_REQUEST_LATENCY.histogram(registry)
        errors = mc.TABLET_REQUEST_ERRORS.counter(registry)
        self.latency = {r: latency.labels(r) for r in REQUESTS}
        self.errors = {r: errors.labels(r) for r in REQUESTS}

    def observe(self, request: str, seconds: float, failed: bool) -> None:
        self.latency[request].observe(seconds)
        if failed:
            self.errors[request].inc()


class MeteredReplicaLayer:
    """A ``ReplicaLayer`` that times the data-path RPCs of ``inner`` and delegates everything else as is."""

    def __init__(self, inner: Any, metrics: RequestMetrics, clock: Callable[[], float] = time.perf_counter) -> None:
        self.inner = inner
        self.metrics = metrics
        self._clock = clock

    def __getattr__(self, name: str) -> Any:  # control requests, get_metadata, the inner layer's attributes
        return getattr(self.inner, name)

    async def _timed(self, request: str, call: Callable[[Any], Awaitable[Any]], req: Any) -> Any:
        start = self._clock()
        try:
            response = await call(req)
        except Exception:  # the servicer turns it into a gRPC error: still one failed request
            self.metrics.observe(request, self._clock() - start, True)
            raise
        self.metrics.observe(request, self._clock() - start, response.error.code != 0)
        return response

    async def produce_log(self, request: Any) -> Any:
        return await self._timed("produce", self.inner.produce_log, request)

    async def fetch_log(self, request: Any) -> Any:
        kind = "fetch_follower" if request.replica_id >= 0 else "fetch_client"
        return await self._timed(kind, self.inner.fetch_log, request)

    async def list_offsets(self, request: Any) -> Any:
        return await self._timed("list_offsets", self.inner.list_offsets, request)

    async def offsets_for_leader_epoch(self, request: Any) -> Any:
        return await self._timed("offsets_for_leader_epoch", self.inner.offsets_for_leader_epoch, request)

    async def lookup(self, request: Any) -> Any:
        return await self._timed("lookup", self.inner.lookup, request)

    async def prefix_lookup(self, request: Any) -> Any:
        return await self._timed("prefix_lookup", self.inner.prefix_lookup, request)

    async def scan_kv(self, request: Any) -> Any:
        return await self._timed("scan_kv", self.inner.scan_kv, request)
