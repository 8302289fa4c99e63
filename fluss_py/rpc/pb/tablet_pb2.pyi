from fluss_py.rpc.pb import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class OffsetSpec(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EARLIEST: _ClassVar[OffsetSpec]
    LATEST: _ClassVar[OffsetSpec]
    HIGH_WATERMARK: _ClassVar[OffsetSpec]
    TIMESTAMP: _ClassVar[OffsetSpec]
EARLIEST: OffsetSpec
LATEST: OffsetSpec
HIGH_WATERMARK: OffsetSpec
TIMESTAMP: OffsetSpec

class ProduceBucket(_message.Message):
    __slots__ = ("table_bucket", "records")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    records: bytes
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., records: _Optional[bytes] = ...) -> None: ...

class ProduceLogRequest(_message.Message):
    __slots__ = ("acks", "timeout_ms", "buckets", "correlation_id")
    ACKS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    acks: int
    timeout_ms: int
    buckets: _containers.RepeatedCompositeFieldContainer[ProduceBucket]
    correlation_id: int
    def __init__(self, acks: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., buckets: _Optional[_Iterable[_Union[ProduceBucket, _Mapping]]] = ..., correlation_id: _Optional[int] = ...) -> None: ...

class ProduceBucketResult(_message.Message):
    __slots__ = ("table_bucket", "error", "base_offset", "last_offset", "log_append_time_ms")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_APPEND_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    error: _common_pb2.ErrorInfo
    base_offset: int
    last_offset: int
    log_append_time_ms: int
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., base_offset: _Optional[int] = ..., last_offset: _Optional[int] = ..., log_append_time_ms: _Optional[int] = ...) -> None: ...

class ProduceLogResponse(_message.Message):
    __slots__ = ("error", "buckets", "correlation_id")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    CORRELATION_ID_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    buckets: _containers.RepeatedCompositeFieldContainer[ProduceBucketResult]
    correlation_id: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., buckets: _Optional[_Iterable[_Union[ProduceBucketResult, _Mapping]]] = ..., correlation_id: _Optional[int] = ...) -> None: ...

class FetchBucket(_message.Message):
    __slots__ = ("table_bucket", "fetch_offset", "max_bytes", "current_leader_epoch", "last_fetched_epoch", "flushed_offset")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FLUSHED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int
    last_fetched_epoch: int
    flushed_offset: int
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., fetch_offset: _Optional[int] = ..., max_bytes: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., flushed_offset: _Optional[int] = ...) -> None: ...

class FetchSession(_message.Message):
    __slots__ = ("id", "epoch", "forgotten")
    ID_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_FIELD_NUMBER: _ClassVar[int]
    id: int
    epoch: int
    forgotten: _containers.RepeatedCompositeFieldContainer[_common_pb2.TableBucket]
    def __init__(self, id: _Optional[int] = ..., epoch: _Optional[int] = ..., forgotten: _Optional[_Iterable[_Union[_common_pb2.TableBucket, _Mapping]]] = ...) -> None: ...

class FetchLogRequest(_message.Message):
    __slots__ = ("replica_id", "max_wait_ms", "min_bytes", "max_bytes", "buckets", "session")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    buckets: _containers.RepeatedCompositeFieldContainer[FetchBucket]
    session: FetchSession
    def __init__(self, replica_id: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., min_bytes: _Optional[int] = ..., max_bytes: _Optional[int] = ..., buckets: _Optional[_Iterable[_Union[FetchBucket, _Mapping]]] = ..., session: _Optional[_Union[FetchSession, _Mapping]] = ...) -> None: ...

class EpochEndOffset(_message.Message):
    __slots__ = ("epoch", "end_offset")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    end_offset: int
    def __init__(self, epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class FetchBucketResult(_message.Message):
    __slots__ = ("table_bucket", "error", "high_watermark", "log_start_offset", "log_end_offset", "records", "diverging_epoch")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    error: _common_pb2.ErrorInfo
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    records: bytes
    diverging_epoch: EpochEndOffset
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., high_watermark: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., records: _Optional[bytes] = ..., diverging_epoch: _Optional[_Union[EpochEndOffset, _Mapping]] = ...) -> None: ...

