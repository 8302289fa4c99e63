"""Streamed follower fetches (docs/replication.md "Streamed follower fetches"): the leader's bindings
(``FetchStreamGuard``), the follower's lockstep exchanges (``FetchStreamClient``), the fetcher over in-memory
streams, and the servicer's ``FetchLogStream`` (proof at open, token still current, bindings)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest

from fluss_py.errors import ErrorCode, FetchSessionNotFoundError
from fluss_py.replica.fetch_stream import FetchStreamClient, FetchStreamGuard
from fluss_py.replica.fetcher.fetcher import ReplicaFetcher
from fluss_py.replica.messages import NO_SESSION, LeaderAndIsrItem
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.rpc.peer import REPLICA_TOKEN_KEY, TokenReplicaVerifier
from fluss_py.tablet.service import FETCH_STREAM_REFUSED, REPLICA_NOT_AUTHENTICATED, TabletServicer
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import TableBucket
from tests.unit.replica.fakes import LocalLeaderEndpoint, batch
from tests.unit.replica.harness import SETTINGS, TB, ReplicaCluster, node

pytestmark = pytest.mark.unit

A, B = TableBucket(1, 0), TableBucket(1, 1)
MIN1 = {"min.insync.replicas": "1"}

# ---------------------------------------------------------------- the leader's bindings


def test_a_stream_opens_with_a_full_request_and_then_carries_only_its_session() -> None:
    g = FetchStreamGuard(2)
    assert g.admit(2, 5, [(A, 1)]).code is ErrorCode.FETCH_SESSION_NOT_FOUND  # must open a session first
    assert g.admit(2, None, [(A, 1)]).code is ErrorCode.INVALID_REQUEST  # sessionless: not on a stream
    assert g.admit(2, NO_SESSION, [(A, 1)]) is None
    assert g.answered(41, failed=False)
    assert g.admit(2, 41, []) is None
    assert g.answered(41, failed=False)
    assert g.admit(2, 42, []).code is ErrorCode.FETCH_SESSION_NOT_FOUND  # another session
    assert g.admit(2, NO_SESSION, []).code is ErrorCode.FETCH_SESSION_NOT_FOUND  # a full request: a new stream


def test_a_stream_is_bound_to_its_replica_and_to_one_leader_epoch_per_bucket() -> None:
    g = FetchStreamGuard(2)
    assert g.admit(2, NO_SESSION, [(A, 1), (B, 4)]) is None
    g.answered(41, failed=False)
    assert g.admit(3, 41, []).code is ErrorCode.INVALID_REQUEST  # another replica's fetch
    assert g.admit(2, 41, [(A, 1)]) is None  # the same epoch again (moved position)
    assert g.admit(2, 41, [(B, 5)]).code is ErrorCode.INVALID_REQUEST  # a new epoch needs a new stream


def test_a_whole_request_error_or_no_session_ends_the_stream() -> None:
    g = FetchStreamGuard(2)
    g.admit(2, NO_SESSION, [])
    assert not g.answered(41, failed=True)
    assert not FetchStreamGuard(2).answered(NO_SESSION, failed=False)


# ---------------------------------------------------------------- the follower's exchanges


class EchoStream:
    """Answers each message with (stream number, message) once ``release`` is set; records cancels."""

    def __init__(self, number: int, release: asyncio.Event) -> None:
        self.number = number
        self.release = release
        self.pending: list[object] = []
        self.cancelled = False

    async def write(self, message: object) -> None:
        self.pending.append(message)

    async def read(self) -> object:
        await self.release.wait()
        return (self.number, self.pending.pop(0))

    def cancel(self) -> None:
        self.cancelled = True


def echo_client() -> tuple[FetchStreamClient, list[EchoStream], asyncio.Event]:
    release = asyncio.Event()
    release.set()
    streams: list[EchoStream] = []

    def open_stream() -> EchoStream:
        streams.append(EchoStream(len(streams), release))
        return streams[-1]

    return FetchStreamClient(open_stream), streams, release


async def test_a_session_stays_on_its_stream_and_a_full_request_opens_a_new_one() -> None:
    client, streams, _ = echo_client()
    with pytest.raises(FetchSessionNotFoundError):
        await client.exchange("incremental", opens_session=False)  # no stream carries a session yet
    assert await client.exchange("full", opens_session=True) == (0, "full")
    assert await client.exchange("next", opens_session=False) == (0, "next")
    assert await client.exchange("full again", opens_session=True) == (1, "full again")
    assert streams[0].cancelled and not streams[1].cancelled and client.opened == 2


async def test_an_abandoned_exchange_drops_the_stream_so_its_late_answer_answers_nothing() -> None:
    client, streams, release = echo_client()
    await client.exchange("full", opens_session=True)
    release.clear()
    parked = asyncio.ensure_future(client.exchange("parked", opens_session=False))
    await asyncio.sleep(0)
    parked.cancel()
    with pytest.raises(asyncio.CancelledError):
        await parked
    release.set()
    assert streams[0].cancelled and not client.is_open
    # the session went with the stream: continuing it is refused, a full request gets its own answer
    with pytest.raises(FetchSessionNotFoundError):
        await client.exchange("next", opens_session=False)
    assert await client.exchange("full", opens_session=True) == (1, "full")


async def test_a_failed_exchange_drops_the_stream() -> None:
    class Broken(EchoStream):
        async def read(self) -> object:
            raise ConnectionError("reset")

    client = FetchStreamClient(lambda: Broken(0, asyncio.Event()))
    with pytest.raises(ConnectionError):
        await client.exchange("full", opens_session=True)
    assert not client.is_open


# ---------------------------------------------------------------- the fetcher over streams


async def test_followers_replicate_over_streams_and_acks_all_completes(clock, tmp_path) -> None:
    c = ReplicaCluster(3, clock, tmp_path)
    c.streams = True
    try:
        await c.create(TB, (1, 2, 3))
        for i in range(5):
            result = (await c.managers[1].append(-1, 5.0, {TB: batch(b"v%d" % i)}))[TB]
            assert result.error is None and result.base_offset == i
        endpoints = [c.managers[s].fetchers.fetcher_of(TB).endpoint for s in (2, 3)]
        assert all(e.streams.opened == 1 for e in endpoints)  # one session, one stream, many requests
        assert all(len(e.fetch_answers) >= 5 for e in endpoints)
        assert not any(e.stream_refusals for e in c.endpoints)
    finally:
        await c.close()


async def test_a_new_leader_epoch_is_fetched_on_a_new_stream(clock, tmp_path) -> None:
    """The leader moves to a new epoch first: the follower's bucket is refused (FENCED_LEADER_EPOCH) and backs
    off until the follower is told of the new epoch; it is then fetched on a new stream, with no binding
    broken, and acks=all goes on."""
    slow_retry = replace(SETTINGS, fetch=replace(SETTINGS.fetch, backoff_s=30.0))
    c = ReplicaCluster(2, clock, tmp_path, slow_retry)
    c.streams = True
    try:
        await c.create(TB, (1, 2), MIN1)
        assert (await c.managers[1].append(-1, 5.0, {TB: batch(b"a")}))[TB].error is None
        fetcher = c.managers[2].fetchers.fetcher_of(TB)
        lai = c.coordinator.state[TB].with_leader(1, (1, 2), c.coordinator_epoch)
        c.coordinator.state[TB] = lai
        state = [LeaderAndIsrItem(TB, lai, (1, 2), MIN1)]
        await c.managers[1].become_leader_or_follower(c.coordinator_epoch, state, [node(1), node(2)])
        await wait_until(lambda: TB in fetcher._backing_off and fetcher._inflight is None)
        await c.managers[2].become_leader_or_follower(c.coordinator_epoch, state, [node(1), node(2)])
        result = (await c.managers[1].append(-1, 5.0, {TB: batch(b"b")}))[TB]
        assert result.error is None, result.error
        assert not fetcher.endpoint.stream_refusals
        assert fetcher.endpoint.streams.opened == 2
    finally:
        await c.close()


async def test_a_follower_told_of_a_new_epoch_between_rounds_fetches_it_on_a_new_stream(clock, tmp_path) -> None:
    """Between two rounds (no call in flight to cancel) the follower is told of a new leader epoch: the next
    request must open a new session on a new stream, never name the bucket at the new epoch on the stream
    bound to the old one (the leader would end it: a refused request, a backoff, a stalled acks=all)."""
    c = ReplicaCluster(2, clock, tmp_path)
    c.streams = True
    try:
        await c.create(TB, (1, 2), MIN1)
        await c.managers[2].fetchers.fetcher_of(TB).close()  # this test drives a fetcher's rounds by hand
        endpoint = LocalLeaderEndpoint(c, 1)
        fetcher = ReplicaFetcher(2, node(1), endpoint, c.managers[2].replica, SETTINGS.fetch)
        fetcher.add_buckets({TB: c.coordinator.state[TB].leader_epoch})
        await fetcher.maybe_truncate()
        assert await fetcher.maybe_fetch() and endpoint.streams.opened == 1
        lai = c.coordinator.state[TB] = c.coordinator.state[TB].with_leader(1, (1, 2), c.coordinator_epoch)
        state = [LeaderAndIsrItem(TB, lai, (1, 2), MIN1)]
        for s in (1, 2):
            await c.managers[s].become_leader_or_follower(c.coordinator_epoch, state, [node(1), node(2)])
        fetcher.add_buckets({TB: lai.leader_epoch})
        await fetcher.maybe_truncate()
        assert await fetcher.maybe_fetch()
        assert not endpoint.stream_refusals
        assert endpoint.streams.opened == 2
        await endpoint.close()
    finally:
        await c.close()


# ---------------------------------------------------------------- the servicer's FetchLogStream


class Context:
    def __init__(self, **metadata: str) -> None:
        self._metadata = tuple(metadata.items())

    def invocation_metadata(self):
        return self._metadata

    def auth_context(self):
        return {}

    def peer(self) -> str:
        return "ipv4:127.0.0.1:5555"


class EchoLayer:
    """Answers each fetch with session 41 (the fetch path itself is tested through the replica manager)."""

    def __init__(self) -> None:
        self.handled: list = []

    async def fetch_log(self, request):
        self.handled.append(request)
        return tablet_pb2.FetchLogResponse(error=common_pb2.ErrorInfo(code=0), session_id=41)


def stream_request(replica_id: int, session_id: int, epoch: int = 3) -> tablet_pb2.FetchLogRequest:
    return tablet_pb2.FetchLogRequest(
        replica_id=replica_id,
        buckets=[tablet_pb2.FetchBucket(table_bucket=common_pb2.TableBucket(table_id=1), current_leader_epoch=epoch)],
        session=tablet_pb2.FetchSession(id=session_id),
    )


async def run_stream(svc: TabletServicer, context: Context, requests: list) -> list:
    async def messages():
        for r in requests:
            yield r

    return [answer async for answer in svc.FetchLogStream(messages(), context)]


def servicer() -> tuple[TabletServicer, EchoLayer, TokenReplicaVerifier]:
    verifier = TokenReplicaVerifier(1)
    verifier.update({2: "secret-2", 3: "secret-3"})
    layer = EchoLayer()
    return TabletServicer(None, layer, verifier), layer, verifier  # type: ignore[arg-type]


async def test_the_stream_serves_only_the_proven_replica_and_each_message_as_a_fetch() -> None:
    svc, layer, _ = servicer()
    ok = Context(**{REPLICA_TOKEN_KEY: "secret-2"})
    answers = await run_stream(svc, ok, [stream_request(2, 0), stream_request(2, 41), stream_request(2, 41)])
    assert [a.session_id for a in answers] == [41, 41, 41] and len(layer.handled) == 3
    for claimed, context in ((2, Context()), (2, Context(**{REPLICA_TOKEN_KEY: "secret-3"})), (1, ok)):
        answers = await run_stream(svc, context, [stream_request(claimed, 0), stream_request(claimed, 41)])
        assert [a.error.code for a in answers] == [ErrorCode.REPLICA_NOT_AUTHENTICATED], claimed
    client = await run_stream(svc, Context(), [stream_request(-1, 0)])
    assert [a.error.code for a in client] == [ErrorCode.INVALID_REQUEST]
    assert len(layer.handled) == 3 and svc.refusals.counts == {REPLICA_NOT_AUTHENTICATED: 3}


async def test_a_stream_ends_when_its_token_is_replaced_or_a_binding_is_broken() -> None:
    svc, layer, verifier = servicer()
    ok = Context(**{REPLICA_TOKEN_KEY: "secret-2"})

    async def messages():
        yield stream_request(2, 0)
        verifier.update({2: "secret-2-restarted"})  # server 2 restarted: its old process keeps the old stream
        yield stream_request(2, 41)

    answers = [a async for a in svc.FetchLogStream(messages(), ok)]
    assert [a.error.code for a in answers] == [ErrorCode.NONE, ErrorCode.REPLICA_NOT_AUTHENTICATED]
    verifier.update({2: "secret-2"})
    epoch_changed = [stream_request(2, 0), stream_request(2, 41, epoch=4), stream_request(2, 41)]
    answers = await run_stream(svc, ok, epoch_changed)
    assert [a.error.code for a in answers] == [ErrorCode.NONE, ErrorCode.INVALID_REQUEST]
    answers = await run_stream(svc, ok, [stream_request(2, 0), stream_request(2, 0)])  # a second full request
    assert [a.error.code for a in answers] == [ErrorCode.NONE, ErrorCode.FETCH_SESSION_NOT_FOUND]
    assert len(layer.handled) == 3 and svc.refusals.counts[FETCH_STREAM_REFUSED] == 2
