"""The one wire-conversion module: protobuf <-> fluss_py values and errors, for servers and clients.

``ok()`` is the ErrorInfo of success; ``error_info(exc)`` turns any exception into an ErrorInfo (a
``FlussError`` keeps its code and leader hint, anything else becomes UNKNOWN_SERVER_ERROR); ``raise_for`` /
``error_of`` / ``to_exception`` give the ApiError of a non-success ErrorInfo with its leader hint as sent.
The client's variants (``raise_for_client`` / ``to_client_exception``) keep a leader hint only when it names
an address (the client cannot reach a leader by id alone). A failed gRPC call becomes an ApiError through
``network_error`` (server to server: always a retriable NETWORK_EXCEPTION) or ``map_grpc_error`` (the
client's table below, by status code)::

    UNAVAILABLE, CANCELLED, UNKNOWN (connection reset)   -> NETWORK_EXCEPTION   (retriable, invalid metadata)
    DEADLINE_EXCEEDED                                    -> REQUEST_TIMED_OUT   (retriable)
    UNIMPLEMENTED (wrong service at that address)        -> INVALID_REQUEST
    UNAVAILABLE: the TLS library refused the peer        -> AUTHENTICATION_FAILED (wrong CA, expired cert, ...)
    UNAUTHENTICATED (no or bad credentials)              -> AUTHENTICATION_FAILED
    PERMISSION_DENIED (no ACL allows it)                 -> AUTHORIZATION_FAILED  (names operation and resource)
    anything else                                        -> UNKNOWN_SERVER_ERROR

The rest convert value types both ways. A table's schema (``schema_from_pb``, ``column_from_pb``) is input:
it is checked as ``TableSchema`` checks every schema it builds (INVALID_REQUEST naming what is wrong).
Who may call: anyone (pure functions).
"""

from __future__ import annotations

import grpc
import grpc.aio

from fluss_py.errors import (
    REFUSED,
    ApiError,
    AuthenticationFailedError,
    AuthorizationFailedError,
    ErrorCode,
    FlussError,
    InvalidRequestError,
    NetworkExceptionError,
    RequestTimedOutError,
    UnknownServerError,
    error_from,
)
from fluss_py.rpc.pb import common_pb2, coordinator_pb2
from fluss_py.schema.schema import Column, SchemaVersion, TableSchema
from fluss_py.schema.types import parse_type
from fluss_py.types import LeaderAndIsr, ServerNode, TableBucket, TablePath


def ok() -> common_pb2.ErrorInfo:
    return common_pb2.ErrorInfo(code=int(ErrorCode.NONE), leader_id=-1)


def error_info(exc: BaseException) -> common_pb2.ErrorInfo:
    """The wire form of an exception (FlussError keeps code, message and leader hint)."""
    if isinstance(exc, FlussError):
        return common_pb2.ErrorInfo(
            code=int(exc.code), message=exc.message, leader_id=exc.leader_id, leader_address=exc.leader_address
        )
    return common_pb2.ErrorInfo(
        code=int(ErrorCode.UNKNOWN_SERVER_ERROR), message=f"{type(exc).__name__}: {exc}", leader_id=-1
    )


def error_code(
    code: ErrorCode, message: str = "", *, leader_id: int = -1, leader_address: str = ""
) -> common_pb2.ErrorInfo:
    return common_pb2.ErrorInfo(code=int(code), message=message, leader_id=leader_id, leader_address=leader_address)


def is_ok(info: common_pb2.ErrorInfo) -> bool:
    return info.code == ErrorCode.NONE


def raise_for(info: common_pb2.ErrorInfo) -> None:
    """Raise the ApiError of ``info`` unless it is success (an unset ErrorInfo counts as success)."""
    if info.code != ErrorCode.NONE:
        raise error_from(info.code, info.message, leader_id=info.leader_id, leader_address=info.leader_address)


def to_exception(info: common_pb2.ErrorInfo) -> ApiError:
    return error_from(info.code, info.message, leader_id=info.leader_id, leader_address=info.leader_address)


