"""Corruption below the recovery point (docs/storage.md §9): found at an unclean start and by the scrubber's
check, never cut by recovery itself; ``truncate_at_corruption`` cuts by position (the header may be the
damaged part)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fluss_py.errors import StorageError
from fluss_py.log import segment as segment_mod
from fluss_py.log.scrub import RateLimiter, verify_segment_file

from .helpers import batch, disk_fills_up, open_log


def _filled(d: Path, n: int = 40):
    t = open_log(d)
    for _ in range(n):
        t.append_as_leader(batch(2), 1)
    t.flush()
    return t


def _flip(path: Path, position: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        b = os.pread(fd, 1, position)
        os.pwrite(fd, bytes([b[0] ^ 0xFF]), position)
    finally:
        os.close(fd)


def test_verify_finds_the_first_bad_batch_and_clean_segments_pass(tmp_path: Path) -> None:
    t = _filled(tmp_path / "1-0")
    seg = t.segments[1]
    assert verify_segment_file(seg.log_path, seg.base_offset, seg.size) is None
    _flip(seg.log_path, seg.size // 2)
    found = verify_segment_file(seg.log_path, seg.base_offset, seg.size, RateLimiter(0))
    assert found is not None and seg.base_offset <= found.offset < seg.next_offset
    assert found.segment_base == seg.base_offset and 0 <= found.position <= seg.size // 2
    torn = verify_segment_file(seg.log_path, seg.base_offset, seg.size + 7)
    assert torn is not None and found.offset <= torn.offset


def test_unclean_start_marks_corruption_below_the_recovery_point_without_cutting(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = _filled(d)
    leo, seg = t.log_end_offset, t.segments[1]
    t.close_without_flush()
    _flip(seg.log_path, seg.size // 2)

    clean = open_log(d, recovery_point=leo, clean_shutdown=True)  # a clean start trusts every segment
    assert clean.corrupt_from is None
    clean.close_without_flush()

    t = open_log(d, recovery_point=leo)  # unclean: everything is CRC-checked, nothing is cut
    assert t.log_end_offset == leo and t.verified_bytes > 0
    assert t.corrupt_from is not None and seg.base_offset <= t.corrupt_from < seg.next_offset
    bad = t.corrupt_from
    t.truncate_at_corruption()
    assert t.log_end_offset == bad and t.corrupt_from is None
    assert len(t.segments) == 2
    assert verify_segment_file(t.segments[-1].log_path, t.segments[-1].base_offset, t.segments[-1].size) is None
    assert t.append_as_leader(batch(2), 2).first_offset == bad  # writes continue where the good prefix ends


def test_a_damaged_header_is_cut_by_position(tmp_path: Path) -> None:
    t = _filled(tmp_path / "1-0")
    seg = t.segments[1]
    _flip(seg.log_path, 3)  # the first batch's base offset: find_batch cannot be trusted there
    found = verify_segment_file(seg.log_path, seg.base_offset, seg.size)
    assert found is not None and (found.offset, found.position) == (seg.base_offset, 0)
    assert t.mark_corrupt(found.offset, found.segment_base, found.position)
    assert not t.mark_corrupt(found.offset + 2, found.segment_base, 50)  # the lowest finding wins
    t.truncate_at_corruption()
    assert t.log_end_offset == seg.base_offset and t.segments[-1].size == 0


def test_a_truncation_below_the_corruption_clears_it(tmp_path: Path) -> None:
    t = _filled(tmp_path / "1-0")
    seg = t.segments[2]
    assert t.mark_corrupt(seg.base_offset + 2, seg.base_offset, 100)
    t.truncate_to(seg.base_offset)
    assert t.corrupt_from is None


def test_a_short_write_reports_the_real_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A disk filling up: the first write is short, the next one fails with ENOSPC. The error says so."""
    t = open_log(tmp_path / "1-0")
    disk_fills_up(monkeypatch)
    seen: list[BaseException] = []
    t.io_error = lambda tablet, e: seen.append(e)
    with pytest.raises(StorageError, match="No space left on device"):
        t.append_as_leader(batch(2), 1)
    assert "short write" not in str(seen[0]) and len(seen) == 1
    monkeypatch.undo()
    assert t.log_end_offset == 0 and t.segments[0].size == 0 and os.path.getsize(t.segments[0].log_path) == 0


