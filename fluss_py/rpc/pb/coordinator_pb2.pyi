from fluss_py.rpc.pb import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ReplicaFault(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REPLICA_OFFLINE: _ClassVar[ReplicaFault]
    REPLICA_CORRUPT: _ClassVar[ReplicaFault]
    REPLICA_RECOVERED: _ClassVar[ReplicaFault]

class ServerTag(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SERVER_TAG_NONE: _ClassVar[ServerTag]
    SERVER_TAG_PERMANENT_OFFLINE: _ClassVar[ServerTag]
    SERVER_TAG_TEMPORARY_OFFLINE: _ClassVar[ServerTag]
REPLICA_OFFLINE: ReplicaFault
REPLICA_CORRUPT: ReplicaFault
REPLICA_RECOVERED: ReplicaFault
SERVER_TAG_NONE: ServerTag
SERVER_TAG_PERMANENT_OFFLINE: ServerTag
SERVER_TAG_TEMPORARY_OFFLINE: ServerTag

class SimpleResponse(_message.Message):
    __slots__ = ("error",)
    ERROR_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ...) -> None: ...

class GetCoordinatorInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetCoordinatorInfoResponse(_message.Message):
    __slots__ = ("error", "server_id", "state", "leader_id", "leader_address", "coordinator_epoch")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    server_id: int
    state: str
    leader_id: int
    leader_address: str
    coordinator_epoch: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., server_id: _Optional[int] = ..., state: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_address: _Optional[str] = ..., coordinator_epoch: _Optional[int] = ...) -> None: ...

class CreateDatabaseRequest(_message.Message):
    __slots__ = ("name", "ignore_if_exists")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IGNORE_IF_EXISTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    ignore_if_exists: bool
    def __init__(self, name: _Optional[str] = ..., ignore_if_exists: _Optional[bool] = ...) -> None: ...

class DropDatabaseRequest(_message.Message):
    __slots__ = ("name", "ignore_if_not_exists", "cascade")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IGNORE_IF_NOT_EXISTS_FIELD_NUMBER: _ClassVar[int]
    CASCADE_FIELD_NUMBER: _ClassVar[int]
    name: str
    ignore_if_not_exists: bool
    cascade: bool
    def __init__(self, name: _Optional[str] = ..., ignore_if_not_exists: _Optional[bool] = ..., cascade: _Optional[bool] = ...) -> None: ...

class ListDatabasesRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListDatabasesResponse(_message.Message):
    __slots__ = ("error", "databases")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    DATABASES_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    databases: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., databases: _Optional[_Iterable[str]] = ...) -> None: ...

class CreateTableRequest(_message.Message):
    __slots__ = ("path", "descriptor", "ignore_if_exists")
    PATH_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_FIELD_NUMBER: _ClassVar[int]
    IGNORE_IF_EXISTS_FIELD_NUMBER: _ClassVar[int]
    path: _common_pb2.TablePath
    descriptor: _common_pb2.TableDescriptor
    ignore_if_exists: bool
    def __init__(self, path: _Optional[_Union[_common_pb2.TablePath, _Mapping]] = ..., descriptor: _Optional[_Union[_common_pb2.TableDescriptor, _Mapping]] = ..., ignore_if_exists: _Optional[bool] = ...) -> None: ...

class CreateTableResponse(_message.Message):
    __slots__ = ("error", "table_id")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    table_id: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., table_id: _Optional[int] = ...) -> None: ...

class DropTableRequest(_message.Message):
    __slots__ = ("path", "ignore_if_not_exists")
    PATH_FIELD_NUMBER: _ClassVar[int]
    IGNORE_IF_NOT_EXISTS_FIELD_NUMBER: _ClassVar[int]
    path: _common_pb2.TablePath
    ignore_if_not_exists: bool
    def __init__(self, path: _Optional[_Union[_common_pb2.TablePath, _Mapping]] = ..., ignore_if_not_exists: _Optional[bool] = ...) -> None: ...

class AlterTableRequest(_message.Message):
    __slots__ = ("path", "num_buckets", "add_column")
    PATH_FIELD_NUMBER: _ClassVar[int]
    NUM_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    ADD_COLUMN_FIELD_NUMBER: _ClassVar[int]
    path: _common_pb2.TablePath
    num_buckets: int
    add_column: _common_pb2.SchemaColumn
    def __init__(self, path: _Optional[_Union[_common_pb2.TablePath, _Mapping]] = ..., num_buckets: _Optional[int] = ..., add_column: _Optional[_Union[_common_pb2.SchemaColumn, _Mapping]] = ...) -> None: ...

