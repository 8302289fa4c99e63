"""Every Prometheus metric of every fluss_py process, declared once: name, type, labels, help and meaning.

A metric is declared here before any module exports it (as a configuration key is in ``config.py``): a
tablet server's and every process's in this module, the coordinator's in ``metric_catalogue_coordinator.py``
(both in ``CATALOGUE``); the exporting modules build it from its ``MetricSpec`` (``metric_spec.py``) and never
spell a name themselves.
``tests/unit/test_metric_catalogue.py`` fails on a metric built without it, and when docs/observability.md's
list differs from the catalogue's rendering (``fluss-py metrics --markdown``, ``make metrics-doc``).

Names and labels are an interface: dashboards (deploy/grafana), alert rules (deploy/prometheus) and
operators' queries use them. A counter's name is the name scraped, ending in ``_total``. To add a metric:
declare it here, in its section, then build it from its spec where the value is known.

Who may call: anyone (declarations; no I/O).
"""

from __future__ import annotations

from fluss_py import metric_catalogue_coordinator  # noqa: F401  (the coordinator's declarations join CATALOGUE)
from fluss_py.metric_spec import EVERY, SECURITY, TABLET, MetricSpec, declared
from fluss_py.metric_spec import declare as _declare

BUCKET = ("bucket", "table_id")
# the data-path request latency histogram's upper bounds, seconds
LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# ---------------------------------------------------------------- tablet server: replicas (tablet/metrics.py)
REPLICA_LEADER_COUNT = _declare("fluss_replica_leader_count", "gauge", "Buckets this server leads", TABLET)
REPLICA_FOLLOWER_COUNT = _declare("fluss_replica_follower_count", "gauge", "Buckets this server follows", TABLET)
REPLICA_UNDER_REPLICATED_BUCKETS = _declare(
    "fluss_replica_under_replicated_buckets",
    "gauge",
    "Led buckets whose ISR is smaller than their assignment (sum of fluss_replica_under_replicated)",
    TABLET,
)
REPLICA_UNDER_MIN_ISR = _declare(
    "fluss_replica_under_min_isr",
    "gauge",
    "Led buckets whose ISR is below min.insync.replicas",
    TABLET,
    doc="led buckets whose ISR is below `min.insync.replicas` (acks=all refused)",
)
REPLICA_ISR_SHRINKS = _declare(
    "fluss_replica_isr_shrinks_total",
    "counter",
    "ISR shrinks of buckets led here (since start)",
    TABLET,
    doc="ISR shrinks of buckets led here since start: the leader's AdjustIsr answered, or the coordinator "
    "removing a dead server while this server stays leader",
)
REPLICA_ISR_EXPANDS = _declare(
    "fluss_replica_isr_expands_total", "counter", "ISR expansions of buckets led here (since start)", TABLET
)
REPLICA_ISR_COUNT = _declare(
    "fluss_replica_isr_count", "gauge", "ISR size of each bucket this server leads", TABLET, *BUCKET
)
REPLICA_UNDER_REPLICATED = _declare(
    "fluss_replica_under_replicated",
    "gauge",
    "1 while a bucket led here has an ISR smaller than its assignment, else 0",
    TABLET,
    *BUCKET,
)
REPLICA_FOLLOWER_LAG = _declare(
    "fluss_replica_follower_lag",
    "gauge",
    "Leader LEO minus the follower's LEO as of its last fetch (messages), per follower of a led bucket",
    TABLET,
    "bucket",
    "follower",
    "table_id",
    doc="leader LEO - the follower's LEO as of its last fetch (messages); a follower that has not fetched in "
    "the current leader term counts as LEO 0 (shows its full lag, never hides)",
)
LOG_END_OFFSET = _declare(
    "fluss_log_end_offset",
    "gauge",
    "Log end offset of each replica hosted here",
    TABLET,
    *BUCKET,
    doc="LEO of each replica hosted here (leader or follower)",
)
LOG_HIGH_WATERMARK = _declare(
    "fluss_log_high_watermark",
    "gauge",
    "High watermark of each replica hosted here",
    TABLET,
    *BUCKET,
    doc="HW of each replica hosted here (a follower learns the HW on its next fetch: up to "
    "`replica.fetch.wait.max.ms` behind)",
)
LOG_SIZE = _declare("fluss_log_size_bytes", "gauge", "Segment bytes of each replica hosted here", TABLET, *BUCKET)

