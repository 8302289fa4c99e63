"""Typed option objects of the client (one per role, instead of thirty constructor keywords).

Durations are float seconds, sizes int bytes, as in ``fluss_py.config``. ``from_config`` reads the
``client.*`` options of a parsed ``Config`` (YAML / ``-D``) and lets keywords override them.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from fluss_py import config as cfg
from fluss_py.errors import ConfigError
from fluss_py.record import CompressionType
from fluss_py.rpc.keepalive import DEFAULT_KEEPALIVE, Keepalive

_ACKS = {"all": -1, "-1": -1, "1": 1, "0": 0}
MAX_POLL_INTERVAL = 86_400.0  # seconds: a day


def parse_acks(value: int | str) -> int:
    """``"all"``/-1, 1 or 0 -> -1, 1, 0."""
    acks = _ACKS.get(str(value).strip().lower())
    if acks is None:
        raise ConfigError("acks", f"must be all, 1 or 0, not {value!r}")
    return acks


@dataclass(frozen=True, slots=True)
class RetryOptions:
    """Backoff between retries: starts at ``backoff`` and doubles up to ``backoff_max`` (seconds)."""

    backoff: float = 0.02
    backoff_max: float = 0.5


DEFAULT_RETRY = RetryOptions()


@dataclass(frozen=True, slots=True)
class ProducerOptions:
    """Producer settings.

    acks                      -1 (all in-sync replicas), 1 (leader), 0 (no answer awaited)
    idempotence               None: on unless acks=0 (an idempotent writer needs answers)
    batch_size                a bucket's batch is sent when it reaches this many bytes ...
    linger                    ... or when its first record is this old (seconds; 0: at once — batches
                              still form while the bucket has max_in_flight_per_bucket batches in flight)
    buffer_memory             bytes of unacknowledged records; ``send`` blocks above it ...
    max_block                 ... for at most this long, then raises REQUEST_TIMED_OUT
    max_in_flight_per_bucket  sent, unanswered batches per bucket (<= 5 with idempotence: the server
                              recognises retried duplicates among a writer's last 5 batches)
    request_timeout           one ProduceLog's deadline (also the server's acks=all wait)
    delivery_timeout          a record fails once this long has passed since ``send`` (its batch's
                              creation), on the wire or not; at least linger + request_timeout
    produce_stream            requests to a leader on one ProduceLogStream (docs/client.md "Produce on a
                              stream"); False: one unary ProduceLog call per request
    keepalive                 pings of its connections: a vanished server fails its calls within
                              time + timeout (rpc.keepalive.*, docs/failure-detection.md "Vanished peers")
    """

    acks: int = -1
    idempotence: bool | None = None
    batch_size: int = 256 * 1024
    linger: float = 0.0
    buffer_memory: int = 32 * 1024 * 1024
    max_block: float = 60.0
    max_in_flight_per_bucket: int = 5
    request_timeout: float = 30.0
    delivery_timeout: float = 120.0
    compression: CompressionType = CompressionType.NONE
    retry: RetryOptions = DEFAULT_RETRY
    produce_stream: bool = True
    keepalive: Keepalive = DEFAULT_KEEPALIVE

    def __post_init__(self) -> None:
        object.__setattr__(self, "acks", parse_acks(self.acks))
        if self.idempotence is None:
            object.__setattr__(self, "idempotence", self.acks != 0)
        if self.idempotence and self.acks == 0:
            raise ConfigError("idempotence", "an idempotent producer needs acks=1 or acks=all")
        if self.idempotence and not 1 <= self.max_in_flight_per_bucket <= 5:
            raise ConfigError("max_in_flight_per_bucket", "must be 1..5 with idempotence")
        if self.max_in_flight_per_bucket < 1:
            raise ConfigError("max_in_flight_per_bucket", "must be at least 1")
        if self.batch_size <= 0 or self.buffer_memory < self.batch_size:
            raise ConfigError("buffer_memory", "batch_size must be > 0 and buffer_memory >= batch_size")
        if self.delivery_timeout < self.linger + self.request_timeout:
            # As Kafka refuses delivery.timeout.ms < linger.ms + request.timeout.ms: a record must have time
            # for its linger and at least one whole request before it can fail.
            raise ConfigError(
                "delivery_timeout",
                f"delivery_timeout ({self.delivery_timeout}s) must be at least linger ({self.linger}s) + "
                f"request_timeout ({self.request_timeout}s)",
            )

    @property
    def in_flight_per_bucket(self) -> int:
        """Effective per-bucket bound: without idempotence 1, so a retry can never overtake a later batch."""
        return self.max_in_flight_per_bucket if self.idempotence else 1

    @classmethod
    def from_config(cls, config: cfg.Config | None = None, **overrides: Any) -> ProducerOptions:
        base: dict[str, Any] = {}
        if config is not None:
            acks = parse_acks(config[cfg.CLIENT_ACKS])
            idempotence = config[cfg.CLIENT_IDEMPOTENCE]
            if acks == 0 and cfg.CLIENT_IDEMPOTENCE.key not in config.explicit():
                idempotence = False  # on by default only where it can work
            base = {
                "acks": acks,
                "idempotence": idempotence,
                "batch_size": config[cfg.CLIENT_BATCH_SIZE],
                "linger": config[cfg.CLIENT_LINGER],
                "buffer_memory": config[cfg.CLIENT_BUFFER_MEMORY],
                "max_in_flight_per_bucket": config[cfg.CLIENT_MAX_IN_FLIGHT],
                "request_timeout": config[cfg.CLIENT_REQUEST_TIMEOUT],
                "delivery_timeout": config[cfg.CLIENT_DELIVERY_TIMEOUT],
                "retry": _retry(config),
                "keepalive": Keepalive.from_config(config),
            }
        return _build(cls, base, overrides)


@dataclass(frozen=True, slots=True)
class ConsumerOptions:
    """Consumer settings.

    fetch_max_wait            a FetchLog waits at the leader up to this long for fetch_min_bytes
    fetch_min_bytes           ...
    fetch_max_bytes           bytes per FetchLog response (all buckets)
    bucket_max_bytes          bytes per bucket per FetchLog
    max_poll_records          records returned by one ``poll``
    auto_offset_reset         where a bucket without a position (or out of range) starts:
                              "earliest", "latest" or "none" (raise OFFSET_OUT_OF_RANGE)
    keepalive                 pings of its connections (as ProducerOptions.keepalive)
    fetch_stream              fetches to a leader on a ConsumerFetchStream (docs/client.md "Consumer fetches
                              on a stream"); False: one unary FetchLog call per fetch
    max_poll_interval         a group member whose application has not called ``poll`` for this long
                              leaves its group (Kafka's max.poll.interval.ms; docs/consumer-groups.md)
    """

    fetch_max_wait: float = 0.5
    fetch_min_bytes: int = 1
    fetch_max_bytes: int = 16 * 1024 * 1024
    bucket_max_bytes: int = 1024 * 1024
    max_poll_records: int = 10_000
    auto_offset_reset: str = "earliest"
    request_timeout: float = 30.0
    retry: RetryOptions = DEFAULT_RETRY
    keepalive: Keepalive = DEFAULT_KEEPALIVE
    fetch_stream: bool = True
    max_poll_interval: float = 300.0

    def __post_init__(self) -> None:
        if self.auto_offset_reset not in ("earliest", "latest", "none"):
            raise ConfigError("auto_offset_reset", "must be earliest, latest or none")
        if not 0.1 <= self.max_poll_interval <= MAX_POLL_INTERVAL:  # NaN fails both comparisons
            raise ConfigError("max_poll_interval", f"must be 0.1 .. {MAX_POLL_INTERVAL:g} seconds")

    @classmethod
    def from_config(cls, config: cfg.Config | None = None, **overrides: Any) -> ConsumerOptions:
        base: dict[str, Any] = {}
        if config is not None:
            base = {
                "request_timeout": config[cfg.CLIENT_REQUEST_TIMEOUT],
                "fetch_max_wait": config[cfg.CLIENT_FETCH_MAX_WAIT],
                "retry": _retry(config),
                "keepalive": Keepalive.from_config(config),
            }
        return _build(cls, base, overrides)


@dataclass(frozen=True, slots=True)
class LookupOptions:
    """Settings of ``client.kv.Lookuper`` (lookups, prefix lookups and scans of primary-key tables).

    request_timeout           a lookup fails with REQUEST_TIMED_OUT once this long has passed since it was
                              asked, retries included; a leader whose KV is behind waits at most the rest
    max_keys_per_request      keys of one Lookup request (one request per leader server carries many buckets)
    max_in_flight_per_server  Lookup requests on the wire to one server; keys asked meanwhile wait and travel
                              together in the next one (the batching)
    """

    request_timeout: float = 30.0
    retry: RetryOptions = DEFAULT_RETRY
    max_keys_per_request: int = 1024
    max_in_flight_per_server: int = 2
    keepalive: Keepalive = DEFAULT_KEEPALIVE

    def __post_init__(self) -> None:
        if not self.request_timeout > 0:
            raise ConfigError("request_timeout", "must be > 0")
        if not 1 <= self.max_keys_per_request <= 65536:
            raise ConfigError("max_keys_per_request", "must be 1..65536")
        if not 1 <= self.max_in_flight_per_server <= 64:
            raise ConfigError("max_in_flight_per_server", "must be 1..64")

    @classmethod
    def from_config(cls, config: cfg.Config | None = None, **overrides: Any) -> LookupOptions:
        base: dict[str, Any] = {}
        if config is not None:
            base = {
                "request_timeout": config[cfg.CLIENT_REQUEST_TIMEOUT],
                "retry": _retry(config),
                "keepalive": Keepalive.from_config(config),
            }
        return _build(cls, base, overrides)


def _retry(config: cfg.Config) -> RetryOptions:
    return RetryOptions(config[cfg.CLIENT_RETRY_BACKOFF], config[cfg.CLIENT_RETRY_BACKOFF_MAX])


def _build(cls: Any, base: dict[str, Any], overrides: dict[str, Any]) -> Any:
    known = {f.name for f in fields(cls)}
    unknown = set(overrides) - known
    if unknown:
        raise ConfigError(", ".join(sorted(unknown)), f"unknown {cls.__name__} field")
    return replace(cls(**{k: v for k, v in base.items() if k not in overrides}), **overrides)


def backoff_delay(options: RetryOptions, n: int) -> float:
    """The wait before the ``n``-th retry in a row (n >= 1): ``backoff`` doubling up to ``backoff_max``."""
    exponent = min(max(n, 1) - 1, 62)  # 2.0**1024 overflows a float
    return min(options.backoff * (2**exponent), options.backoff_max)


class Backoff:
    """Exponential backoff state for one retry sequence: 0 for the first retry after a leader hint,
    then ``backoff``, doubling up to ``backoff_max``. Hinted retries do not double the next backoff: two
    servers with stale views naming each other as leader (a leader move in flight) are retried at once
    several times, and the first unhinted failure after that still waits only ``backoff``. Pure; owned by one
    caller."""

    __slots__ = ("_attempts", "_backoffs", "_options")

    def __init__(self, options: RetryOptions) -> None:
        self._options = options
        self._attempts = 0
        self._backoffs = 0

    @property
    def attempts(self) -> int:
        return self._attempts

    def next_delay(self, *, hinted: bool = False) -> float:
        """Delay before the next attempt; a fresh leader hint is tried at once (once per failure)."""
        self._attempts += 1
        if hinted:
            return 0.0
        self._backoffs += 1
        return backoff_delay(self._options, self._backoffs)

    def reset(self) -> None:
        self._attempts = 0
        self._backoffs = 0
