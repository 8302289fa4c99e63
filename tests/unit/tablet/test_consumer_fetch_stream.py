"""``serve_consumer_fetches``, the leader's side of a ConsumerFetchStream: answers in order, one fetch at a time,
a refused message answered with its refusal and the stream going on, a follower's fetch ending the stream.
In-memory requests and writes; no sockets."""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.errors import AuthorizationFailedError, ErrorCode
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.tablet.consumer_fetch_stream import serve_consumer_fetches

pytestmark = pytest.mark.timeout(10)


def _request(table_id: int, replica_id: int = -1) -> tablet_pb2.FetchLogRequest:
    request = tablet_pb2.FetchLogRequest(replica_id=replica_id, max_wait_ms=100)
    request.buckets.add(table_bucket=common_pb2.TableBucket(table_id=table_id, bucket=0))
    return request


async def _messages(requests: list[tablet_pb2.FetchLogRequest]):
    for r in requests:
        yield r


async def test_fetches_are_answered_in_order_one_at_a_time_and_a_refused_one_does_not_end_the_stream() -> None:
    running = 0
    most = 0

    async def fetch(request: tablet_pb2.FetchLogRequest) -> tablet_pb2.FetchLogResponse:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01 if request.buckets[0].table_bucket.table_id == 1 else 0)  # a slow first one
        running -= 1
        response = tablet_pb2.FetchLogResponse()
        response.buckets.add(table_bucket=request.buckets[0].table_bucket, high_watermark=7)
        return response

    def refusal(request: tablet_pb2.FetchLogRequest) -> AuthorizationFailedError | None:
        if request.buckets[0].table_bucket.table_id == 2:
            return AuthorizationFailedError("alice may not READ table fluss.secret")
        return None

    written: list[tablet_pb2.FetchLogResponse] = []

    async def write(response: tablet_pb2.FetchLogResponse) -> None:
        written.append(response)

    handled = await serve_consumer_fetches(_messages([_request(1), _request(2), _request(3)]), fetch, write, refusal)
    assert handled == 3 and most == 1
    assert [r.error.code for r in written] == [ErrorCode.NONE, ErrorCode.AUTHORIZATION_FAILED, ErrorCode.NONE]
    assert [r.buckets[0].table_bucket.table_id for r in (written[0], written[2])] == [1, 3]
    assert not written[1].buckets and "may not READ" in written[1].error.message


async def test_a_follower_fetch_on_a_consumer_stream_is_refused_and_ends_it_unhandled() -> None:
    fetched: list[object] = []

    async def fetch(request: tablet_pb2.FetchLogRequest) -> tablet_pb2.FetchLogResponse:
        fetched.append(request)
        return tablet_pb2.FetchLogResponse()

    written: list[tablet_pb2.FetchLogResponse] = []

    async def write(response: tablet_pb2.FetchLogResponse) -> None:
        written.append(response)

    requests = [_request(1, replica_id=2), _request(1)]
    assert await serve_consumer_fetches(_messages(requests), fetch, write, lambda r: None) == 1
    assert not fetched
    assert [r.error.code for r in written] == [ErrorCode.INVALID_REQUEST]
