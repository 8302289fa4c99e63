"""Error codes and the exception tree of fluss_py.

Error codes are protocol: they travel in ``ErrorInfo.code`` and are stored in logs. The *names* may
change, the *numbers* never do. Callers decide what to do from the two flags each code carries, never
from class names::

    retriable         the same request may succeed later (leader moving, replicas catching up, ...)
    invalid_metadata  the caller's cluster view is stale: refresh metadata before retrying

Exception tree::

    FlussError(RuntimeError)                  .code .retriable .invalid_metadata .leader_id .leader_address
    ├── ApiError                              an ErrorCode answered by a server (or raised to become one)
    │   (one subclass per ErrorCode, named after it: NOT_LEADER_OR_FOLLOWER -> NotLeaderOrFollowerError)
    └── ConfigError                           a bad configuration key or value (CLI exit code 2)

``for_code(code)`` gives the exception class for a code; ``error_from(code, message)`` builds one.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ErrorCode(IntEnum):
    """Stable wire codes. Append new codes; never renumber or reuse one."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    NETWORK_EXCEPTION = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TABLE_OR_BUCKET = 3
    OFFSET_OUT_OF_RANGE = 4
    NOT_LEADER_OR_FOLLOWER = 5
    REQUEST_TIMED_OUT = 6
    RECORD_BATCH_TOO_LARGE = 7
    INVALID_CONFIG = 8
    NOT_ENOUGH_REPLICAS = 9
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 10
    FENCED_LEADER_EPOCH = 11
    UNKNOWN_LEADER_EPOCH = 12
    INVALID_COORDINATOR_EPOCH = 13
    NOT_COORDINATOR_LEADER = 14
    COORDINATOR_NOT_AVAILABLE = 15
    DATABASE_NOT_EXIST = 16
    DATABASE_ALREADY_EXIST = 17
    TABLE_NOT_EXIST = 18
    TABLE_ALREADY_EXIST = 19
    INVALID_DATABASE_NAME = 20
    INVALID_TABLE_NAME = 21
    INVALID_REPLICATION_FACTOR = 22
    OUT_OF_ORDER_SEQUENCE = 23
    DUPLICATE_SEQUENCE = 24
    INVALID_WRITER_EPOCH = 25
    UNKNOWN_WRITER_ID = 26
    STORAGE_ERROR = 27
    INVALID_RECORD_BATCH = 28
    LEADER_NOT_AVAILABLE = 29
    INVALID_UPDATE_VERSION = 30
    INVALID_REQUEST = 31
    DATABASE_NOT_EMPTY = 32
    GROUP_NOT_EXIST = 33
    REBALANCE_IN_PROGRESS = 34
    INVALID_REBALANCE_PLAN = 35
    UNSUPPORTED_COMPRESSION = 36
    INELIGIBLE_REPLICA = 37
    SERVER_ID_CONFLICT = 38
    LOG_CORRUPTED = 39
    FETCH_SESSION_NOT_FOUND = 40
    INVALID_FETCH_SESSION_EPOCH = 41
    REPLICA_NOT_AUTHENTICATED = 42
    REPLICA_NOT_ASSIGNED = 43
    COORDINATOR_NOT_AUTHENTICATED = 44
    AUTHENTICATION_FAILED = 45
    AUTHORIZATION_FAILED = 46
    UNKNOWN_MEMBER_ID = 47
    FENCED_MEMBER_EPOCH = 48
    INVALID_SESSION_TIMEOUT = 49
    BUCKET_NOT_OWNED = 50
    GROUP_NOT_EMPTY = 51
    PARTITIONED_TABLE = 52
    PARTITION_NOT_EXIST = 53
    INVALID_TIMESTAMP = 54
    # 55-59: consumer groups and security (issue 36)
    UNRELEASED_INSTANCE_ID = 55
    # primary-key tables (docs/primary-key-tables.md)
    INVALID_ROW = 60
    TABLE_TYPE_MISMATCH = 61
    KV_NOT_READY = 62
    UNKNOWN_SCHEMA_ID = 63
    # server tags (docs/rebalance.md §12)
    TABLET_SERVER_NOT_EXIST = 70
    INVALID_SERVER_TAG = 71


@dataclass(frozen=True, slots=True)
class _Spec:
    retriable: bool
    invalid_metadata: bool
    text: str


