"""Protobuf <-> fluss_py values and errors, for servers (clients have ``client/transport.py``).

``ok()`` is the ErrorInfo of success; ``error_info(exc)`` turns any exception into an ErrorInfo (a
``FlussError`` keeps its code and leader hint, anything else becomes UNKNOWN_SERVER_ERROR); ``raise_for``
raises the ApiError of a non-success ErrorInfo. The rest convert value types both ways.

Who may call: anyone (pure functions).
"""

from __future__ import annotations

from fluss_py.errors import ApiError, ErrorCode, FlussError, error_from
from fluss_py.rpc.pb import common_pb2
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


def leader_and_isr_from_pb(pb: common_pb2.BucketLeaderAndIsr) -> tuple[TableBucket, LeaderAndIsr, tuple[int, ...]]:
    lai = LeaderAndIsr(pb.leader, pb.leader_epoch, tuple(pb.isr), pb.coordinator_epoch, pb.bucket_epoch)
    return table_bucket_from_pb(pb.table_bucket), lai, tuple(pb.replicas)
