"""The replica layer's snapshot for /metrics and /health: ``ReplicaStats`` with one ``BucketStats`` per replica."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fluss_py.errors import StorageError
from fluss_py.kv.store import StoreFootprint
from fluss_py.replica.kv_health import KvHealth, KvState
from fluss_py.replica.replica import LocalReplicaState, Replica
from fluss_py.types import TableBucket

if TYPE_CHECKING:
    from fluss_py.replica.group_flush import GroupFlusher
    from fluss_py.replica.isr_changes import IsrChanges
    from fluss_py.replica.kv_apply import KvApplier
    from fluss_py.replica.read_path import ReadPath


@dataclass(frozen=True, slots=True)
class KvBucketStats:
    """The KV of a primary-key replica (leader or follower): apply lag = HW - applied offset; its state
    (``replica/kv_health.py``) and why (stopped: what failed; rebuilding: the offsets it replays)."""

    applied_offset: int
    apply_lag: int
    size_bytes: int  # live SST files
    memtable_bytes: int
    rows: int  # RocksDB's estimate
    buffered_keys: int = 0  # leader: keys in the pre-write buffer
    state: KvState = KvState.APPLYING
    reason: str = ""

    @property
    def state_code(self) -> int:
        return self.state.code


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
    kv: KvBucketStats | None = None  # a primary-key bucket's KV


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
    kv_memory_bytes: int = 0  # RocksDB block cache and memtables of every KV here (one shared budget: kv.memory)
    kv_applied_records: int = 0  # changelog records applied to KVs since start (leaders and followers)
    kv_apply_cpu_s: float = 0.0  # CPU time of those apply rounds
    kv_stopped: tuple[tuple[TableBucket, str], ...] = ()  # offline here because their KV stopped: why


def _kv_stats(r: Replica, health: KvHealth) -> KvBucketStats | None:
    kv = r.kv
    if kv is None or kv.closed:
        return None
    try:
        f = kv.footprint()
    except StorageError:  # its store failed (being taken offline): no sizes
        f = StoreFootprint(-1, -1, -1)
    buffered = len(kv.buffer) if kv.buffer is not None else 0
    lag = max(r.log.high_watermark - kv.applied_offset, 0)
    status = health.state(r.table_bucket, kv, r.log)
    return KvBucketStats(
        kv.applied_offset, lag, f.sst_bytes, f.memtable_bytes, f.rows_estimate, buffered, status.state, status.reason
    )


def collect_stats(
    replicas: Mapping[TableBucket, Replica],
    isr_changes: IsrChanges,
    reads: ReadPath,
    group_flush: GroupFlusher,
    kv: KvApplier,
) -> ReplicaStats:
    """One pass over the replicas (called per /metrics scrape and /health; nothing is kept per request)."""
    leaders = followers = under = under_min = 0
    isr_sizes: dict[TableBucket, int] = {}
    buckets: list[BucketStats] = []
    for tb, r in replicas.items():
        lg, kvs = r.log, _kv_stats(r, kv.health)
        if r.state is LocalReplicaState.LEADER:
            leaders += 1
            isr = len(r.isr)
            lagging = isr < len(r.replicas)
            under += lagging
            under_min += isr < r.min_isr
            isr_sizes[tb] = isr
            leos = tuple((f, p.log_end_offset) for f, p in r.followers.items())
            buckets.append(
                BucketStats(tb, True, lg.log_end_offset, lg.high_watermark, lg.size_in_bytes, isr, lagging, leos, kvs)
            )
        else:
            followers += r.state is LocalReplicaState.FOLLOWER
            buckets.append(BucketStats(tb, False, lg.log_end_offset, lg.high_watermark, lg.size_in_bytes, kv=kvs))
    return ReplicaStats(
        leaders, followers, under, under_min, isr_sizes, tuple(buckets), isr_changes.shrinks, isr_changes.expands,
        reads.throttle.bytes_total, reads.throttle.deferred_total, len(reads.fetch_sessions),
        reads.fetch_sessions.opened_total, group_flush.rounds, group_flush.failures,
        kv.resources.usage_bytes, kv.applied_records, kv.apply_cpu_s, tuple(sorted(kv.stopped_offline().items())),
    )  # fmt: skip