# code -> (retriable, invalid_metadata, default message)
_SPECS: dict[ErrorCode, _Spec] = {
    ErrorCode.UNKNOWN_SERVER_ERROR: _Spec(False, False, "unexpected server error"),
    ErrorCode.NONE: _Spec(False, False, "no error"),
    ErrorCode.NETWORK_EXCEPTION: _Spec(True, True, "the server disconnected before a response was received"),
    ErrorCode.CORRUPT_MESSAGE: _Spec(False, False, "the record batch failed its CRC check or is malformed"),
    ErrorCode.UNKNOWN_TABLE_OR_BUCKET: _Spec(True, True, "this server does not host this table bucket"),
    ErrorCode.OFFSET_OUT_OF_RANGE: _Spec(False, False, "the requested offset is outside the log"),
    ErrorCode.NOT_LEADER_OR_FOLLOWER: _Spec(True, True, "this server is not the leader of the bucket"),
    ErrorCode.REQUEST_TIMED_OUT: _Spec(True, False, "the request timed out"),
    ErrorCode.RECORD_BATCH_TOO_LARGE: _Spec(False, False, "the record batch is larger than log.max-batch-size"),
    ErrorCode.INVALID_CONFIG: _Spec(False, False, "invalid configuration"),
    ErrorCode.NOT_ENOUGH_REPLICAS: _Spec(True, False, "fewer in-sync replicas than min.insync.replicas"),
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: _Spec(True, False, "appended, but the ISR shrank below minimum"),
    ErrorCode.FENCED_LEADER_EPOCH: _Spec(True, True, "the request's leader epoch is older than the replica's"),
    # invalid_metadata: the caller's epoch may be a guess from a leader hint (docs/client.md); a refresh fixes it
    ErrorCode.UNKNOWN_LEADER_EPOCH: _Spec(True, True, "the request's leader epoch is newer than the replica's"),
    ErrorCode.INVALID_COORDINATOR_EPOCH: _Spec(False, False, "the coordinator epoch is stale"),
    ErrorCode.NOT_COORDINATOR_LEADER: _Spec(True, True, "this coordinator is not the leader"),
    ErrorCode.COORDINATOR_NOT_AVAILABLE: _Spec(True, True, "no coordinator leader is available"),
    ErrorCode.DATABASE_NOT_EXIST: _Spec(False, False, "the database does not exist"),
    ErrorCode.DATABASE_ALREADY_EXIST: _Spec(False, False, "the database already exists"),
    ErrorCode.TABLE_NOT_EXIST: _Spec(False, False, "the table does not exist"),
    ErrorCode.TABLE_ALREADY_EXIST: _Spec(False, False, "the table already exists"),
    ErrorCode.INVALID_DATABASE_NAME: _Spec(False, False, "invalid database name"),
    ErrorCode.INVALID_TABLE_NAME: _Spec(False, False, "invalid table name"),
    ErrorCode.INVALID_REPLICATION_FACTOR: _Spec(False, False, "replication factor exceeds live tablet servers"),
    ErrorCode.OUT_OF_ORDER_SEQUENCE: _Spec(False, False, "the batch sequence is out of order for this writer"),
    ErrorCode.DUPLICATE_SEQUENCE: _Spec(False, False, "the batch is a duplicate of one already appended"),
    ErrorCode.INVALID_WRITER_EPOCH: _Spec(False, False, "the writer epoch is older than the current one"),
    ErrorCode.UNKNOWN_WRITER_ID: _Spec(True, False, "the server has no state for this writer id"),
    ErrorCode.STORAGE_ERROR: _Spec(True, True, "the replica's disk failed (for example, no space left)"),
    ErrorCode.INVALID_RECORD_BATCH: _Spec(False, False, "the record batch header is invalid"),
    ErrorCode.LEADER_NOT_AVAILABLE: _Spec(True, True, "the bucket has no live leader right now"),
    ErrorCode.INVALID_UPDATE_VERSION: _Spec(False, True, "the bucket epoch is stale"),
    ErrorCode.INVALID_REQUEST: _Spec(False, False, "the request is malformed"),
    ErrorCode.DATABASE_NOT_EMPTY: _Spec(False, False, "the database still holds tables"),
    ErrorCode.GROUP_NOT_EXIST: _Spec(False, False, "the consumer group does not exist"),
    ErrorCode.REBALANCE_IN_PROGRESS: _Spec(False, False, "a rebalance is already running"),
    ErrorCode.INVALID_REBALANCE_PLAN: _Spec(False, False, "the rebalance plan cannot be carried out"),
    ErrorCode.UNSUPPORTED_COMPRESSION: _Spec(False, False, "unsupported compression type"),
    ErrorCode.INELIGIBLE_REPLICA: _Spec(False, False, "the replica may not join the ISR"),
    ErrorCode.SERVER_ID_CONFLICT: _Spec(False, False, "another live server has the same id"),
    ErrorCode.LOG_CORRUPTED: _Spec(False, False, "a log file on disk is corrupt"),
    ErrorCode.FETCH_SESSION_NOT_FOUND: _Spec(True, False, "no such fetch session here: send a full fetch"),
    ErrorCode.INVALID_FETCH_SESSION_EPOCH: _Spec(True, False, "not the fetch session's next epoch: send a full fetch"),
    # retriable: the real peer meets them transiently (a restarted follower's new token not yet known to the
    # leader; a replica being added fetching before the leader is told; a new coordinator before its leader node)
    ErrorCode.REPLICA_NOT_AUTHENTICATED: _Spec(True, False, "the caller did not prove it is the replica it claims"),
    ErrorCode.REPLICA_NOT_ASSIGNED: _Spec(True, False, "the fetching replica is not assigned to this bucket"),
    ErrorCode.COORDINATOR_NOT_AUTHENTICATED: _Spec(
        True, False, "the request is not from the current coordinator leader"
    ),
    ErrorCode.AUTHENTICATION_FAILED: _Spec(False, False, "no valid credentials: unknown user, wrong password"),
    ErrorCode.AUTHORIZATION_FAILED: _Spec(False, False, "the principal may not do this operation on this resource"),
    # consumer groups (docs/consumer-groups.md): the member rejoins as a new member on the first two
    ErrorCode.UNKNOWN_MEMBER_ID: _Spec(False, False, "the group has no such member (expired, left or fenced)"),
    ErrorCode.FENCED_MEMBER_EPOCH: _Spec(False, False, "the member epoch is not the member's current one"),
    ErrorCode.INVALID_SESSION_TIMEOUT: _Spec(False, False, "the session timeout is outside the server's bounds"),
    ErrorCode.BUCKET_NOT_OWNED: _Spec(False, False, "the member does not own the bucket it commits"),
    ErrorCode.GROUP_NOT_EMPTY: _Spec(False, False, "the group has live members"),
    ErrorCode.PARTITIONED_TABLE: _Spec(
        False, False, "the table is partitioned and has no buckets of its own: name a partition (<table>$<slot>)"
    ),
    ErrorCode.PARTITION_NOT_EXIST: _Spec(
        False, False, "the record's partition does not exist (expired, or not created yet)"
    ),
    # as Kafka's INVALID_TIMESTAMP (32): the producer's clock or timestamps are wrong, a retry cannot help
    ErrorCode.INVALID_TIMESTAMP: _Spec(
        False, False, "a record timestamp is too far ahead of the server's clock (log.message.timestamp.after.max.ms)"
    ),
    # KIP-848: a static member's instance id is held by another active member; fatal for the newcomer
    ErrorCode.UNRELEASED_INSTANCE_ID: _Spec(
        False, False, "another active member of the group holds this static instance id"
    ),
    ErrorCode.INVALID_ROW: _Spec(False, False, "a row does not match the table's schema; nothing was written"),
    ErrorCode.TABLE_TYPE_MISMATCH: _Spec(
        False, False, "the operation needs the other kind of table (primary-key vs log table)"
    ),
    # a new leader's KV has not yet applied everything committed: lookups wait for it (docs/primary-key-tables.md)
    ErrorCode.KV_NOT_READY: _Spec(True, False, "the bucket's KV has not yet applied every committed change"),
    # a row written with a schema id the server has not learned yet (an ALTER racing the metadata update)
    ErrorCode.UNKNOWN_SCHEMA_ID: _Spec(True, True, "the server does not know this schema id yet"),
    # a server tag names an id that is not registered, hosts no replica and has no tag
    ErrorCode.TABLET_SERVER_NOT_EXIST: _Spec(False, False, "no such tablet server"),
    # a server tag that would leave no live server, or a bucket below its min ISR: nothing was written
    ErrorCode.INVALID_SERVER_TAG: _Spec(False, False, "the server tag was refused"),
}


