"""Protobuf <-> replica values, for the two network seams the replica layer owns (leader endpoint, gateway).

The tablet service does its own conversions for the server side; these are the client-side halves.
"""

from __future__ import annotations

import grpc

from fluss_py.errors import ApiError, NetworkExceptionError, error_from
from fluss_py.rpc.pb import common_pb2
from fluss_py.types import LeaderAndIsr, TableBucket


def pb_bucket(tb: TableBucket) -> common_pb2.TableBucket:
    return common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket)


def bucket_of(pb: common_pb2.TableBucket) -> TableBucket:
    return TableBucket(pb.table_id, pb.bucket)


def error_of(info: common_pb2.ErrorInfo) -> ApiError | None:
    """The ApiError an ErrorInfo carries, None for code 0 (NONE) or an unset field."""
    if info.code == 0:
        return None
    return error_from(info.code, info.message, leader_id=info.leader_id, leader_address=info.leader_address)


def raise_for(info: common_pb2.ErrorInfo) -> None:
    error = error_of(info)
    if error is not None:
        raise error


def leader_and_isr_of(pb: common_pb2.BucketLeaderAndIsr) -> LeaderAndIsr:
    return LeaderAndIsr(pb.leader, pb.leader_epoch, tuple(pb.isr), pb.coordinator_epoch, pb.bucket_epoch)


def network_error(e: grpc.aio.AioRpcError, what: str) -> ApiError:
    """A whole-call gRPC failure as a retriable NETWORK_EXCEPTION naming the peer and the status."""
    return NetworkExceptionError(f"{what}: {e.code().name} {e.details() or ''}".strip())
