"""What the consumer makes of fetch answers a buggy or hostile leader sends: a torn answer holding no whole
batch is an error ``poll`` raises (with a backoff), not a silent stall."""

from __future__ import annotations

from typing import Any

import pytest

from fluss_py.errors import CorruptMessageError
from tests.unit.client.fake_cluster import FakeCluster
from tests.unit.client.helpers import consumer, fill, poll_n

pytestmark = pytest.mark.timeout(30)


class TornCluster(FakeCluster):
    """Answers every FetchLog with only the first half of its records bytes: no whole batch."""

    async def _h_FetchLog(self, address: str, request: Any, timeout: float) -> Any:
        response = await super()._h_FetchLog(address, request, timeout)
        for r in response.buckets:
            r.records = r.records[: len(r.records) // 2]
        return response


async def test_an_answer_holding_no_whole_batch_is_raised_by_poll_and_backs_off() -> None:
    cluster = TornCluster()
    cluster.create_table("fluss", "t")
    await fill(cluster, 10)
    cluster.calls.clear()
    async with consumer(cluster, fetch_max_wait=0.0) as c:  # 5 ms doubling to 50 ms
        await c.assign("t")
        with pytest.raises(CorruptMessageError, match="no complete record batch"):
            await poll_n(c, 1, timeout=1.0)
        raised = 0
        for _ in range(20):  # the user keeps polling: each answer is raised, none loops silently
            try:
                await c.poll(timeout=0.05)
            except CorruptMessageError:
                raised += 1
        assert raised > 0
        assert await c.position(next(iter(c.assignment()))) == 0  # nothing skipped
    fetches = sum(1 for _, name, _ in cluster.calls if name == "FetchLog")
    assert fetches < 40, fetches


class AboveHwCluster(FakeCluster):
    """Reports a high watermark of 5 while sending every record of the log (a buggy leader)."""

    async def _h_FetchLog(self, address: str, request: Any, timeout: float) -> Any:
        response = await super()._h_FetchLog(address, request, timeout)
        for r in response.buckets:
            if not r.error.code:
                r.high_watermark = 5
        return response


async def test_records_at_or_above_the_answers_high_watermark_are_not_delivered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = AboveHwCluster()
    cluster.create_table("fluss", "t")
    await fill(cluster, 5)
    await fill(cluster, 5, prefix="w")  # a second batch, offsets 5-9, wholly above the reported HW
    cluster.calls.clear()
    async with consumer(cluster, fetch_max_wait=0.0) as c:
        await c.assign("t")
        got = await poll_n(c, 10, timeout=1.0)
        tb = next(iter(c.assignment()))
        assert await c.position(tb) == 5
    assert [r.offset for r in got] == [0, 1, 2, 3, 4]
    assert any("high watermark 5" in r.getMessage() for r in caplog.records if r.levelname == "WARNING")
    fetches = sum(1 for _, name, _ in cluster.calls if name == "FetchLog")
    assert fetches < 40, fetches  # an answer with nothing below the HW backs off
