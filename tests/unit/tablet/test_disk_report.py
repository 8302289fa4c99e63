"""The tablet server's disk use on the liveness heartbeat: when a check is reported, what it carries, and
how the coordinator and the console read it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fluss_py.console.snapshot import ConsoleSource, build_snapshot
from fluss_py.coordinator.liveness import disk_of
from fluss_py.coordinator.tables import ClusterView
from fluss_py.rpc.pb import tablet_pb2
from fluss_py.tablet.liveness import DiskReporter, LivenessBeacon, disk_moved
from fluss_py.tablet.storage_health import disk_use

pytestmark = pytest.mark.unit

MiB = 1 << 20


def _sample(held: int, free: int) -> tuple[int, list[tuple[str, int, int]]]:
    return held, [("/d1", free, 1000 * MiB), ("/d2", 500 * MiB, 1000 * MiB)]


def test_a_check_is_reported_first_then_only_when_it_moved_past_the_threshold_or_every_n_checks():
    reporter = DiskReporter(threshold=8 * MiB, refresh_checks=3)
    assert reporter.check(_sample(100 * MiB, 400 * MiB)) is not None  # a stream's first check
    assert reporter.check(_sample(104 * MiB, 397 * MiB)) is None  # moved less than 8 MiB
    moved = _sample(109 * MiB, 397 * MiB)  # held moved 9 MiB from the last *reported* sample
    assert reporter.check(moved) == moved
    assert reporter.check(_sample(109 * MiB, 390 * MiB)) is None
    assert reporter.check(_sample(109 * MiB, 390 * MiB)) is None
    assert reporter.check(_sample(109 * MiB, 390 * MiB)) is not None  # the third unreported check: refreshed
    assert disk_moved(_sample(0, 0), (0, [("/d1", 0, 1000 * MiB)]))  # a directory fewer: reported
    assert disk_moved(_sample(0, 0), _sample(0, 9 * MiB)) and not disk_moved(_sample(0, 0), _sample(0, 8 * MiB))


async def test_the_stream_carries_disk_use_on_its_first_beat_and_leaves_idle_beats_without_it():
    clock = SimpleNamespace(now=0.0)
    sample = [_sample(100 * MiB, 400 * MiB)]
    beacon = LivenessBeacon(1, "inc", lambda: [], clock=lambda: clock.now, disk_use=lambda: sample[0],
                            disk_interval_s=10.0)  # fmt: skip
    beats = beacon.stream(tablet_pb2.WatchLivenessRequest(coordinator_id=0, interval_ms=50))
    first = await anext(beats)
    assert first.HasField("disk") and disk_of(first) == sample[0]
    clock.now = 10.0  # checked again, unchanged: nothing on the beat
    assert not (await anext(beats)).HasField("disk")
    sample[0] = _sample(100 * MiB, 300 * MiB)
    clock.now = 15.0  # changed, but not checked before the interval
    assert not (await anext(beats)).HasField("disk")
    clock.now = 20.0
    assert disk_of(await anext(beats)) == sample[0]
    await beats.aclose()
    assert not LivenessBeacon(1, "inc").heartbeat(0, True)[0].HasField("disk")  # no provider: never


def test_disk_use_statvfs_each_online_directory_and_marks_a_failed_one_unknown(tmp_path: Path):
    good, failed = tmp_path / "a", tmp_path / "b"
    good.mkdir()
    failed.mkdir()
    dirs = SimpleNamespace(paths=[good, failed], offline={failed: object()})
    held, got = disk_use(dirs, SimpleNamespace(held_bytes=lambda: 4096))  # type: ignore[arg-type]
    assert held == 4096 and got[1] == (str(failed), -1, -1)
    path, free, total = got[0]
    assert path == str(good) and 0 <= free <= total and total > 0


def test_the_servers_panel_sums_the_known_directories():
    view = ClusterView()
    source = ConsoleSource({"id": 0, "state": "Leader"}, view, {1, 2}, {}, disk={
        1: (7 * MiB, [("/d1", 100, 1000), ("/d2", -1, -1), ("/d3", 50, 500)]),
    })  # fmt: skip
    source.servers = {1: SimpleNamespace(host="h", port=1, rack=""), 2: SimpleNamespace(host="h", port=2, rack="")}
    rows = {s["id"]: s for s in build_snapshot(source, now=1.0)["servers"]}
    assert (rows[1]["held"], rows[1]["free"], rows[1]["total"]) == (7 * MiB, 150, 1500)
    assert rows[1]["dirs"][1] == ["/d2", -1, -1]
    assert (rows[2]["held"], rows[2]["free"], rows[2]["dirs"]) == (None, None, [])  # no report yet