def _last_batch_position(seg) -> int:
    fd = os.open(seg.log_path, os.O_RDONLY)
    try:
        return [pos for pos, _, _ in segment_mod.scan_batches(fd, 0, seg.size)][-1]
    finally:
        os.close(fd)


def _set_byte(path: Path, position: int, value: int) -> None:
    fd = os.open(path, os.O_RDWR)
    try:
        os.pwrite(fd, bytes([value]), position)
    finally:
        os.close(fd)


@pytest.mark.parametrize("clean", [True, False])
def test_a_damaged_batch_length_below_the_recovery_point_is_recorded_and_later_segments_kept(
    tmp_path: Path, clean: bool
) -> None:
    """A length field is not CRC-covered: a flipped byte there makes the segment's batches stop short of its
    end. Below the recovery point that is the medium's damage, never a crash tail: nothing is cut, the
    batch is recorded for repair, the fsynced later segments stay (they used to be deleted, silently)."""
    d = tmp_path / "1-0"
    t = _filled(d)
    leo, bases = t.log_end_offset, [s.base_offset for s in t.segments]
    assert len(bases) >= 3 and t.recovery_point == leo
    seg0 = t.segments[0]
    position = _last_batch_position(seg0)
    bad_offset = seg0.find_batch(bases[1] - 1)[1][0]
    size0 = seg0.size
    t.close()
    _set_byte(seg0.log_path, position + 8, 0x7F)  # the high byte of the batch's length

    t = open_log(d, recovery_point=leo, clean_shutdown=clean)
    assert t.log_end_offset == leo and [s.base_offset for s in t.segments] == bases
    assert t.segments[0].size == size0 == os.path.getsize(seg0.log_path)  # not one byte cut
    assert t.corrupt_from == bad_offset and t.corrupt_segment_base == bases[0]
    later = t.read(bases[1], 1 << 20, leo).records
    assert verify_segment_file(t.segments[1].log_path, bases[1], t.segments[1].size) is None and later
    # the repair (a follower out of the ISR) cuts at the damaged batch and fetches the rest again
    t.truncate_at_corruption()
    assert t.log_end_offset == bad_offset and len(t.segments) == 1 and t.segments[0].size == position


def test_a_missing_index_below_the_recovery_point_is_rebuilt_and_a_bad_batch_recorded(tmp_path: Path) -> None:
    d = tmp_path / "1-0"
    t = _filled(d)
    leo, seg1 = t.log_end_offset, t.segments[1]
    count = len(t.segments)
    t.close()
    seg1.offset_index.path.unlink()
    _flip(seg1.log_path, seg1.size // 2)  # a CRC failure in the segment whose index is rebuilt

    t = open_log(d, recovery_point=leo, clean_shutdown=True)
    assert t.log_end_offset == leo and len(t.segments) == count
    assert t.corrupt_from is not None and seg1.base_offset <= t.corrupt_from < t.segments[2].base_offset
    t.close()
    assert seg1.offset_index.path.exists()


def test_the_last_segment_damaged_after_a_clean_shutdown_is_cut_with_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """No later segment names where the last one ends, so the batches after a damaged header cannot be
    located: the one place recovery cuts fsynced bytes, and it says so."""
    d = tmp_path / "1-0"
    t = _filled(d)
    leo, last = t.log_end_offset, t.segments[-1]
    position = _last_batch_position(last)
    bad_offset = last.find_batch(leo - 1)[1][0]
    t.close()
    _set_byte(last.log_path, position + 8, 0x7F)

    t = open_log(d, recovery_point=leo, clean_shutdown=True)
    assert t.log_end_offset == bad_offset and t.segments[-1].size == position
    assert any(r.levelname == "ERROR" and "fsynced bytes" in r.getMessage() for r in caplog.records)