def error_of(info: common_pb2.ErrorInfo) -> ApiError | None:
    """The ApiError an ErrorInfo carries, None for code 0 (NONE) or an unset field."""
    if info.code == 0:
        return None
    return to_exception(info)


def raise_for_client(error: common_pb2.ErrorInfo) -> None:
    """Raise the ApiError described by an ``ErrorInfo`` (with its leader hint); no-op for NONE/unset."""
    if error.code != ErrorCode.NONE:
        raise to_client_exception(error)


def to_client_exception(error: common_pb2.ErrorInfo) -> ApiError:
    leader_id = error.leader_id if error.leader_address else -1
    return error_from(error.code, error.message, leader_id=leader_id, leader_address=error.leader_address)


def network_error(e: grpc.aio.AioRpcError, what: str) -> ApiError:
    """A whole-call gRPC failure as a retriable NETWORK_EXCEPTION naming the peer and the status."""
    return NetworkExceptionError(f"{what}: {e.code().name} {e.details() or ''}".strip())


def map_grpc_error(address: str, method: str, code: grpc.StatusCode, details: str | None) -> ApiError:
    """The ApiError a failed gRPC call of the client becomes (see the module docstring)."""
    text = f"{method} to {address}: {code.name} {details or ''}".strip()
    if code is grpc.StatusCode.UNAUTHENTICATED:
        return AuthenticationFailedError(details or text)
    if code is grpc.StatusCode.PERMISSION_DENIED:
        return AuthorizationFailedError(details or text)
    if code is grpc.StatusCode.UNAVAILABLE and _tls_failure(details):
        return AuthenticationFailedError(f"TLS handshake with {address} failed: {details}")
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.UNKNOWN):
        return NetworkExceptionError(text)
    if code is grpc.StatusCode.DEADLINE_EXCEEDED:
        return RequestTimedOutError(text)
    if code is grpc.StatusCode.UNIMPLEMENTED:
        return InvalidRequestError(text)
    return UnknownServerError(text)


def map_stream_error(address: str, method: str, code: grpc.StatusCode, details: str | None) -> ApiError:
    """The ApiError a broken request stream (ProduceLogStream) becomes for the requests pending on it.

    A refusal of the caller (AUTHENTICATION_FAILED, AUTHORIZATION_FAILED, as ``map_grpc_error``) stays one;
    any other end of the stream is NETWORK_EXCEPTION (retriable): the server answers every error of a
    request inside its answer, so a stream status is about the stream, and its pending requests' fate is
    unknown. gRPC reports a write racing a dropped connection as INTERNAL ("Internal error from Core"),
    which for a unary call would be a server's verdict (UNKNOWN_SERVER_ERROR)."""
    mapped = map_grpc_error(address, method, code, details)
    return mapped if mapped.code in REFUSED else NetworkExceptionError(mapped.message)


def _tls_failure(details: str | None) -> bool:
    """gRPC reports a refused TLS handshake (wrong CA, expired or unknown certificate) as UNAVAILABLE, and so
    it does a handshake cut short by the network: a peer killed mid-handshake, a connection attempt abandoned
    under load ("handshaker shutdown", "Handshake read failed", SSL_ERROR_SYSCALL). Only the first is a verdict
    about credentials; the second must stay a retriable NETWORK_EXCEPTION, or a producer fails a send (and
    restarts its sequences) because a leader died at the wrong moment. The TLS library's own refusal says
    SSL_ERROR_SSL (a protocol error: bad signature, unknown CA, a peer's alert) or names the certificate."""
    text = (details or "").upper()
    return "SSL_ERROR_SSL" in text or "CERTIFICATE" in text


def server_node_to_pb(node: ServerNode) -> common_pb2.ServerNode:
    return common_pb2.ServerNode(id=node.id, host=node.host, port=node.port, rack=node.rack)


def server_node_from_pb(pb: common_pb2.ServerNode) -> ServerNode:
    return ServerNode(pb.id, pb.host, pb.port, pb.rack)


def table_path_to_pb(path: TablePath) -> common_pb2.TablePath:
    return common_pb2.TablePath(database=path.database, table=path.table)


