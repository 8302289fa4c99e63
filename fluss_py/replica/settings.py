"""``ReplicaSettings``: the options the replica layer reads, from the static config or its dynamic layers."""

from __future__ import annotations

from dataclasses import dataclass, field

from fluss_py import config as cfg
from fluss_py.replica.fetcher.state import FetchSettings


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
