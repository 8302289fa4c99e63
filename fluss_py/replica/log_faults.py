"""What the replica layer does when its storage fails it: failed data directories, corrupt segments.

``LogFaultHandler`` is owned by the ``ReplicaManager`` and runs on its event loop (docs/storage.md §9-10):

- **Directory failure** (``LogDirs`` tells ``dir_failed``, from inside the failing call): queued, then on the
  handler's task every replica of the directory goes Offline here (parked produces fail with STORAGE_ERROR,
  fetchers stop), is remembered in ``ReplicaManager.offline`` (requests for it answer STORAGE_ERROR) and is
  reported to the coordinator (REPLICA_OFFLINE: it elects from the ISR minus this server at once). A full
  directory is probed every ``log.dir.recovery-check-interval``; once it is back, its replicas are reported
  REPLICA_RECOVERED and the coordinator tells this server their roles again (followers that catch up). One
  whose fsync failed is never probed: it stays offline until the process restarts (``LogDirs``).
- **A replica whose KV stopped** (``replica_failed``, from ``KvApplier.stop``): offline and reported as above,
  alone; nothing brings it back but a restart of the process.
- **Corruption** (the unclean-start check or the ``Scrubber``): the replica reports REPLICA_CORRUPT first,
  always; a follower stops fetching the bucket until then. Once the coordinator has answered (it applied the
  report: this replica is out of the ISR, and out of leadership when another ISR member can lead), a follower
  truncates its log at the first bad batch and fetches again from the leader. A follower's own copy of the
  ISR is never the evidence: the leader's AdjustIsr changes reach followers only as metadata, so a follower
  that rejoined the ISR still holds the ISR it was told when it became a follower (outside it), and trusting
  that made an ISR member truncate below the HW unreported (acknowledged records lost on the next election).

Reports to the coordinator are retried until answered (``_reporter``): never dropped, always logged.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fluss_py import config as cfg
from fluss_py.errors import ApiError, StorageError
from fluss_py.log.scrub import Corruption, RateLimiter, verify_segment_file
from fluss_py.replica.replica import LocalReplicaState
from fluss_py.rpc.pb import coordinator_pb2
from fluss_py.types import TableBucket

if TYPE_CHECKING:
    from fluss_py.log.dirs import DirFailure
    from fluss_py.log.tablet import LogTablet
    from fluss_py.replica.manager import ReplicaManager

log = logging.getLogger(__name__)

OFFLINE, CORRUPT, RECOVERED = (
    coordinator_pb2.REPLICA_OFFLINE,
    coordinator_pb2.REPLICA_CORRUPT,
    coordinator_pb2.REPLICA_RECOVERED,
)
REPORT_RETRY_S = 1.0


class LogFaultHandler:
    """Owns the reaction to failed data directories and corrupt logs of one server (module docstring), the
    pending reports to the coordinator and the fault counters of /metrics. Called on the loop only."""

    def __init__(self, manager: ReplicaManager, config: cfg.Config) -> None:
        self.rm = manager
        self.scrub_rate = int(config[cfg.LOG_SCRUB_RATE])
        self.scrub_interval_s = float(config[cfg.LOG_SCRUB_INTERVAL])
        self.recovery_interval_s = float(config[cfg.LOG_DIR_RECOVERY_CHECK_INTERVAL])
        self.min_free = int(config[cfg.LOG_DIR_MIN_FREE])
        self._failed_dirs: asyncio.Queue[DirFailure] | None = None
        self._pending: dict[int, set[TableBucket]] = {}
        self._reasons: dict[int, str] = {}
        self._wakeup: asyncio.Event | None = None
        self._reported_segments: set[tuple[TableBucket, int]] = set()
        self._held: set[TableBucket] = set()  # corrupt followers: not fetched until the report is answered
        # offline replicas: their failed data directory (None: refused while some directory was offline)
        self._offline_in: dict[TableBucket, Path | None] = {}
        self.corrupt_segments = 0  # found since start (logged once each)
        self.repairs = 0  # truncations of a corrupt log followed by a fetch from the leader
        self._limiter: RateLimiter | None = None
        self.scrub_passes = 0

    @property
    def scrubbed_bytes(self) -> int:
        """Bytes the scrubber has CRC-checked since start (as it reads, not per finished segment)."""
        return self._limiter.total if self._limiter is not None else 0

    # ------------------------------------------------------------ lifecycle (from ReplicaManager.start)
    def start(self) -> None:
        self._failed_dirs = asyncio.Queue()
        self._wakeup = asyncio.Event()
        self.rm.spawn("dir-failures", self._dir_failure_loop)
        self.rm.spawn("fault-reporter", self._reporter)
        if hasattr(self.rm.log_manager, "try_recover"):
            self.rm.spawn("dir-recovery", self._dir_recovery_loop)
        if self.scrub_rate > 0:
            self.rm.spawn("scrubber", self._scrub_loop)
        for tb, tablet in self.rm.log_manager.logs.items():  # found by the unclean-start check
            if tablet.corrupt_from is not None:
                self._note_corruption(tb, tablet, None)

    def dir_failed(self, failure: DirFailure) -> None:
        """``LogDirs`` listener (any call stack on the loop): queue; the handler's task does the rest."""
        if self._failed_dirs is not None:
            self._failed_dirs.put_nowait(failure)

    # ------------------------------------------------------------ directory failure and recovery
    async def _dir_failure_loop(self) -> None:
        assert self._failed_dirs is not None
        while True:
            failure = await self._failed_dirs.get()
            await self.take_offline(failure)

    async def take_offline(self, failure: DirFailure) -> None:
        rm = self.rm
        reason = f"data directory {failure.path} failed: {failure.reason} ({failure.code})"
        tbs = set(failure.buckets) | {tb for tb, r in rm.replicas.items() if Path(r.log.dir).parent == failure.path}
        for tb in tbs:
            self._offline_in[tb] = failure.path
        await self._go_offline(tbs, reason)

    def replica_failed(self, tb: TableBucket, reason: str) -> None:
        """One replica cannot serve while its directory can (its KV stopped applying: docs/primary-key-tables.md
        §9): offline here as a failed directory's replicas are, and reported, until the process restarts (no
        directory brings it back). Any call stack on the loop: the handler's own task does it."""
        self.rm.spawn(f"offline-{tb.table_id}-{tb.bucket}", lambda: self._replica_offline(tb, reason), once=True)

    async def _replica_offline(self, tb: TableBucket, reason: str) -> None:
        if self.rm.replica(tb) is not None:  # (not stopped, nor taken with its directory, meanwhile)
            await self._go_offline({tb}, reason)

    async def _go_offline(self, tbs: set[TableBucket], reason: str) -> None:
        rm = self.rm
        for tb in sorted(tbs):
            rm.offline[tb] = reason
            replica = rm.replica(tb)
            if replica is not None:
                log.error("bucket %s: replica offline (%s; was %s)", tb, reason, replica.state.value)
            rm.remove_replica(tb, StorageError(f"bucket {tb}: {reason}"))
        await rm.fetchers.remove_buckets(tbs)
        self.report(OFFLINE, tbs, reason)

    def refused_while_offline(self, tb: TableBucket, reason: str) -> None:
        """A bucket without a log here was refused while a directory is offline (it may hold the bucket):
        offline until a directory comes back (then reported REPLICA_RECOVERED, and asked for again)."""
        self.rm.offline[tb] = reason
        self._offline_in[tb] = None

    async def _dir_recovery_loop(self) -> None:
        while True:
            await asyncio.sleep(self.recovery_interval_s)
            for path, buckets in self.rm.log_manager.try_recover(self.min_free):
                back = {tb for tb, p in self._offline_in.items() if p in (path, None)} | set(buckets)
                for tb in back:
                    self._offline_in.pop(tb, None)
                    self.rm.offline.pop(tb, None)
                self._pending.get(OFFLINE, set()).difference_update(back)
                self.report(RECOVERED, back, f"data directory {path} has free space again")

    # ------------------------------------------------------------ corruption
    def _note_corruption(self, tb: TableBucket, tablet: LogTablet, found: Corruption | None) -> None:
        if found is not None and not tablet.mark_corrupt(found.offset, found.segment_base, found.position):
            return
        key = (tb, tablet.corrupt_segment_base)
        if key not in self._reported_segments:
            self._reported_segments.add(key)
            self.corrupt_segments += 1
            if found is not None:  # the unclean-start check logged its own finding
                log.error("bucket %s: %s", tb, found)
        self.check_corruption(tb)

    def check_corruption(self, tb: TableBucket) -> None:
        """A corrupt replica asks the coordinator to leave the ISR and leadership; a follower stops fetching
        the bucket meanwhile (its position must not put it back in the ISR) and repairs once the report is
        answered (``_answered``). Called after every role change and whenever corruption is found."""
        replica = self.rm.replica(tb)
        if replica is None or replica.log.corrupt_from is None:
            self._held.discard(tb)
            return
        if replica.state is LocalReplicaState.FOLLOWER and tb not in self._held:
            self._held.add(tb)
            self.rm.spawn(f"hold-{tb.table_id}-{tb.bucket}", lambda: self.rm.fetchers.remove_buckets([tb]), once=True)
        self.report(CORRUPT, [tb], f"corrupt segment at offset {replica.log.corrupt_from}")

    def holds(self, tb: TableBucket) -> bool:
        """A corrupt follower waiting for the coordinator's answer: not to be fetched (``ReplicaManager``)."""
        if tb not in self._held:
            return False
        replica = self.rm.replica(tb)
        if replica is None or replica.log.corrupt_from is None:  # truncated meanwhile: nothing to repair
            self._held.discard(tb)
            return False
        return True

    def _answered(self, tbs: set[TableBucket]) -> None:
        """The coordinator applied a REPLICA_CORRUPT report of ``tbs``: the followers among them repair."""
        for tb in tbs:
            replica = self.rm.replica(tb)
            if replica is not None and replica.state is LocalReplicaState.FOLLOWER and tb in self._held:
                self.rm.spawn(f"repair-{tb.table_id}-{tb.bucket}", lambda tb=tb: self._repair(tb), once=True)

    async def _repair(self, tb: TableBucket) -> None:
        rm = self.rm
        replica = rm.replica(tb)
        if replica is None or replica.log.corrupt_from is None or replica.state is not LocalReplicaState.FOLLOWER:
            self._held.discard(tb)
            return
        await rm.fetchers.remove_buckets([tb])
        self._held.discard(tb)
        offset = replica.log.corrupt_from
        replica.truncate_at_corruption()
        self.repairs += 1
        log.warning(
            "bucket %s: corrupt log truncated at offset %d (LEO now %d); fetching it again from leader %d",
            tb, offset, replica.log.log_end_offset, replica.leader_id,
        )  # fmt: skip
        leader = rm.server(replica.leader_id)
        if leader is not None and rm.replica(tb) is replica and replica.state is LocalReplicaState.FOLLOWER:
            await rm.fetchers.add_buckets({tb: (leader, replica.leader_epoch)})

    async def _scrub_loop(self) -> None:
        """Every ``log.scrub.interval``: CRC-check every closed segment of every log at ``log.scrub.rate`` in a
        worker thread. A result is void when the log was truncated meanwhile."""
        loop = asyncio.get_running_loop()
        limiter = self._limiter = RateLimiter(self.scrub_rate)
        while True:
            await asyncio.sleep(self.scrub_interval_s)
            for tb, tablet in list(self.rm.log_manager.logs.items()):
                for seg in list(tablet.segments[:-1]):
                    if tablet.closed or (tablet.corrupt_from is not None and tablet.corrupt_from <= seg.base_offset):
                        break
                    truncations, size = tablet.truncations, seg.size
                    try:
                        found = await loop.run_in_executor(
                            None, verify_segment_file, seg.log_path, seg.base_offset, size, limiter
                        )
                    except FileNotFoundError:  # deleted meanwhile (retention, truncation, StopReplica)
                        continue
                    except OSError as e:
                        if tablet.io_error is not None and not tablet.closed:
                            tablet.io_error(tablet, e)  # the disk failed: its directory goes offline
                        break
                    if tablet.closed or tablet.truncations != truncations or seg not in tablet.segments:
                        break
                    if found is not None:
                        self._note_corruption(tb, tablet, found)
                        break
            self.scrub_passes += 1

    # ------------------------------------------------------------ reports to the coordinator
    def report(self, fault: int, buckets: Any, reason: str) -> None:
        tbs = set(buckets)
        if not tbs:
            return
        self._pending.setdefault(fault, set()).update(tbs)
        self._reasons[fault] = reason
        if self._wakeup is not None:
            self._wakeup.set()

    async def _reporter(self) -> None:
        assert self._wakeup is not None
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            for fault in (OFFLINE, CORRUPT, RECOVERED):
                tbs = self._pending.pop(fault, set())
                if not tbs:
                    continue
                name = coordinator_pb2.ReplicaFault.Name(fault)
                try:
                    await self.rm.gateway.report_replica_faults(
                        self.rm.server_id, fault, sorted(tbs), self._reasons[fault]
                    )
                    log.info("reported %s of %d bucket(s) to the coordinator", name, len(tbs))
                    if fault == CORRUPT:
                        self._answered(tbs)
                except ApiError as e:
                    log.warning("reporting %s of %s failed (%s); retrying in %.1f s", name,
                                [str(tb) for tb in sorted(tbs)], e, REPORT_RETRY_S)  # fmt: skip
                    self._pending.setdefault(fault, set()).update(tbs)
                    await asyncio.sleep(REPORT_RETRY_S)
                    self._wakeup.set()
                    break
