"""Tablet-server side of proof-of-death failure detection (docs/failure-detection.md).

``LivenessBeacon`` answers ``TabletService.WatchLiveness``: a stream the coordinator leader keeps open for
this process's lifetime, carrying a heartbeat at once and then every ``interval_ms``. The heartbeats name
the server id and this process's *incarnation* (a random id drawn once per process start and written into
the ``tabletservers/ids/<id>`` registration), so the coordinator knows which life of the server answers.
The stream changes no state; it exists so that the kernel closing this process's sockets (kill -9, crash,
exit) breaks it at once on the coordinator's side. It also carries, on its first heartbeat and then every
``sizes_interval_s``, the log sizes of the buckets this server leads (the rebalance planner's input,
docs/rebalance.md §2). The first report of a stream is whole (one pass over the replicas); the later ones
are incremental (the buckets whose size changed, and those no longer led), so an idle server with thousands
of led buckets sends no per-bucket entry. With a ``LedSource`` (the replica manager's ``LedChanges``,
replica/led_report.py) a later report looks only at the buckets whose log or role changed since the last
one, so it does not scan the replicas either: an idle server's report is O(1). Every ``disk_interval_s`` it checks the
server's disk use (bytes held by all its replicas, one ``statvfs`` per data directory): ``DiskReporter``
puts it on the heartbeat only on a stream's first check, when it moved by more than ``DISK_THRESHOLD_BYTES``
or after ``DISK_REFRESH_CHECKS`` checks without a report, so an idle server's heartbeats stay empty.

``is_own_stale_registration`` is the pure rule a restarting server uses to take over the registration of
its dead predecessor without waiting for that session to expire.

Who may call: grpc.aio on the tablet server's loop (``stream``); the tablet server's registration code.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, Protocol

from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.types import TableBucket
from fluss_py.zk.codecs import TabletServerRegistration

log = logging.getLogger(__name__)

DEFAULT_INTERVAL_MS = 1000
MIN_INTERVAL_MS = 50
SIZES_INTERVAL_S = 2.0
DISK_INTERVAL_S = 10.0
DISK_THRESHOLD_BYTES = 8 << 20  # held bytes, or a directory's free bytes, moved by more: reported
DISK_REFRESH_CHECKS = 6  # an unchanged disk use is reported again after this many checks (60 s)

LedSizes = Callable[[], Iterable[tuple[TableBucket, tuple[int, int, int]]]]  # (bucket, (bytes, HW, LEO))


class LedTouched(Protocol):
    def take(self) -> set[TableBucket]: ...  # the buckets whose log or role changed since the last take

    def close(self) -> None: ...


class LedSource(Protocol):
    """What changed among the led buckets (``replica.led_report.LedChanges``)."""

    def watch(self) -> LedTouched: ...

    def current(self, tb: TableBucket) -> tuple[int, int, int] | None: ...  # (bytes, HW, LEO) if led, else None


# (bytes held by all replicas, [(data directory, free bytes, filesystem bytes)], -1 where unknown)
DiskSample = tuple[int, list[tuple[str, int, int]]]
DiskUse = Callable[[], DiskSample]


def disk_moved(last: DiskSample, now: DiskSample, threshold: int = DISK_THRESHOLD_BYTES) -> bool:
    """True when ``now`` differs from the last reported sample by more than ``threshold`` bytes (held bytes
    or a directory's free bytes), or in its directories or their sizes (pure)."""
    if abs(now[0] - last[0]) > threshold or [(p, t) for p, _, t in now[1]] != [(p, t) for p, _, t in last[1]]:
        return True
    return any(abs(a[1] - b[1]) > threshold for a, b in zip(now[1], last[1], strict=True))


class DiskReporter:
    """Which disk checks of one liveness stream go on its heartbeat (see the module docstring). Owned by
    that stream."""

    def __init__(self, threshold: int = DISK_THRESHOLD_BYTES, refresh_checks: int = DISK_REFRESH_CHECKS) -> None:
        self.threshold = threshold
        self.refresh_checks = refresh_checks
        self._last: DiskSample | None = None
        self._unreported = 0

    def check(self, sample: DiskSample) -> DiskSample | None:
        """The sample to report, or None to keep this heartbeat free of it."""
        self._unreported += 1
        last = self._last
        if last is not None and self._unreported < self.refresh_checks and not disk_moved(last, sample, self.threshold):
            return None
        self._last, self._unreported = sample, 0
        return sample


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

    def __init__(
        self,
        server_id: int,
        incarnation: str,
        led_sizes: LedSizes | None = None,
        sizes_interval_s: float = SIZES_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
        disk_use: DiskUse | None = None,
        disk_interval_s: float = DISK_INTERVAL_S,
        led_changes: LedSource | None = None,
    ) -> None:
        self.server_id = server_id
        self.incarnation = incarnation
        self.led_sizes = led_sizes  # (bucket, (bytes, HW, LEO)) of the buckets it leads; None: never reported
        self.sizes_interval_s = sizes_interval_s
        self._clock = clock
        self.disk_use = disk_use  # None: never reported
        self.disk_interval_s = disk_interval_s
        self.led_changes = led_changes  # None: every report compares all led buckets (led_sizes)
        self.streams = 0  # open streams (for /health and tests)
        self._closed = asyncio.Event()

    def close(self) -> None:
        """End every stream after its current beat (the server is stopping): an open stream is an RPC in
        flight, and the RPC server's stop waited its whole grace for the coordinator's. The coordinator takes
        the end as a broken stream: it probes, and a refused connect once the listener is closed proves the
        death its session's end would report a moment later."""
        self._closed.set()

    def heartbeat(
        self,
        sequence: int,
        with_sizes: bool,
        reported: dict[TableBucket, tuple[int, int, int]] | None = None,
        touched: LedTouched | None = None,
    ) -> tuple[Any, dict[TableBucket, tuple[int, int, int]] | None]:
        """One heartbeat, and the sizes the stream has reported so far. With ``with_sizes`` and a provider,
        it carries the led buckets' sizes, HW and LEO: all of them when ``reported`` is None (a stream's first
        report), else only those whose size, HW or LEO differ from ``reported`` and, in ``sizes_dropped``, the
        ones no longer led (an idle bucket changes none of the three: it is not in the report). ``touched``
        (the stream's watch of ``led_changes``, opened before its first report): a later report compares
        only the buckets it names, and updates ``reported`` in place."""
        beat = tablet_pb2.LivenessHeartbeat(server_id=self.server_id, incarnation=self.incarnation, sequence=sequence)
        if not with_sizes or self.led_sizes is None:
            return beat, reported
        if reported is not None and touched is not None and self.led_changes is not None:
            return self._changes(beat, reported, touched, self.led_changes), reported
        now = dict(self.led_sizes())
        beat.sizes_included = True
        changed = now if reported is None else {tb: s for tb, s in now.items() if reported.get(tb) != s}
        beat.led_bucket_sizes.extend(
            tablet_pb2.BucketSize(table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket),
                                  size_bytes=size, high_watermark=hw, log_end_offset=leo)
            for tb, (size, hw, leo) in changed.items()
        )  # fmt: skip
        if reported is not None:
            beat.sizes_incremental = True
            beat.sizes_dropped.extend(
                common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket) for tb in reported if tb not in now
            )
        return beat, now

    @staticmethod
    def _changes(
        beat: Any, reported: dict[TableBucket, tuple[int, int, int]], touched: LedTouched, led: LedSource
    ) -> Any:
        """An incremental report from the touched buckets only (``reported`` brought up to date)."""
        beat.sizes_included = beat.sizes_incremental = True
        for tb in touched.take():
            now = led.current(tb)
            if now is None:
                if reported.pop(tb, None) is not None:
                    beat.sizes_dropped.append(common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket))
            elif reported.get(tb) != now:
                reported[tb] = now
                size, hw, leo = now
                beat.led_bucket_sizes.append(
                    tablet_pb2.BucketSize(table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket),
                                          size_bytes=size, high_watermark=hw, log_end_offset=leo)
                )  # fmt: skip
        return beat

    @staticmethod
    def add_disk(beat: Any, sample: DiskSample) -> None:
        held, dirs = sample
        beat.disk.held_bytes = held
        beat.disk.dirs.extend(tablet_pb2.DataDirUse(path=p, free_bytes=f, total_bytes=t) for p, f, t in dirs)

    async def _closing(self, interval: float) -> bool:
        """Sleeps one heartbeat interval; True (at once) when the beacon is closed."""
        if not self._closed.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closed.wait(), interval)
        return self._closed.is_set()

    async def stream(self, request: Any) -> AsyncIterator[Any]:
        interval = (request.interval_ms if request.interval_ms > 0 else DEFAULT_INTERVAL_MS) / 1000
        interval = max(interval, MIN_INTERVAL_MS / 1000)
        log.info(
            "Liveness stream opened by coordinator %d (epoch %d), heartbeat every %.0f ms",
            request.coordinator_id, request.coordinator_epoch, interval * 1000,
        )  # fmt: skip
        self.streams += 1
        sequence = 0
        sizes_due = self._clock()
        reported: dict[TableBucket, tuple[int, int, int]] | None = None  # what this stream's reports add up to
        disk_due, disk = sizes_due, DiskReporter()
        touched: LedTouched | None = None  # opened with the first report, in the same loop step
        try:
            while True:
                now = self._clock()
                with_sizes = now >= sizes_due
                if with_sizes:
                    sizes_due = now + self.sizes_interval_s
                    if touched is None and self.led_changes is not None and self.led_sizes is not None:
                        touched = self.led_changes.watch()
                beat, reported = self.heartbeat(sequence, with_sizes, reported, touched)
                if self.disk_use is not None and now >= disk_due:
                    disk_due = now + self.disk_interval_s
                    sample = disk.check(self.disk_use())
                    if sample is not None:
                        self.add_disk(beat, sample)
                yield beat
                sequence += 1
                if await self._closing(interval):
                    return
        finally:
            if touched is not None:
                touched.close()
            self.streams -= 1
            log.debug("Liveness stream of coordinator %d closed", request.coordinator_id)