class ListTablesRequest(_message.Message):
    __slots__ = ("database",)
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    database: str
    def __init__(self, database: _Optional[str] = ...) -> None: ...

class ListTablesResponse(_message.Message):
    __slots__ = ("error", "tables")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    tables: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., tables: _Optional[_Iterable[str]] = ...) -> None: ...

class AdjustIsrBucket(_message.Message):
    __slots__ = ("table_bucket", "leader_epoch", "bucket_epoch", "new_isr")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    BUCKET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    NEW_ISR_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    leader_epoch: int
    bucket_epoch: int
    new_isr: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., leader_epoch: _Optional[int] = ..., bucket_epoch: _Optional[int] = ..., new_isr: _Optional[_Iterable[int]] = ...) -> None: ...

class AdjustIsrRequest(_message.Message):
    __slots__ = ("server_id", "buckets")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    buckets: _containers.RepeatedCompositeFieldContainer[AdjustIsrBucket]
    def __init__(self, server_id: _Optional[int] = ..., buckets: _Optional[_Iterable[_Union[AdjustIsrBucket, _Mapping]]] = ...) -> None: ...

class AdjustIsrBucketResult(_message.Message):
    __slots__ = ("table_bucket", "error", "leader_and_isr")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    LEADER_AND_ISR_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    error: _common_pb2.ErrorInfo
    leader_and_isr: _common_pb2.BucketLeaderAndIsr
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., leader_and_isr: _Optional[_Union[_common_pb2.BucketLeaderAndIsr, _Mapping]] = ...) -> None: ...

class AdjustIsrResponse(_message.Message):
    __slots__ = ("error", "buckets")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    buckets: _containers.RepeatedCompositeFieldContainer[AdjustIsrBucketResult]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., buckets: _Optional[_Iterable[_Union[AdjustIsrBucketResult, _Mapping]]] = ...) -> None: ...

class ControlledShutdownRequest(_message.Message):
    __slots__ = ("server_id",)
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    def __init__(self, server_id: _Optional[int] = ...) -> None: ...

class ControlledShutdownResponse(_message.Message):
    __slots__ = ("error", "remaining_leaders")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REMAINING_LEADERS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    remaining_leaders: _containers.RepeatedCompositeFieldContainer[_common_pb2.TableBucket]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., remaining_leaders: _Optional[_Iterable[_Union[_common_pb2.TableBucket, _Mapping]]] = ...) -> None: ...

class ReportReplicaFaultsRequest(_message.Message):
    __slots__ = ("server_id", "fault", "buckets", "reason")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    FAULT_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    fault: ReplicaFault
    buckets: _containers.RepeatedCompositeFieldContainer[_common_pb2.TableBucket]
    reason: str
    def __init__(self, server_id: _Optional[int] = ..., fault: _Optional[_Union[ReplicaFault, str]] = ..., buckets: _Optional[_Iterable[_Union[_common_pb2.TableBucket, _Mapping]]] = ..., reason: _Optional[str] = ...) -> None: ...

class AllocateWriterIdRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AllocateWriterIdResponse(_message.Message):
    __slots__ = ("error", "writer_id")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    WRITER_ID_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    writer_id: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., writer_id: _Optional[int] = ...) -> None: ...

class BucketOffset(_message.Message):
    __slots__ = ("table_bucket", "offset")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    table_bucket: _common_pb2.TableBucket
    offset: int
    def __init__(self, table_bucket: _Optional[_Union[_common_pb2.TableBucket, _Mapping]] = ..., offset: _Optional[int] = ...) -> None: ...

class CommitOffsetsRequest(_message.Message):
    __slots__ = ("group", "offsets", "member_id", "member_epoch")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    group: str
    offsets: _containers.RepeatedCompositeFieldContainer[BucketOffset]
    member_id: str
    member_epoch: int
    def __init__(self, group: _Optional[str] = ..., offsets: _Optional[_Iterable[_Union[BucketOffset, _Mapping]]] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ...) -> None: ...

class TableError(_message.Message):
    __slots__ = ("table_id", "error")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    error: _common_pb2.ErrorInfo
    def __init__(self, table_id: _Optional[int] = ..., error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ...) -> None: ...