# ---------------------------------------------------------------- tablet server: primary-key tables (tablet/metrics.py)
KV_APPLIED_OFFSET = _declare(
    "fluss_kv_applied_offset",
    "gauge",
    "Every change below this offset is in the replica's KV",
    TABLET,
    *BUCKET,
    doc="primary-key replicas (leader or follower): every change of the log below this offset is in the "
    "replica's KV (docs/primary-key-tables.md)",
)
KV_APPLY_LAG = _declare(
    "fluss_kv_apply_lag",
    "gauge",
    "Committed changes not yet in the KV: HW minus applied offset",
    TABLET,
    *BUCKET,
    doc="committed changes not yet in the KV: HW - applied offset (a follower's HW is up to one fetch behind "
    "its leader's)",
)
KV_SIZE_BYTES = _declare(
    "fluss_kv_size_bytes",
    "gauge",
    "Bytes of the KV's live SST files",
    TABLET,
    *BUCKET,
    doc="bytes of the KV's live SST files (what `table describe` reports as the bucket's KV size)",
)
KV_MEMTABLE_BYTES = _declare("fluss_kv_memtable_bytes", "gauge", "Bytes of the KV's memtables", TABLET, *BUCKET)
KV_ROWS = _declare(
    "fluss_kv_rows",
    "gauge",
    "Rows in the KV (RocksDB's estimate)",
    TABLET,
    *BUCKET,
    doc="rows in the KV, RocksDB's estimate (exact after a compaction)",
)
KV_BUFFERED_KEYS = _declare(
    "fluss_kv_buffered_keys",
    "gauge",
    "Keys in the leader's pre-write buffer (changes appended, not yet applied)",
    TABLET,
    *BUCKET,
    doc="keys in the leader's pre-write buffer: changes appended, not yet applied (0 on followers)",
)
KV_STATE = _declare(
    "fluss_kv_state",
    "gauge",
    "The KV's state: 0 applying, 1 rebuilding (replaying its log from empty), 2 stopped (its replica is offline "
    "here: /health says why)",
    TABLET,
    *BUCKET,
    doc="the KV's state (docs/primary-key-tables.md §9): 0 applying, 1 rebuilding (it started empty over a log "
    "that holds changes and replays it), 2 stopped (it stopped applying; its replica is offline on this server, "
    "`/health` `kv_replicas` says why); also for a replica offline because its KV stopped",
)
KV_ROCKSDB_MEMORY_BYTES = _declare(
    "fluss_kv_rocksdb_memory_bytes",
    "gauge",
    "RocksDB block cache and memtables of every KV here (kv.memory)",
    TABLET,
    doc="RocksDB block cache and memtables of every KV here: one budget, `kv.memory`",
)
KV_APPLY_RECORDS = _declare(
    "fluss_kv_apply_records_total", "counter", "Changelog records applied to the KVs here since start", TABLET
)
KV_APPLY_CPU_SECONDS = _declare(
    "fluss_kv_apply_cpu_seconds_total",
    "counter",
    "CPU time of the KV apply rounds since start",
    TABLET,
    doc="CPU time of those apply rounds: `rate(..._cpu_seconds_total) / rate(..._records_total)` is the cost "
    "per row of the hot standbys",
)
REBALANCE_THROTTLED_BYTES = _declare(
    "fluss_rebalance_throttled_bytes_total",
    "counter",
    "Bytes served as leader to followers being added, within the throttle (docs/rebalance.md §6)",
    TABLET,
    doc="bytes this server, as leader, served to followers a rebalance move is adding (named in "
    "NotifyLeaderAndIsr's `adding_replicas`, not in the ISR), within "
    "`tablet-server.rebalance.throttle-bytes-per-second`; a follower catching up after a restart is never "
    "counted (docs/rebalance.md §6)",
)
REBALANCE_THROTTLE_DEFERRED = _declare(
    "fluss_rebalance_throttle_deferred_total",
    "counter",
    "Reads of followers being added answered empty for want of throttle budget",
    TABLET,
    doc="such followers' bucket reads answered empty for want of budget (read again at their next fetch)",
)
REPLICA_FETCH_SESSIONS = _declare(
    "fluss_replica_fetch_sessions",
    "gauge",
    "Incremental fetch sessions (followers', consumers') held here",
    TABLET,
    doc='incremental fetch sessions this server holds as leader (docs/replication.md "Fetch sessions"): '
    "normally one per follower server plus one per consumer reading from it",
)
REPLICA_FETCH_SESSIONS_OPENED = _declare(
    "fluss_replica_fetch_sessions_opened_total",
    "counter",
    "Fetch sessions opened here (each by a full request naming every bucket), since start",
    TABLET,
    doc="fetch sessions opened here since start, each by a full request naming every bucket; it rises on "
    "leadership moves and restarts, a steady rise while idle means followers keep starting over",
)
REPLICA_GROUP_FLUSH_ROUNDS = _declare(
    "fluss_replica_group_flush_rounds_total",
    "counter",
    "fsync rounds of log.flush.on-ack logs (one round covers every batch appended meanwhile), since start",
    TABLET,
    doc="fsync rounds of `log.flush.on-ack` logs (leader and follower), each covering every batch appended "
    'meanwhile (docs/replication.md "Durable acknowledgement"); acknowledged requests / rounds is the '
    "group-commit factor",
)
REPLICA_GROUP_FLUSH_FAILURES = _declare(
    "fluss_replica_group_flush_failures_total",
    "counter",
    "log.flush.on-ack fsync rounds that failed (the produces waiting on them got STORAGE_ERROR)",
    TABLET,
    doc="of those rounds, the ones whose fsync failed: the produces waiting on them were answered "
    "STORAGE_ERROR (also logged)",
)

