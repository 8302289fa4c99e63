"""Proof-of-death failure detection on the coordinator leader (design: docs/failure-detection.md).

One watcher task per live tablet-server registration (server id + incarnation) keeps a ``WatchLiveness``
stream open to that server. When the stream cannot be opened or breaks, the watcher probes the server's
RPC port with a plain TCP connect::

    stream ends/fails ──▶ probe host:port ──▶ REFUSED (ECONNREFUSED)      ──▶ proof: report, dead mode
                                       └──▶ CONNECTED | TIMEOUT | OTHER  ──▶ no proof: back off, re-open
    dead mode: (the handler applied the proof, its node is still in ZooKeeper) every DEAD_RECHECK s try the
               stream again; a heartbeat of the same incarnation means the proof was wrong: report it alive
               (``TabletServerAliveAgain``). Ends when the node is gone or replaced (``sync``).

Only ECONNREFUSED is proof: the kernel of the server's host answered that nothing listens on the port the
registration names, and a tablet server binds that port before it registers and closes it only when it
exits. Missing heartbeats are never proof (a SIGSTOPped process keeps its sockets; the stream just goes
quiet): such a server is left to ZooKeeper session expiry. A proof is reported as
``TabletServerDeathProven`` on the event loop, which applies it only if the registration is still the one
the watcher followed (idempotent with the later session expiry and with a re-registration).

``LivenessStream`` and ``Prober`` are the narrow network edges (gRPC stream, TCP connect); unit tests pass
fakes. ``decide`` is the pure rule.

Who may call: the leader services create and ``close`` the monitor; ``sync`` runs on the event loop (a
MetadataHandlers liveness listener); watcher tasks are owned by the monitor.
"""

from __future__ import annotations

import asyncio
import enum
import errno
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import grpc.aio

from fluss_py.rpc.channels import ChannelPool
from fluss_py.rpc.pb import tablet_pb2, tablet_pb2_grpc
from fluss_py.types import TableBucket
from fluss_py.zk.codecs import TabletServerRegistration

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_MS = 500
PROBE_TIMEOUT = 1.0
RETRY_INITIAL = 0.1
RETRY_MAX = 1.0
DEAD_RECHECK = 2.0
# A kill -9'd process's kernel resets its connections (the stream breaks) a moment before it closes its listening
# socket, which meanwhile still completes handshakes: a probe that connects right after a break is made again
# after these pauses before the stream is re-opened with back-off (the proof is still only a refused connect).
CONNECTED_RECHECKS = (0.01, 0.02, 0.04)


class ProbeResult(enum.Enum):
    REFUSED = "refused"  # ECONNREFUSED: the host's kernel says nothing listens there
    CONNECTED = "connected"  # something accepted the connection (alive, paused, or a new incarnation)
    TIMEOUT = "timeout"  # no answer in time (partition, overloaded host)
    UNREACHABLE = "unreachable"  # any other error (no route, host down, ...): says nothing about the process


def decide(probe: ProbeResult) -> bool:
    """True when a probe made after the liveness stream failed proves the watched incarnation dead."""
    return probe is ProbeResult.REFUSED


def classify_connect_error(exc: BaseException) -> ProbeResult:
    """Map a failed TCP connect to a ProbeResult (pure)."""
    if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == errno.ECONNREFUSED:
        return ProbeResult.REFUSED
    if isinstance(exc, TimeoutError):
        return ProbeResult.TIMEOUT
    return ProbeResult.UNREACHABLE


async def probe_port(host: str, port: int, timeout: float = PROBE_TIMEOUT) -> ProbeResult:
    """One TCP connect to host:port (closed at once). Used by the watcher; a ``Prober``."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
    except (OSError, TimeoutError) as e:
        return classify_connect_error(e)
    writer.close()
    try:
        await writer.wait_closed()
    except OSError:
        pass
    return ProbeResult.CONNECTED


class Prober(Protocol):
    async def __call__(self, host: str, port: int, timeout: float = PROBE_TIMEOUT) -> ProbeResult: ...


class LivenessStream(Protocol):
    """Follows one server's liveness stream until it ends; returns why it ended (for the log)."""

    async def follow(self, server_id: int, reg: TabletServerRegistration, on_heartbeat: Callable[[], None]) -> str: ...


# (server, sizes, dropped buckets, incremental, (HW, LEO) per bucket): one led-sizes report of a liveness stream
SizesReport = Callable[[int, dict[TableBucket, int], list[TableBucket], bool, dict[TableBucket, tuple[int, int]]], None]
# (server, (bytes held, [(data directory, free bytes, filesystem bytes)])): one disk report (the console)
DiskReport = Callable[[int, tuple[int, list[tuple[str, int, int]]]], None]


