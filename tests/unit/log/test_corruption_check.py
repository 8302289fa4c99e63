"""Corruption below the recovery point (docs/storage.md §9): found at an unclean start and by the scrubber's
check, never cut by recovery itself; ``truncate_at_corruption`` cuts by position (the header may be the
damaged part)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from fluss_py.errors import StorageError
from fluss_py.log import segment as segment_mod
from fluss_py.log.scrub import RateLimiter, verify_segment_file

from .helpers import batch, open_log


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
    real_write, calls = os.write, []

    def filling(fd: int, data) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:10]))
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(segment_mod.os, "write", filling)
    seen: list[BaseException] = []
    t.io_error = lambda tablet, e: seen.append(e)
    with pytest.raises(StorageError, match="No space left on device"):
        t.append_as_leader(batch(2), 1)
    assert "short write" not in str(seen[0]) and len(seen) == 1
    monkeypatch.undo()
    assert t.log_end_offset == 0 and t.segments[0].size == 0 and os.path.getsize(t.segments[0].log_path) == 0