class CommitOffsetsResponse(_message.Message):
    __slots__ = ("error", "refused")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    refused: _containers.RepeatedCompositeFieldContainer[TableError]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., refused: _Optional[_Iterable[_Union[TableError, _Mapping]]] = ...) -> None: ...

class FetchOffsetsRequest(_message.Message):
    __slots__ = ("group", "table_id")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    group: str
    table_id: int
    def __init__(self, group: _Optional[str] = ..., table_id: _Optional[int] = ...) -> None: ...

class FetchOffsetsResponse(_message.Message):
    __slots__ = ("error", "offsets", "refused")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    OFFSETS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    offsets: _containers.RepeatedCompositeFieldContainer[BucketOffset]
    refused: _containers.RepeatedCompositeFieldContainer[TableError]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., offsets: _Optional[_Iterable[_Union[BucketOffset, _Mapping]]] = ..., refused: _Optional[_Iterable[_Union[TableError, _Mapping]]] = ...) -> None: ...

class ListGroupsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListGroupsResponse(_message.Message):
    __slots__ = ("error", "groups", "summaries")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    GROUPS_FIELD_NUMBER: _ClassVar[int]
    SUMMARIES_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    groups: _containers.RepeatedScalarFieldContainer[str]
    summaries: _containers.RepeatedCompositeFieldContainer[GroupSummary]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., groups: _Optional[_Iterable[str]] = ..., summaries: _Optional[_Iterable[_Union[GroupSummary, _Mapping]]] = ...) -> None: ...

class GroupSummary(_message.Message):
    __slots__ = ("group", "state", "members")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    group: str
    state: str
    members: int
    def __init__(self, group: _Optional[str] = ..., state: _Optional[str] = ..., members: _Optional[int] = ...) -> None: ...

class ConsumerHeartbeatRequest(_message.Message):
    __slots__ = ("group", "member_id", "member_epoch", "instance_id", "session_timeout_ms", "subscribed_table_ids", "owned")
    GROUP_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TABLE_IDS_FIELD_NUMBER: _ClassVar[int]
    OWNED_FIELD_NUMBER: _ClassVar[int]
    group: str
    member_id: str
    member_epoch: int
    instance_id: str
    session_timeout_ms: int
    subscribed_table_ids: _containers.RepeatedScalarFieldContainer[int]
    owned: _containers.RepeatedCompositeFieldContainer[_common_pb2.TableBucket]
    def __init__(self, group: _Optional[str] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., instance_id: _Optional[str] = ..., session_timeout_ms: _Optional[int] = ..., subscribed_table_ids: _Optional[_Iterable[int]] = ..., owned: _Optional[_Iterable[_Union[_common_pb2.TableBucket, _Mapping]]] = ...) -> None: ...

class ConsumerHeartbeatResponse(_message.Message):
    __slots__ = ("error", "member_id", "member_epoch", "heartbeat_interval_ms", "assignment")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNMENT_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    member_id: str
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: _containers.RepeatedCompositeFieldContainer[_common_pb2.TableBucket]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., member_id: _Optional[str] = ..., member_epoch: _Optional[int] = ..., heartbeat_interval_ms: _Optional[int] = ..., assignment: _Optional[_Iterable[_Union[_common_pb2.TableBucket, _Mapping]]] = ...) -> None: ...

class DescribeGroupRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class GroupMemberInfo(_message.Message):
    __slots__ = ("member_id", "instance_id", "client_host", "member_epoch", "session_timeout_ms", "since_heartbeat_ms", "assigned", "target", "leaving", "subscribed_table_ids")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_HOST_FIELD_NUMBER: _ClassVar[int]
    MEMBER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    SESSION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SINCE_HEARTBEAT_MS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    LEAVING_FIELD_NUMBER: _ClassVar[int]
    SUBSCRIBED_TABLE_IDS_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    instance_id: str
    client_host: str
    member_epoch: int
    session_timeout_ms: int
    since_heartbeat_ms: int
    assigned: _containers.RepeatedCompositeFieldContainer[_common_pb2.TableBucket]
    target: _containers.RepeatedCompositeFieldContainer[_common_pb2.TableBucket]
    leaving: bool
    subscribed_table_ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, member_id: _Optional[str] = ..., instance_id: _Optional[str] = ..., client_host: _Optional[str] = ..., member_epoch: _Optional[int] = ..., session_timeout_ms: _Optional[int] = ..., since_heartbeat_ms: _Optional[int] = ..., assigned: _Optional[_Iterable[_Union[_common_pb2.TableBucket, _Mapping]]] = ..., target: _Optional[_Iterable[_Union[_common_pb2.TableBucket, _Mapping]]] = ..., leaving: _Optional[bool] = ..., subscribed_table_ids: _Optional[_Iterable[int]] = ...) -> None: ...

