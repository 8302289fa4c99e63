"""The liveness report's led sizes in O(changed) (replica/led_report.py): a stream that looks only at the
buckets touched since its last report (their log changed or their replica's role did) holds exactly what a
full scan of the replicas would report, through appends, HW moves, truncation, retention, leadership
changes, StopReplica, and a data directory that fails and recovers; and an idle stream looks at nothing."""

from __future__ import annotations

import dataclasses
import errno
import os

from fluss_py import config as cfg
from fluss_py.coordinator.liveness import dropped_of, offsets_of, sizes_of
from fluss_py.replica.led_report import LedChanges
from fluss_py.replica.log_faults import OFFLINE, RECOVERED
from fluss_py.replica.manager import ReplicaManager
from fluss_py.replica.messages import StopReplicaItem
from fluss_py.rpc.pb import tablet_pb2
from fluss_py.tablet.liveness import LivenessBeacon
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import TableBucket
from tests.unit.replica.fakes import batch
from tests.unit.replica.harness import SETTINGS, ReplicaCluster

R3 = (1, 2, 3)
BUCKETS = [TableBucket(7, b) for b in range(6)]


class Stream:
    """What a coordinator holds from one liveness stream of ``m`` (the reports applied, as BucketSizes does)."""

    def __init__(self, m: ReplicaManager) -> None:
        self.m = m
        self.beacon = LivenessBeacon(2, "inc", m.led_sizes, led_changes=m.led)
        self.touched = m.led.watch()
        beat, self.reported = self.beacon.heartbeat(0, True, None, self.touched)
        self.held = {**{tb: (s, *offsets_of(beat)[tb]) for tb, s in sizes_of(beat).items()}}

    def report(self) -> tablet_pb2.LivenessHeartbeat:
        beat, _ = self.beacon.heartbeat(1, True, self.reported, self.touched)
        assert beat.sizes_incremental
        for tb in dropped_of(beat):
            del self.held[tb]
        offsets = offsets_of(beat)
        self.held.update({tb: (s, *offsets[tb]) for tb, s in sizes_of(beat).items()})
        return beat

    def exact(self) -> bool:
        """The coordinator's picture equals a full scan of the replicas now."""
        self.report()
        full = {tb: (r.log.size_in_bytes, r.log.high_watermark, r.log.log_end_offset)
                for tb, r in self.m.replicas.items() if r.is_leader}  # fmt: skip
        return self.held == full == self.reported


async def test_reports_from_the_touched_buckets_equal_a_full_scan_through_every_change(clock, tmp_path) -> None:
    c = ReplicaCluster(3, clock, tmp_path, SETTINGS)
    config = cfg.load_config(cfg.TABLET, None, {"log.dir.recovery-check-interval": "1s", "log.dir.min-free": "0"})
    m, dirs = await c.restart_on_dirs(2, [tmp_path / "server-2" / "a", tmp_path / "server-2" / "b"], config)
    try:
        s = Stream(m)
        assert s.exact() and s.held == {}
        for tb in BUCKETS:
            await c.create(tb, (2, 1, 3))  # server 2 leads all six
        assert s.exact() and len(s.held) == 6
        for i in range(12):  # appends, then the HW moves as the followers fetch
            assert (await m.append(-1, 5.0, {BUCKETS[i % 6]: batch(b"v%d" % i)}))[BUCKETS[i % 6]].error is None
        await wait_until(lambda: all(m.replica(tb).high_watermark == 2 for tb in BUCKETS))
        assert s.exact() and all(v == (v[0], 2, 2) and v[0] > 0 for v in s.held.values())
        await c.elect(BUCKETS[0], (2, 1, 3), 1, R3)  # leadership moves away: dropped from the report
        assert s.exact() and BUCKETS[0] not in s.held
        m.replica(BUCKETS[0]).truncate_to(1)  # a follower's truncation (not led: not reported)
        assert s.exact()
        await c.elect(BUCKETS[0], (2, 1, 3), 2, (2,))  # and leadership comes back, with the shorter log
        assert s.exact() and s.held[BUCKETS[0]][2] == 1
        log = m.replica(BUCKETS[2]).log
        log.roll()
        assert (await m.append(-1, 5.0, {BUCKETS[2]: batch(b"new segment")}))[BUCKETS[2]].error is None
        await wait_until(lambda: log.high_watermark == log.log_end_offset == 3)
        log.config = dataclasses.replace(log.config, retention_bytes=1)
        assert log.apply_retention(0) == 1  # the first segment, below the HW, goes
        assert s.exact() and s.held[BUCKETS[2]][0] == log.size_in_bytes
        await m.stop_replicas(c.coordinator_epoch, [StopReplicaItem(BUCKETS[3], delete=True)])
        assert s.exact() and BUCKETS[3] not in s.held
        a = tmp_path / "server-2" / "a"
        in_a = {tb for tb in m.replicas if dirs.dir_of(tb) == a}
        assert in_a
        dirs.fail(a, OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
        await wait_until(lambda: any(f[:2] == (2, OFFLINE) for f in c.coordinator.faults))
        assert s.exact() and not (in_a & set(s.held))  # its replicas went offline: no longer led here
        await wait_until(lambda: any(f[:2] == (2, RECOVERED) for f in c.coordinator.faults))
        for tb in sorted(in_a):  # the coordinator makes them leaders here again
            c.coordinator.state[tb] = c.coordinator.state[tb].with_leader(2, (2,), c.coordinator_epoch)
            await c.notify(tb, (2, 1, 3))
        assert s.exact() and in_a <= set(s.held)
        tb = sorted(in_a)[0]
        assert (await m.append(1, 5.0, {tb: batch(b"again")}))[tb].error is None  # a log of the reloaded dir
        assert s.exact()
    finally:
        await c.close()


async def test_an_idle_stream_looks_at_no_bucket() -> None:
    looked: list[TableBucket] = []

    class Counting(LedChanges):
        def current(self, tb: TableBucket) -> tuple[int, int, int] | None:
            looked.append(tb)
            return super().current(tb)

    led = Counting({})
    scans: list[int] = []
    full = [(TableBucket(1, b), (0, 0, 0)) for b in range(5000)]
    beacon = LivenessBeacon(1, "inc", lambda: scans.append(1) or full, led_changes=led, sizes_interval_s=0.0)
    beats = beacon.stream(tablet_pb2.WatchLivenessRequest(coordinator_id=0, interval_ms=50))
    first = await anext(beats)
    assert len(first.led_bucket_sizes) == 5000 and len(led.watches) == 1
    for _ in range(3):
        idle = await anext(beats)
        assert idle.sizes_included and idle.sizes_incremental and not idle.led_bucket_sizes
    assert scans == [1] and looked == []  # one scan for the first report, then nothing per bucket
    led.touch(TableBucket(1, 7))
    moved = await anext(beats)
    assert looked == [TableBucket(1, 7)] and dropped_of(moved) == [TableBucket(1, 7)]  # no longer led
    await beats.aclose()
    assert not led.watches  # the stream's watch is closed with it