class FetchLogResponse(_message.Message):
    __slots__ = ("error", "buckets", "session_id")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    buckets: _containers.RepeatedCompositeFieldContainer[FetchBucketResult]
    session_id: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., buckets: _Optional[_Iterable[_Union[FetchBucketResult, _Mapping]]] = ..., session_id: _Optional[int] = ...) -> None: ...

class ListOffsetsBucket(_message.Message):
    __slots__ = ("table_bucket", "spec", "timestamp_ms")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_MS_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    spec: OffsetSpec
    timestamp_ms: int
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., spec: _Optional[_Union[OffsetSpec, str]] = ..., timestamp_ms: _Optional[int] = ...) -> None: ...

class ListOffsetsRequest(_message.Message):
    __slots__ = ("buckets",)
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    buckets: _containers.RepeatedCompositeFieldContainer[ListOffsetsBucket]
    def __init__(self, buckets: _Optional[_Iterable[_Union[ListOffsetsBucket, _Mapping]]] = ...) -> None: ...

class ListOffsetsBucketResult(_message.Message):
    __slots__ = ("table_bucket", "error", "offset", "high_watermark", "log_end_offset", "log_start_offset", "kv")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    KV_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    error: _common_pb2.ErrorInfo
    offset: int
    high_watermark: int
    log_end_offset: int
    log_start_offset: int
    kv: KvSize
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., offset: _Optional[int] = ..., high_watermark: _Optional[int] = ..., log_end_offset: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., kv: _Optional[_Union[KvSize, _Mapping]] = ...) -> None: ...

class KvSize(_message.Message):
    __slots__ = ("size_bytes", "rows")
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    size_bytes: int
    rows: int
    def __init__(self, size_bytes: _Optional[int] = ..., rows: _Optional[int] = ...) -> None: ...

class ListOffsetsResponse(_message.Message):
    __slots__ = ("error", "buckets")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    buckets: _containers.RepeatedCompositeFieldContainer[ListOffsetsBucketResult]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., buckets: _Optional[_Iterable[_Union[ListOffsetsBucketResult, _Mapping]]] = ...) -> None: ...

class OffsetsForLeaderEpochBucket(_message.Message):
    __slots__ = ("table_bucket", "leader_epoch", "current_leader_epoch")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    leader_epoch: int
    current_leader_epoch: int
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., leader_epoch: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ...) -> None: ...

class OffsetsForLeaderEpochRequest(_message.Message):
    __slots__ = ("replica_id", "buckets")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    buckets: _containers.RepeatedCompositeFieldContainer[OffsetsForLeaderEpochBucket]
    def __init__(self, replica_id: _Optional[int] = ..., buckets: _Optional[_Iterable[_Union[OffsetsForLeaderEpochBucket, _Mapping]]] = ...) -> None: ...

class OffsetsForLeaderEpochBucketResult(_message.Message):
    __slots__ = ("table_bucket", "error", "leader_epoch", "end_offset")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    error: _common_pb2.ErrorInfo
    leader_epoch: int
    end_offset: int
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., leader_epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class OffsetsForLeaderEpochResponse(_message.Message):
    __slots__ = ("error", "buckets")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    buckets: _containers.RepeatedCompositeFieldContainer[OffsetsForLeaderEpochBucketResult]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., buckets: _Optional[_Iterable[_Union[OffsetsForLeaderEpochBucketResult, _Mapping]]] = ...) -> None: ...

class LookupBucket(_message.Message):
    __slots__ = ("table_bucket", "keys")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    keys: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., keys: _Optional[_Iterable[bytes]] = ...) -> None: ...