class GrpcLivenessStream:
    """LivenessStream over ``TabletService.WatchLiveness`` on the leader's ChannelPool (owned by the caller).
    Heartbeats that carry the server's led-bucket sizes are handed to ``on_sizes`` (docs/rebalance.md §2),
    those that carry its disk use to ``on_disk`` (the console)."""

    def __init__(
        self,
        pool: ChannelPool,
        coordinator_id: int,
        coordinator_epoch: int,
        on_sizes: SizesReport | None = None,
        on_disk: DiskReport | None = None,
    ) -> None:
        self._pool = pool
        self._on_sizes = on_sizes
        self._on_disk = on_disk
        self._request = tablet_pb2.WatchLivenessRequest(
            coordinator_epoch=coordinator_epoch, coordinator_id=coordinator_id, interval_ms=HEARTBEAT_INTERVAL_MS
        )

    async def follow(self, server_id: int, reg: TabletServerRegistration, on_heartbeat: Callable[[], None]) -> str:
        stub = tablet_pb2_grpc.TabletServiceStub(self._pool.get(reg.address))
        call = stub.WatchLiveness(self._request)
        try:
            async for beat in call:
                if beat.server_id != server_id or (reg.incarnation and beat.incarnation != reg.incarnation):
                    # Another process answers at this address: the registration we follow is stale; the
                    # new one reaches us through ZooKeeper. Not a proof (see the module docstring).
                    return f"answered by server {beat.server_id} incarnation {beat.incarnation!r}"
                on_heartbeat()
                if beat.sizes_included and self._on_sizes is not None:
                    incremental = beat.sizes_incremental
                    self._on_sizes(server_id, sizes_of(beat), dropped_of(beat), incremental, offsets_of(beat))
                if self._on_disk is not None and beat.HasField("disk"):
                    self._on_disk(server_id, disk_of(beat))
            return "stream ended by the server"
        except asyncio.CancelledError:
            call.cancel()
            raise
        except (grpc.aio.AioRpcError, OSError) as e:
            return _short(e)
        finally:
            call.cancel()


def sizes_of(beat: tablet_pb2.LivenessHeartbeat) -> dict[TableBucket, int]:
    """The led-bucket sizes a heartbeat carries (pure)."""
    return {TableBucket(s.table_bucket.table_id, s.table_bucket.bucket): s.size_bytes for s in beat.led_bucket_sizes}


def offsets_of(beat: tablet_pb2.LivenessHeartbeat) -> dict[TableBucket, tuple[int, int]]:
    """(HW, LEO) of the led buckets a heartbeat carries (pure)."""
    return {
        TableBucket(s.table_bucket.table_id, s.table_bucket.bucket): (s.high_watermark, s.log_end_offset)
        for s in beat.led_bucket_sizes
    }


def disk_of(beat: tablet_pb2.LivenessHeartbeat) -> tuple[int, list[tuple[str, int, int]]]:
    """(bytes held, [(data directory, free bytes, filesystem bytes)]) a heartbeat carries (pure)."""
    return beat.disk.held_bytes, [(d.path, d.free_bytes, d.total_bytes) for d in beat.disk.dirs]


def dropped_of(beat: tablet_pb2.LivenessHeartbeat) -> list[TableBucket]:
    """The buckets an incremental report says are no longer led (pure)."""
    return [TableBucket(tb.table_id, tb.bucket) for tb in beat.sizes_dropped]


def _short(e: BaseException) -> str:
    code, details = getattr(e, "code", None), getattr(e, "details", None)
    if callable(code) and callable(details):
        try:
            return f"{code().name}: {details()}"
        except Exception:
            pass
    return f"{type(e).__name__}: {e}"


Report = Callable[[int, TabletServerRegistration, str], None]
ReportAlive = Callable[[int, TabletServerRegistration], None]


@dataclass
class _Watcher:
    reg: TabletServerRegistration
    dead: bool  # dead mode: waiting for a heartbeat that would disprove a proof
    task: asyncio.Task


