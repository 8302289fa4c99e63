"""Bucket sizes for the planner (docs/rebalance.md §2): reported by each tablet server on its liveness
heartbeats (the first of a stream, then every interval), kept per server by the coordinator leader, and
used by the executor's plan (moved bytes non-zero, the smaller buckets moved)."""

from __future__ import annotations

from fluss_py.coordinator.events import StartRebalance
from fluss_py.coordinator.liveness import dropped_of, offsets_of, sizes_of
from fluss_py.coordinator.rebalance.sizes import BucketSizes
from fluss_py.rpc.pb import tablet_pb2
from fluss_py.tablet.liveness import LivenessBeacon
from fluss_py.types import TableBucket

A, B, C = TableBucket(1, 0), TableBucket(1, 1), TableBucket(2, 0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_report_replaces_the_servers_previous_one_and_the_largest_fresh_report_counts() -> None:
    clock = Clock()
    sizes = BucketSizes(max_age_s=30, clock=clock)
    assert sizes() == {}
    sizes.report(1, {A: 100, B: 50})
    sizes.report(2, {C: 7})
    assert sizes() == {A: 100, B: 50, C: 7}
    sizes.report(1, {A: 120})  # 1 no longer leads B
    assert sizes() == {A: 120, C: 7}
    sizes.report(3, {A: 90})  # a moment of two claimants around a leadership change
    assert sizes()[A] == 120
    clock.now += 31
    sizes.report(2, {C: 8})
    assert sizes() == {C: 8}  # 1 and 3 stopped reporting (dead): their sizes age out


async def test_the_beacon_carries_led_sizes_on_the_first_heartbeat_and_then_every_interval() -> None:
    clock = Clock()
    led = [(A, (4096, 7, 9)), (C, (1, 0, 0))]
    beacon = LivenessBeacon(1, "inc", lambda: led, sizes_interval_s=5.0, clock=clock)
    beats = beacon.stream(tablet_pb2.WatchLivenessRequest(coordinator_id=0, interval_ms=50))
    first = await anext(beats)
    assert first.sizes_included and sizes_of(first) == {A: 4096, C: 1} and not first.sizes_incremental
    assert offsets_of(first) == {A: (7, 9), C: (0, 0)}
    second = await anext(beats)
    assert not second.sizes_included and sizes_of(second) == {}
    clock.now += 5
    led.clear()  # leads nothing any more: a report dropping both, not no report
    third = await anext(beats)
    assert third.sizes_included and third.sizes_incremental and sizes_of(third) == {} and third.sequence == 2
    assert dropped_of(third) == [A, C]
    await beats.aclose()
    assert not LivenessBeacon(1, "inc").heartbeat(0, True)[0].sizes_included  # no provider: never a report


async def test_the_plan_counts_the_reported_sizes(grown):
    rig, _ = grown
    sizes = BucketSizes()
    led: dict[int, dict[TableBucket, int]] = {}
    for i, (tb, b) in enumerate(sorted(rig.proc.view.buckets.items())):
        led.setdefault(b.leader_and_isr.leader, {})[tb] = 1000 * (i + 1)
    for server, report in led.items():
        sizes.report(server, report)
    rig.ex._sizes = sizes
    view = await rig.ex.start_rebalance(StartRebalance(dry_run=True))
    moves = [m for m in view["moves"] if m["kind"] == "replica"]
    assert moves and all(m["bytes"] > 0 for m in moves)
    assert rig.ex.plan().moved_bytes == sum(m["bytes"] for m in moves)


async def test_an_idle_servers_later_reports_carry_only_what_changed() -> None:
    clock = Clock()
    led = {TableBucket(1, b): (0, 0, 0) for b in range(5000)}
    beacon = LivenessBeacon(1, "inc", lambda: led.items(), sizes_interval_s=5.0, clock=clock)
    beats = beacon.stream(tablet_pb2.WatchLivenessRequest(coordinator_id=0, interval_ms=50))
    sizes = BucketSizes(max_age_s=30, clock=clock)

    async def next_report() -> tablet_pb2.LivenessHeartbeat:
        clock.now += 5
        beat = await anext(beats)
        assert beat.sizes_included
        sizes.report(1, sizes_of(beat), dropped_of(beat), beat.sizes_incremental, offsets_of(beat))
        return beat

    assert len((await next_report()).led_bucket_sizes) == 5000
    idle = await next_report()
    assert len(idle.led_bucket_sizes) == 0 and len(idle.sizes_dropped) == 0  # before: all 5000 every time
    led[A] = (700, 0, 0)
    del led[TableBucket(1, 9)]
    moved = await next_report()
    assert sizes_of(moved) == {A: 700} and dropped_of(moved) == [TableBucket(1, 9)]
    assert sizes() == {**{tb: 0 for tb in led}, A: 700} and len(sizes()) == 4999
    d = TableBucket(1, 3)
    led[d] = (0, 3, 5)  # the HW and LEO moved, the size did not (yet): reported too
    hw = await next_report()
    assert offsets_of(hw) == {d: (3, 5)} and sizes.offsets()[1][d] == (3, 5) and len(sizes.offsets()[1]) == 4999
    assert TableBucket(1, 9) not in sizes.offsets()[1]  # no longer led: dropped with its size
    await beats.aclose()
