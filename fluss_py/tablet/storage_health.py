"""The replica and storage parts of a tablet server's /health and /metrics: data directories, their failures,
scrubbing, the replicas' counts and KVs.

/metrics (``StorageCollector``; docs/observability.md)::

    fluss_log_dir_online{dir}                1 while the data directory serves, 0 once it failed
    fluss_log_dir_failures_total{dir}        times it went offline since start
    fluss_log_dir_logs{dir}                  logs held there
    fluss_log_dir_free_bytes{dir}            bytes free for this server on its filesystem (online dirs only)
    fluss_log_dir_capacity_bytes{dir}        size of that filesystem (the disk-nearly-full alert divides them)
    fluss_log_corrupt_segments_total         corrupt segments found (unclean-start check, scrubber)
    fluss_log_corruption_repairs_total       corrupt logs truncated and fetched again from the leader
    fluss_log_scrubbed_bytes_total           bytes the scrubber CRC-checked
    fluss_log_scrub_passes_total             passes it finished
    fluss_log_recovery_verified_bytes        bytes CRC-checked by the last (unclean) start
    fluss_log_recovery_seconds               how long loading the logs took at start
    fluss_replica_offline_count              replicas offline here because their directory failed
    fluss_replica_checkpoint_failures_total  flush/checkpoint rounds that failed for another reason (retried)

/health adds ``log_dirs`` ({dir: "online" | "offline: <reason> (<ERRNO>) since <time>"}) and ``offline_replicas``
(``health_fields``); ``leaders``, ``followers``, ``under_replicated``, ``replica_manager`` ("ok" or the first
dead background task), ``kv_states`` ({"applying": n, "rebuilding": n, "stopped": n}) and ``kv_replicas`` ({bucket:
{"state", "applied_offset", "apply_lag", "reason"?}}, every primary-key replica here and each offline because its
KV stopped: docs/primary-key-tables.md §9) (``replica_fields``, with its problems: the dead task, each stopped
KV); the server adds ``status`` ("ok" | "degraded") and ``problems`` (offline dirs, dead background loops,
stopped KVs). Without DESCRIBE_CONFIGS ``hide_table_details`` leaves out what names a bucket.
``disk_use`` is the liveness heartbeat's disk report (``tablet/liveness.py``).
Who may call: the tablet server's HTTP handlers and its liveness streams, on its loop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client.registry import Collector

from fluss_py import metric_catalogue as mc
from fluss_py.log.dirs import LogDirs
from fluss_py.replica.kv_health import KvState
from fluss_py.replica.manager import ReplicaManager
from fluss_py.security_types import CLUSTER, Operation


def health_fields(log_dirs: LogDirs, rm: ReplicaManager | None) -> dict[str, Any]:
    offline = log_dirs.offline
    dirs: dict[str, str] = {}
    for path in log_dirs.paths:
        f = offline.get(path)
        if f is None:
            dirs[str(path)] = "online"
        else:
            since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(f.since))
            dirs[str(path)] = f"offline: {f.reason} ({f.code}) since {since}"
    body: dict[str, Any] = {"log_dirs": dirs}
    if rm is not None:
        body["offline_replicas"] = sorted(str(tb) for tb in rm.offline)
        body["offline_replica_count"] = len(body["offline_replicas"])
    return body


def replica_fields(body: dict[str, Any], rm: ReplicaManager) -> list[str]:
    """Add the replica manager's part to ``body`` (one ``stats()`` pass); returns its problems."""
    stats = rm.stats()
    body["leaders"], body["followers"] = stats.leader_count, stats.follower_count
    body["under_replicated"] = stats.under_replicated
    problems = []
    try:
        rm.check_health()
        body["replica_manager"] = "ok"
    except RuntimeError as e:
        body["replica_manager"] = str(e)
        problems.append(str(e))
    kvs: dict[str, dict[str, Any]] = {}
    for b in stats.buckets:
        kv = b.kv
        if kv is not None:
            entry: dict[str, Any] = {"state": kv.state.value, "applied_offset": kv.applied_offset}
            entry["apply_lag"] = kv.apply_lag
            kvs[str(b.table_bucket)] = {**entry, "reason": kv.reason} if kv.reason else entry
    for tb, why in stats.kv_stopped:
        kvs[str(tb)] = {"state": KvState.STOPPED.value, "reason": why}
    body["kv_states"] = {state.value: sum(k["state"] == state for k in kvs.values()) for state in KvState}
    body["kv_replicas"] = kvs
    problems += [f"KV stopped: bucket {tb}: {k['reason']}" for tb, k in kvs.items() if k["state"] == KvState.STOPPED]
    return problems