class FlussError(RuntimeError):
    """Base of every fluss_py error. Subclasses set ``code``; flags come from the code's spec."""

    code: ErrorCode = ErrorCode.UNKNOWN_SERVER_ERROR

    def __init__(self, message: str | None = None, *, leader_id: int = -1, leader_address: str = "") -> None:
        super().__init__(message or _SPECS[self.code].text)
        self.message = message or _SPECS[self.code].text
        self.leader_id = leader_id
        self.leader_address = leader_address

    @property
    def retriable(self) -> bool:
        return _SPECS[self.code].retriable

    @property
    def invalid_metadata(self) -> bool:
        return _SPECS[self.code].invalid_metadata

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


class ApiError(FlussError):
    """An error with a wire code; raised on servers and re-raised on clients from ``ErrorInfo``."""


class ConfigError(FlussError):
    """A configuration key is unknown or its value is invalid; ``key`` names it."""

    code = ErrorCode.INVALID_CONFIG

    def __init__(self, key: str, message: str) -> None:
        super().__init__(f"{key}: {message}")
        self.key = key


def _camel(name: str) -> str:
    base = name.removesuffix("_ERROR")
    return "".join(part.capitalize() for part in base.lower().split("_")) + "Error"


# One ApiError subclass per code, named after it (NOT_LEADER_OR_FOLLOWER -> NotLeaderOrFollowerError).
_BY_CODE: dict[int, type[ApiError]] = {}
for _code in ErrorCode:
    if _code is ErrorCode.NONE:
        continue
    _cls = type(_camel(_code.name), (ApiError,), {"code": _code, "__doc__": _SPECS[_code].text})
    _BY_CODE[int(_code)] = _cls
    globals()[_cls.__name__] = _cls

