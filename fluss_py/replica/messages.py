"""Plain request/result values of the replica layer (no protobuf here; the tablet service converts).

Per-bucket errors are carried as ``ApiError`` instances (``error is None`` means success), so the service can
put ``code``, ``message``, ``leader_id`` and ``leader_address`` into the wire ``ErrorInfo``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

from fluss_py.errors import ApiError, ErrorCode, StorageError, UnknownServerError
from fluss_py.schema.schema import TableSchema
from fluss_py.types import LeaderAndIsr, OffsetSpec, TableBucket

log = logging.getLogger(__name__)

NO_EPOCH = -1
"""A leader epoch that is not checked / not known."""


def _code(error: ApiError | None) -> ErrorCode:
    return ErrorCode.NONE if error is None else error.code


@dataclass(frozen=True, slots=True)
class LeaderAndIsrItem:
    """What NotifyLeaderAndIsr says about one bucket: its leader and ISR, assignment, table properties, the
    replicas a rebalance move is adding (their catch-up is throttled by the leader, docs/rebalance.md §6) and
    the table's schema (None: a log table without one; docs/primary-key-tables.md §2) and bucket count (the
    leader of a primary-key bucket refuses keys of other buckets; 0: unknown)."""

    table_bucket: TableBucket
    leader_and_isr: LeaderAndIsr
    replicas: tuple[int, ...]
    table_properties: Mapping[str, str] = field(default_factory=dict)
    adding_replicas: tuple[int, ...] = ()
    table_schema: TableSchema | None = None
    num_buckets: int = 0


@dataclass(frozen=True, slots=True)
class StopReplicaItem:
    """StopReplica for one bucket; ``leader_epoch`` -1 skips the epoch check."""

    table_bucket: TableBucket
    leader_epoch: int = NO_EPOCH
    delete: bool = False


@dataclass(frozen=True, slots=True)
class ProduceResult:
    """Result of appending one bucket's batches."""

    error: ApiError | None = None
    base_offset: int = -1
    last_offset: int = -1
    log_append_time_ms: int = -1

    @property
    def error_code(self) -> ErrorCode:
        return _code(self.error)


@dataclass(frozen=True, slots=True)
class FetchBucketRequest:
    """One bucket of a fetch. Followers send ``last_fetched_epoch`` (epoch of their last batch) or -1, and
    ``flushed_offset``: everything below it is fsynced in their log (docs/replication.md "Durable
    acknowledgement"); 0 says nothing."""

    table_bucket: TableBucket
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH
    flushed_offset: int = 0


NO_SESSION = 0
"""``FetchSessionRequest.id`` of a full request that opens a new session."""


@dataclass(frozen=True, slots=True)
class FetchSessionRequest:
    """A fetch's place in an incremental fetch session (docs/replication.md "Fetch sessions"): ``id`` 0 opens
    one (the request names every bucket); otherwise the request's ``epoch`` in session ``id``, its buckets the
    ones added or moved since the previous request, and ``forgotten`` the ones dropped."""

    id: int = NO_SESSION
    epoch: int = 0
    forgotten: tuple[TableBucket, ...] = ()


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A whole fetch as a follower sends it to one leader (``replica_id`` = the follower's server id);
    ``session`` None is a sessionless full fetch."""

    replica_id: int
    max_wait_s: float
    min_bytes: int
    max_bytes: int
    buckets: tuple[FetchBucketRequest, ...]
    session: FetchSessionRequest | None = None


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """(largest epoch <= the asked one, where it ends); (-1, -1) when undefined."""

    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchBucketResult:
    """One bucket of a fetch answer; ``diverging_epoch`` set (and no records) when the follower diverged."""

    table_bucket: TableBucket
    error: ApiError | None = None
    high_watermark: int = -1
    log_start_offset: int = -1
    log_end_offset: int = -1
    records: bytes = b""
    diverging_epoch: EpochEndOffset | None = None

    @property
    def error_code(self) -> ErrorCode:
        return _code(self.error)


FetchResult = dict[TableBucket, FetchBucketResult]
"""A fetch answer: one result per requested bucket (in a session: per bucket read)."""


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """A whole fetch answer; ``session_id`` is the session it belongs to (``NO_SESSION``: sessionless)."""

    buckets: FetchResult
    session_id: int = NO_SESSION


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    table_bucket: TableBucket
    spec: OffsetSpec
    timestamp_ms: int = -1


@dataclass(frozen=True, slots=True)
class KvSize:
    """A bucket's KV on this replica: its files' bytes and RocksDB's estimate of its rows."""

    size_bytes: int
    rows: int


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    """``offset`` is -1 when TIMESTAMP finds no record at or after the timestamp; ``kv``: the leader's KV of a
    primary-key table's bucket (None for a log table), shown by ``table describe``."""

    table_bucket: TableBucket
    error: ApiError | None = None
    offset: int = -1
    high_watermark: int = -1
    log_end_offset: int = -1
    log_start_offset: int = -1
    kv: KvSize | None = None

    @property
    def error_code(self) -> ErrorCode:
        return _code(self.error)


@dataclass(frozen=True, slots=True)
class EpochRequest:
    """OffsetsForLeaderEpoch for one bucket: where does ``leader_epoch`` end on the leader's log?"""

    table_bucket: TableBucket
    leader_epoch: int
    current_leader_epoch: int = NO_EPOCH


@dataclass(frozen=True, slots=True)
class EpochResult:
    table_bucket: TableBucket
    error: ApiError | None = None
    leader_epoch: int = -1
    end_offset: int = -1

    @property
    def error_code(self) -> ErrorCode:
        return _code(self.error)


@dataclass(frozen=True, slots=True)
class AdjustIsrItem:
    """One bucket of an AdjustIsr proposal from its leader to the coordinator."""

    table_bucket: TableBucket
    leader_epoch: int
    bucket_epoch: int
    new_isr: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class AdjustIsrResult:
    """The coordinator's answer for one bucket: the committed state on success, else an error."""

    table_bucket: TableBucket
    error: ApiError | None = None
    leader_and_isr: LeaderAndIsr | None = None


def as_api_error(e: Exception, what: str) -> ApiError:
    """An unexpected failure as a per-bucket error, logged with its traceback (never silently dropped)."""
    if isinstance(e, ApiError):
        return e
    log.error("%s failed unexpectedly", what, exc_info=e)
    if isinstance(e, OSError):
        return StorageError(f"{what}: {e}")
    return UnknownServerError(f"{what}: {type(e).__name__}: {e}")
