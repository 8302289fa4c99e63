"""ReplicaManager: every bucket replica of this tablet server, and the data path the tablet service calls.

Takes and returns the plain values of ``fluss_py.replica.messages`` (the tablet service converts protobuf).
Per-bucket failures are ``ApiError`` values in the results; a whole-request failure (stale coordinator
epoch) raises.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fluss_py import config as cfg
from fluss_py.common import latency_trace as trace
from fluss_py.errors import (
    ApiError,
    InvalidCoordinatorEpochError,
    InvalidRequestError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    ReplicaNotAssignedError,
    RequestTimedOutError,
    StorageError,
    UnknownServerError,
    UnknownTableOrBucketError,
)
from fluss_py.log.config import LogConfig, table_setting
from fluss_py.replica.delayed import DelayedFetch, DelayedProduce, Waker, wait_futures
from fluss_py.replica.fetch_session import FetchSession, FetchSessionCache
from fluss_py.replica.fetcher.fetcher import FetchSettings
from fluss_py.replica.fetcher.leader_endpoint import LeaderEndpoint
from fluss_py.replica.fetcher.manager import FetcherManager
from fluss_py.replica.gateway import CoordinatorGateway
from fluss_py.replica.group_flush import GroupFlusher
from fluss_py.replica.log_faults import LogFaultHandler
from fluss_py.replica.messages import (
    AdjustIsrItem,
    BucketState,
    EpochRequest,
    EpochResult,
    FetchBucketRequest,
    FetchBucketResult,
    FetchRequest,
    FetchResponse,
    FetchResult,
    ListOffsetsRequest,
    ListOffsetsResult,
    OffsetSpec,
    ProduceResult,
    StopReplicaItem,
)
from fluss_py.replica.replica import ACKS_ALL, Replica, ReplicaState
from fluss_py.replica.throttle import ReplicationThrottle
from fluss_py.types import ServerNode, TableBucket

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReplicaSettings:
    """The options the replica layer reads (seconds, bytes)."""

    min_insync_replicas: int = 2
    lag_time_s: float = 30.0
    checkpoint_interval_s: float = 1.0
    isr_retry_backoff_s: float = 0.5
    fetch: FetchSettings = field(default_factory=FetchSettings)
    throttle_bytes_per_s: int = 0  # followers a rebalance move is adding (docs/rebalance.md §6); 0: unlimited

    @classmethod
    def from_config(cls, config: cfg.Config) -> ReplicaSettings:
        return cls(
            min_insync_replicas=int(config[cfg.MIN_INSYNC_REPLICAS]),
            lag_time_s=float(config[cfg.REPLICA_LAG_TIME_MAX]),
            checkpoint_interval_s=float(config[cfg.LOG_FLUSH_INTERVAL]),
            fetch=FetchSettings(
                wait_max_s=float(config[cfg.REPLICA_FETCH_WAIT_MAX]),
                min_bytes=int(config[cfg.REPLICA_FETCH_MIN_BYTES]),
                max_bytes=int(config[cfg.REPLICA_FETCH_MAX_BYTES]),
                backoff_s=float(config[cfg.REPLICA_FETCH_BACKOFF]),
            ),
            throttle_bytes_per_s=int(config[cfg.REBALANCE_THROTTLE]),
        )


@dataclass(frozen=True, slots=True)
class BucketStats:
    """One hosted replica in a ``stats()`` snapshot. The leader-only fields are 0/False/() on a follower."""

    table_bucket: TableBucket
    is_leader: bool
    log_end_offset: int
    high_watermark: int
    size_bytes: int
    isr_size: int = 0
    under_replicated: bool = False  # led and ISR smaller than the assignment
    follower_leos: tuple[tuple[int, int], ...] = ()  # (follower id, its LEO as last fetched; -1 unknown)


@dataclass(frozen=True, slots=True)
class ReplicaStats:
    """One snapshot for /metrics and /health (docs/observability.md): counts, one ``BucketStats`` per hosted
    replica, and the ISR changes this server has applied as leader since it started."""

    leader_count: int
    follower_count: int
    under_replicated: int  # led buckets whose ISR is smaller than the assignment
    under_min_isr: int  # led buckets whose ISR is smaller than their min ISR
    isr_sizes: dict[TableBucket, int]  # per led bucket
    buckets: tuple[BucketStats, ...] = ()
    isr_shrinks: int = 0
    isr_expands: int = 0
    throttled_bytes: int = 0  # served to followers being added (docs/rebalance.md §6), since start
    throttle_deferred: int = 0  # their bucket reads answered empty for want of budget
    fetch_sessions: int = 0  # fetch sessions (followers', consumers') held here as leader
    fetch_sessions_opened: int = 0  # since start
    group_flush_rounds: int = 0  # log.flush.on-ack fsync rounds (group commits), since start
    group_flush_failures: int = 0  # of those, rounds whose fsync failed


def _as_api_error(e: Exception, what: str) -> ApiError:
    """An unexpected failure as a per-bucket error, logged with its traceback (never silently dropped)."""
    if isinstance(e, ApiError):
        return e
    log.error("%s failed unexpectedly", what, exc_info=e)
    if isinstance(e, OSError):
        return StorageError(f"{what}: {e}")
    return UnknownServerError(f"{what}: {type(e).__name__}: {e}")


class ReplicaManager:
    """Owns every ``Replica`` of this server, the delayed produce/fetch, the fetchers and four background
    tasks: ISR shrink (every lag/2, one scan over all leaders), the AdjustIsr sender (one batched request
    for all pending proposals), the HW/recovery checkpoint and the group flush of ``log.flush.on-ack`` logs;
    and ``faults`` (``LogFaultHandler``: failed data directories, corrupt logs, the scrubber, with their tasks
    started through ``spawn``). Replicas of a failed directory leave ``_replicas`` for ``offline``.
    Everything runs on one asyncio loop; the tablet service calls the async methods from its RPC handlers.
    """

    def __init__(
        self,
        server_id: int,
        log_manager: Any,
        config: cfg.Config,
        coordinator_gateway: CoordinatorGateway,
        leader_endpoint_factory: Callable[[ServerNode], LeaderEndpoint],
        clock: Callable[[], float] = time.monotonic,
        *,
        settings: ReplicaSettings | None = None,
    ) -> None:
        self.server_id = server_id
        self.log_manager = log_manager
        self.config = config  # the static file + -D overrides; dynamic values layer on top (apply_dynamic)
        self.effective_config: Any = config
        self.settings = settings or ReplicaSettings.from_config(config)
        self._table_properties: dict[TableBucket, dict[str, str]] = {}  # creation properties, per hosted bucket
        self._table_dynamic: dict[int, dict[str, str]] = {}  # table_id -> dynamic table entries
        self._gateway = coordinator_gateway
        self._clock = clock
        self._replicas: dict[TableBucket, Replica] = {}
        self._servers: dict[int, ServerNode] = {}
        self.coordinator_epoch = -1
        self.delayed_produce = DelayedProduce()
        self.delayed_fetch = DelayedFetch()
        self.fetch_sessions = FetchSessionCache(clock)
        self.group_flush = GroupFlusher(self._group_flushed, self._group_flush_failed)  # log.flush.on-ack
        self.fetchers = FetcherManager(
            server_id, leader_endpoint_factory, self._replicas.get, self.settings.fetch, self.group_flush.flush
        )
        rate = self.settings.throttle_bytes_per_s  # burst: one second of budget, at most one follower fetch
        self.throttle = ReplicationThrottle(rate, min(rate, self.settings.fetch.max_bytes), clock)
        self._isr_pending: dict[TableBucket, AdjustIsrItem] = {}
        self._isr_wakeup: asyncio.Event | None = None
        self.isr_send_failures = 0
        self.isr_shrinks = 0  # ISR changes of led buckets (AdjustIsr answers or coordinator updates), /metrics
        self.isr_expands = 0
        self.unassigned_fetches = 0  # follower fetches of buckets the fetcher holds no replica of (/metrics)
        self._tasks: list[asyncio.Task[None]] = []
        self.failures: list[BaseException] = []
        self._closed = False
        self.offline: dict[TableBucket, str] = {}  # replicas whose data directory failed: why
        self.checkpoint_failures = 0  # flush/checkpoint rounds that failed for another reason than a disk
        self.faults = LogFaultHandler(self, config)
        listeners = getattr(log_manager, "listeners", None)  # LogDirs: told of every failed data directory
        if listeners is not None:
            listeners.append(self.faults.dir_failed)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the background tasks (call once, from the loop)."""
        self._isr_wakeup = asyncio.Event()
        for name, body in (
            ("isr-shrink", self._shrink_loop),
            ("isr-sender", self._isr_sender_loop),
            ("checkpoint", self._checkpoint_loop),
            ("group-flush", self.group_flush.run),
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
        self.delayed_fetch.wake_all()
        self.fetch_sessions.close_all()
        self.log_manager.checkpoint()

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
        leaders = followers = under = under_min = 0
        isr_sizes: dict[TableBucket, int] = {}
        buckets: list[BucketStats] = []
        for tb, r in self._replicas.items():
            lg = r.log
            if r.state is ReplicaState.LEADER:
                leaders += 1
                isr = len(r.isr)
                lagging = isr < len(r.replicas)
                under += lagging
                under_min += isr < r.min_isr
                isr_sizes[tb] = isr
                leos = tuple((f, p.log_end_offset) for f, p in r.followers.items())
                buckets.append(
                    BucketStats(tb, True, lg.log_end_offset, lg.high_watermark, lg.size_in_bytes, isr, lagging, leos)
                )
            else:
                followers += r.state is ReplicaState.FOLLOWER
                buckets.append(BucketStats(tb, False, lg.log_end_offset, lg.high_watermark, lg.size_in_bytes))
        return ReplicaStats(
            leaders, followers, under, under_min, isr_sizes, tuple(buckets), self.isr_shrinks, self.isr_expands,
            self.throttle.bytes_total, self.throttle.deferred_total, len(self.fetch_sessions),
            self.fetch_sessions.opened_total, self.group_flush.rounds, self.group_flush.failures,
        )  # fmt: skip

    def led_sizes(self) -> list[tuple[TableBucket, int]]:
        """(bucket, log bytes) of every bucket this server leads (the liveness heartbeat's size report)."""
        return [(tb, r.log.size_in_bytes) for tb, r in self._replicas.items() if r.state is ReplicaState.LEADER]

    def _count_isr_change(self, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        if set(after) < set(before):
            self.isr_shrinks += 1
        elif set(after) > set(before):
            self.isr_expands += 1

    def update_servers(self, servers: Iterable[ServerNode]) -> None:
        for s in servers:
            self._servers[s.id] = s

    @property
    def gateway(self) -> CoordinatorGateway:
        return self._gateway

    def server(self, server_id: int) -> ServerNode | None:
        return self._servers.get(server_id)

    def remove_replica(self, tb: TableBucket, error: ApiError) -> Replica | None:
        """Stop serving ``tb`` here (Offline, forgotten): parked produces fail with ``error``. The caller
        stops its fetching."""
        replica = self._replicas.pop(tb, None)
        if replica is not None:
            replica.go_offline()
        self.delayed_produce.fail_bucket(tb, error)
        self._role_changed(tb)
        self._isr_pending.pop(tb, None)
        return replica

    def _not_leader(self, tb: TableBucket, replica: Replica | None) -> ApiError:
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

    def _leader_replica(self, tb: TableBucket, current_leader_epoch: int = -1) -> Replica:
        """The leader replica of ``tb``. The epoch is compared before the role: a server that has not yet heard
        of the request's (newer) epoch says so (UNKNOWN_LEADER_EPOCH, no hint) instead of naming the leader of
        its stale view, which would send the caller away from the real leader (docs/client.md)."""
        replica = self._replicas.get(tb)
        if replica is not None and current_leader_epoch > replica.leader_epoch:
            replica.check_epoch(current_leader_epoch)  # raises UNKNOWN_LEADER_EPOCH
        if replica is None or not replica.is_leader:
            raise self._not_leader(tb, replica)
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
        Returns what changed, for the log. Runs on the loop (the DynamicConfigWatcher's callback)."""
        from dataclasses import replace as _replace

        from fluss_py.common.dynamic_config import LayeredConfig

        effective = LayeredConfig(self.config, *server_layers)
        settings = _replace(
            ReplicaSettings.from_config(effective), isr_retry_backoff_s=self.settings.isr_retry_backoff_s
        )
        changed = [f"{k}={v}" for k, v in sorted(effective.overridden().items())]
        self.effective_config, self.settings = effective, settings
        self._table_dynamic = {int(t): dict(e) for t, e in tables.items()}
        self.throttle.rate = max(0, settings.throttle_bytes_per_s)
        self.throttle.burst = max(1, min(settings.throttle_bytes_per_s, settings.fetch.max_bytes))
        for tb, replica in self._replicas.items():
            props = self._properties(tb)
            replica.lag_time_s = settings.lag_time_s
            replica.min_insync_replicas = self._min_isr(props)
            replica.log.config = self._log_config(props)
        return changed

    def _properties(self, tb: TableBucket) -> dict[str, str]:
        """The table's creation properties with its dynamic entries on top."""
        return {**self._table_properties.get(tb, {}), **self._table_dynamic.get(tb.table_id, {})}

    def _min_isr(self, properties: Mapping[str, str]) -> int:
        return int(table_setting(cfg.TABLE_MIN_INSYNC_REPLICAS, properties, self.settings.min_insync_replicas))

    def _get_or_create(self, state: BucketState) -> Replica:
        tb = state.table_bucket
        self._table_properties[tb] = dict(state.table_properties)
        props = self._properties(tb)
        replica = self._replicas.get(tb)
        if tb in self.offline:
            raise StorageError(f"tablet server {self.server_id}: bucket {tb}: {self.offline[tb]}")
        if replica is None:
            log_tablet = self.log_manager.get(tb)
            offline_dirs = getattr(self.log_manager, "offline", None)
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
            replica.transition(ReplicaState.ONLINE)
            self._replicas[tb] = replica
        else:
            replica.min_insync_replicas = self._min_isr(props)
            if replica.state is ReplicaState.OFFLINE:
                replica.transition(ReplicaState.ONLINE)
        return replica

    @staticmethod
    def _brand_new(state: BucketState) -> bool:
        """A bucket unchanged since its table was created: no server can hold data of it yet."""
        lai = state.leader_and_isr
        return lai.leader_epoch == 0 and lai.bucket_epoch == 0

    def _log_config(self, properties: Mapping[str, str]) -> Any:
        return LogConfig.from_config(self.effective_config, properties)

    async def become_leader_or_follower(
        self, coordinator_epoch: int, buckets: Sequence[BucketState], servers: Iterable[ServerNode] = ()
    ) -> dict[TableBucket, ApiError | None]:
        """Apply NotifyLeaderAndIsr. Raises INVALID_COORDINATOR_EPOCH for a stale coordinator; per bucket,
        FENCED_LEADER_EPOCH for an older leader epoch than ours."""
        if self._isr_wakeup is None:
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
                        self._isr_pending.pop(tb, None)
                    if isr_before is not None:  # still leader: the coordinator changed the ISR (e.g. a death)
                        self._count_isr_change(isr_before, replica.isr)
                    self._hw_maybe_moved(tb, replica)
                elif replica.make_follower(lai, state.replicas):
                    self._isr_pending.pop(tb, None)
                    self.delayed_produce.fail_bucket(tb, self._not_leader(tb, replica))
                    self._role_changed(tb)
                    leader = self._servers.get(lai.leader)
                    if leader is not None:
                        follow[tb] = (leader, lai.leader_epoch)  # (re)starts in Truncating, same fetcher if it can
                    else:
                        stop_fetching.append(tb)
                        if lai.leader >= 0:
                            log.warning("bucket %s: leader %d has no known address; not fetching", tb, lai.leader)
                elif self.fetchers.fetcher_of(tb) is None and lai.leader in self._servers:
                    follow[tb] = (self._servers[lai.leader], lai.leader_epoch)  # its address is known now
                replica.adding_replicas = state.adding_replicas  # the coordinator's latest word (in-order requests)
                errors[tb] = None
                if replica.log.corrupt_from is not None:
                    self.faults.check_corruption(tb)  # leave the ISR and leadership, or repair now
            except Exception as e:
                errors[tb] = _as_api_error(e, f"become leader/follower of {tb}")
        await self.fetchers.remove_buckets(stop_fetching)
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
                    self.delayed_produce.fail_bucket(tb, self._not_leader(tb, replica))
                    self._role_changed(tb)
                    self._isr_pending.pop(tb, None)
                    del self._replicas[tb]
                    self._table_properties.pop(tb, None)
                stopped.append(tb)
                if item.delete:
                    self.offline.pop(tb, None)
                    self.log_manager.delete(tb)
                errors[tb] = None
            except Exception as e:
                errors[tb] = _as_api_error(e, f"stop replica {tb}")
        await self.fetchers.remove_buckets(stopped)
        return errors

    # ------------------------------------------------------------ produce

    async def append(
        self, acks: int, timeout_s: float, batches: Mapping[TableBucket, bytes]
    ) -> dict[TableBucket, ProduceResult]:
        """Append each bucket's batches as leader; with acks=all wait (one timer for the whole request) until
        the HW passes each bucket's last offset, or REQUEST_TIMED_OUT."""
        if acks not in (ACKS_ALL, 0, 1):
            error = InvalidRequestError(f"acks must be -1 (all), 0 or 1, not {acks}")
            return {tb: ProduceResult(error) for tb in batches}
        results: dict[TableBucket, ProduceResult] = {}
        waiting: dict[TableBucket, tuple[asyncio.Future[ApiError | None], Any]] = {}
        for tb, records in batches.items():
            replica = self._replicas.get(tb)
            try:
                if replica is None or not replica.is_leader:
                    raise self._not_leader(tb, replica)
                hw_before = replica.high_watermark
                leo_before = replica.log.log_end_offset
                trace.mark("L_append", tb, leo_before)
                info = replica.append_as_leader(records, acks)
                trace.mark("L_appended", tb, leo_before)
            except Exception as e:
                results[tb] = ProduceResult(_as_api_error(e, f"append to {tb}"))
                continue
            if not info.duplicate:
                self._appended(tb, replica, leo_before)
            if replica.flush_on_ack:
                self.group_flush.request(replica.log)  # durable offset: docs/replication.md
                replica.maybe_advance_durable()
            if replica.high_watermark != hw_before:
                self._hw_maybe_moved(tb, replica)
            result = ProduceResult(None, info.first_offset, info.last_offset, info.append_time_ms)
            if acks == ACKS_ALL and replica.ack_offset <= info.last_offset:
                waiting[tb] = (self.delayed_produce.add(tb, info.last_offset + 1), result)
            else:
                results[tb] = result
        if waiting:
            futures = [f for f, _ in waiting.values()]
            try:
                await wait_futures(futures, timeout_s)
            except asyncio.CancelledError:  # the caller went away: forget its waiters
                for tb, (future, _) in waiting.items():
                    self.delayed_produce.remove(tb, future)
                raise
            for tb, (future, result) in waiting.items():
                results[tb] = self._complete_produce(tb, future, result, timeout_s)
                trace.mark("L_answer", tb, result.base_offset)
        return {tb: results[tb] for tb in batches}

    def _complete_produce(
        self, tb: TableBucket, future: asyncio.Future[ApiError | None], result: ProduceResult, timeout_s: float
    ) -> ProduceResult:
        if not future.done() or future.cancelled():  # (the timeout cancels the future it was waiting on)
            self.delayed_produce.remove(tb, future)
            future.cancel()
            replica = self._replicas.get(tb)
            what = "durable offset" if replica is not None and replica.flush_on_ack else "HW"
            return ProduceResult(
                RequestTimedOutError(
                    f"bucket {tb}: {what} did not reach offset {result.last_offset + 1} within {timeout_s:.3f}s"
                )
            )
        error = future.result()
        if error is not None:
            return ProduceResult(error)
        replica = self._replicas.get(tb)
        if replica is not None and len(replica.maximal_isr) < replica.min_isr:
            return ProduceResult(
                NotEnoughReplicasAfterAppendError(
                    f"bucket {tb}: appended at {result.base_offset}, but ISR {list(replica.maximal_isr)} < "
                    f"min.insync.replicas {replica.min_isr}"
                )
            )
        return result

    def _hw_maybe_moved(self, tb: TableBucket, replica: Replica) -> None:
        """Complete what the (possibly moved) HW allows: acks=all produces and client long polls; fetch
        sessions carry the HW in their next answer."""
        replica.maybe_advance_durable()
        trace.mark("L_hw", tb, replica.high_watermark)
        self.delayed_produce.complete_up_to(tb, replica.ack_offset)
        self.delayed_fetch.hw_moved(tb)
        self.fetch_sessions.hw_moved(tb)

    def _durable_maybe_moved(self, tb: TableBucket, replica: Replica) -> None:
        """log.flush.on-ack: a flush (ours or a follower's) may have moved the durable offset."""
        if replica.maybe_advance_durable():
            self.delayed_produce.complete_up_to(tb, replica.ack_offset)

    def _group_flushed(self, tablets: list[Any]) -> None:
        for t in tablets:
            replica = self._replicas.get(t.table_bucket)
            if replica is not None and replica.log is t and replica.flush_on_ack:
                self._durable_maybe_moved(t.table_bucket, replica)

    def _group_flush_failed(self, tablets: list[Any], error: ApiError) -> None:
        """A failed fsync: the produces waiting on those logs are answered with it (the next append
        requests a new round)."""
        for t in tablets:
            replica = self._replicas.get(t.table_bucket)
            if replica is not None and replica.log is t and replica.is_leader:
                self.delayed_produce.fail_bucket(t.table_bucket, error)

    def _appended(self, tb: TableBucket, replica: Replica, leo_before: int) -> None:
        """The leader's LEO moved from ``leo_before``: wake follower fetches. A follower whose session held the
        bucket clean at ``leo_before`` polled caught up until its last request (docs/replication.md "Fetch
        sessions": the caught-up rule for buckets a session does not re-read)."""
        self.delayed_fetch.leo_moved(tb)
        for session in self.fetch_sessions.appended(tb):
            position = session.positions.get(tb)
            if position is not None and position.fetch_offset == leo_before:
                replica.note_caught_up(session.replica_id, leo_before, session.last_used)

    def _role_changed(self, tb: TableBucket) -> None:
        self.delayed_fetch.role_changed(tb)
        self.fetch_sessions.role_changed(tb)

    # ------------------------------------------------------------ fetch

    async def fetch(
        self,
        replica_id: int,
        max_wait_s: float,
        min_bytes: int,
        max_bytes: int,
        requests: Sequence[FetchBucketRequest],
    ) -> dict[TableBucket, FetchBucketResult]:
        """A sessionless fetch for a client (``replica_id`` -1: up to HW) or a follower (its server id: up to
        LEO, recording its progress). Long-polls up to ``max_wait_s`` until ``min_bytes`` are available or a
        bucket errs."""
        for_follower = replica_id >= 0
        results = self._read_all(replica_id, max_bytes, requests)
        if max_wait_s <= 0 or self._fetch_satisfied(results, min_bytes, for_follower):
            return results
        by_bucket = {r.table_bucket: r for r in requests}
        waiter = self.delayed_fetch.park(by_bucket, for_follower=for_follower)
        try:
            await self._long_poll(waiter, by_bucket, results, replica_id, max_wait_s, min_bytes, max_bytes)
        finally:
            self.delayed_fetch.unpark(waiter)
        return results

    async def fetch_in_session(self, request: FetchRequest) -> FetchResponse:
        """A fetch in an incremental session (``request.session`` set; a follower's or a consumer's): reads the
        buckets the request names (all of them when it opens the session, else the added or moved ones) plus
        those carried or marked since the session's last look, long-polls like ``fetch``, and answers the
        buckets it read. Raises FETCH_SESSION_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH (the fetcher then sends a
        full request)."""
        replica_id, max_bytes, requests = request.replica_id, request.max_bytes, request.buckets
        if request.session is None:
            raise InvalidRequestError("not a session fetch")
        for_follower = replica_id >= 0
        session = self.fetch_sessions.begin(replica_id, request.session, requests)
        # buckets the last answer left behind first, then those marked since, then those named: a bucket with
        # a steady stream of data (named every time) cannot starve the others of the response budget
        to_read = {tb: session.positions[tb] for tb in session.take_carried()}
        to_read.update((tb, session.positions[tb]) for tb in session.take_dirty() if tb not in to_read)
        to_read.update((r.table_bucket, r) for r in requests if r.table_bucket not in to_read)
        results = self._read_all(replica_id, max_bytes, to_read.values())
        max_wait_s, min_bytes = request.max_wait_s, request.min_bytes
        if max_wait_s > 0 and not self._fetch_satisfied(results, min_bytes, for_follower):
            await self._long_poll(session, session.positions, results, replica_id, max_wait_s, min_bytes, max_bytes)
        self._carry_over(session, results)
        return FetchResponse(results, session.id)

    async def _long_poll(
        self,
        waiter: Waker,
        positions: Mapping[TableBucket, FetchBucketRequest],
        results: FetchResult,
        replica_id: int,
        max_wait_s: float,
        min_bytes: int,
        max_bytes: int,
    ) -> None:
        """Wait for ``waiter``'s buckets to change and re-read the ones that did into ``results``, until
        ``min_bytes``, an error, ``max_wait_s`` or shutdown."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max_wait_s
        while not self._closed:
            remaining = deadline - loop.time()
            if remaining <= 0:
                break
            await wait_futures((waiter.arm(),), remaining)
            dirty = waiter.take_dirty()
            if not dirty:
                break
            changed = [positions[b] for b in dirty if b in positions]
            results.update(self._read_all(replica_id, max_bytes, changed, results))
            if self._fetch_satisfied(results, min_bytes, replica_id >= 0):
                break

    def _carry_over(self, session: FetchSession, results: FetchResult) -> None:
        """Carry to the front of the session's next request the buckets read without records that still need a
        look: the fetcher is behind (the response budget or the throttle ran out), or a follower is not in the
        ISR (an expansion refused or backing off is proposed again at a later fetch)."""
        for tb, r in results.items():
            if r.records or r.error is not None or r.diverging_epoch is not None:
                continue  # the next request names it (moved) or drops it (backed off)
            position = session.positions.get(tb)
            replica = self._replicas.get(tb)
            if position is None or replica is None:
                continue
            if not session.for_follower:
                if position.fetch_offset < r.high_watermark:
                    session.carry(tb)
            elif position.fetch_offset < r.log_end_offset or session.replica_id not in replica.maximal_isr:
                session.carry(tb)

    def _fetch_satisfied(
        self, results: Mapping[TableBucket, FetchBucketResult], min_bytes: int, for_follower: bool
    ) -> bool:
        """Answer now: an error or divergence, ``min_bytes`` gathered, or (followers) data that an acks=all
        produce is waiting for — so acks=all latency does not depend on replica.fetch.min.bytes."""
        total = 0
        for tb, r in results.items():
            if r.error is not None or r.diverging_epoch is not None:
                return True
            if r.records and for_follower and self.delayed_produce.pending(tb):
                return True
            total += len(r.records)
        return total >= max(min_bytes, 1)

    def _read_all(
        self,
        replica_id: int,
        max_bytes: int,
        to_read: Iterable[FetchBucketRequest],
        previous: Mapping[TableBucket, FetchBucketResult] | None = None,
    ) -> dict[TableBucket, FetchBucketResult]:
        """Read ``to_read`` within the response byte budget (the first bucket with data always gets a batch).
        A follower's buckets a rebalance move is adding it to (not in the ISR) are read last, within the throttle."""
        used = sum(len(r.records) for r in (previous or {}).values())
        out: dict[TableBucket, FetchBucketResult] = {}
        throttled: list[FetchBucketRequest] = []
        for request in to_read:
            tb = request.table_bucket
            if replica_id >= 0 and self.throttle.enabled and self._throttled(tb, replica_id):
                throttled.append(request)
                continue
            used -= len(previous[tb].records) if previous and tb in previous else 0
            budget = min(request.max_bytes, max_bytes - used)
            result = self._read_one(replica_id, request, budget, must_fill=used == 0)
            used += len(result.records)
            out[tb] = result
        for request in throttled:  # after the ISR buckets; an empty answer when the budget is spent
            tb = request.table_bucket
            used -= len(previous[tb].records) if previous and tb in previous else 0
            budget = self.throttle.allowance(max(0, min(request.max_bytes, max_bytes - used)))
            result = self._read_one(replica_id, request, budget, must_fill=False)
            self.throttle.take(len(result.records))
            used += len(result.records)
            out[tb] = result
        return out

    def _throttled(self, tb: TableBucket, follower_id: int) -> bool:
        replica = self._replicas.get(tb)
        return replica is not None and replica.is_throttled(follower_id)

    def _read_one(
        self, replica_id: int, request: FetchBucketRequest, budget: int, must_fill: bool
    ) -> FetchBucketResult:
        tb = request.table_bucket
        replica = self._replicas.get(tb)
        try:
            replica = self._leader_replica(tb, request.current_leader_epoch)
            log_ = replica.log
            follower = replica_id >= 0
            if follower and replica_id not in replica.followers:  # not assigned here, or the leader itself
                self.unassigned_fetches += 1
                raise ReplicaNotAssignedError(
                    f"server {replica_id} holds no follower replica of {tb} (replicas {list(replica.replicas)})"
                )
            if follower:
                diverging = replica.diverging_epoch(request.fetch_offset, request.last_fetched_epoch)
                if diverging is not None:  # the follower's progress is not recorded
                    return FetchBucketResult(
                        tb, None, log_.high_watermark, log_.log_start_offset, log_.log_end_offset, b"", diverging
                    )
            size = max(budget, 1) if must_fill else budget
            records = replica.read(request.fetch_offset, size, for_follower=follower)
            if trace.ENABLED:
                who = f"{replica_id}" if follower else "C"
                trace.mark(f"L_fetch_in{who}", tb, request.fetch_offset)
                if records:
                    trace.mark(f"L_fetch_out{who}", tb, request.fetch_offset)
            if follower:  # only a fetch inside our log counts as progress (and may move the HW)
                hw_moved, proposal = replica.update_follower_fetch(
                    replica_id, request.fetch_offset, request.flushed_offset
                )
                if hw_moved:
                    self._hw_maybe_moved(tb, replica)
                elif replica.flush_on_ack:
                    self._durable_maybe_moved(tb, replica)
                if proposal is not None:
                    self._propose_isr(replica, proposal)
            return FetchBucketResult(tb, None, log_.high_watermark, log_.log_start_offset, log_.log_end_offset, records)
        except Exception as e:
            error = _as_api_error(e, f"fetch from {tb}")
            if replica is not None and replica.state in (ReplicaState.LEADER, ReplicaState.FOLLOWER):
                lg = replica.log
                return FetchBucketResult(tb, error, lg.high_watermark, lg.log_start_offset, lg.log_end_offset)
            return FetchBucketResult(tb, error)

    # ------------------------------------------------------------ offsets

    async def list_offsets(self, requests: Sequence[ListOffsetsRequest]) -> dict[TableBucket, ListOffsetsResult]:
        """EARLIEST = log start, LATEST = LEO, HIGH_WATERMARK = HW, TIMESTAMP = first offset with timestamp
        >= the given one (below the HW), -1 if none. Leader only."""
        out: dict[TableBucket, ListOffsetsResult] = {}
        for r in requests:
            tb = r.table_bucket
            try:
                lg = self._leader_replica(tb).log
                hw, leo, start = lg.high_watermark, lg.log_end_offset, lg.log_start_offset
                if r.spec is OffsetSpec.EARLIEST:
                    offset = start
                elif r.spec is OffsetSpec.LATEST:
                    offset = leo
                elif r.spec is OffsetSpec.HIGH_WATERMARK:
                    offset = hw
                else:
                    found = lg.offset_for_timestamp(r.timestamp_ms)
                    offset = found if found is not None and found < hw else -1
                out[tb] = ListOffsetsResult(tb, None, offset, hw, leo, start)
            except Exception as e:
                out[tb] = ListOffsetsResult(tb, _as_api_error(e, f"list offsets of {tb}"))
        return out

    async def offsets_for_leader_epoch(self, requests: Sequence[EpochRequest]) -> dict[TableBucket, EpochResult]:
        """Where each asked epoch ends on this leader's log (KIP-279: largest epoch <= asked, its end)."""
        out: dict[TableBucket, EpochResult] = {}
        for r in requests:
            tb = r.table_bucket
            try:
                lg = self._leader_replica(tb, r.current_leader_epoch).log
                epoch, end = lg.end_offset_for_epoch(r.leader_epoch)
                out[tb] = EpochResult(tb, None, epoch, end)
            except Exception as e:
                out[tb] = EpochResult(tb, _as_api_error(e, f"offsets for leader epoch of {tb}"))
        return out

    # ------------------------------------------------------------ ISR changes

    def _propose_isr(self, replica: Replica, new_isr: tuple[int, ...]) -> None:
        """Queue an AdjustIsr; the replica counts the maximal ISR until the coordinator answers."""
        replica.start_isr_change(new_isr)
        self._isr_pending[replica.table_bucket] = AdjustIsrItem(
            replica.table_bucket, replica.leader_epoch, replica.bucket_epoch, tuple(new_isr)
        )
        if self._isr_wakeup is not None:
            self._isr_wakeup.set()

    def maybe_shrink_isr(self) -> int:
        """One scan over all leaders: propose removing followers lagging > replica.lag.time.max. Returns how
        many buckets got a proposal."""
        n = 0
        for replica in self._replicas.values():
            proposal = replica.shrink_proposal()
            if proposal is not None:
                self._propose_isr(replica, proposal)
                n += 1
        return n

    async def send_isr_changes(self) -> int:
        """Send every queued AdjustIsr in one request and apply the answers. Returns how many were sent.
        A failed call releases the proposals (maximal ISR back to the committed one); they are re-made by
        the next shrink scan or follower fetch."""
        items, self._isr_pending = list(self._isr_pending.values()), {}
        if not items:
            return 0
        try:
            results = await self._gateway.adjust_isr(self.server_id, items)
        except ApiError as e:
            log.warning("AdjustIsr for %d buckets failed: %s", len(items), e)
            self.isr_send_failures += 1
            results = {}
        for item in items:
            tb = item.table_bucket
            replica = self._replicas.get(tb)
            if replica is None or tb in self._isr_pending:
                continue
            result = results.get(tb)
            if result is not None and result.error is not None:
                log.info("bucket %s: AdjustIsr to %s refused: %s", tb, list(item.new_isr), result.error)
            committed = result.leader_and_isr if result is not None and result.error is None else None
            isr_before = replica.isr
            if replica.finish_isr_change(item.leader_epoch, committed, self.settings.isr_retry_backoff_s):
                self._hw_maybe_moved(tb, replica)
            elif replica.flush_on_ack:  # a shrink may leave only members that already fsynced
                self._durable_maybe_moved(tb, replica)
            self._count_isr_change(isr_before, replica.isr)
        return len(items)

    async def _shrink_loop(self) -> None:
        while True:
            await asyncio.sleep(max(self.settings.lag_time_s / 2, 0.01))  # read each time: it may change live
            self.maybe_shrink_isr()
            self.fetch_sessions.evict_idle()

    async def _isr_sender_loop(self) -> None:
        assert self._isr_wakeup is not None
        while True:
            await self._isr_wakeup.wait()
            self._isr_wakeup.clear()
            failures = self.isr_send_failures
            await self.send_isr_changes()
            if self.isr_send_failures != failures:
                await asyncio.sleep(self.settings.isr_retry_backoff_s)

    async def _checkpoint_loop(self) -> None:
        """Every log.flush.interval: fsync what is new (in a thread; advances recovery points), then write the
        offset checkpoints. A disk error takes only its data directory offline (``LogDirs``); anything else is
        logged with its traceback each time, counted, and the next round tries again."""
        while True:
            await asyncio.sleep(self.settings.checkpoint_interval_s)
            try:
                await self.log_manager.flush_all_async()
                await self.log_manager.checkpoint_async()
            except Exception:
                self.checkpoint_failures += 1
                log.exception("flush/checkpoint round failed (%d so far); retrying", self.checkpoint_failures)
