"""The console feed samples only while a console watches, and its failover timeline comes from the view's
LeaderAndIsr changes, so a coordinator nobody watches does no per-bucket work (docs/console.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from fluss_py.console.routes import ConsoleFeed
from fluss_py.console.snapshot import ConsoleSource, Rates
from fluss_py.coordinator.state import BucketState
from fluss_py.coordinator.tables import ClusterView, TableRegistration
from fluss_py.types import LeaderAndIsr, TableBucket, TablePath

pytestmark = pytest.mark.unit

DEADLINE_S = 10.0


def _view() -> ClusterView:
    view = ClusterView()
    view.add_table(TableRegistration(7, TablePath("fluss", "orders"), 2, 3), {b: (1, 2, 3) for b in range(2)})
    for b in range(2):
        tb = TableBucket(7, b)
        view.set_leader_and_isr(tb, LeaderAndIsr(1, 0, (1, 2, 3), 1, 0))
        view.bucket_states.force(tb, BucketState.ONLINE)
    return view


class Rig:
    """A feed on a view, its sampling loop running every 10 ms; counts the reads (samples) and the ticks."""

    def __init__(self, view: ClusterView | None) -> None:
        self.view, self.reads, self.ticks = view, 0, 0
        self.feed = ConsoleFeed(self._read, self._no_leader, interval=0.01, view=self._current)

    def _read(self) -> ConsoleSource:
        self.reads += 1
        return ConsoleSource({"id": 0, "state": "Leader"}, self.view, {1, 2, 3})

    def _current(self) -> ClusterView | None:
        self.ticks += 1
        return self.view

    @staticmethod
    async def _no_leader() -> None:
        return None


async def _until(ok: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not ok():
        assert loop.time() < deadline, what
        await asyncio.sleep(0.005)


async def test_nobody_watching_no_sample_but_the_timeline_follows_the_views_changes():
    rig = Rig(_view())
    task = asyncio.create_task(rig.feed.run())
    try:
        await _until(lambda: rig.ticks >= 5, "five ticks of the feed")
        assert rig.reads == 0  # unwatched: no snapshot of every bucket
        tb = TableBucket(7, 0)
        rig.view.set_leader_and_isr(tb, LeaderAndIsr(2, 1, (2, 3), 1, 0))  # e.g. server 1 died
        rig.view.set_leader_and_isr(tb, LeaderAndIsr(2, 1, (2, 3, 1), 1, 1))  # and came back
        await _until(lambda: rig.ticks >= 10, "five more ticks")
        assert rig.reads == 0
        await rig.feed.fresh()  # a first read (/console/snapshot, or a stream) waits for a fresh sample
        assert rig.reads == 1
        snap = rig.feed._latest
        assert snap is not None
        kinds = [(e["table"], e["bucket"], e["kind"], e["from"], e["to"]) for e in snap["timeline"]]
        assert kinds == [("fluss.orders", 0, "leader", 1, 2), ("fluss.orders", 0, "isr", [1, 2, 3], [2, 3]),
                         ("fluss.orders", 0, "isr", [2, 3], [2, 3, 1])]  # fmt: skip
        rig.feed.subscribers = 1  # a live stream: a sample every tick
        await _until(lambda: rig.reads >= 4, "samples while a stream is open")
        rig.feed.subscribers = 0
        await asyncio.sleep(0)
        stopped, ticks = rig.reads, rig.ticks
        await _until(lambda: rig.ticks >= ticks + 5, "five ticks after the stream closed")
        assert rig.reads <= stopped + 1  # at most the tick under way
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


async def test_a_new_terms_view_starts_an_empty_timeline_and_the_old_view_is_no_longer_followed():
    rig = Rig(_view())
    old = rig.view
    rig.feed.attach()
    old.set_leader_and_isr(TableBucket(7, 1), LeaderAndIsr(3, 1, (3,), 1, 0))
    assert [e["kind"] for e in rig.feed.timeline._events] == ["leader", "isr"]
    rig.view = _view()  # this coordinator lost and won leadership again: another ClusterView
    rig.feed.attach()
    assert list(rig.feed.timeline._events) == [] and old.on_leader_and_isr is None
    old.set_leader_and_isr(TableBucket(7, 1), LeaderAndIsr(1, 2, (1,), 1, 0))
    assert list(rig.feed.timeline._events) == []
    rig.view = None  # a standby
    rig.feed.attach()
    assert rig.feed._attached is None


def test_rates_start_again_after_a_gap_without_samples():
    rates = Rates(window_s=10.0)

    def snap(now: float, size: int) -> dict:
        out = {"ts": now, "tables": [{"id": 7, "bytes": size}], "buckets": []}
        rates.observe(out)
        return out["tables"][0]

    snap(0.0, 0)
    assert snap(5.0, 5000)["bytes_per_s"] == 1000.0
    # nobody watched from 5 s to 600 s: the rate is not the average over ten minutes
    assert snap(600.0, 905000)["bytes_per_s"] == 0.0
    assert snap(602.0, 907000)["bytes_per_s"] == 1000.0
