"""LogTablet: appends, reads, offsets, truncation, retention, roll, bad input."""

from __future__ import annotations

import errno
import os
import struct
import time
from pathlib import Path

import pytest

from fluss_py.errors import (
    CorruptMessageError,
    FencedLeaderEpochError,
    InvalidRecordBatchError,
    InvalidTimestampError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    StorageError,
)
from fluss_py.log import LogConfig
from fluss_py.record import RecordBatch, iter_batches
from fluss_py.types import EpochEntry

from .helpers import SMALL, batch, open_log


def offsets(data: bytes) -> list[tuple[int, int]]:
    return [(b.base_offset, b.last_offset) for b in iter_batches(data)]


def test_leader_assigns_offsets_stamps_epoch_and_rolls(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    infos = [t.append_as_leader(batch(3), 5) for _ in range(40)]
    assert [(i.first_offset, i.last_offset) for i in infos[:2]] == [(0, 2), (3, 5)]
    assert t.log_end_offset == 120 and len(t.segments) > 3
    assert all(s.size <= SMALL.segment_bytes for s in t.segments)
    assert t.epoch_cache.entries() == [EpochEntry(5, 0)]
    data = t.read(0, 1 << 20, t.log_end_offset).records
    assert offsets(data)[:3] == [(0, 2), (3, 5), (6, 8)]
    assert all(b.leader_epoch == 5 and b.is_valid() for b in iter_batches(data))
    names = sorted(os.listdir(tmp_path / "1-0"))
    assert "00000000000000000000.log" in names and "00000000000000000000.index" in names


def test_read_bounds_whole_batches_and_upper_bound(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0", LogConfig(segment_bytes=1 << 20, index_interval_bytes=64))
    for _ in range(10):
        t.append_as_leader(batch(4), 0)
    size = len(batch(4))
    # from the middle of a batch: the whole batch holding it
    assert offsets(t.read(5, 1 << 20, 40).records)[0] == (4, 7)
    # upper bound (HW) cuts at a batch boundary; a batch straddling it is not served
    assert offsets(t.read(0, 1 << 20, 12).records)[-1] == (8, 11)
    assert offsets(t.read(0, 1 << 20, 10).records)[-1] == (4, 7)
    assert t.read(12, 1 << 20, 12).records == b""
    # max_bytes: whole batches only, but at least one even if larger
    assert len(t.read(0, size * 2 + 5, 40).records) == size * 2
    assert len(t.read(0, 10, 40).records) == size
    # out of range names the valid range
    with pytest.raises(OffsetOutOfRangeError, match=r"\[0, 40\]"):
        t.read(41, 100, 40)
    info = t.read(40, 100, 40)
    assert info.records == b"" and info.log_end_offset == 40


def test_read_across_segments(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    for _ in range(60):
        t.append_as_leader(batch(1), 0)
    got, off = [], 0
    while off < t.log_end_offset:
        data = t.read(off, 300, t.log_end_offset).records
        assert data
        got += offsets(data)
        off = got[-1][1] + 1
    assert got == [(i, i) for i in range(60)]


def test_bad_batches_refused_and_nothing_written(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    t.append_as_leader(batch(), 0)
    before = (t.log_end_offset, t.size_in_bytes)
    good = batch()
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    with pytest.raises(CorruptMessageError):
        t.append_as_leader(good + bytes(bad_crc), 0)  # the good first batch is not written either
    bad_magic = bytearray(good)
    bad_magic[16] = 7
    with pytest.raises(InvalidRecordBatchError, match="magic"):
        t.append_as_leader(bytes(bad_magic), 0)
    with pytest.raises(InvalidRecordBatchError, match="trailing"):
        t.append_as_leader(good + b"xx", 0)
    with pytest.raises(InvalidRecordBatchError, match="declares"):
        t.append_as_leader(good[:-3], 0)
    with pytest.raises(InvalidRecordBatchError, match="empty"):
        t.append_as_leader(b"", 0)
    with pytest.raises(RecordBatchTooLargeError):
        t.append_as_leader(batch(1, size=5000), 0)
    assert (t.log_end_offset, t.size_in_bytes) == before
    t.append_as_leader(good, 3)
    with pytest.raises(FencedLeaderEpochError):
        t.append_as_leader(good, 2)
    assert t.log_end_offset == before[0] + 2


def test_enospc_surfaces_and_leaves_no_partial_batch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    t = open_log(tmp_path / "1-0")
    t.append_as_leader(batch(), 0)
    size = t.size_in_bytes
    real_write = os.write

    def full_disk(fd: int, data) -> int:
        real_write(fd, bytes(data)[:10])  # a partial write, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)
    with pytest.raises(StorageError, match="No space left"):
        t.append_as_leader(batch(), 0)
    monkeypatch.undo()
    assert t.size_in_bytes == size and t.log_end_offset == 2
    t.close_without_flush()
    t = open_log(tmp_path / "1-0")  # unclean reopen
    assert t.log_end_offset == 2 and t.size_in_bytes == size
    assert t.append_as_leader(batch(), 0).first_offset == 2


def test_follower_keeps_offsets_and_checks_continuity(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader")
    leader.append_as_leader(batch(2), 1)
    leader.append_as_leader(batch(3), 1)
    leader.append_as_leader(batch(1), 4)
    follower = open_log(tmp_path / "follower")
    data = leader.read(0, 1 << 20, leader.log_end_offset).records
    info = follower.append_as_follower(data)
    assert (info.first_offset, info.last_offset, follower.log_end_offset) == (0, 5, 6)
    assert follower.epoch_cache.entries() == [EpochEntry(1, 0), EpochEntry(4, 5)]
    with pytest.raises(InvalidRecordBatchError, match="expected 6"):
        follower.append_as_follower(data)
    assert follower.append_as_follower(b"").record_count == 0


def test_high_watermark_clamped(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    t.append_as_leader(batch(5), 0)
    assert t.update_high_watermark(3) and t.high_watermark == 3
    assert not t.update_high_watermark(3)
    t.update_high_watermark(99)
    assert t.high_watermark == 5


def test_truncate_to_trims_log_epochs_writers_hw(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    for i in range(30):
        t.append_as_leader(batch(2, writer_id=9, writer_epoch=0, seq=2 * i), 1 if i < 10 else 2)
    t.update_high_watermark(60)
    t.truncate_to(20)
    assert t.log_end_offset == 20 and t.high_watermark == 20
    assert t.epoch_cache.entries() == [EpochEntry(1, 0)]
    assert t.writer_state(9).last_seq == 19
    assert t.append_as_leader(batch(2, writer_id=9, writer_epoch=0, seq=20), 3).first_offset == 20
    t.truncate_to(21)  # inside the batch [20, 21]: the whole batch goes
    assert t.log_end_offset == 20
    t.truncate_to(500)  # at or past LEO: no-op
    assert t.log_end_offset == 20
    t.close()
    t = open_log(tmp_path / "1-0", clean_shutdown=True)
    assert t.log_end_offset == 20 and t.epoch_cache.entries() == [EpochEntry(1, 0)]


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    for _ in range(20):
        t.append_as_leader(batch(2, writer_id=1, writer_epoch=0, seq=_ * 2), 0)
    t.truncate_fully_and_start_at(1000)
    assert (t.log_start_offset, t.log_end_offset, t.high_watermark) == (1000, 1000, 1000)
    assert t.epoch_cache.entries() == [] and t.writer_state(1) is None
    assert sorted(os.listdir(tmp_path / "1-0")) == ["00000000000000001000.log", "leader-epoch-checkpoint"]
    assert t.append_as_leader(batch(), 3).first_offset == 1000
    with pytest.raises(OffsetOutOfRangeError):
        t.read(5, 100, 2000)


def test_offset_for_timestamp(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    for i in range(50):
        t.append_as_leader(batch(2, ts=10_000 + 100 * i), 0)
    assert t.offset_for_timestamp(0) == 0
    assert t.offset_for_timestamp(10_000 + 100 * 17) == 34
    assert t.offset_for_timestamp(10_000 + 100 * 17 + 1) == 34  # the batch's max timestamp is +1
    assert t.offset_for_timestamp(10_000 + 100 * 17 + 2) == 36
    assert t.offset_for_timestamp(10**9) is None


def test_retention_by_time_and_size_advances_log_start(tmp_path: Path) -> None:
    cfg = LogConfig(segment_bytes=1024, index_interval_bytes=128, ttl_s=60, retention_bytes=-1)
    t = open_log(tmp_path / "1-0", cfg)
    for i in range(40):
        t.append_as_leader(batch(1, ts=1_000_000 + 1000 * i), i // 10)
    t.update_high_watermark(t.log_end_offset)
    now = 1_000_000 + 1000 * 39 + 60_000 - 15_000  # segments whose newest batch is older than 60 s go
    deleted = t.apply_retention(now)
    assert deleted > 0 and t.log_start_offset == t.segments[0].base_offset > 0
    assert t.epoch_cache.earliest_entry.start_offset == t.log_start_offset
    with pytest.raises(OffsetOutOfRangeError):
        t.read(0, 100, t.log_end_offset)
    # size: keep at most ~2 segments of bytes
    t2 = open_log(tmp_path / "2-0", LogConfig(segment_bytes=1024, index_interval_bytes=128, retention_bytes=2048))
    for _ in range(40):
        t2.append_as_leader(batch(1), 0)
    t2.update_high_watermark(t2.log_end_offset)
    t2.apply_retention(0)
    assert t2.size_in_bytes <= 2048 + 1024 and t2.log_start_offset > 0
    # never past the HW
    t3 = open_log(tmp_path / "3-0", LogConfig(segment_bytes=1024, index_interval_bytes=128, retention_bytes=0))
    for _ in range(40):
        t3.append_as_leader(batch(1), 0)
    assert t3.apply_retention(0) == 0


def test_roll_by_age(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0", LogConfig(segment_max_age_s=10))
    t.append_as_leader(batch(1, ts=0), 0)
    t.append_as_leader(batch(1, ts=5_000), 0)
    assert len(t.segments) == 1
    t.append_as_leader(batch(1, ts=20_000), 0)
    assert len(t.segments) == 2 and t.segments[1].base_offset == 2


def test_a_file_that_is_not_log_data_is_left_alone(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = open_log(d)
    t.append_as_leader(batch(), 0)
    t.close()
    for name in (".DS_Store", "notes.txt", "leader-epoch-checkpoint~", "00000000000000000000.log.bak"):
        (d / name).write_bytes(b"x")
    t = open_log(d, clean_shutdown=True)
    assert t.log_end_offset == 2
    t.close()
    assert (d / ".DS_Store").exists() and (d / "00000000000000000000.log.bak").exists()


@pytest.mark.parametrize("name", ["0000000000000000001.log", "0000000000000000000a.index", "sub.log", "subdir"])
def test_a_name_that_may_be_a_renamed_segment_is_refused_with_its_name(tmp_path: Path, name: str) -> None:
    d = tmp_path / "1-0"
    open_log(d).close()
    if name == "subdir":
        (d / name).mkdir()
    else:
        (d / name).write_bytes(b"x")
    from fluss_py.errors import LogCorruptedError

    with pytest.raises(LogCorruptedError, match=name):
        open_log(d)


def test_leftovers_and_orphan_indexes_are_deleted(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = open_log(d)
    t.append_as_leader(batch(), 0)
    t.close()
    (d / "leader-epoch-checkpoint.tmp").write_bytes(b"half")
    (d / "00000000000000000099.index").write_bytes(b"")
    t = open_log(d, clean_shutdown=True)
    assert t.log_end_offset == 2
    assert not (d / "leader-epoch-checkpoint.tmp").exists() and not (d / "00000000000000000099.index").exists()


def test_log_start_checkpoint_and_hw_respected_on_open(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = open_log(d)
    for _ in range(10):
        t.append_as_leader(batch(2), 0)
    t.close()
    t = open_log(d, clean_shutdown=True, log_start_offset=4, high_watermark=15)
    assert (t.log_start_offset, t.high_watermark, t.log_end_offset, t.recovery_point) == (4, 15, 20, 20)
    t.close()
    t.close()
    # A log start past the log end contradicts the log: a bad checkpoint, the log is kept (it used to be
    # deleted: one bad line could destroy a replica's only copy of its data).
    t = open_log(d, clean_shutdown=True, log_start_offset=50, high_watermark=70, recovery_point=90)
    assert (t.log_start_offset, t.high_watermark, t.log_end_offset, t.recovery_point) == (0, 20, 20, 20)


def test_patched_header_crc_stays_valid_on_disk(tmp_path: Path) -> None:
    t = open_log(tmp_path / "1-0")
    raw = batch(3)
    t.append_as_leader(raw, 7)
    t.append_as_leader(raw, 7)
    data = t.read(0, 1 << 20, 10).records
    second = RecordBatch(data, len(raw))
    assert second.base_offset == 3 and second.crc == struct.unpack_from(">I", raw, 17)[0] and second.is_valid()


def test_follower_replaces_an_empty_election_epoch(tmp_path: Path) -> None:
    """A replica that was briefly leader at epoch 5 (assigned at its LEO, nothing written) follows a leader
    whose next batches carry epoch 4: the empty epoch-5 entry is replaced, as in Kafka's follower path."""
    leader = open_log(tmp_path / "leader")
    leader.append_as_leader(batch(2), 3)
    leader.append_as_leader(batch(2), 4)
    follower = open_log(tmp_path / "follower")
    follower.append_as_follower(leader.read(0, 1 << 20, 2).records)
    follower.epoch_cache.assign(5, 2)
    follower.append_as_follower(leader.read(2, 1 << 20, 4).records)
    assert follower.epoch_cache.entries() == [EpochEntry(3, 0), EpochEntry(4, 2)]
    # but not over an epoch that already holds data
    other = open_log(tmp_path / "other")
    other.append_as_follower(leader.read(0, 1 << 20, 2).records)
    other.append_as_leader(batch(1), 5)
    with pytest.raises(InvalidRecordBatchError, match="epoch 4 < latest 5"):
        other.append_as_follower(_rebase(leader, 3))


def _rebase(t, offset: int) -> bytes:
    """Leader batch [2, 3] (epoch 4) re-stamped at ``offset`` so it continues another log."""
    from fluss_py.record import set_base_offset_and_epoch

    buf = bytearray(t.read(2, 1 << 20, 4).records)
    set_base_offset_and_epoch(buf, 0, offset, 4)
    return bytes(buf)


def test_close_of_an_empty_log_writes_no_snapshot_or_epoch_checkpoint(tmp_path: Path) -> None:
    """Thousands of idle buckets open and close without a file per bucket (each would be fsynced)."""
    log = open_log(tmp_path / "b")
    log.close()
    assert (
        sorted(p.name for p in (tmp_path / "b").iterdir() if not p.name.endswith((".log", ".index", ".timeindex")))
        == []
    )
    again = open_log(tmp_path / "b")
    again.append_as_leader(batch(writer_id=7, writer_epoch=0, seq=0), leader_epoch=1)
    again.close()
    names = {p.name for p in (tmp_path / "b").iterdir()}
    assert "leader-epoch-checkpoint" in names and any(n.endswith(".snapshot") for n in names), names


def test_a_batch_too_far_ahead_of_the_clock_is_refused_and_cannot_pin_ttl_retention(tmp_path: Path) -> None:
    """One batch stamped 2^63-1 would be the newest of its segment forever: TTL retention stops at the first
    unexpired segment, so nothing of the bucket would ever be deleted. The leader refuses a max timestamp
    more than log.message.timestamp.after.max.ms ahead of its clock (INVALID_TIMESTAMP), writing nothing."""
    cfg = LogConfig(segment_bytes=1024, index_interval_bytes=128, ttl_s=60, timestamp_after_max_s=3600)
    t = open_log(tmp_path / "1-0", cfg)
    now = int(time.time() * 1000)
    for far in (2**63 - 1, now + 3_700_000):
        with pytest.raises(InvalidTimestampError, match=r"log\.message\.timestamp\.after\.max\.ms"):
            t.append_as_leader(batch(1, ts=0) + batch(1, ts=far), 0)
        assert t.log_end_offset == 0 and t.size_in_bytes == 0
    t.append_as_leader(batch(1, ts=now + 3_500_000), 0)  # within the hour: accepted
    for i in range(40):
        t.append_as_leader(batch(1, ts=now + i), 0)
    t.update_high_watermark(t.log_end_offset)
    assert t.apply_retention(now + 3_600_000 + 3_600_000) > 0  # the accepted future batch expires too

    unbounded = open_log(tmp_path / "2-0", LogConfig(timestamp_after_max_s=0))  # 0: no bound, as before
    unbounded.append_as_leader(batch(1, ts=2**63 - 2), 0)
    assert unbounded.log_end_offset == 1


def test_the_timestamp_bound_is_a_server_default_a_table_overrides() -> None:
    from fluss_py import config as cfg

    server = cfg.Config(cfg.TABLET)
    assert LogConfig.from_config(server).timestamp_after_max_s == 3600.0  # Kafka 4.0's default: one hour
    table = LogConfig.from_config(server, {"log.message.timestamp.after.max.ms": "2d"})
    assert table.timestamp_after_max_s == 2 * 86400 and table.latest_timestamp(1_000) == 1_000 + 2 * 86_400_000
    assert LogConfig.from_config(server, {"log.message.timestamp.after.max.ms": "0"}).latest_timestamp(5) is None
    assert cfg.Config(cfg.TABLE, {"log.message.timestamp.after.max.ms": "5000"})[cfg.LOG_TIMESTAMP_AFTER_MAX] == 5.0
