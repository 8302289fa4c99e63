"""A new log is nothing on disk until its first write (docs/storage.md §3 "Empty until written"): the
``.log`` file comes with the first batch, a new leader's epoch entry at the log end with the first batch of its
term. A process killed (SIGKILL) at any point of creating, leading and appending leaves directories that load
as the log it had written. Real files and real processes in a temp dir."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from fluss_py import config as cfg
from fluss_py.log.epoch_cache import LEADER_EPOCH_CHECKPOINT
from fluss_py.log.manager import LogManager
from fluss_py.replica.replica import LocalReplicaState, Replica
from fluss_py.types import EpochEntry, LeaderAndIsr, TableBucket

from .helpers import SMALL, batch, synced_paths

TB = TableBucket(7, 3)


def manager(d: Path) -> LogManager:
    lm = LogManager(d, cfg.Config(cfg.TABLET))
    lm.load_logs()
    return lm


def test_a_new_log_has_no_directory_until_its_first_write(tmp_path: Path) -> None:
    lm = manager(tmp_path / "d")
    t = lm.get_or_create(TB, SMALL)
    assert not t.dir.exists()
    assert t.log_end_offset == 0 and t.size_in_bytes == 0 and t.latest_epoch is None
    t.append_as_leader(batch(2), 0)
    assert sorted(os.listdir(t.dir)) == ["00000000000000000000.log", LEADER_EPOCH_CHECKPOINT]
    assert t.size_in_bytes == os.path.getsize(t.dir / "00000000000000000000.log") > 0


def test_what_does_not_write_leaves_a_new_log_without_a_directory(tmp_path: Path) -> None:
    """Everything a replica does to an empty log before its first batch: reads, flushes, checkpoints,
    retention, a no-op truncation, a deferred epoch entry, a clean close. None needs the directory."""
    lm = manager(tmp_path / "d")
    t = lm.get_or_create(TB, SMALL)
    t.epoch_cache.assign(3, 0, write=False)
    assert t.read(0, 1024, 0).records == b""
    t.truncate_to(0)
    t.flush()
    assert t.begin_flush() is None
    assert t.apply_retention(10**13) == 0
    lm.checkpoint()
    lm.shutdown()
    assert not t.dir.exists() and manager(tmp_path / "d").get(TB) is None  # as if never created: empty


def test_a_new_log_is_checkpointed_and_flushed_from_its_first_write(tmp_path: Path) -> None:
    """Creating thousands of buckets costs the checkpoint and flush rounds nothing: a log without a directory
    has no offsets worth a checkpoint entry (the loader reads directories)."""
    lm = manager(tmp_path / "d")
    lm.checkpoint()
    t = lm.get_or_create(TB, SMALL)
    assert not lm.checkpoint_due and list(lm.flush_rounds()) == []
    t.append_as_leader(batch(2), 0)
    assert lm.checkpoint_due and [len(jobs) for jobs in lm.flush_rounds()] == [1]


def test_a_reset_of_a_new_log_makes_its_directory(tmp_path: Path) -> None:
    """A follower of a leader whose log starts at 40 starts there: the new segment's file is named for it."""
    lm = manager(tmp_path / "d")
    t = lm.get_or_create(TB, SMALL)
    t.truncate_fully_and_start_at(40)
    assert (t.dir / "00000000000000000040.log").exists()
    lm.shutdown()
    again = manager(tmp_path / "d").get(TB)
    assert again is not None and again.log_start_offset == again.log_end_offset == 40


@pytest.mark.parametrize("clean", [True, False])
def test_a_restart_leaves_an_empty_log_an_empty_directory(tmp_path: Path, clean: bool) -> None:
    """Loading a directory without segments (an empty log of an earlier version, or one emptied by hand)
    creates no file either (a restarted server of thousands of empty logs allocates no inode for them); the
    log then takes writes."""
    (tmp_path / "d" / "7-3").mkdir(parents=True)
    lm = manager(tmp_path / "d")
    assert lm.get(TB) is not None
    if clean:
        lm.shutdown()
    again = manager(tmp_path / "d").get(TB)
    assert again is not None and again.log_end_offset == 0 and os.listdir(again.dir) == []
    again.append_as_leader(batch(2), 0)
    assert again.log_end_offset == 2 and (again.dir / "00000000000000000000.log").stat().st_size > 0