def table_path_from_pb(pb: common_pb2.TablePath) -> TablePath:
    return TablePath(pb.database, pb.table)


def table_bucket_to_pb(tb: TableBucket) -> common_pb2.TableBucket:
    return common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket)


def table_bucket_from_pb(pb: common_pb2.TableBucket) -> TableBucket:
    return TableBucket(pb.table_id, pb.bucket)


def leader_and_isr_to_pb(
    tb: TableBucket, lai: LeaderAndIsr, replicas: tuple[int, ...] = (), adding_replicas: tuple[int, ...] = ()
) -> common_pb2.BucketLeaderAndIsr:
    return common_pb2.BucketLeaderAndIsr(
        table_bucket=table_bucket_to_pb(tb),
        leader=lai.leader,
        leader_epoch=lai.leader_epoch,
        isr=list(lai.isr),
        coordinator_epoch=lai.coordinator_epoch,
        bucket_epoch=lai.bucket_epoch,
        replicas=list(replicas),
        adding_replicas=list(adding_replicas),
    )


def leader_and_isr_of(pb: common_pb2.BucketLeaderAndIsr) -> LeaderAndIsr:
    return LeaderAndIsr(pb.leader, pb.leader_epoch, tuple(pb.isr), pb.coordinator_epoch, pb.bucket_epoch)


def leader_and_isr_from_pb(pb: common_pb2.BucketLeaderAndIsr) -> tuple[TableBucket, LeaderAndIsr, tuple[int, ...]]:
    return table_bucket_from_pb(pb.table_bucket), leader_and_isr_of(pb), tuple(pb.replicas)


def column_to_pb(column: Column) -> common_pb2.SchemaColumn:
    return common_pb2.SchemaColumn(name=column.name, type=str(column.type), nullable=column.nullable)


def column_from_pb(pb: common_pb2.SchemaColumn) -> Column:
    """A column of the wire; INVALID_REQUEST for a type that does not parse (its name is checked by the schema
    it joins)."""
    try:
        return Column(pb.name, parse_type(pb.type), pb.nullable)
    except ApiError as e:
        raise InvalidRequestError(f"column {pb.name[:140]!r}: {e.message}") from None


def schema_to_pb(schema: TableSchema) -> common_pb2.TableSchema:
    return common_pb2.TableSchema(
        versions=[
            common_pb2.SchemaVersion(schema_id=v.schema_id, columns=[column_to_pb(c) for c in v.columns])
            for v in schema.versions
        ],
        primary_key=list(schema.primary_key),
        bucket_key=list(schema.bucket_key),
    )


def schema_from_pb(pb: common_pb2.TableSchema) -> TableSchema:
    """The schema of the wire, every rule checked (INVALID_REQUEST naming the first one broken)."""
    versions = tuple(SchemaVersion(v.schema_id, tuple(column_from_pb(c) for c in v.columns)) for v in pb.versions)
    return TableSchema(versions, tuple(pb.primary_key), tuple(pb.bucket_key))


# server tags (docs/rebalance.md §12): the wire enum <-> the tag's name ("none" for no tag)
_SERVER_TAGS = {
    coordinator_pb2.SERVER_TAG_NONE: "none",
    coordinator_pb2.SERVER_TAG_PERMANENT_OFFLINE: "permanent-offline",
    coordinator_pb2.SERVER_TAG_TEMPORARY_OFFLINE: "temporary-offline",
}


def server_tag_from_pb(value: int) -> str:
    """The tag's name; INVALID_REQUEST for a value this version does not know."""
    name = _SERVER_TAGS.get(value)
    if name is None:
        raise InvalidRequestError(f"unknown server tag {value}")
    return name


def server_tag_to_pb(name: str) -> int:
    """The wire value of a tag's name; INVALID_REQUEST for anything but none, permanent-offline, temporary-offline."""
    for value, known in _SERVER_TAGS.items():
        if known == name:
            return value
    raise InvalidRequestError(f"server tag {name[:40]!r} is not one of permanent-offline, temporary-offline or none")