# ---------------------------------------------------------------- tablet server: requests (tablet/request_metrics.py)
TABLET_REQUEST_LATENCY = _declare(
    "fluss_tablet_request_latency_seconds",
    "histogram",
    "Time a data-path request spent in the tablet server (long polls and acks=all waits included)",
    TABLET,
    "request",
    buckets=LATENCY_BUCKETS,
    doc="time in the tablet server per data-path RPC; `request` = `produce`, `fetch_client`, "
    "`fetch_follower`, `list_offsets`, `offsets_for_leader_epoch`, `lookup`, `prefix_lookup`, `scan_kv`. Rate: "
    "`rate(..._count[1m])`. A fetch includes its long poll, an acks=all produce its wait for the followers, a "
    "lookup its wait for the KV (docs/primary-key-tables.md §5)",
)
TABLET_REQUEST_ERRORS = _declare(
    "fluss_tablet_request_errors_total",
    "counter",
    "Data-path requests that failed as a whole",
    TABLET,
    "request",
    doc="RPCs that failed as a whole (response `error`, or an exception); per-bucket errors are in the "
    "bucket results and not counted",
)

# ---------------------------------------------------------------- tablet server: storage (tablet/storage_health.py)
LOG_DIR_ONLINE = _declare(
    "fluss_log_dir_online",
    "gauge",
    "1 while the data directory serves",
    TABLET,
    "dir",
    doc="1 while the data directory serves, 0 once it failed (docs/storage.md §10)",
)
LOG_DIR_FREE_BYTES = _declare(
    "fluss_log_dir_free_bytes",
    "gauge",
    "Bytes free on the directory's filesystem",
    TABLET,
    "dir",
    doc="bytes free for the server on the directory's filesystem (not sampled while the directory is offline)",
)
LOG_DIR_CAPACITY_BYTES = _declare(
    "fluss_log_dir_capacity_bytes",
    "gauge",
    "Size of its filesystem",
    TABLET,
    "dir",
    doc="size of that filesystem; `1 - free/capacity` is what the disk-nearly-full alert watches",
)
LOG_DIR_FAILURES = _declare("fluss_log_dir_failures_total", "counter", "Times the data directory failed", TABLET, "dir")
LOG_DIR_LOGS = _declare("fluss_log_dir_logs", "gauge", "Logs held in the data directory", TABLET, "dir")
REPLICA_OFFLINE_COUNT = _declare(
    "fluss_replica_offline_count",
    "gauge",
    "Replicas offline (failed directory)",
    TABLET,
    doc="replicas offline here because their directory failed (STORAGE_ERROR to requests)",
)
LOG_CORRUPT_SEGMENTS = _declare(
    "fluss_log_corrupt_segments_total",
    "counter",
    "Corrupt segments found",
    TABLET,
    doc="corrupt segments found by the unclean-start check or the scrubber (docs/storage.md §9)",
)
LOG_CORRUPTION_REPAIRS = _declare(
    "fluss_log_corruption_repairs_total", "counter", "Corrupt logs refetched from the leader", TABLET
)
LOG_SCRUBBED_BYTES = _declare("fluss_log_scrubbed_bytes_total", "counter", "Bytes the scrubber CRC-checked", TABLET)
LOG_SCRUB_PASSES = _declare("fluss_log_scrub_passes_total", "counter", "Scrubbing passes finished", TABLET)
LOG_RECOVERY_VERIFIED_BYTES = _declare(
    "fluss_log_recovery_verified_bytes", "gauge", "Bytes CRC-checked at the last start", TABLET
)
LOG_RECOVERY_SECONDS = _declare("fluss_log_recovery_seconds", "gauge", "Time to load the logs at start", TABLET)
REPLICA_CHECKPOINT_FAILURES = _declare(
    "fluss_replica_checkpoint_failures_total",
    "counter",
    "Flush/checkpoint rounds failed (not a disk)",
    TABLET,
    doc="flush/checkpoint rounds that failed for another reason than a disk (logged, retried)",
)

