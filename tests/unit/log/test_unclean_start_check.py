"""The unclean-start check of the segment holding the recovery point (docs/storage.md §6 step 4, §9).

Bytes below the recovery point are trusted as fsynced. An fsync that reported success for writes the disk
lost (a lying drive; before the fix of issue 36, a failed fsync whose dir was reloaded from the page cache)
leaves them as zeros there after a power cut, inside the segment that holds the recovery point: that
segment used to be loaded from its index up to the recovery point without a check, and the replica rejoined
the ISR with the zeros. Now its bytes below the recovery point are CRC-checked too; a bad batch there is
recorded (``corrupt_from``) for the replica layer to repair from the leader, never kept silently.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from fluss_py.log import loader as loader_mod
from fluss_py.log.scrub import verify_segment_file

from .helpers import SMALL, batch, open_log

BIG = SMALL.__class__(segment_bytes=1 << 20, index_interval_bytes=128, max_batch_bytes=4096)


def _zero(path: Path, start: int, end: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, bytes(end - start), start)
    finally:
        os.close(fd)


def _positions(seg) -> list[tuple[int, int]]:
    """(base offset, position) of every batch of ``seg``."""
    out, pos = [], 0
    for p, h, _ in seg.scan(0, verify=False):
        out.append((h[0], p))
        pos = p
    assert pos < seg.size
    return out


def _one_segment(d: Path, n: int = 30):
    t = open_log(d, BIG)
    for _ in range(n):
        t.append_as_leader(batch(2), 1)
    t.flush()
    assert len(t.segments) == 1 and t.recovery_point == t.log_end_offset
    return t


def test_zeros_below_the_recovery_point_in_the_active_segment_are_recorded_not_kept(tmp_path: Path) -> None:
    """The index locates the batches after the damage: nothing is cut, the log end stays, the first lost batch
    is recorded; the repair cuts there."""
    d = tmp_path / "1-0"
    t = _one_segment(d)
    leo, seg = t.log_end_offset, t.segments[0]
    batches = _positions(seg)
    (lost_offset, lost_at), (_, lost_end) = batches[10], batches[14]
    t.close_without_flush()
    _zero(seg.log_path, lost_at, lost_end)  # four batches the disk never got

    clean = open_log(d, BIG, recovery_point=leo, clean_shutdown=True)  # a clean start trusts it (it was synced)
    assert clean.corrupt_from is None
    clean.close_without_flush()

    t = open_log(d, BIG, recovery_point=leo)
    assert t.log_end_offset == leo and t.corrupt_from == lost_offset
    assert os.path.getsize(seg.log_path) == seg.size and t.verified_bytes >= lost_at
    later = t.read(batches[20][0], 1 << 20, leo).records  # the index still finds what follows the damage
    assert later and later[:8] == batches[20][0].to_bytes(8, "big")
    t.truncate_at_corruption()
    assert t.log_end_offset == lost_offset and t.corrupt_from is None
    assert verify_segment_file(t.segments[0].log_path, 0, t.segments[0].size) is None
    assert t.append_as_follower(b"") is not None


def test_without_an_index_past_the_damage_the_last_segment_is_cut_and_still_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing locates the batches after the damage: the segment is cut there (with an ERROR line), and the
    loss stays recorded at the log end, so the replica still leaves the ISR before it counts as a copy."""
    d = tmp_path / "1-0"
    t = _one_segment(d)
    leo, seg = t.log_end_offset, t.segments[0]
    batches = _positions(seg)
    lost_offset, lost_at = batches[10]
    t.close_without_flush()
    _zero(seg.log_path, lost_at, lost_at + 300)
    seg.offset_index.path.unlink()

    with caplog.at_level(logging.ERROR):
        t = open_log(d, BIG, recovery_point=leo)
    assert t.log_end_offset == lost_offset == t.corrupt_from and t.segments[0].size == lost_at
    assert any("could not be located" in r.getMessage() for r in caplog.records)
    t.truncate_at_corruption()  # the repair: nothing left to cut; the leader's copy fills it in again
    assert t.corrupt_from is None and t.log_end_offset == lost_offset


def test_damage_below_the_recovery_point_with_later_segments_keeps_them(tmp_path: Path) -> None:
    """The recovery point's segment was rolled after it: damaged below the recovery point and unlocatable, it
    is kept whole as any segment below it (§6 step 3); the later segments are re-validated as usual."""
    d = tmp_path / "1-0"
    t = open_log(d)  # SMALL: 2 KiB segments
    for _ in range(40):
        t.append_as_leader(batch(2), 1)
    seg = t.segments[1]
    batches = _positions(seg)
    rp = batches[-1][0]  # the recovery point inside segments[1], at its last batch
    t.flush()
    leo, count = t.log_end_offset, len(t.segments)
    assert count >= 3
    t.close_without_flush()
    _zero(seg.log_path, batches[1][1], batches[1][1] + 40)
    seg.offset_index.path.unlink()

    t = open_log(d, recovery_point=rp)
    assert t.corrupt_from == batches[1][0] and len(t.segments) == count and t.log_end_offset == leo
    assert os.path.getsize(seg.log_path) == seg.size


def test_the_walk_finds_the_batch_holding_the_recovery_point_and_the_tail_is_rewritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No damage: re-validation starts at the batch holding the recovery point, found by the checked walk (not
    by trusting the index), and the re-validated bytes above it are written again (an fsync that failed before
    the restart may have left them clean in the page cache, never written), unchanged."""
    d = tmp_path / "1-0"
    t = _one_segment(d, 20)
    rp, seg = t.recovery_point, t.segments[0]
    rp_position = seg.size
    for _ in range(5):
        t.append_as_leader(batch(2), 1)
    leo, size = t.log_end_offset, seg.size
    before = seg.log_path.read_bytes()
    t.close_without_flush()
    seg.offset_index.path.write_bytes(b"")  # an empty index: the walk does not need it
    rewritten: list[tuple[int, int]] = []
    real = loader_mod.rewrite_in_place

    def spy(path, start: int, end: int) -> None:
        rewritten.append((start, end))
        real(path, start, end)

    monkeypatch.setattr(loader_mod, "rewrite_in_place", spy)
    t = open_log(d, BIG, recovery_point=rp)
    assert t.log_end_offset == leo and t.corrupt_from is None and t.verified_bytes == rp_position
    assert rewritten == [(rp_position, size)] and seg.log_path.read_bytes() == before
    assert t.segments[0].dirty  # the next flush writes them
    t.close()
    rewritten.clear()
    open_log(d, BIG, recovery_point=leo, clean_shutdown=True).close()
    assert rewritten == []  # after a clean shutdown everything was synced by this process: nothing to redo
