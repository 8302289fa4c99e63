"""Recovery on open: torn tails, corrupt batches, indexes, epoch cache, later segments, clean marker."""

from __future__ import annotations

import os
from pathlib import Path

from fluss_py.log import LogConfig
from fluss_py.record import iter_batches
from fluss_py.types import EpochEntry

from .helpers import SMALL, batch, open_log


def fill(d: Path, n: int = 40, epochs: tuple[int, ...] = (1,)):
    t = open_log(d)
    for i in range(n):
        t.append_as_leader(batch(2, writer_id=3, writer_epoch=0, seq=2 * i), epochs[i * len(epochs) // n])
    return t


def segs(d: Path) -> list[Path]:
    return sorted(d.glob("*.log"))


def test_torn_tail_is_cut_after_kill(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = fill(d, epochs=(1, 2))
    t.flush(up_to=30)
    t.close_without_flush()
    last = segs(d)[-1]
    os.truncate(last, last.stat().st_size - 5)
    t = open_log(d, recovery_point=30)
    assert t.log_end_offset == 78
    data = t.read(0, 1 << 20, t.log_end_offset).records
    assert [b.base_offset for b in iter_batches(data)][:2] == [0, 2]
    assert t.writer_state(3).last_seq == 77
    assert t.epoch_cache.entries() == [EpochEntry(1, 0), EpochEntry(2, 40)]
    assert t.append_as_leader(batch(2, writer_id=3, writer_epoch=0, seq=78), 2).first_offset == 78


def test_crc_failure_truncates_and_drops_later_segments(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = fill(d, n=60, epochs=(1, 2, 3))
    t.close_without_flush()
    files = segs(d)
    assert len(files) >= 4
    victim = files[1]
    raw = bytearray(victim.read_bytes())
    raw[200] ^= 0xFF  # inside the second or third batch of the segment
    victim.write_bytes(bytes(raw))
    t = open_log(d, recovery_point=0)
    assert len(t.segments) == 2
    assert t.log_end_offset < int(files[2].name[:20])
    assert all(b.is_valid() for b in iter_batches(t.read(0, 1 << 22, t.log_end_offset).records))
    assert t.epoch_cache.latest_entry.start_offset < t.log_end_offset
    assert not files[3].exists()


def test_clean_shutdown_skips_rescan_but_rebuilds_bad_index(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = fill(d)
    t.close()
    idx = sorted(d.glob("*.index"))[0]
    idx.write_bytes(b"\x00\x00\x00")  # not a multiple of 8
    (sorted(d.glob("*.timeindex"))[1]).unlink()
    t = open_log(d, clean_shutdown=True)
    assert t.log_end_offset == 80
    assert len(idx.read_bytes()) % 8 == 0
    assert next(b.base_offset for b in iter_batches(t.read(50, 1 << 20, 80).records)) == 50


def test_recovery_from_recovery_point_only(tmp_path: Path, monkeypatch) -> None:
    d = tmp_path / "1-0"
    t = fill(d, n=60)
    t.flush()
    rp = t.recovery_point
    for i in range(60, 70):
        t.append_as_leader(batch(2, writer_id=3, writer_epoch=0, seq=2 * i), 1)
    t.close_without_flush()
    from fluss_py.log import segment as segment_mod

    checked: list[int] = []
    orig = segment_mod.LogSegment.recover

    def spy(self, start, check):
        checked.append(self.base_offset)
        return orig(self, start, check)

    monkeypatch.setattr(segment_mod.LogSegment, "recover", spy)
    t = open_log(d, recovery_point=rp)
    assert t.log_end_offset == 140
    assert checked and min(checked) >= max(int(p.name[:20]) for p in segs(d) if int(p.name[:20]) <= rp)


def test_corrupt_epoch_checkpoint_is_rebuilt_from_log(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = fill(d, epochs=(1, 4))
    t.close()
    (d / "leader-epoch-checkpoint").write_text("garbage\n")
    t = open_log(d, clean_shutdown=True)
    assert t.epoch_cache.entries() == [EpochEntry(1, 0), EpochEntry(4, 40)]
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n4 40\n"


def test_epoch_entry_beyond_recovered_end_is_dropped(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = fill(d, n=10)
    t.epoch_cache.assign(5, t.log_end_offset)  # a new leader's assignment at election, no data yet
    t.close_without_flush()
    t = open_log(d, config=SMALL)
    assert t.epoch_cache.entries() == [EpochEntry(1, 0)]


def test_garbage_tail_of_zeros(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = fill(d, n=5)
    t.close_without_flush()
    with open(segs(d)[-1], "ab") as f:
        f.write(bytes(4096))  # preallocated / zero-filled tail after a power loss
    t = open_log(d, LogConfig(segment_bytes=1 << 20))
    assert t.log_end_offset == 10


def test_missing_epoch_checkpoint_is_rebuilt(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = fill(d, epochs=(2, 5))
    t.close()
    (d / "leader-epoch-checkpoint").unlink()
    t = open_log(d, clean_shutdown=True)
    assert t.epoch_cache.entries() == [EpochEntry(2, 0), EpochEntry(5, 40)]


def test_missing_index_on_clean_open_rebuilds_that_index_and_cuts_nothing(tmp_path: Path) -> None:
    """Below the recovery point (everything, after a clean shutdown) a missing index is rebuilt from its own
    segment only; a later segment is loaded from its index as usual (its silent damage is the scrubber's to
    find, docs/storage.md §9), never re-validated and cut."""
    d = tmp_path / "1-0"
    t = fill(d, n=60)
    t.close()
    files = segs(d)
    files[1].with_suffix(".index").unlink()
    raw = bytearray(files[2].read_bytes())
    raw[150] ^= 0x01
    files[2].write_bytes(bytes(raw))
    t = open_log(d, clean_shutdown=True)
    assert t.log_end_offset == 120 and len(t.segments) == len(files) and t.corrupt_from is None
    assert next(b.base_offset for b in iter_batches(t.read(int(files[1].name[:20]), 1 << 20, 120).records)) == int(
        files[1].name[:20]
    )
    t.close()
    assert files[1].with_suffix(".index").exists()
