"""Replica metrics of a tablet server, rendered at scrape time from one ``ReplicaManager.stats()`` call.

Nothing is updated per request or per record: a scrape of ``/metrics`` calls ``stats()`` once (one pass
over the replicas) and renders (declared in ``fluss_py/metric_catalogue.py``, listed in docs/observability.md)

    fluss_replica_leader_count                       buckets this server leads
    fluss_replica_follower_count                     buckets this server follows
    fluss_replica_under_replicated_buckets           led buckets whose ISR is smaller than their assignment
    fluss_replica_under_min_isr                      led buckets whose ISR is below min.insync.replicas
    fluss_replica_isr_shrinks_total / _expands_total ISR changes of led buckets since the process started
    fluss_rebalance_throttled_bytes_total            bytes served to followers being added (docs/rebalance.md §6)
    fluss_rebalance_throttle_deferred_total          their reads answered empty for want of throttle budget
    fluss_replica_fetch_sessions                     fetch sessions (followers', consumers') held here as leader
    fluss_replica_fetch_sessions_opened_total        fetch sessions opened (each a full request) since start
    fluss_replica_group_flush_rounds_total           log.flush.on-ack fsync rounds (group commits) since start
    fluss_replica_group_flush_failures_total         ... of which failed (their waiting produces got STORAGE_ERROR)
  per led bucket {bucket,table_id}:
    fluss_replica_isr_count                          ISR size
    fluss_replica_under_replicated                   1 while the ISR is smaller than the assignment, else 0
    fluss_replica_follower_lag{...,follower}         leader LEO - the follower's LEO (messages)
  per hosted replica {bucket,table_id} (leader or follower):
    fluss_log_end_offset, fluss_log_high_watermark, fluss_log_size_bytes
  primary-key tables (docs/primary-key-tables.md):
    fluss_kv_rocksdb_memory_bytes                    block cache + memtables of every KV here (kv.memory)
    fluss_kv_apply_records_total / _cpu_seconds_total  changelog records applied to KVs, and the CPU it took
    per primary-key replica {bucket,table_id}: fluss_kv_applied_offset, fluss_kv_apply_lag (HW - applied),
    fluss_kv_size_bytes (SST files), fluss_kv_memtable_bytes, fluss_kv_rows (estimate), fluss_kv_buffered_keys,
    fluss_kv_state (0 applying, 1 rebuilding, 2 stopped: also for a replica offline here because its KV stopped)

The text is written directly in the Prometheus exposition format (labels sorted by name, integer values)
instead of through prometheus-client's ``Metric``/``Sample`` objects: with 2000 led buckets (14 000
samples) that is several times cheaper, and the scrape runs on the server's event loop
(``tests/bench/bench_metrics.py`` measures it).

``PeerRefusalCollector`` adds ``fluss_tablet_peer_refusals_total{kind}`` (requests refused because the peer did
not prove who it is) to the process registry.

Who may call: the tablet server's ``/metrics`` handler (``metrics_route(registry, replica_metrics_text(...))``)
on its loop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from fluss_py import metric_catalogue as mc
from fluss_py.metric_spec import Family
from fluss_py.replica.kv_health import KvState
from fluss_py.replica.stats import ReplicaStats
from fluss_py.tablet import coordinator_fence
from fluss_py.tablet.service import REPLICA_NOT_AUTHENTICATED

if TYPE_CHECKING:
    from fluss_py.tablet.server import TabletServer

# the unlabelled families, in the order of their values in ``render``
_COUNTS = (
    mc.REPLICA_LEADER_COUNT,
    mc.REPLICA_FOLLOWER_COUNT,
    mc.REPLICA_UNDER_REPLICATED_BUCKETS,
    mc.REPLICA_UNDER_MIN_ISR,
    mc.REPLICA_ISR_SHRINKS,
    mc.REPLICA_ISR_EXPANDS,
    mc.REBALANCE_THROTTLED_BYTES,
    mc.REBALANCE_THROTTLE_DEFERRED,
    mc.REPLICA_FETCH_SESSIONS,
    mc.REPLICA_FETCH_SESSIONS_OPENED,
    mc.REPLICA_GROUP_FLUSH_ROUNDS,
    mc.REPLICA_GROUP_FLUSH_FAILURES,
    mc.KV_ROCKSDB_MEMORY_BYTES,
    mc.KV_APPLY_RECORDS,
    mc.KV_APPLY_CPU_SECONDS,
)
# per primary-key replica: the family and the KvBucketStats field it reads
_KV_BUCKET = (
    (mc.KV_APPLIED_OFFSET, "applied_offset"),
    (mc.KV_APPLY_LAG, "apply_lag"),
    (mc.KV_SIZE_BYTES, "size_bytes"),
    (mc.KV_MEMTABLE_BYTES, "memtable_bytes"),
    (mc.KV_ROWS, "rows"),
    (mc.KV_BUFFERED_KEYS, "buffered_keys"),
    (mc.KV_STATE, "state_code"),
)
_STATE = [spec for spec, _ in _KV_BUCKET].index(mc.KV_STATE)


def follower_lag(leader_leo: int, follower_leo: int) -> int:
    """Messages the follower is behind; a follower that has not fetched in this leader term (LEO unknown,
    -1) counts as holding nothing, so a frozen follower shows its full lag instead of hiding."""
    return max(leader_leo - max(follower_leo, 0), 0)


def render(stats: ReplicaStats | None) -> bytes:
    """The replica families of one snapshot as Prometheus text (empty before the replica manager exists)."""
    if stats is None:
        return b""
    s = stats
    out: list[str] = []
    values = (s.leader_count, s.follower_count, s.under_replicated, s.under_min_isr, s.isr_shrinks, s.isr_expands,
              s.throttled_bytes, s.throttle_deferred, s.fetch_sessions, s.fetch_sessions_opened,
              s.group_flush_rounds, s.group_flush_failures)  # fmt: skip
    kv_values = (s.kv_memory_bytes, s.kv_applied_records, round(s.kv_apply_cpu_s, 6))
    for spec, v in zip(_COUNTS, (*values, *kv_values), strict=True):
        out.append(f"{spec.head()}{spec.name} {v}\n")
    isr: list[str] = []
    under: list[str] = []
    lag: list[str] = []
    leo: list[str] = []
    hw: list[str] = []
    size: list[str] = []
    kv: list[list[str]] = [[] for _ in _KV_BUCKET]
    leo_name, hw_name, size_name = mc.LOG_END_OFFSET.name, mc.LOG_HIGH_WATERMARK.name, mc.LOG_SIZE.name
    isr_name, under_name = mc.REPLICA_ISR_COUNT.name, mc.REPLICA_UNDER_REPLICATED.name
    lag_name = mc.REPLICA_FOLLOWER_LAG.name
    for b in s.buckets:
        tb = b.table_bucket
        labels = f'bucket="{tb.bucket}",table_id="{tb.table_id}"'
        if b.kv is not None:
            for lines, (spec, field) in zip(kv, _KV_BUCKET, strict=True):
                lines.append(f"{spec.name}{{{labels}}} {getattr(b.kv, field)}\n")
        leo.append(f"{leo_name}{{{labels}}} {b.log_end_offset}\n")
        hw.append(f"{hw_name}{{{labels}}} {b.high_watermark}\n")
        size.append(f"{size_name}{{{labels}}} {b.size_bytes}\n")
        if b.is_leader:
            isr.append(f"{isr_name}{{{labels}}} {b.isr_size}\n")
            under.append(f"{under_name}{{{labels}}} {1 if b.under_replicated else 0}\n")
            for follower, follower_leo in b.follower_leos:
                n = follower_lag(b.log_end_offset, follower_leo)
                lag.append(f'{lag_name}{{bucket="{tb.bucket}",follower="{follower}",table_id="{tb.table_id}"}} {n}\n')
    stopped = KvState.STOPPED.code  # replicas offline because their KV stopped: no other KV family has them
    kv[_STATE].extend(f'{mc.KV_STATE.name}{{bucket="{tb.bucket}",table_id="{tb.table_id}"}} {stopped}\n'
                      for tb, _ in s.kv_stopped)  # fmt: skip
    for spec, lines in (
        (mc.REPLICA_ISR_COUNT, isr),
        (mc.REPLICA_UNDER_REPLICATED, under),
        (mc.REPLICA_FOLLOWER_LAG, lag),
        (mc.LOG_END_OFFSET, leo),
        (mc.LOG_HIGH_WATERMARK, hw),
        (mc.LOG_SIZE, size),
        *((spec, lines) for (spec, _), lines in zip(_KV_BUCKET, kv, strict=True)),
    ):
        out.append(spec.head())
        out.extend(lines)
    return "".join(out).encode()


def replica_metrics_text(stats: Callable[[], ReplicaStats | None]) -> Callable[[], bytes]:
    """The ``/metrics`` text source of a tablet server: one ``stats()`` call per scrape."""
    return lambda: render(stats())


REFUSAL_KINDS = (
    REPLICA_NOT_AUTHENTICATED,
    coordinator_fence.UNCONFIRMED,
    coordinator_fence.NOT_LEADER,
    coordinator_fence.STALE,
)


class PeerRefusalCollector:
    """``fluss_tablet_peer_refusals_total{kind}`` at scrape time from the service's refusal log (and the
    replica manager's per-bucket ``replica_not_assigned``)."""

    def __init__(self, server: TabletServer) -> None:
        self._server = server

    def collect(self) -> Iterator[Family]:
        family = mc.TABLET_PEER_REFUSALS.family()
        servicer, rm = self._server.servicer, self._server.replica_manager
        counts = dict(servicer.refusals.counts) if servicer is not None else {}
        for kind in REFUSAL_KINDS:
            family.add_metric([kind], counts.get(kind, 0))
        family.add_metric(["replica_not_assigned"], rm.reads.unassigned_fetches if rm is not None else 0)
        yield family
