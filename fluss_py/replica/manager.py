"""ReplicaManager: every bucket replica of this tablet server, routing the data path to them, and the role
changes the coordinator sends.

Takes and returns the plain values of ``fluss_py.replica.messages`` (the tablet service converts protobuf).
Per-bucket failures are ``ApiError`` values in the results; a whole-request failure (stale coordinator
epoch) raises. The rooms around it (docs/architecture.md): ``write_path`` (produce), ``read_path`` (fetch,
sessions, long polls, the byte budget and throttle, offsets), ``isr_changes`` (AdjustIsr proposals and their
loops), ``stats`` (the /metrics snapshot), ``log_faults`` (failed directories, corrupt logs, the scrubber).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fluss_py import config as cfg
from fluss_py.common import latency_trace as trace
from fluss_py.errors import (
    ApiError,
    InvalidCoordinatorEpochError,
    NotLeaderOrFollowerError,
    StorageError,
    UnknownTableOrBucketError,
)
from fluss_py.log.config import LogConfig, table_setting
from fluss_py.log.dirs import LogDirs
from fluss_py.log.manager import LogManager
from fluss_py.log.tablet import LogTablet
from fluss_py.replica import log_flush
from fluss_py.replica.delayed import DelayedProduce
from fluss_py.replica.fetcher.leader_endpoint import LeaderEndpoint
from fluss_py.replica.fetcher.manager import FetcherManager
from fluss_py.replica.gateway import CoordinatorEndpoint
from fluss_py.replica.group_flush import GroupFlusher
from fluss_py.replica.isr_changes import IsrChanges
from fluss_py.replica.kv_apply import KvApplier
from fluss_py.replica.led_report import LedChanges
from fluss_py.replica.log_faults import LogFaultHandler
from fluss_py.replica.messages import (
    LeaderAndIsrItem,
    StopReplicaItem,
    as_api_error,
)
from fluss_py.replica.read_path import ReadPath
from fluss_py.replica.replica import LocalReplicaState, Replica
from fluss_py.replica.schemas import TableSchemas
from fluss_py.replica.settings import ReplicaSettings
from fluss_py.replica.stats import BucketStats, ReplicaStats, collect_stats
from fluss_py.replica.write_path import WritePath
from fluss_py.types import LeaderAndIsr, ServerNode, TableBucket

if TYPE_CHECKING:
    from fluss_py.common.dynamic_config import LayeredConfig

log = logging.getLogger(__name__)

__all__ = ["BucketStats", "ReplicaManager", "ReplicaSettings", "ReplicaStats"]


class ReplicaManager:
    """Owns every ``Replica`` of this server, the delayed produces, the fetchers and the background tasks
    (ISR shrink and AdjustIsr sender of ``isr``, the HW/recovery checkpoint, the group flush of
    ``log.flush.on-ack`` logs); routes produce to ``writes``, fetch and offsets to ``reads``; applies the
    coordinator's role changes; and ``faults`` (``LogFaultHandler``: failed data directories, corrupt logs,
    the scrubber, with their tasks started through ``spawn``). Replicas of a failed directory leave
    ``_replicas`` for ``offline``. Everything runs on one asyncio loop; the tablet service calls the async
    methods from its RPC handlers.
    """

    def __init__(
        self,
        server_id: int,
        log_manager: LogManager | LogDirs,
        config: cfg.Config,
        coordinator_gateway: CoordinatorEndpoint,
        leader_endpoint_factory: Callable[[ServerNode], LeaderEndpoint],
        clock: Callable[[], float] = time.monotonic,
        *,
        settings: ReplicaSettings | None = None,
    ) -> None:
        self.server_id = server_id
        self.log_manager = log_manager
        self.config = config  # the static file + -D overrides; dynamic values layer on top (apply_dynamic)
        self.effective_config: cfg.Config | LayeredConfig = config
        self.settings = settings or ReplicaSettings.from_config(config)
        self._table_properties: dict[TableBucket, dict[str, str]] = {}  # creation properties, per hosted bucket
        self._table_dynamic: dict[int, dict[str, str]] = {}  # table_id -> dynamic table entries
        self.schemas = TableSchemas()  # of the tables hosted here (docs/primary-key-tables.md §2)
        self._gateway = coordinator_gateway
        self._clock = clock
        self._replicas: dict[TableBucket, Replica] = {}
        self._servers: dict[int, ServerNode] = {}
        self.coordinator_epoch = -1
        self.delayed_produce = DelayedProduce()
        self.writes = WritePath(self, self._replicas)
        self.reads = ReadPath(
            self, self._replicas, self.settings.throttle_bytes_per_s, self.settings.fetch.max_bytes, clock
        )
        self.isr = IsrChanges(self, self._replicas)
        self.kv = KvApplier(self, self._replicas, int(config[cfg.KV_MEMORY]))  # primary-key buckets' KVs
        # routing: the rooms answer these requests themselves (the tablet service calls them on the manager)
        self.append = self.writes.append  # ProduceLog
        self.fetch = self.reads.fetch  # a sessionless FetchLog
        self.fetch_in_session = self.reads.fetch_in_session  # a FetchLog in an incremental fetch session
        self.list_offsets = self.reads.list_offsets
        self.offsets_for_leader_epoch = self.reads.offsets_for_leader_epoch
        self.maybe_shrink_isr = self.isr.maybe_shrink_isr  # one ISR shrink scan now
        self.send_isr_changes = self.isr.send_isr_changes  # the queued AdjustIsr proposals, now
        self.group_flush = GroupFlusher(self.writes.group_flushed, self.writes.group_flush_failed)  # flush.on-ack
        self.fetchers = FetcherManager(
            server_id, leader_endpoint_factory, self._replicas.get, self.settings.fetch, self.group_flush.flush
        )
        self._tasks: list[asyncio.Task[None]] = []
        self.failures: list[BaseException] = []
        self._closed = False
        self._handing_over = False  # controlled shutdown began: see begin_controlled_shutdown
        self.offline: dict[TableBucket, str] = {}  # replicas whose data directory failed: why
        self.checkpoint_failures = 0  # flush/checkpoint rounds that failed for another reason than a disk
        self.faults = LogFaultHandler(self, config)
        self.led = LedChanges(self._replicas)  # the liveness report's changed led buckets (led_report.py)
        log_manager.on_log_change = self._log_changed
        if isinstance(log_manager, LogDirs):  # told of every failed data directory
            log_manager.listeners.append(self.faults.dir_failed)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the background tasks (call once, from the loop)."""
        self.isr.start()
        for name, body in (
            ("isr-shrink", self.isr.shrink_loop),
            ("isr-sender", self.isr.sender_loop),
            ("checkpoint", self._checkpoint_loop),
            ("group-flush", self.group_flush.run),
            ("kv-apply", self.kv.run),
        ):
            self.spawn(name, body)
        self.faults.start()

    def spawn(self, name: str, body: Callable[[], Any], *, once: bool = False) -> asyncio.Task[None] | None:
        """Run ``body()`` as an owned task: cancelled at shutdown, its failure kept for /health and logged.
        ``once``: a short job, forgotten when done (else a loop that must run until shutdown)."""
        if self._closed:
            return None
        task = asyncio.create_task(body(), name=f"replica-manager-{self.server_id}-{name}")
        task.add_done_callback(self._on_task_done)
        if once:
            task.add_done_callback(lambda t: t in self._tasks and self._tasks.remove(t))
        self._tasks.append(task)
        return task

    def _on_task_done(self, task: asyncio.Task[None]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        self.failures.append(task.exception())  # type: ignore[arg-type]
        log.error("background task %s died", task.get_name(), exc_info=task.exception())

    def check_health(self) -> None:
        """Raise the first failure of a background task or fetcher (for /health)."""
        failures = self.failures + self.fetchers.failures()
        if failures:
            raise RuntimeError(f"replica manager task failed: {failures[0]!r}") from failures[0]

    async def shutdown(self) -> None:
        """Stop fetchers and tasks, answer every parked request, write a last checkpoint. The log manager
        itself is shut down by its owner (the tablet server)."""
        if self._closed:
            return
        self._closed = True
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:  # recorded by _on_task_done
                pass
        await self.fetchers.close()
        self.delayed_produce.fail_all(NotLeaderOrFollowerError(f"tablet server {self.server_id} is shutting down"))
        self.reads.delayed_fetch.wake_all()
        self.reads.fetch_sessions.close_all()
        self.kv.close_all()
        self.log_manager.checkpoint()

    def begin_controlled_shutdown(self) -> None:
        """This server is about to stop (the tablet server calls it before asking ControlledShutdown): from now on
        a bucket it follows outside the ISR is not fetched, so not truncated either; its restart does that
        (docs/replication.md "A stopping server leaves truncation to its restart")."""
        self._handing_over = True

    def _leaves_to_restart(self, lai: LeaderAndIsr) -> bool:
        return self._handing_over and self.server_id not in lai.isr

    @property
    def closed(self) -> bool:
        """``shutdown`` has begun (long polls stop waiting)."""
        return self._closed

    # ------------------------------------------------------------ views

    def replica(self, tb: TableBucket) -> Replica | None:
        return self._replicas.get(tb)

    @property
    def replicas(self) -> dict[TableBucket, Replica]:
        return dict(self._replicas)

    def leader_count(self) -> int:
        return sum(1 for r in self._replicas.values() if r.is_leader)

    def stats(self) -> ReplicaStats:
        """One pass over the replicas (called per /metrics scrape and /health; nothing is kept per request)."""
        return collect_stats(self._replicas, self.isr, self.reads, self.group_flush, self.kv)

    def led_sizes(self) -> list[tuple[TableBucket, tuple[int, int, int]]]:
        """(bucket, (log bytes, HW, LEO)) of every bucket this server leads (a liveness stream's first report;
        the later ones ask ``led`` for what changed)."""
        return self.led.all()

    def _log_changed(self, tablet: LogTablet) -> None:  # every log's notice: the led-size report, the KV apply
        self.led.log_changed(tablet)
        self.kv.log_changed(tablet)

    def held_bytes(self) -> int:
        """Log bytes of every log this server holds, led or followed (the liveness heartbeat's disk use): the
        log managers' running sums, O(data directories)."""
        return self.log_manager.held_bytes

    def update_servers(self, servers: Iterable[ServerNode]) -> None:
        for s in servers:
            self._servers[s.id] = s

    @property
    def gateway(self) -> CoordinatorEndpoint:
        return self._gateway

    def server(self, server_id: int) -> ServerNode | None:
        return self._servers.get(server_id)

    def remove_replica(self, tb: TableBucket, error: ApiError) -> Replica | None:
        """Stop serving ``tb`` here (Offline, forgotten): parked produces fail with ``error``. The caller
        stops its fetching."""
        replica = self._replicas.pop(tb, None)
        if replica is not None:
            replica.go_offline()
            self.kv.detach(replica, failed=True)
        self.delayed_produce.fail_bucket(tb, error)
        self._role_changed(tb)
        self.isr.forget(tb)
        return replica

    def not_leader(self, tb: TableBucket, replica: Replica | None) -> ApiError:
        if replica is None and tb in self.offline:
            return StorageError(f"tablet server {self.server_id}: bucket {tb}: {self.offline[tb]}")
        if replica is None:
            return UnknownTableOrBucketError(f"tablet server {self.server_id} does not host bucket {tb}")
        leader = self._servers.get(replica.leader_id)
        return NotLeaderOrFollowerError(
            f"tablet server {self.server_id} is not the leader of bucket {tb}",
            leader_id=replica.leader_id,
            leader_address=leader.address if leader else "",
        )

    def leader_replica(self, tb: TableBucket, current_leader_epoch: int = -1) -> Replica:
        """The leader replica of ``tb``. The epoch is compared before the role: a server that has not yet heard
        of the request's (newer) epoch says so (UNKNOWN_LEADER_EPOCH, no hint) instead of naming the leader of
        its stale view, which would send the caller away from the real leader (docs/client.md)."""
        replica = self._replicas.get(tb)
        if replica is not None and current_leader_epoch > replica.leader_epoch:
            replica.check_epoch(current_leader_epoch)  # raises UNKNOWN_LEADER_EPOCH
        if replica is None or not replica.is_leader:
            raise self.not_leader(tb, replica)
        replica.check_epoch(current_leader_epoch)
        return replica

    # ------------------------------------------------------------ coordinator requests

    def _check_coordinator_epoch(self, epoch: int) -> None:
        if epoch < self.coordinator_epoch:
            raise InvalidCoordinatorEpochError(
                f"coordinator epoch {epoch} is older than {self.coordinator_epoch} seen by server {self.server_id}"
            )
        self.coordinator_epoch = epoch

    def apply_dynamic(
        self, server_layers: Sequence[Mapping[str, str]], tables: Mapping[int, Mapping[str, str]]
    ) -> list[str]:
        """Apply dynamic configuration live (docs/dynamic-config.md): ``server_layers`` lowest first (cluster,
        then this server), ``tables`` the per-table entries. Recomputes the settings, the throttle and, for
        every hosted replica, its lag time, min ISR and log config (table > creation property > server).
        Returns what changed, for the log. Raises ConfigError, with nothing changed, when a value does not
        parse or the layers break a rule between keys with the static config. Runs on the loop (the
        DynamicConfigWatcher's callback)."""
        from dataclasses import replace as _replace

        from fluss_py.common.dynamic_config import LayeredConfig

        effective = LayeredConfig(self.config, *server_layers)  # raises before anything is changed
        settings = _replace(
            ReplicaSettings.from_config(effective), isr_retry_backoff_s=self.settings.isr_retry_backoff_s
        )
        table_dynamic = {int(t): dict(e) for t, e in tables.items()}
        per_replica = []
        for tb, replica in self._replicas.items():
            props = {**self._table_properties.get(tb, {}), **table_dynamic.get(tb.table_id, {})}
            min_isr = int(table_setting(cfg.TABLE_MIN_INSYNC_REPLICAS, props, settings.min_insync_replicas))
            per_replica.append((replica, min_isr, LogConfig.from_config(effective, props)))
        changed = [f"{k}={v}" for k, v in sorted(effective.overridden().items())]
        self.effective_config, self.settings, self._table_dynamic = effective, settings, table_dynamic
        self.reads.throttle.rate = max(0, settings.throttle_bytes_per_s)
        self.reads.throttle.burst = max(1, min(settings.throttle_bytes_per_s, settings.fetch.max_bytes))
        for replica, min_isr, log_config in per_replica:
            replica.lag_time_s = settings.lag_time_s
            replica.min_insync_replicas = min_isr
            replica.log.config = log_config
        return changed

    def _properties(self, tb: TableBucket) -> dict[str, str]:
        """The table's creation properties with its dynamic entries on top."""
        return {**self._table_properties.get(tb, {}), **self._table_dynamic.get(tb.table_id, {})}

    def _min_isr(self, properties: Mapping[str, str]) -> int:
        return int(table_setting(cfg.TABLE_MIN_INSYNC_REPLICAS, properties, self.settings.min_insync_replicas))

    def _get_or_create(self, state: LeaderAndIsrItem) -> Replica:
        tb = state.table_bucket
        self._table_properties[tb] = dict(state.table_properties)
        self.schemas.learn(tb.table_id, state.table_schema)
        props = self._properties(tb)
        replica = self._replicas.get(tb)
        if tb in self.offline:
            raise StorageError(f"tablet server {self.server_id}: bucket {tb}: {self.offline[tb]}")
        if replica is None:
            log_tablet = self.log_manager.get(tb)
            offline_dirs = self.log_manager.offline if isinstance(self.log_manager, LogDirs) else None
            if log_tablet is None and offline_dirs and not self._brand_new(state):
                # it may be in the failed directory: a second, empty copy elsewhere would shadow it
                reason = f"not in an online data directory, maybe in offline {', '.join(map(str, offline_dirs))}"
                self.faults.refused_while_offline(tb, reason)
                raise StorageError(f"tablet server {self.server_id}: bucket {tb}: {reason}")
            if log_tablet is None:
                log_tablet = self.log_manager.get_or_create(tb, self._log_config(props))
            else:
                log_tablet.config = self._log_config(props)
            replica = Replica(
                tb,
                self.server_id,
                log_tablet,
                min_insync_replicas=self._min_isr(props),
                lag_time_s=self.settings.lag_time_s,
                clock=self._clock,
            )
            replica.on_transition = self.led.replica_changed
            replica.transition(LocalReplicaState.ONLINE)
            self._replicas[tb] = replica
        else:
            replica.min_insync_replicas = self._min_isr(props)
            if replica.state is LocalReplicaState.OFFLINE:
                replica.transition(LocalReplicaState.ONLINE)
        self.kv.attach(replica, self.schemas.get(tb.table_id), props, state.num_buckets)
        return replica

    @staticmethod
    def _brand_new(state: LeaderAndIsrItem) -> bool:
        """A bucket unchanged since its table was created: no server can hold data of it yet."""
        lai = state.leader_and_isr
        return lai.leader_epoch == 0 and lai.bucket_epoch == 0

    def _log_config(self, properties: Mapping[str, str]) -> LogConfig:
        return LogConfig.from_config(self.effective_config, properties)

    async def become_leader_or_follower(
        self, coordinator_epoch: int, buckets: Sequence[LeaderAndIsrItem], servers: Iterable[ServerNode] = ()
    ) -> dict[TableBucket, ApiError | None]:
        """Apply NotifyLeaderAndIsr. Raises INVALID_COORDINATOR_EPOCH for a stale coordinator; per bucket,
        FENCED_LEADER_EPOCH for an older leader epoch than ours."""
        if not self.isr.started:
            raise RuntimeError("ReplicaManager.start() must run before it takes replicas")
        self._check_coordinator_epoch(coordinator_epoch)
        self.update_servers(servers)
        errors: dict[TableBucket, ApiError | None] = {}
        stop_fetching: list[TableBucket] = []
        follow: dict[TableBucket, tuple[ServerNode, int]] = {}
        for state in buckets:
            tb, lai = state.table_bucket, state.leader_and_isr
            try:
                if self.server_id not in state.replicas:
                    raise UnknownTableOrBucketError(f"server {self.server_id} is not a replica of bucket {tb}")
                replica = self._get_or_create(state)
                if lai.leader == self.server_id:
                    isr_before = replica.isr if replica.is_leader else None
                    if replica.make_leader(lai, state.replicas):
                        stop_fetching.append(tb)
                        self.isr.forget(tb)
                    if isr_before is not None:  # still leader: the coordinator changed the ISR (e.g. a death)
                        self.isr.isr_changed(tb, isr_before, replica.isr)
                    self.hw_maybe_moved(tb, replica)
                elif replica.make_follower(lai, state.replicas):
                    self.isr.forget(tb)
                    self.delayed_produce.fail_bucket(tb, self.not_leader(tb, replica))
                    self._role_changed(tb)
                    leader = self._servers.get(lai.leader)
                    if self._leaves_to_restart(lai):
                        stop_fetching.append(tb)
                    elif leader is not None:
                        follow[tb] = (leader, lai.leader_epoch)  # (re)starts in Truncating, same fetcher if it can
                    else:
                        stop_fetching.append(tb)
                        if lai.leader >= 0:
                            log.warning("bucket %s: leader %d has no known address; not fetching", tb, lai.leader)
                elif (
                    lai.leader in self._servers
                    and self.fetchers.fetcher_of(tb) is None
                    and not self._leaves_to_restart(lai)
                ):
                    follow[tb] = (self._servers[lai.leader], lai.leader_epoch)  # its address is known now
                replica.adding_replicas = state.adding_replicas  # the coordinator's latest word (in-order requests)
                errors[tb] = None
                if replica.log.corrupt_from is not None:
                    self.faults.check_corruption(tb)  # leave the ISR and leadership, or repair now
            except Exception as e:
                errors[tb] = as_api_error(e, f"become leader/follower of {tb}")
        held = [tb for tb in follow if self.faults.holds(tb)]  # corrupt: not fetched until the report is answered
        for tb in held:
            del follow[tb]
        await self.fetchers.remove_buckets([*stop_fetching, *held])
        await self.fetchers.add_buckets(follow)
        return errors

    async def stop_replicas(
        self, coordinator_epoch: int, buckets: Sequence[StopReplicaItem]
    ) -> dict[TableBucket, ApiError | None]:
        """Apply StopReplica: stop serving (Offline), and delete the log when asked."""
        self._check_coordinator_epoch(coordinator_epoch)
        errors: dict[TableBucket, ApiError | None] = {}
        stopped = []
        for item in buckets:
            tb = item.table_bucket
            replica = self._replicas.get(tb)
            try:
                if replica is not None:
                    if 0 <= item.leader_epoch < replica.leader_epoch:
                        replica.check_epoch(item.leader_epoch)  # raises FENCED_LEADER_EPOCH
                    replica.go_offline()
                    self.kv.detach(replica, delete=item.delete)
                    self.delayed_produce.fail_bucket(tb, self.not_leader(tb, replica))
                    self._role_changed(tb)
                    self.isr.forget(tb)
                    del self._replicas[tb]
                    self._table_properties.pop(tb, None)
                stopped.append(tb)
                if item.delete:
                    self.offline.pop(tb, None)
                    self.log_manager.delete(tb)
                errors[tb] = None
            except Exception as e:
                errors[tb] = as_api_error(e, f"stop replica {tb}")
        self.schemas.retain({t.table_id for t in self._replicas})
        await self.fetchers.remove_buckets(stopped)
        return errors

    # ------------------------------------------------------------ wake-ups (HW, durable offset, role)

    def hw_maybe_moved(self, tb: TableBucket, replica: Replica) -> None:
        """Complete what the (possibly moved) HW allows: acks=all produces and client long polls; fetch
        sessions carry the HW in their next answer."""
        replica.maybe_advance_durable()
        trace.mark("L_hw", tb, replica.high_watermark)
        self.delayed_produce.complete_up_to(tb, replica.ack_offset)
        self.reads.delayed_fetch.hw_moved(tb)
        self.reads.fetch_sessions.hw_moved(tb)

    def durable_maybe_moved(self, tb: TableBucket, replica: Replica) -> None:
        """log.flush.on-ack: a flush (ours or a follower's) may have moved the durable offset."""
        if replica.maybe_advance_durable():
            self.delayed_produce.complete_up_to(tb, replica.ack_offset)

    def _role_changed(self, tb: TableBucket) -> None:
        self.kv.role_changed(tb)
        self.reads.role_changed(tb)

    async def _checkpoint_loop(self) -> None:
        """Every log.flush.interval: fsync what is new (in a thread; advances recovery points), then write the
        offset checkpoints. A disk error takes only its data directory offline (``LogDirs``); anything else is
        logged with its traceback each time, counted, and the next round tries again."""
        while True:
            await asyncio.sleep(self.settings.checkpoint_interval_s)
            try:
                await log_flush.flush_all(self.log_manager)
                await log_flush.checkpoint(self.log_manager)
            except Exception:
                self.checkpoint_failures += 1
                log.exception("flush/checkpoint round failed (%d so far); retrying", self.checkpoint_failures)