# on a secure cluster /health names tables (offline replicas, failures) only to a principal allowed this
HEALTH_DETAILS = (Operation.DESCRIBE_CONFIGS, CLUSTER)
_HIDDEN = "details need DESCRIBE_CONFIGS on the cluster"


def hide_table_details(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` (a /health answer, changed in place) without what names a table: the offline replicas (their
    count stays), the KVs of each replica (the count per state stays) and the text of a failure (its kind
    stays); data directories' states stay."""
    body.pop("offline_replicas", None)
    body.pop("kv_replicas", None)
    if body.get("replica_manager", "ok") != "ok":
        body["replica_manager"] = f"failed ({_HIDDEN})"
    body["problems"] = [
        p if p.startswith("data directory ") else f"{p.split(':', 1)[0]} ({_HIDDEN})" for p in body.get("problems", [])
    ]
    return body


def disk_use(log_dirs: LogDirs, rm: ReplicaManager) -> tuple[int, list[tuple[str, int, int]]]:
    """(bytes held by every replica here, [(data directory, free bytes, filesystem bytes)]) for the liveness
    heartbeat (the console): one ``statvfs`` per online directory, -1 for a failed one (not asked again)."""
    offline = log_dirs.offline
    dirs = []
    for path in log_dirs.paths:
        usage = _usage(path) if path not in offline else None
        dirs.append((str(path), *(usage if usage is not None else (-1, -1))))
    return rm.held_bytes(), dirs


def _usage(path: Any) -> tuple[int, int] | None:
    """(free bytes for an unprivileged writer, filesystem size) of ``path``; None when it cannot be read."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


class StorageCollector(Collector):
    """Renders the metrics above at scrape time from ``LogDirs`` and the replica manager's fault handler."""

    def __init__(self, log_dirs: LogDirs, rm: ReplicaManager, recovery_seconds: float) -> None:
        self.log_dirs = log_dirs
        self.rm = rm
        self.recovery_seconds = recovery_seconds

    def collect(self) -> Iterator[Any]:
        offline = self.log_dirs.offline
        online, failures, logs = mc.LOG_DIR_ONLINE.family(), mc.LOG_DIR_FAILURES.family(), mc.LOG_DIR_LOGS.family()
        free, capacity = mc.LOG_DIR_FREE_BYTES.family(), mc.LOG_DIR_CAPACITY_BYTES.family()
        counts = self.log_dirs.log_counts()
        for path, n in self.log_dirs.failure_counts().items():
            online.add_metric([str(path)], 0 if path in offline else 1)
            failures.add_metric([str(path)], n)
            logs.add_metric([str(path)], counts.get(path, 0))
            usage = _usage(path) if path not in offline else None  # a failed disk is not asked again
            if usage is not None:
                free.add_metric([str(path)], usage[0])
                capacity.add_metric([str(path)], usage[1])
        yield from (online, failures, logs, free, capacity)
        faults = self.rm.faults
        for spec, value in (
            (mc.LOG_CORRUPT_SEGMENTS, faults.corrupt_segments),
            (mc.LOG_CORRUPTION_REPAIRS, faults.repairs),
            (mc.LOG_SCRUBBED_BYTES, faults.scrubbed_bytes),
            (mc.LOG_SCRUB_PASSES, faults.scrub_passes),
            (mc.REPLICA_CHECKPOINT_FAILURES, self.rm.checkpoint_failures),
            (mc.LOG_RECOVERY_VERIFIED_BYTES, self.log_dirs.verified_bytes),
            (mc.LOG_RECOVERY_SECONDS, self.recovery_seconds),
            (mc.REPLICA_OFFLINE_COUNT, len(self.rm.offline)),
        ):
            yield spec.family(value)
