"""Typed configuration: one registry of options, YAML files, ``-D key=value`` overrides.

Every setting is a ``ConfigOption`` declared once below with its key, type, default, the roles that use
it and a one-line doc. Values are parsed from YAML scalars or strings::

    duration   "15s", "500ms", "5min", "2h", "1d"; a bare number means milliseconds when the key ends
               in ".ms" and seconds otherwise (so ``replica.lag.time.max.ms: 30000`` is 30 s)
    size       "10MB", "1KB", "64kb", "1GiB", a bare number of bytes
    int/float/bool/str/list (comma separated)

Durations are held as float seconds, sizes as int bytes. ``load_config(role, path, overrides)`` returns
a ``Config``: unknown keys and bad values raise ``ConfigError`` naming the key (the CLI exits with 2).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fluss_py.errors import ConfigError

COORDINATOR = "coordinator"
TABLET = "tablet-server"
CLIENT = "client"
ROLES = (COORDINATOR, TABLET, CLIENT)

_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|secs|min|mins|m|h|d)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1, "sec": 1, "secs": 1, "min": 60, "mins": 60, "m": 60, "h": 3600, "d": 86400}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_duration(value: Any, *, bare_unit_ms: bool = False) -> float:
    """Seconds from ``"15s"``, ``"5min"``, ``"500ms"`` or a bare number (ms or s, see module doc)."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        return float(value) / 1000.0 if bare_unit_ms else float(value)
    m = _DURATION_RE.match(str(value))
    if not m:
        raise ValueError(f"not a duration: {value!r} (use e.g. 15s, 500ms, 5min)")
    number, unit = float(m.group(1)), (m.group(2) or "").lower()
    if not unit:
        return number / 1000.0 if bare_unit_ms else number
    return number * _DURATION_UNITS[unit]