class LookupRequest(_message.Message):
    __slots__ = ("buckets", "timeout_ms")
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    buckets: _containers.RepeatedCompositeFieldContainer[LookupBucket]
    timeout_ms: int
    def __init__(self, buckets: _Optional[_Iterable[_Union[LookupBucket, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class LookupValue(_message.Message):
    __slots__ = ("found", "row")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    found: bool
    row: bytes
    def __init__(self, found: _Optional[bool] = ..., row: _Optional[bytes] = ...) -> None: ...

class LookupBucketResult(_message.Message):
    __slots__ = ("table_bucket", "error", "values", "applied_offset")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    APPLIED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    error: _common_pb2.ErrorInfo
    values: _containers.RepeatedCompositeFieldContainer[LookupValue]
    applied_offset: int
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., values: _Optional[_Iterable[_Union[LookupValue, _Mapping]]] = ..., applied_offset: _Optional[int] = ...) -> None: ...

class LookupResponse(_message.Message):
    __slots__ = ("error", "buckets")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    buckets: _containers.RepeatedCompositeFieldContainer[LookupBucketResult]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., buckets: _Optional[_Iterable[_Union[LookupBucketResult, _Mapping]]] = ...) -> None: ...

class PrefixLookupBucket(_message.Message):
    __slots__ = ("table_bucket", "prefixes")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    PREFIXES_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    prefixes: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., prefixes: _Optional[_Iterable[bytes]] = ...) -> None: ...

class PrefixLookupRequest(_message.Message):
    __slots__ = ("buckets", "timeout_ms", "max_rows_per_prefix")
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_ROWS_PER_PREFIX_FIELD_NUMBER: _ClassVar[int]
    buckets: _containers.RepeatedCompositeFieldContainer[PrefixLookupBucket]
    timeout_ms: int
    max_rows_per_prefix: int
    def __init__(self, buckets: _Optional[_Iterable[_Union[PrefixLookupBucket, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., max_rows_per_prefix: _Optional[int] = ...) -> None: ...

class RowList(_message.Message):
    __slots__ = ("rows", "truncated")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    rows: _containers.RepeatedScalarFieldContainer[bytes]
    truncated: bool
    def __init__(self, rows: _Optional[_Iterable[bytes]] = ..., truncated: _Optional[bool] = ...) -> None: ...

class PrefixLookupBucketResult(_message.Message):
    __slots__ = ("table_bucket", "error", "results", "applied_offset")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    APPLIED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    error: _common_pb2.ErrorInfo
    results: _containers.RepeatedCompositeFieldContainer[RowList]
    applied_offset: int
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., results: _Optional[_Iterable[_Union[RowList, _Mapping]]] = ..., applied_offset: _Optional[int] = ...) -> None: ...

class PrefixLookupResponse(_message.Message):
    __slots__ = ("error", "buckets")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    buckets: _containers.RepeatedCompositeFieldContainer[PrefixLookupBucketResult]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., buckets: _Optional[_Iterable[_Union[PrefixLookupBucketResult, _Mapping]]] = ...) -> None: ...

class ScanKvRequest(_message.Message):
    __slots__ = ("table_bucket", "after_key", "max_rows", "timeout_ms")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    AFTER_KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_ROWS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    after_key: bytes
    max_rows: int
    timeout_ms: int
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., after_key: _Optional[bytes] = ..., max_rows: _Optional[int] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class KvRow(_message.Message):
    __slots__ = ("key", "row")
    KEY_FIELD_NUMBER: _ClassVar[int]
    ROW_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    row: bytes
    def __init__(self, key: _Optional[bytes] = ..., row: _Optional[bytes] = ...) -> None: ...

class ScanKvResponse(_message.Message):
    __slots__ = ("error", "rows", "more", "applied_offset")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    MORE_FIELD_NUMBER: _ClassVar[int]
    APPLIED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    rows: _containers.RepeatedCompositeFieldContainer[KvRow]
    more: bool
    applied_offset: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., rows: _Optional[_Iterable[_Union[KvRow, _Mapping]]] = ..., more: _Optional[bool] = ..., applied_offset: _Optional[int] = ...) -> None: ...

class NotifyLeaderAndIsrRequest(_message.Message):
    __slots__ = ("coordinator_epoch", "coordinator_id", "buckets", "tables", "servers")
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    coordinator_epoch: int
    coordinator_id: int
    buckets: _containers.RepeatedCompositeFieldContainer[_common_pb2.BucketLeaderAndIsr]
    tables: _containers.RepeatedCompositeFieldContainer[_common_pb2.TableInfo]
    servers: _containers.RepeatedCompositeFieldContainer[_common_pb2.ServerNode]
    def __init__(self, coordinator_epoch: _Optional[int] = ..., coordinator_id: _Optional[int] = ..., buckets: _Optional[_Iterable[_Union[_common_pb2.BucketLeaderAndIsr, _Mapping]]] = ..., tables: _Optional[_Iterable[_Union[_common_pb2.TableInfo, _Mapping]]] = ..., servers: _Optional[_Iterable[_Union[_common_pb2.ServerNode, _Mapping]]] = ...) -> None: ...

class BucketResult(_message.Message):
    __slots__ = ("table_bucket", "error")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    error: _common_pb2.ErrorInfo
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ...) -> None: ...

