"""Per-log settings, resolved from the server ``Config`` and a table's properties."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fluss_py import config as cfg
from fluss_py.errors import ConfigError

log = logging.getLogger(__name__)


def table_setting(option: cfg.ConfigOption, properties: Mapping[str, str], server_value: Any) -> Any:
    """``option``'s value for a table: its property when set and valid, else ``server_value``. The coordinator
    refuses invalid properties at CreateTable; one stored before that check (an older version) is ignored
    with a warning rather than failing the bucket."""
    raw = properties.get(option.key)
    if raw is None:
        return server_value
    try:
        return option.parse(raw)
    except ConfigError as e:
        log.warning("Ignoring table property (using the server's %s): %s", option.show(server_value), e)
        return server_value


@dataclass(frozen=True, slots=True)
class LogConfig:
    """Immutable settings of one ``LogTablet``. Build with ``from_config``; tests may construct directly."""

    segment_bytes: int = 1024**3
    segment_max_age_s: float = 7 * 86400.0
    index_interval_bytes: int = 4096
    max_batch_bytes: int = 8 * 1024**2
    ttl_s: float = 7 * 86400.0  # table.log.ttl; <= 0 disables time retention
    retention_bytes: int = -1  # -1: no size limit
    writer_expiration_s: float = 7 * 86400.0
    flush_interval_s: float = 1.0
    writer_snapshot_interval_bytes: int = 64 * 1024**2  # flush() snapshots writer state this often
    flush_on_ack: bool = False  # log.flush.on-ack: acks=all waits for every ISR member's fsync
    timestamp_after_max_s: float = 3600.0  # log.message.timestamp.after.max.ms; <= 0: no bound

    @property
    def retention_ms(self) -> int:
        return int(self.ttl_s * 1000) if self.ttl_s > 0 else -1

    def latest_timestamp(self, now_ms: int) -> int | None:
        """The largest batch max timestamp the leader accepts at ``now_ms``; None: no bound."""
        return now_ms + int(self.timestamp_after_max_s * 1000) if self.timestamp_after_max_s > 0 else None

    @classmethod
    def from_config(cls, config: cfg.Config, table_properties: Mapping[str, str] | None = None) -> LogConfig:
        """Server defaults overridden by table properties (same keys, e.g. ``table.log.ttl``)."""
        props = dict(table_properties or {})

        def get(option: cfg.ConfigOption) -> Any:
            return table_setting(option, props, config[option])

        return cls(
            segment_bytes=int(get(cfg.LOG_SEGMENT_FILE_SIZE)),
            segment_max_age_s=float(get(cfg.LOG_SEGMENT_MAX_AGE)),
            index_interval_bytes=int(get(cfg.LOG_INDEX_INTERVAL)),
            max_batch_bytes=int(get(cfg.LOG_MAX_BATCH_SIZE)),
            ttl_s=float(get(cfg.TABLE_LOG_TTL)),
            retention_bytes=int(get(cfg.TABLE_LOG_RETENTION_BYTES)),
            writer_expiration_s=float(get(cfg.WRITER_EXPIRATION)),
            flush_interval_s=float(get(cfg.LOG_FLUSH_INTERVAL)),
            flush_on_ack=bool(get(cfg.LOG_FLUSH_ON_ACK)),
            timestamp_after_max_s=float(get(cfg.LOG_TIMESTAMP_AFTER_MAX)),
        )