# Names spelled out for linters and readers (the classes are made in the loop above).
UnknownServerError: type[ApiError] = _BY_CODE[ErrorCode.UNKNOWN_SERVER_ERROR]
NetworkExceptionError: type[ApiError] = _BY_CODE[ErrorCode.NETWORK_EXCEPTION]
CorruptMessageError: type[ApiError] = _BY_CODE[ErrorCode.CORRUPT_MESSAGE]
UnknownTableOrBucketError: type[ApiError] = _BY_CODE[ErrorCode.UNKNOWN_TABLE_OR_BUCKET]
OffsetOutOfRangeError: type[ApiError] = _BY_CODE[ErrorCode.OFFSET_OUT_OF_RANGE]
NotLeaderOrFollowerError: type[ApiError] = _BY_CODE[ErrorCode.NOT_LEADER_OR_FOLLOWER]
RequestTimedOutError: type[ApiError] = _BY_CODE[ErrorCode.REQUEST_TIMED_OUT]
RecordBatchTooLargeError: type[ApiError] = _BY_CODE[ErrorCode.RECORD_BATCH_TOO_LARGE]
NotEnoughReplicasError: type[ApiError] = _BY_CODE[ErrorCode.NOT_ENOUGH_REPLICAS]
NotEnoughReplicasAfterAppendError: type[ApiError] = _BY_CODE[ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND]
FencedLeaderEpochError: type[ApiError] = _BY_CODE[ErrorCode.FENCED_LEADER_EPOCH]
UnknownLeaderEpochError: type[ApiError] = _BY_CODE[ErrorCode.UNKNOWN_LEADER_EPOCH]
InvalidCoordinatorEpochError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_COORDINATOR_EPOCH]
NotCoordinatorLeaderError: type[ApiError] = _BY_CODE[ErrorCode.NOT_COORDINATOR_LEADER]
CoordinatorNotAvailableError: type[ApiError] = _BY_CODE[ErrorCode.COORDINATOR_NOT_AVAILABLE]
DatabaseNotExistError: type[ApiError] = _BY_CODE[ErrorCode.DATABASE_NOT_EXIST]
DatabaseAlreadyExistError: type[ApiError] = _BY_CODE[ErrorCode.DATABASE_ALREADY_EXIST]
TableNotExistError: type[ApiError] = _BY_CODE[ErrorCode.TABLE_NOT_EXIST]
TableAlreadyExistError: type[ApiError] = _BY_CODE[ErrorCode.TABLE_ALREADY_EXIST]
InvalidDatabaseNameError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_DATABASE_NAME]
InvalidTableNameError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_TABLE_NAME]
InvalidReplicationFactorError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_REPLICATION_FACTOR]
OutOfOrderSequenceError: type[ApiError] = _BY_CODE[ErrorCode.OUT_OF_ORDER_SEQUENCE]
DuplicateSequenceError: type[ApiError] = _BY_CODE[ErrorCode.DUPLICATE_SEQUENCE]
InvalidWriterEpochError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_WRITER_EPOCH]
UnknownWriterIdError: type[ApiError] = _BY_CODE[ErrorCode.UNKNOWN_WRITER_ID]
StorageError: type[ApiError] = _BY_CODE[ErrorCode.STORAGE_ERROR]
InvalidRecordBatchError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_RECORD_BATCH]
LeaderNotAvailableError: type[ApiError] = _BY_CODE[ErrorCode.LEADER_NOT_AVAILABLE]
InvalidUpdateVersionError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_UPDATE_VERSION]
InvalidRequestError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_REQUEST]
DatabaseNotEmptyError: type[ApiError] = _BY_CODE[ErrorCode.DATABASE_NOT_EMPTY]
GroupNotExistError: type[ApiError] = _BY_CODE[ErrorCode.GROUP_NOT_EXIST]
RebalanceInProgressError: type[ApiError] = _BY_CODE[ErrorCode.REBALANCE_IN_PROGRESS]
InvalidRebalancePlanError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_REBALANCE_PLAN]
UnsupportedCompressionError: type[ApiError] = _BY_CODE[ErrorCode.UNSUPPORTED_COMPRESSION]
IneligibleReplicaError: type[ApiError] = _BY_CODE[ErrorCode.INELIGIBLE_REPLICA]
ServerIdConflictError: type[ApiError] = _BY_CODE[ErrorCode.SERVER_ID_CONFLICT]
LogCorruptedError: type[ApiError] = _BY_CODE[ErrorCode.LOG_CORRUPTED]
FetchSessionNotFoundError: type[ApiError] = _BY_CODE[ErrorCode.FETCH_SESSION_NOT_FOUND]
InvalidFetchSessionEpochError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_FETCH_SESSION_EPOCH]
ReplicaNotAuthenticatedError: type[ApiError] = _BY_CODE[ErrorCode.REPLICA_NOT_AUTHENTICATED]
ReplicaNotAssignedError: type[ApiError] = _BY_CODE[ErrorCode.REPLICA_NOT_ASSIGNED]
CoordinatorNotAuthenticatedError: type[ApiError] = _BY_CODE[ErrorCode.COORDINATOR_NOT_AUTHENTICATED]
AuthenticationFailedError: type[ApiError] = _BY_CODE[ErrorCode.AUTHENTICATION_FAILED]
AuthorizationFailedError: type[ApiError] = _BY_CODE[ErrorCode.AUTHORIZATION_FAILED]
UnknownMemberIdError: type[ApiError] = _BY_CODE[ErrorCode.UNKNOWN_MEMBER_ID]
FencedMemberEpochError: type[ApiError] = _BY_CODE[ErrorCode.FENCED_MEMBER_EPOCH]
InvalidSessionTimeoutError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_SESSION_TIMEOUT]
BucketNotOwnedError: type[ApiError] = _BY_CODE[ErrorCode.BUCKET_NOT_OWNED]
GroupNotEmptyError: type[ApiError] = _BY_CODE[ErrorCode.GROUP_NOT_EMPTY]
PartitionedTableError: type[ApiError] = _BY_CODE[ErrorCode.PARTITIONED_TABLE]
PartitionNotExistError: type[ApiError] = _BY_CODE[ErrorCode.PARTITION_NOT_EXIST]
InvalidTimestampError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_TIMESTAMP]
UnreleasedInstanceIdError: type[ApiError] = _BY_CODE[ErrorCode.UNRELEASED_INSTANCE_ID]
InvalidRowError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_ROW]
TableTypeMismatchError: type[ApiError] = _BY_CODE[ErrorCode.TABLE_TYPE_MISMATCH]
KvNotReadyError: type[ApiError] = _BY_CODE[ErrorCode.KV_NOT_READY]
UnknownSchemaIdError: type[ApiError] = _BY_CODE[ErrorCode.UNKNOWN_SCHEMA_ID]
TabletServerNotExistError: type[ApiError] = _BY_CODE[ErrorCode.TABLET_SERVER_NOT_EXIST]
InvalidServerTagError: type[ApiError] = _BY_CODE[ErrorCode.INVALID_SERVER_TAG]


# The caller's credentials, certificate or permissions were refused: trying another server cannot help, so
# loops that move on to the next server on any failure (bootstrap, coordinator discovery) stop at once.
REFUSED = frozenset({ErrorCode.AUTHENTICATION_FAILED, ErrorCode.AUTHORIZATION_FAILED})


def for_code(code: int) -> type[ApiError]:
    """The exception class of a wire code; unknown codes map to UNKNOWN_SERVER_ERROR."""
    return _BY_CODE.get(int(code), UnknownServerError)


def error_from(code: int, message: str = "", *, leader_id: int = -1, leader_address: str = "") -> ApiError:
    """Build the exception for a wire code (``code`` must not be NONE)."""
    return for_code(code)(message or None, leader_id=leader_id, leader_address=leader_address)


def spec(code: ErrorCode) -> tuple[bool, bool]:
    """(retriable, invalid_metadata) of a code."""
    s = _SPECS[code]
    return s.retriable, s.invalid_metadata