class NotifyLeaderAndIsrResponse(_message.Message):
    __slots__ = ("error", "buckets")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    buckets: _containers.RepeatedCompositeFieldContainer[BucketResult]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., buckets: _Optional[_Iterable[_Union[BucketResult, _Mapping]]] = ...) -> None: ...

class StopReplicaBucket(_message.Message):
    __slots__ = ("table_bucket", "leader_epoch", "delete")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    DELETE_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    leader_epoch: int
    delete: bool
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., leader_epoch: _Optional[int] = ..., delete: _Optional[bool] = ...) -> None: ...

class StopReplicaRequest(_message.Message):
    __slots__ = ("coordinator_epoch", "coordinator_id", "buckets")
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    coordinator_epoch: int
    coordinator_id: int
    buckets: _containers.RepeatedCompositeFieldContainer[StopReplicaBucket]
    def __init__(self, coordinator_epoch: _Optional[int] = ..., coordinator_id: _Optional[int] = ..., buckets: _Optional[_Iterable[_Union[StopReplicaBucket, _Mapping]]] = ...) -> None: ...

class StopReplicaResponse(_message.Message):
    __slots__ = ("error", "buckets")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    buckets: _containers.RepeatedCompositeFieldContainer[BucketResult]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., buckets: _Optional[_Iterable[_Union[BucketResult, _Mapping]]] = ...) -> None: ...

class UpdateMetadataRequest(_message.Message):
    __slots__ = ("coordinator_epoch", "coordinator_id", "metadata", "replica_tokens", "metadata_version", "incremental", "base_version", "removed_table_ids")
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REPLICA_TOKENS_FIELD_NUMBER: _ClassVar[int]
    METADATA_VERSION_FIELD_NUMBER: _ClassVar[int]
    INCREMENTAL_FIELD_NUMBER: _ClassVar[int]
    BASE_VERSION_FIELD_NUMBER: _ClassVar[int]
    REMOVED_TABLE_IDS_FIELD_NUMBER: _ClassVar[int]
    coordinator_epoch: int
    coordinator_id: int
    metadata: _common_pb2.ClusterMetadata
    replica_tokens: _containers.RepeatedCompositeFieldContainer[ReplicaToken]
    metadata_version: int
    incremental: bool
    base_version: int
    removed_table_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, coordinator_epoch: _Optional[int] = ..., coordinator_id: _Optional[int] = ..., metadata: _Optional[_Union[_common_pb2.ClusterMetadata, _Mapping]] = ..., replica_tokens: _Optional[_Iterable[_Union[ReplicaToken, _Mapping]]] = ..., metadata_version: _Optional[int] = ..., incremental: _Optional[bool] = ..., base_version: _Optional[int] = ..., removed_table_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class ReplicaToken(_message.Message):
    __slots__ = ("server_id", "token")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    token: str
    def __init__(self, server_id: _Optional[int] = ..., token: _Optional[str] = ...) -> None: ...

