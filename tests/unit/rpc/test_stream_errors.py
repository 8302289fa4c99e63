"""``map_stream_error``: a broken produce stream leaves its pending requests' fate unknown, so every end of the
stream but a refusal of the caller is a retriable NETWORK_EXCEPTION (a non-retriable error would make the
producer fail a send and restart its sequences because a leader died at the wrong moment)."""

from __future__ import annotations

import grpc
import pytest

from fluss_py.errors import ErrorCode
from fluss_py.rpc.convert import map_grpc_error, map_stream_error


@pytest.mark.parametrize(
    "code",
    [
        grpc.StatusCode.INTERNAL,  # a write racing a dropped connection ("Internal error from Core")
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.RESOURCE_EXHAUSTED,
    ],
)
def test_the_end_of_a_stream_is_retriable(code: grpc.StatusCode) -> None:
    error = map_stream_error("127.0.0.1:1", "ProduceLogStream", code, "Internal error from Core")
    assert error.code is ErrorCode.NETWORK_EXCEPTION and error.retriable and error.invalid_metadata


def test_internal_is_a_server_verdict_for_a_unary_call_only() -> None:
    unary = map_grpc_error("127.0.0.1:1", "ProduceLog", grpc.StatusCode.INTERNAL, "Internal error from Core")
    assert unary.code is ErrorCode.UNKNOWN_SERVER_ERROR and not unary.retriable


@pytest.mark.parametrize(
    ("code", "details", "expected"),
    [
        (grpc.StatusCode.UNAUTHENTICATED, "bad password", ErrorCode.AUTHENTICATION_FAILED),
        (grpc.StatusCode.PERMISSION_DENIED, "alice may not WRITE table t", ErrorCode.AUTHORIZATION_FAILED),
        (grpc.StatusCode.UNAVAILABLE, "SSL_ERROR_SSL: CERTIFICATE_VERIFY_FAILED", ErrorCode.AUTHENTICATION_FAILED),
    ],
)
def test_a_refusal_of_the_caller_stays_a_refusal(code: grpc.StatusCode, details: str, expected: ErrorCode) -> None:
    error = map_stream_error("127.0.0.1:1", "ProduceLogStream", code, details)
    assert error.code is expected and not error.retriable