def test_a_new_leaders_epoch_entry_is_written_with_its_terms_first_batch(tmp_path: Path) -> None:
    lm = manager(tmp_path / "d")
    t = lm.get_or_create(TB, SMALL)
    r = Replica(TB, 1, t, min_insync_replicas=1, lag_time_s=30.0, clock=lambda: 0.0)
    r.transition(LocalReplicaState.ONLINE)
    r.make_leader(LeaderAndIsr(1, 4, (1,), 1, 0), (1,))
    assert t.latest_epoch == 4 and not (t.dir / LEADER_EPOCH_CHECKPOINT).exists()  # in memory only
    t.append_as_leader(batch(3), 4)
    assert (t.dir / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n1\n4 0\n"
    # a later term on a non-empty log: the entry at the log end waits for that term's first batch too
    r.make_leader(LeaderAndIsr(1, 6, (1,), 1, 1), (1,))
    assert (t.dir / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n1\n4 0\n"
    t.append_as_leader(batch(1), 6)
    assert (t.dir / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n4 0\n6 3\n"
    t.flush()
    lm.shutdown()
    again = manager(tmp_path / "d").get(TB)
    assert again is not None and again.epoch_cache.entries() == [EpochEntry(4, 0), EpochEntry(6, 3)]


def test_a_deferred_entry_lost_in_a_crash_is_the_one_recovery_drops(tmp_path: Path) -> None:
    """Leader of an empty log, then SIGKILL before any batch: the entry at the log end is not in the file,
    and the reloaded log is what recovery makes of a file that has it (an empty cache: entries at or past the
    LEO are dropped)."""
    lm = manager(tmp_path / "d")
    t = lm.get_or_create(TB, SMALL)
    t.epoch_cache.assign(2, 0, write=False)
    # no close, no clean-shutdown marker: as after kill -9; nothing was written, not even the directory
    assert manager(tmp_path / "d").get(TB) is None
    t.dir.mkdir()
    (t.dir / LEADER_EPOCH_CHECKPOINT).write_text("0\n1\n2 0\n")  # as if it had been written
    assert manager(tmp_path / "d").get(TB).epoch_cache.entries() == []


CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from fluss_py import config as cfg
    from fluss_py.log.manager import LogManager
    from fluss_py.replica.replica import LocalReplicaState, Replica
    from fluss_py.types import LeaderAndIsr, TableBucket
    from tests.unit.log.helpers import SMALL, batch

    kill_at = int(sys.argv[2])
    step = 0

    def point():
        global step
        step += 1
        if step == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)

    lm = LogManager(sys.argv[1], cfg.Config(cfg.TABLET))
    lm.load_logs()
    for b in range(3):
        t = lm.get_or_create(TableBucket(7, b), SMALL)
        point()
        r = Replica(TableBucket(7, b), 1, t, min_insync_replicas=1, lag_time_s=30.0, clock=lambda: 0.0)
        r.transition(LocalReplicaState.ONLINE)
        r.make_leader(LeaderAndIsr(1, 5, (1,), 1, 0), (1,))
        point()
        for i in range(b):
            t.append_as_leader(batch(2), 5)
            point()
    print("done", step, flush=True)
    """
)


@pytest.mark.parametrize("kill_at", range(1, 10))
def test_sigkill_at_any_point_of_new_logs_leaves_logs_that_load(tmp_path: Path, kill_at: int) -> None:
    """Three new logs with 0, 1 and 2 batches; the child SIGKILLs itself after step ``kill_at`` (a creation,
    a make_leader or an append): every directory it left loads, with the batches it had appended and the epoch
    of those batches."""
    root = Path(__file__).resolve().parents[3]
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path / "d"), str(kill_at)], cwd=root, capture_output=True, text=True
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    # the child's steps: bucket b is created (1), led (1), then gets b appends; steps 1..kill_at were done
    done: dict[int, int] = {}  # bucket -> batches appended, for the buckets created before the kill
    first = 1
    for b in range(3):
        if first <= kill_at:
            done[b] = max(0, min(b, kill_at - (first + 1)))
        first += 2 + b
    lm = manager(tmp_path / "d")
    for b in range(3):
        t = lm.get(TableBucket(7, b))
        if b not in done or done[b] == 0:  # never created, or nothing written: no directory, or an empty log
            assert t is None or t.log_end_offset == 0
            continue
        assert t is not None, f"bucket {b} was written before the kill"
        assert t.log_end_offset == 2 * done[b]
        assert t.epoch_cache.entries() == ([EpochEntry(5, 0)] if done[b] else [])
        t.append_as_leader(batch(1), 6)  # and it takes writes
        assert t.log_end_offset == 2 * done[b] + 1


@pytest.mark.parametrize("off_the_loop", [False, True])
def test_new_directory_entries_are_fsynced_before_the_recovery_point_passes_their_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, off_the_loop: bool
) -> None:
    """A file fsynced in a directory whose entry is not can vanish in a power cut: the first write's new
    directory (its entry in the data dir) and each new segment file (its entry in the log's directory) are
    fsynced by the flush that moves the recovery point past them, once."""
    lm = manager(tmp_path / "d")
    t = lm.get_or_create(TB, SMALL)
    synced = synced_paths(monkeypatch)

    def flush() -> None:
        if not off_the_loop:
            t.flush()
            return
        job = t.begin_flush()
        assert job is not None
        job.sync()
        job.close()
        t.end_flush(job)

    t.append_as_leader(batch(2), 0)
    flush()
    data_dir, log_dir = str(tmp_path / "d"), str(t.dir)
    assert data_dir in synced and log_dir in synced and t.recovery_point == 2
    synced.clear()
    t.append_as_leader(batch(1), 0)
    flush()
    assert data_dir not in synced and log_dir not in synced  # nothing new in either
    t.roll()
    t.append_as_leader(batch(1), 0)
    flush()
    assert log_dir in synced and data_dir not in synced  # the new segment's entry