def parse_size(value: Any) -> int:
    """Bytes from ``"10MB"``, ``"1KB"``, ``"64KiB"`` or a bare number (1 KB = 1024 bytes, as in Fluss)."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        return value
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ValueError(f"not a size: {value!r} (use e.g. 10MB, 1KB, 1048576)")
    unit = (m.group(2) or "").lower()[:1]
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def _parse_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return tuple(p.strip() for p in str(value).split(",") if p.strip())


@dataclass(frozen=True, slots=True)
class ConfigOption:
    """One setting: ``key`` (dotted kebab-case), its type, default, the roles that read it, and a doc."""

    key: str
    type: str  # duration | size | int | float | bool | str | list
    default: Any
    roles: tuple[str, ...]
    doc: str

    def parse(self, raw: Any) -> Any:
        parsers: dict[str, Callable[[Any], Any]] = {
            "duration": lambda v: parse_duration(v, bare_unit_ms=self.key.endswith(".ms")),
            "size": parse_size,
            "int": lambda v: int(v) if not isinstance(v, bool) and str(v).strip().lstrip("-").isdigit() else _bad(v),
            "float": lambda v: float(v),
            "bool": _parse_bool,
            "str": lambda v: "" if v is None else str(v),
            "list": _parse_list,
        }
        try:
            return parsers[self.type](raw)
        except (ValueError, TypeError) as e:
            raise ConfigError(self.key, f"invalid {self.type} value {raw!r}: {e}") from None


def _bad(value: Any) -> Any:
    raise ValueError(f"not an integer: {value!r}")


OPTIONS: dict[str, ConfigOption] = {}


def option(key: str, type: str, default: Any, roles: Iterable[str], doc: str) -> ConfigOption:
    """Declare an option (import time only). Returns it so modules can keep a handle."""
    if key in OPTIONS:
        raise RuntimeError(f"config option {key} declared twice")
    opt = ConfigOption(key, type, default, tuple(roles), doc)
    OPTIONS[key] = opt
    return opt


_ALL = ROLES
_SERVERS = (COORDINATOR, TABLET)

# ---------------------------------------------------------------- ZooKeeper and process basics
ZK_ADDRESS = option("zookeeper.address", "str", "127.0.0.1:2181", _SERVERS, "ZooKeeper connect string host:port[,...]")
ZK_ROOT = option("zookeeper.root", "str", "/fluss", _SERVERS, "root znode of this cluster")
ZK_SESSION_TIMEOUT = option(
    "zookeeper.session-timeout", "duration", 15.0, _SERVERS, "ZooKeeper session timeout (death detection)"
)
ZK_CONNECTION_TIMEOUT = option(
    "zookeeper.connection-timeout", "duration", 10.0, _SERVERS, "give up connecting to ZooKeeper after this long"
)
BIND_HOST = option("bind.host", "str", "127.0.0.1", _SERVERS, "address the RPC and HTTP servers bind to")
ADVERTISED_HOST = option("advertised.host", "str", "127.0.0.1", _SERVERS, "host other processes use to reach us")
RPC_PORT = option("rpc.port", "int", 0, _SERVERS, "RPC port (0: the role default, 9123 or 9122)")
HTTP_PORT = option("http.port", "int", 0, _SERVERS, "HTTP port for /metrics and /health (0: 9124 or 9125)")
LOG_DIR = option("log.dir", "str", "logs", _SERVERS, "directory of the process's log file")
LOG_LEVEL = option("log.level", "str", "INFO", _SERVERS, "logging level")

# ---------------------------------------------------------------- coordinator
COORDINATOR_ID = option("coordinator.id", "int", -1, [COORDINATOR], "coordinator id (-1: from advertised host:port)")
PROOF_OF_DEATH = option(
    "coordinator.failure-detection.proof-of-death", "bool", True, [COORDINATOR],
    "fail a tablet server over at once when its liveness stream broke and its port refuses connections "
    "(false where a firewall answers closed ports with a TCP reset; docs/failure-detection.md)",
)  # fmt: skip
REBALANCE_CHECK_INTERVAL = option(
    "coordinator.rebalance.check-interval", "duration", 300.0, [COORDINATOR], "how often balance is checked"
)
REBALANCE_TRIGGER_THRESHOLD = option(
    "coordinator.rebalance.trigger-threshold", "float", 0.1, [COORDINATOR], "stddev/mean of replicas per server"
)
REBALANCE_AUTO = option("coordinator.rebalance.auto", "bool", True, [COORDINATOR], "trigger rebalances by itself")
REBALANCE_BATCH_RATIO = option(
    "tablet-server.rebalance.batch.ratio", "float", 0.2, _SERVERS, "share of a rebalance's moves per batch"
)
REBALANCE_MAX_CONCURRENT = option(
    "tablet-server.rebalance.max-concurrent-migrations", "int", 5, _SERVERS, "moves touching one server per batch"
)
REBALANCE_THROTTLE = option(
    "tablet-server.rebalance.throttle-bytes-per-second",
    "size",
    10 * 1024**2,
    _SERVERS,
    "per-server budget for replicas being added by a rebalance (bytes/s, 0: unlimited)",
)
DEFAULT_REPLICATION_FACTOR = option(
    "default.replication.factor", "int", 3, [COORDINATOR], "replication factor of tables that do not set one"
)
DEFAULT_BUCKET_NUMBER = option("default.bucket.number", "int", 1, [COORDINATOR], "buckets of tables that set none")

# ---------------------------------------------------------------- tablet server
TABLET_SERVER_ID = option("tablet-server.id", "int", 0, [TABLET], "tablet server id, unique in the cluster")
TABLET_SERVER_RACK = option("tablet-server.rack", "str", "", [TABLET], "rack, for replica placement")
DATA_DIR = option("data.dir", "str", "data", [TABLET], "directory holding bucket logs and checkpoints")
MIN_INSYNC_REPLICAS = option(
    "tablet-server.min.insync.replicas", "int", 2, [TABLET], "acks=all needs at least this many replicas in ISR"
)
REPLICA_LAG_TIME_MAX = option(
    "replica.lag.time.max.ms", "duration", 30.0, [TABLET], "a follower not caught up for this long leaves the ISR"
)
REPLICA_FETCH_MAX_BYTES = option("replica.fetch.max.bytes", "size", 10 * 1024**2, [TABLET], "bytes per follower fetch")
REPLICA_FETCH_MIN_BYTES = option("replica.fetch.min.bytes", "size", 1024, [TABLET], "leader waits for this many bytes")
REPLICA_FETCH_WAIT_MAX = option(
    "replica.fetch.wait.max.ms", "duration", 0.5, [TABLET], "longest a follower fetch waits at the leader"
)
REPLICA_FETCH_BACKOFF = option(
    "replica.fetch.backoff.ms", "duration", 0.05, [TABLET], "pause after a failed follower fetch"
)
LOG_SEGMENT_FILE_SIZE = option("log.segment.file-size", "size", 1024**3, [TABLET], "roll a segment at this size")
LOG_SEGMENT_MAX_AGE = option("log.segment.max-age", "duration", 7 * 86400.0, [TABLET], "roll a segment this old")
LOG_INDEX_INTERVAL = option("log.index.interval-size", "size", 4096, [TABLET], "bytes between offset index entries")
LOG_MAX_BATCH_SIZE = option("log.max-batch-size", "size", 8 * 1024**2, [TABLET], "largest record batch accepted")
LOG_FLUSH_INTERVAL = option(
    "log.flush.interval", "duration", 1.0, [TABLET], "how often logs and checkpoints are flushed (fsync)"
)
LOG_FLUSH_ON_ACK = option(
    "log.flush.on-ack",
    "bool",
    False,
    [TABLET],
    "acks=all waits until every ISR member fsynced the records (group commit; docs/replication.md)",
)
TABLE_LOG_TTL = option("table.log.ttl", "duration", 7 * 86400.0, [TABLET], "delete segments older than this")
TABLE_LOG_RETENTION_BYTES = option(
    "table.log.retention-bytes", "size", -1, [TABLET], "keep at most this many bytes per bucket (-1: no limit)"
)
WRITER_EXPIRATION = option(
    "writer.expiration", "duration", 7 * 86400.0, [TABLET], "forget an idle idempotent writer after this long"
)

# ---------------------------------------------------------------- client
CLIENT_ACKS = option("client.request.acks", "str", "all", [CLIENT], "producer acks: all, 1 or 0")
CLIENT_REQUEST_TIMEOUT = option("client.request.timeout", "duration", 30.0, [CLIENT], "one request's deadline")
CLIENT_DELIVERY_TIMEOUT = option(
    "client.delivery.timeout", "duration", 120.0, [CLIENT], "a record fails after retrying this long"
)
CLIENT_BATCH_SIZE = option(
    "client.writer.batch-size", "size", 256 * 1024, [CLIENT], "send a bucket's batch at this size"
)
CLIENT_LINGER = option(
    "client.writer.batch-timeout", "duration", 0.0, [CLIENT], "... or when its first record is this old (linger)"
)
CLIENT_BUFFER_MEMORY = option(
    "client.writer.buffer.memory-size", "size", 32 * 1024**2, [CLIENT], "unacknowledged bytes before send blocks"
)
CLIENT_IDEMPOTENCE = option(
    "client.writer.enable-idempotence", "bool", True, [CLIENT], "exactly-once retries (needs acks 1 or all)"
)
CLIENT_MAX_IN_FLIGHT = option(
    "client.writer.max-inflight-requests-per-bucket", "int", 5, [CLIENT], "unanswered batches per bucket (<= 5)"
)
CLIENT_RETRY_BACKOFF = option("client.retry.backoff", "duration", 0.02, [CLIENT], "first retry backoff (doubles)")
CLIENT_RETRY_BACKOFF_MAX = option("client.retry.backoff-max", "duration", 0.5, [CLIENT], "largest retry backoff")
CLIENT_FETCH_MAX_WAIT = option(
    "client.scanner.fetch.max-wait", "duration", 0.5, [CLIENT], "a consumer fetch waits this long for data"
)


class Config(Mapping[str, Any]):
    """Parsed settings of one role. ``config[OPTION]`` or ``config["key"]``; defaults fill the rest."""

    def __init__(self, role: str, values: Mapping[str, Any] | None = None) -> None:
        self.role = role
        self._values: dict[str, Any] = {}
        for key, raw in (values or {}).items():
            self._values[key] = _lookup(key, role).parse(raw)

    def __getitem__(self, key: str | ConfigOption) -> Any:
        opt = key if isinstance(key, ConfigOption) else _lookup(key, self.role)
        return self._values.get(opt.key, opt.default)

    def __iter__(self):
        return iter(k for k, o in OPTIONS.items() if self.role in o.roles)

    def __len__(self) -> int:
        return sum(1 for o in OPTIONS.values() if self.role in o.roles)

    def with_overrides(self, overrides: Mapping[str, Any]) -> Config:
        merged = dict(self._raw_items())
        merged.update(overrides)
        return Config(self.role, merged)

    def _raw_items(self) -> dict[str, Any]:
        return dict(self._values)

    def explicit(self) -> dict[str, Any]:
        """The settings given explicitly (parsed values), e.g. for logging at start."""
        return dict(self._values)


def _lookup(key: str, role: str) -> ConfigOption:
    opt = OPTIONS.get(key)
    if opt is None:
        raise ConfigError(key, "unknown configuration key")
    if role not in opt.roles:
        raise ConfigError(key, f"not a {role} option (it is for: {', '.join(opt.roles)})")
    return opt


def parse_overrides(pairs: Iterable[str]) -> dict[str, str]:
    """``["a.b=1", "c=2s"]`` -> ``{"a.b": "1", "c": "2s"}``; a pair without '=' is a ConfigError."""
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(pair, "expected -D key=value")
        result[key.strip()] = value.strip()
    return result


def load_config(role: str, path: str | Path | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """Read a YAML file (flat ``key: value`` mapping) for ``role`` and apply overrides on top."""
    values: dict[str, Any] = {}
    if path is not None:
        try:
            data = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(str(path), f"cannot read config file: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(str(path), "config file must be a mapping of key: value")
        values.update({str(k): v for k, v in data.items()})
    values.update(overrides or {})
    return Config(role, values)


def describe_options(role: str | None = None) -> list[ConfigOption]:
    """All options (of one role), sorted by key, for docs and ``--help``."""
    return sorted((o for o in OPTIONS.values() if role is None or role in o.roles), key=lambda o: o.key)
