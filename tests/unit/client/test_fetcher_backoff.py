"""The consumer's fetcher backs off where it cannot make progress: metadata refreshes while a bucket has no
leader, and offset resets a buggy server answers with nothing usable. Counted in calls to the fake."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from fluss_py.client.metadata import ClusterMetadata, RefreshThrottle
from fluss_py.client.options import RetryOptions
from fluss_py.types import NO_LEADER, TableBucket
from tests.unit.client.fake_cluster import FakeCluster
from tests.unit.client.helpers import consumer, fill, poll_n

pytestmark = pytest.mark.timeout(30)

RETRY = RetryOptions(backoff=0.02, backoff_max=0.5)


def count(cluster: FakeCluster, rpc: str) -> int:
    return sum(1 for _, name, _ in cluster.calls if name == rpc)


async def test_metadata_refreshes_back_off_while_a_bucket_has_no_leader_and_reset_once_it_has_one() -> None:
    cluster = FakeCluster()
    tid = cluster.create_table("fluss", "t")
    bucket = cluster.buckets[TableBucket(tid, 0)]
    leader = bucket.leader
    bucket.leader = NO_LEADER  # every replica down
    async with consumer(cluster, retry=RETRY) as c:
        await c.assign("t")
        before = count(cluster, "GetMetadata")
        assert await c.poll(timeout=1.5) == []
        # 20, 40, 80 ms ... doubling to 0.5 s: about 7 refreshes (a constant 20 ms made 75)
        assert count(cluster, "GetMetadata") - before <= 10
        bucket.leader = leader
        bucket.leader_epoch += 1
        await fill(cluster, 1)
        assert len(await poll_n(c, 1, timeout=3.0)) == 1  # found by a refresh within the backoff cap


async def test_the_refresh_throttle_doubles_its_wait_and_restarts_after_a_reset() -> None:
    cluster = FakeCluster()
    metadata = ClusterMetadata(cluster.servers[0], cluster, retry=RETRY)
    wakeups: list[None] = []
    throttle = RefreshThrottle(metadata, RETRY, lambda: wakeups.append(None))
    try:
        assert throttle.request(10.0) == pytest.approx(10.02)  # asked at once, then 20 ms
        assert throttle.request(10.01) == pytest.approx(10.02)  # too early: nothing asked
        assert throttle.request(10.02) == pytest.approx(10.06)
        assert throttle.request(10.06) == pytest.approx(10.14)
        throttle.reset()  # a round found every leader
        assert throttle.request(10.14) == pytest.approx(10.16)
        await metadata.update(5.0)
        await asyncio.sleep(0)
        assert wakeups  # a refresh's end wakes the loop
    finally:
        await metadata.close()


class OffsetsCluster(FakeCluster):
    """A buggy leader's ListOffsets: ``offset`` replaces every answered offset; ``omit`` leaves every bucket out."""

    def __init__(self, offset: int | None = None, omit: bool = False) -> None:
        super().__init__()
        self.offset, self.omit = offset, omit

    async def _h_ListOffsets(self, address: str, request: Any, timeout: float) -> Any:
        response = await super()._h_ListOffsets(address, request, timeout)
        if self.omit:
            del response.buckets[:]
        for r in response.buckets:
            if self.offset is not None:
                r.offset = self.offset
        return response


@pytest.mark.parametrize(
    "cluster",
    [
        pytest.param(OffsetsCluster(omit=True), id="bucket-left-out"),
        pytest.param(OffsetsCluster(offset=-7), id="negative-offset"),
        pytest.param(OffsetsCluster(offset=100), id="offset-out-of-range"),  # FetchLog answers OFFSET_OUT_OF_RANGE
    ],
)
async def test_a_reset_answer_that_cannot_be_used_backs_off_and_logs_once(
    cluster: OffsetsCluster, caplog: pytest.LogCaptureFixture
) -> None:
    cluster.create_table("fluss", "t")
    await fill(cluster, 10)
    cluster.calls.clear()
    async with consumer(cluster, fetch_max_wait=0.0) as c:  # 5 ms doubling to 50 ms
        await c.assign("t")
        assert await c.poll(timeout=1.0) == []  # retriable: nothing raised, nothing delivered
    calls = count(cluster, "ListOffsets") + count(cluster, "FetchLog")
    assert calls < 60, calls  # (tens of thousands without a backoff)
    warned = [r for r in caplog.records if r.levelname == "WARNING" and "ListOffsets" in r.getMessage()]
    assert len(warned) == (0 if cluster.offset == 100 else 1)
