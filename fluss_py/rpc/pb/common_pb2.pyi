from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ErrorInfo(_message.Message):
    __slots__ = ("code", "message", "leader_id", "leader_address")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    code: int
    message: str
    leader_id: int
    leader_address: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., leader_id: _Optional[int] = ..., leader_address: _Optional[str] = ...) -> None: ...

class ServerNode(_message.Message):
    __slots__ = ("id", "host", "port", "rack")
    ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    RACK_FIELD_NUMBER: _ClassVar[int]
    id: int
    host: str
    port: int
    rack: str
    def __init__(self, id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., rack: _Optional[str] = ...) -> None: ...

class TablePath(_message.Message):
    __slots__ = ("database", "table")
    DATABASE_FIELD_NUMBER: _ClassVar[int]
    TABLE_FIELD_NUMBER: _ClassVar[int]
    database: str
    table: str
    def __init__(self, database: _Optional[str] = ..., table: _Optional[str] = ...) -> None: ...

class TableBucket(_message.Message):
    __slots__ = ("table_id", "bucket")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    bucket: int
    def __init__(self, table_id: _Optional[int] = ..., bucket: _Optional[int] = ...) -> None: ...

class TableDescriptor(_message.Message):
    __slots__ = ("num_buckets", "replication_factor", "properties", "comment", "schema")
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NUM_BUCKETS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    COMMENT_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    num_buckets: int
    replication_factor: int
    properties: _containers.ScalarMap[str, str]
    comment: str
    schema: TableSchema
    def __init__(self, num_buckets: _Optional[int] = ..., replication_factor: _Optional[int] = ..., properties: _Optional[_Mapping[str, str]] = ..., comment: _Optional[str] = ..., schema: _Optional[_Union[TableSchema, _Mapping]] = ...) -> None: ...

class SchemaColumn(_message.Message):
    __slots__ = ("name", "type", "nullable")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NULLABLE_FIELD_NUMBER: _ClassVar[int]
    name: str
    type: str
    nullable: bool
    def __init__(self, name: _Optional[str] = ..., type: _Optional[str] = ..., nullable: _Optional[bool] = ...) -> None: ...

class SchemaVersion(_message.Message):
    __slots__ = ("schema_id", "columns")
    SCHEMA_ID_FIELD_NUMBER: _ClassVar[int]
    COLUMNS_FIELD_NUMBER: _ClassVar[int]
    schema_id: int
    columns: _containers.RepeatedCompositeFieldContainer[SchemaColumn]
    def __init__(self, schema_id: _Optional[int] = ..., columns: _Optional[_Iterable[_Union[SchemaColumn, _Mapping]]] = ...) -> None: ...

class TableSchema(_message.Message):
    __slots__ = ("versions", "primary_key", "bucket_key")
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_KEY_FIELD_NUMBER: _ClassVar[int]
    BUCKET_KEY_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[SchemaVersion]
    primary_key: _containers.RepeatedScalarFieldContainer[str]
    bucket_key: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, versions: _Optional[_Iterable[_Union[SchemaVersion, _Mapping]]] = ..., primary_key: _Optional[_Iterable[str]] = ..., bucket_key: _Optional[_Iterable[str]] = ...) -> None: ...

class TableInfo(_message.Message):
    __slots__ = ("table_id", "path", "descriptor", "created_ms")
    TABLE_ID_FIELD_NUMBER: _ClassVar[int]
    PATH_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTOR_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    table_id: int
    path: TablePath
    descriptor: TableDescriptor
    created_ms: int
    def __init__(self, table_id: _Optional[int] = ..., path: _Optional[_Union[TablePath, _Mapping]] = ..., descriptor: _Optional[_Union[TableDescriptor, _Mapping]] = ..., created_ms: _Optional[int] = ...) -> None: ...

class BucketLeaderAndIsr(_message.Message):
    __slots__ = ("table_bucket", "leader", "leader_epoch", "isr", "coordinator_epoch", "bucket_epoch", "replicas", "adding_replicas")
    TABLE_BUCKET_FIELD_NUMBER: _ClassVar[int]
    LEADER_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    ISR_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    BUCKET_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    table_bucket: TableBucket
    leader: int
    leader_epoch: int
    isr: _containers.RepeatedScalarFieldContainer[int]
    coordinator_epoch: int
    bucket_epoch: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, table_bucket: _Optional[_Union[TableBucket, _Mapping]] = ..., leader: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., isr: _Optional[_Iterable[int]] = ..., coordinator_epoch: _Optional[int] = ..., bucket_epoch: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., adding_replicas: _Optional[_Iterable[int]] = ...) -> None: ...

class TableMetadata(_message.Message):
    __slots__ = ("info", "buckets")
    INFO_FIELD_NUMBER: _ClassVar[int]
    BUCKETS_FIELD_NUMBER: _ClassVar[int]
    info: TableInfo
    buckets: _containers.RepeatedCompositeFieldContainer[BucketLeaderAndIsr]
    def __init__(self, info: _Optional[_Union[TableInfo, _Mapping]] = ..., buckets: _Optional[_Iterable[_Union[BucketLeaderAndIsr, _Mapping]]] = ...) -> None: ...

class ClusterMetadata(_message.Message):
    __slots__ = ("tablet_servers", "coordinator", "tables", "coordinator_epoch")
    TABLET_SERVERS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_FIELD_NUMBER: _ClassVar[int]
    TABLES_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    tablet_servers: _containers.RepeatedCompositeFieldContainer[ServerNode]
    coordinator: ServerNode
    tables: _containers.RepeatedCompositeFieldContainer[TableMetadata]
    coordinator_epoch: int
    def __init__(self, tablet_servers: _Optional[_Iterable[_Union[ServerNode, _Mapping]]] = ..., coordinator: _Optional[_Union[ServerNode, _Mapping]] = ..., tables: _Optional[_Iterable[_Union[TableMetadata, _Mapping]]] = ..., coordinator_epoch: _Optional[int] = ...) -> None: ...

class MetadataRequest(_message.Message):
    __slots__ = ("tables",)
    TABLES_FIELD_NUMBER: _ClassVar[int]
    tables: _containers.RepeatedCompositeFieldContainer[TablePath]
    def __init__(self, tables: _Optional[_Iterable[_Union[TablePath, _Mapping]]] = ...) -> None: ...

class MetadataResponse(_message.Message):
    __slots__ = ("error", "metadata")
    ERROR_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    error: ErrorInfo
    metadata: ClusterMetadata
    def __init__(self, error: _Optional[_Union[ErrorInfo, _Mapping]] = ..., metadata: _Optional[_Union[ClusterMetadata, _Mapping]] = ...) -> None: ...