# ---------------------------------------------------------------- tablet server: the process (tablet/server.py)
TABLET_SERVER_REGISTERED = _declare(
    "fluss_tablet_server_registered", "gauge", "1 while registered in ZooKeeper", TABLET
)
TABLET_SERVER_COORDINATOR_EPOCH = _declare(
    "fluss_tablet_server_coordinator_epoch",
    "gauge",
    "Highest coordinator epoch seen",
    TABLET,
    doc="highest coordinator epoch ZooKeeper confirmed",
)
TABLET_PEER_REFUSALS = _declare(
    "fluss_tablet_peer_refusals_total",
    "counter",
    "Requests refused because the peer did not prove who it is",
    TABLET,
    "kind",
    doc="requests refused because the peer did not prove who it is (docs/peer-trust.md): "
    "`replica_not_authenticated` (a follower fetch without the claimed server's token), "
    "`replica_not_assigned` (per bucket: a proven server holding no replica of it; transient during a "
    "rebalance move), `coordinator_epoch_unconfirmed` (an epoch above ZooKeeper's), `coordinator_not_leader` "
    "(no or a wrong leader token), `coordinator_epoch_stale`. Anything but a short blip after a restart or a "
    "coordinator failover means a misconfigured tool or an impostor: the tablet-server log names the "
    "caller's address",
)

# ---------------------------------------------------------------- every server: security (security/authz.py)
AUTHORIZATION_DENIALS = _declare(
    "fluss_authorization_denials_total",
    "counter",
    "requests refused because no ACL allowed them (or one denied them)",
    SECURITY,
    "operation",
    "resource_type",
    doc="requests refused because no ACL allowed them or one denied them (docs/security.md; each also an "
    "audit log line)",
)
AUTHENTICATION_FAILURES = _declare(
    "fluss_authentication_failures_total", "counter", "requests refused for missing or bad credentials", SECURITY
)

# ---------------------------------------------------------------- every process: ZooKeeper session (zk/metrics.py)
ZOOKEEPER_SESSION_STATE = _declare(
    "fluss_zookeeper_session_state",
    "gauge",
    "ZooKeeper session state of this process (1 = current)",
    EVERY,
    "state",
    doc="1 for the current state, `state` = `connected`, `suspended`, `lost`. `suspended`: connection "
    "dropped, the session (and its ephemeral nodes) may still be alive; `lost`: expired, or not established yet",
)
ZOOKEEPER_SESSION_EVENTS = _declare(
    "fluss_zookeeper_session_events_total",
    "counter",
    "ZooKeeper session changes seen by this process",
    EVERY,
    "event",
    doc="session changes seen by this process, `event` = `new_session` (includes the first connection), "
    "`reconnected`, `suspended`, `lost`",
)

CATALOGUE: tuple[MetricSpec, ...] = declared()
BY_NAME: dict[str, MetricSpec] = {m.name: m for m in CATALOGUE}
if len(BY_NAME) != len(CATALOGUE):
    raise ValueError("a metric is declared twice")