class LivenessMonitor:
    """Owns one watcher task per tablet-server registration the leader wants watched. Created and closed by
    LeaderServices; ``sync`` is called by MetadataHandlers on the event loop after every membership change.

    ``sync(live, proven_dead)`` is level-triggered: a live registration gets a normal watcher, a registration
    proven dead (its node still in ZooKeeper) a dead-mode watcher, anything else none. A watcher that
    reported (a proof, or a heartbeat in dead mode) idles until the handler's decision arrives by ``sync``.
    """

    def __init__(
        self,
        stream: LivenessStream,
        report: Report,
        prober: Prober = probe_port,
        retry_initial: float = RETRY_INITIAL,
        retry_max: float = RETRY_MAX,
        report_alive: ReportAlive | None = None,
        dead_recheck: float = DEAD_RECHECK,
    ) -> None:
        self._stream = stream
        self._report = report
        self._report_alive = report_alive
        self._dead_recheck = dead_recheck
        self._probe = prober
        self._retry_initial = retry_initial
        self._retry_max = retry_max
        self._watchers: dict[int, _Watcher] = {}
        self.last_heartbeat: dict[int, float] = {}  # server id -> monotonic time (metrics, tests)
        self.proofs = 0  # deaths proven by this monitor (metrics)
        self._closed = False

    def watched(self) -> dict[int, TabletServerRegistration]:
        """Registrations watched in normal mode."""
        return {sid: w.reg for sid, w in self._watchers.items() if not w.dead}

    def watched_dead(self) -> dict[int, TabletServerRegistration]:
        """Registrations proven dead, watched for a heartbeat that would disprove the proof."""
        return {sid: w.reg for sid, w in self._watchers.items() if w.dead}

    def sync(self, live: dict[int, TabletServerRegistration], proven_dead: dict[int, TabletServerRegistration]) -> None:
        """Make the watchers match the leader's view (MetadataHandlers liveness listener, on the loop)."""
        if self._closed:
            return
        wanted = {sid: (reg, False) for sid, reg in live.items()}
        if self._report_alive is not None:
            wanted.update({sid: (reg, True) for sid, reg in proven_dead.items() if sid not in live})
        for sid in [sid for sid in self._watchers if sid not in wanted]:
            self._stop(sid)
        for sid, (reg, dead) in wanted.items():
            current = self._watchers.get(sid)
            if current is not None and (current.reg, current.dead) == (reg, dead) and not current.task.done():
                continue
            self._stop(sid)
            body = self._dead_mode(sid, reg) if dead else self._watch(sid, reg)
            task = asyncio.get_running_loop().create_task(body, name=f"liveness-{sid}{'-dead' if dead else ''}")
            task.add_done_callback(_surface_failure)
            self._watchers[sid] = _Watcher(reg, dead, task)

    def fresh(self, within: float) -> int:
        """How many servers watched in normal mode sent a heartbeat in the last ``within`` seconds."""
        now = time.monotonic()
        live = self.watched()
        return sum(1 for sid, t in self.last_heartbeat.items() if sid in live and now - t <= within)

    def _stop(self, server_id: int) -> None:
        watcher = self._watchers.pop(server_id, None)
        self.last_heartbeat.pop(server_id, None)
        if watcher is not None:
            watcher.task.cancel()

    async def close(self) -> None:
        self._closed = True
        tasks = [w.task for w in self._watchers.values()]
        self._watchers.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _watch(self, server_id: int, reg: TabletServerRegistration) -> None:
        """Normal mode: follow the stream; after each failure probe; report a proof once, then idle."""
        delay = self._retry_initial
        attempts = 0

        def beat() -> None:
            nonlocal delay, attempts
            self.last_heartbeat[server_id] = time.monotonic()
            delay, attempts = self._retry_initial, 0

        while True:
            why = await self._stream.follow(server_id, reg, beat)
            started = time.monotonic()
            probe = await self._probe(reg.host, reg.port)
            for pause in CONNECTED_RECHECKS if probe is ProbeResult.CONNECTED else ():
                await asyncio.sleep(pause)
                probe = await self._probe(reg.host, reg.port)
                if probe is not ProbeResult.CONNECTED:
                    break
            if decide(probe):
                log.warning(
                    "Tablet server %d at %s is dead: its liveness stream broke (%s) and the port refuses "
                    "connections (probe %.0f ms); failing it over without waiting for its ZooKeeper session",
                    server_id, reg.address, why, (time.monotonic() - started) * 1000,
                )  # fmt: skip
                self.proofs += 1
                self.last_heartbeat.pop(server_id, None)
                self._report(server_id, reg, why)
                await asyncio.Event().wait()  # idle until sync() moves this server to dead mode (or drops it)
            attempts += 1
            level = logging.INFO if attempts in (1, 10) or attempts % 100 == 0 else logging.DEBUG
            log.log(level, "Liveness stream of tablet server %d at %s failed (%s), probe: %s (no proof of death); "
                    "re-opening in %.1fs", server_id, reg.address, why, probe.value, delay)  # fmt: skip
            await asyncio.sleep(delay)
            delay = min(self._retry_max, delay * 2)

    async def _dead_mode(self, server_id: int, reg: TabletServerRegistration) -> None:
        """Every ``dead_recheck`` s try the stream; a heartbeat of this very incarnation disproves the proof:
        report it once, then idle until sync() makes the server live again (or drops it)."""
        assert self._report_alive is not None
        while True:
            await asyncio.sleep(self._dead_recheck)
            answered = asyncio.Event()
            follow = asyncio.ensure_future(self._stream.follow(server_id, reg, answered.set))
            waiter = asyncio.ensure_future(answered.wait())
            try:
                await asyncio.wait([follow, waiter], return_when=asyncio.FIRST_COMPLETED)
            finally:
                for task in (follow, waiter):
                    task.cancel()
                await asyncio.gather(follow, waiter, return_exceptions=True)
            if answered.is_set():
                log.warning("Tablet server %d at %s (proven dead) answers its liveness stream again",
                            server_id, reg.address)  # fmt: skip
                self._report_alive(server_id, reg)
                await asyncio.Event().wait()


def _surface_failure(task: asyncio.Task) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("Liveness watcher %s failed", task.get_name(), exc_info=task.exception())