class UpdateMetadataResponse(_message.Message):
    __slots__ = ("error", "needs_full_view")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    NEEDS_FULL_VIEW_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    needs_full_view: bool
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., needs_full_view: _Optional[bool] = ...) -> None: ...

class WatchLivenessRequest(_message.Message):
    __slots__ = ("coordinator_epoch", "coordinator_id", "interval_ms")
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    coordinator_epoch: int
    coordinator_id: int
    interval_ms: int
    def __init__(self, coordinator_epoch: _Optional[int] = ..., coordinator_id: _Optional[int] = ..., interval_ms: _Optional[int] = ...) -> None: ...

class LivenessHeartbeat(_message.Message):
    __slots__ = ("server_id", "incarnation", "sequence", "sizes_included", "led_bucket_sizes", "sizes_incremental", "sizes_dropped", "disk")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    SIZES_INCLUDED_FIELD_NUMBER: _ClassVar[int]
    LED_BUCKET_SIZES_FIELD_NUMBER: _ClassVar[int]
    SIZES_INCREMENTAL_FIELD_NUMBER: _ClassVar[int]
    SIZES_DROPPED_FIELD_NUMBER: _ClassVar[int]
    DISK_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    incarnation: str
    sequence: int
    sizes_included: bool
    led_bucket_sizes: _containers.RepeatedCompositeFieldContainer[BucketSize]
    sizes_incremental: bool
    sizes_dropped: _containers.RepeatedCompositeFieldContainer[_common_pb2.TableBucket]
    disk: DiskUse
    def __init__(self, server_id: _Optional[int] = ..., incarnation: _Optional[str] = ..., sequence: _Optional[int] = ..., sizes_included: _Optional[bool] = ..., led_bucket_sizes: _Optional[_Iterable[_Union[BucketSize, _Mapping]]] = ..., sizes_incremental: _Optional[bool] = ..., sizes_dropped: _Optional[_Iterable[_Union[_common_pb2.TableBucket, _Mapping]]] = ..., disk: _Optional[_Union[DiskUse, _Mapping]] = ...) -> None: ...

class DiskUse(_message.Message):
    __slots__ = ("held_bytes", "dirs")
    HELD_BYTES_FIELD_NUMBER: _ClassVar[int]
    DIRS_FIELD_NUMBER: _ClassVar[int]
    held_bytes: int
    dirs: _containers.RepeatedCompositeFieldContainer[DataDirUse]
    def __init__(self, held_bytes: _Optional[int] = ..., dirs: _Optional[_Iterable[_Union[DataDirUse, _Mapping]]] = ...) -> None: ...

class DataDirUse(_message.Message):
    __slots__ = ("path", "free_bytes", "total_bytes")
    PATH_FIELD_NUMBER: _ClassVar[int]
    FREE_BYTES_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    path: str
    free_bytes: int
    total_bytes: int
    def __init__(self, path: _Optional[str] = ..., free_bytes: _Optional[int] = ..., total_bytes: _Optional[int] = ...) -> None: ...

class BucketSize(_message.Message):
    __slots__ = ("table_bucket", "size_bytes", "high_watermark", "log_end_offset")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    SIZE_BYTES_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    size_bytes: int
    high_watermark: int
    log_end_offset: int
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., size_bytes: _Optional[int] = ..., high_watermark: _Optional[int] = ..., log_end_offset: _Optional[int] = ...) -> None: ...