class DescribeGroupResponse(_message.Message):
    __slots__ = ("error", "state", "group_epoch", "members")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    GROUP_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    state: str
    group_epoch: int
    members: _containers.RepeatedCompositeFieldContainer[GroupMemberInfo]
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., state: _Optional[str] = ..., group_epoch: _Optional[int] = ..., members: _Optional[_Iterable[_Union[GroupMemberInfo, _Mapping]]] = ...) -> None: ...

class DeleteGroupRequest(_message.Message):
    __slots__ = ("group",)
    GROUP_FIELD_NUMBER: _ClassVar[int]
    group: str
    def __init__(self, group: _Optional[str] = ...) -> None: ...

class AlterServerTagRequest(_message.Message):
    __slots__ = ("server_id", "tag")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    tag: ServerTag
    def __init__(self, server_id: _Optional[int] = ..., tag: _Optional[_Union[ServerTag, str]] = ...) -> None: ...

class ReplacementProgress(_message.Message):
    __slots__ = ("id", "status", "replacing", "moves_total", "moves_done", "moves_in_flight", "bytes_total", "bytes_moved", "message")
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    REPLACING_FIELD_NUMBER: _ClassVar[int]
    MOVES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    MOVES_DONE_FIELD_NUMBER: _ClassVar[int]
    MOVES_IN_FLIGHT_FIELD_NUMBER: _ClassVar[int]
    BYTES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    BYTES_MOVED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    id: str
    status: str
    replacing: _containers.RepeatedScalarFieldContainer[int]
    moves_total: int
    moves_done: int
    moves_in_flight: int
    bytes_total: int
    bytes_moved: int
    message: str
    def __init__(self, id: _Optional[str] = ..., status: _Optional[str] = ..., replacing: _Optional[_Iterable[int]] = ..., moves_total: _Optional[int] = ..., moves_done: _Optional[int] = ..., moves_in_flight: _Optional[int] = ..., bytes_total: _Optional[int] = ..., bytes_moved: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class AlterServerTagResponse(_message.Message):
    __slots__ = ("error", "tag", "message", "replacement")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENT_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    tag: ServerTag
    message: str
    replacement: ReplacementProgress
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., tag: _Optional[_Union[ServerTag, str]] = ..., message: _Optional[str] = ..., replacement: _Optional[_Union[ReplacementProgress, _Mapping]] = ...) -> None: ...

class DescribeServerTagsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ServerTagInfo(_message.Message):
    __slots__ = ("server_id", "tag", "by", "since_ms", "reason", "live", "replicas", "leaders")
    SERVER_ID_FIELD_NUMBER: _ClassVar[int]
    TAG_FIELD_NUMBER: _ClassVar[int]
    BY_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    LIVE_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    LEADERS_FIELD_NUMBER: _ClassVar[int]
    server_id: int
    tag: ServerTag
    by: str
    since_ms: int
    reason: str
    live: bool
    replicas: int
    leaders: int
    def __init__(self, server_id: _Optional[int] = ..., tag: _Optional[_Union[ServerTag, str]] = ..., by: _Optional[str] = ..., since_ms: _Optional[int] = ..., reason: _Optional[str] = ..., live: _Optional[bool] = ..., replicas: _Optional[int] = ..., leaders: _Optional[int] = ...) -> None: ...

class DescribeServerTagsResponse(_message.Message):
    __slots__ = ("error", "servers", "replacement", "to_replace")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    REPLACEMENT_FIELD_NUMBER: _ClassVar[int]
    TO_REPLACE_FIELD_NUMBER: _ClassVar[int]
    error: _common_pb2.ErrorInfo
    servers: _containers.RepeatedCompositeFieldContainer[ServerTagInfo]
    replacement: ReplacementProgress
    to_replace: int
    def __init__(self, error: _Optional[_Union[_common_pb2.ErrorInfo, _Mapping]] = ..., servers: _Optional[_Iterable[_Union[ServerTagInfo, _Mapping]]] = ..., replacement: _Optional[_Union[ReplacementProgress, _Mapping]] = ..., to_replace: _Optional[int] = ...) -> None: ...
