"""``fluss-py dump-log``: output fields, --records, --verify on good and corrupt logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.cli.main import main
from fluss_py.log import LogConfig

from .helpers import batch, open_log


def make_log(d: Path) -> None:
    t = open_log(d)
    for i in range(30):
        t.append_as_leader(batch(2, writer_id=4, writer_epoch=0, seq=2 * i), 1 if i < 15 else 3)
    t.close()


def test_dump_dir_prints_batches_and_epoch_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    d = tmp_path / "1-0"
    make_log(d)
    assert main(["dump-log", str(d), "--verify", "--records"]) == 0
    out = capsys.readouterr().out
    assert "epoch: 1 startOffset: 0" in out and "epoch: 3 startOffset: 30" in out
    assert "baseOffset: 0 lastOffset: 1 count: 2" in out and "leaderEpoch: 1" in out and "crcValid: true" in out
    assert "writerId: 4" in out and "baseSequence: 0" in out
    assert "| offset: 1 timestamp: 1001 key: b'k1'" in out
    assert "verify: OK" in out


def test_dump_single_files(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    d = tmp_path / "1-0"
    make_log(d)
    for name in ("00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex"):
        assert main(["dump-log", str(d / name)]) == 0
    assert main(["dump-log", str(d / "leader-epoch-checkpoint")]) == 0
    snap = sorted(d.glob("*.snapshot"))[-1]
    assert main(["dump-log", str(snap)]) == 0
    out = capsys.readouterr().out
    assert "offset: " in out and "position: " in out and "timestamp: " in out and "writerId: 4" in out


@pytest.mark.parametrize("damage", ["crc", "torn", "index", "epochs"])
def test_verify_detects_corruption(tmp_path: Path, capsys: pytest.CaptureFixture, damage: str) -> None:
    d = tmp_path / "1-0"
    make_log(d)
    seg = sorted(d.glob("*.log"))[0]
    if damage == "crc":
        raw = bytearray(seg.read_bytes())
        raw[100] ^= 0x55
        seg.write_bytes(bytes(raw))
    elif damage == "torn":
        with open(seg, "ab") as f:
            f.write(b"\x00" * 30)
    elif damage == "index":
        idx = seg.with_suffix(".index")
        idx.write_bytes(idx.read_bytes() + (1).to_bytes(4, "big") + (3).to_bytes(4, "big") * 1)
    else:
        (d / "leader-epoch-checkpoint").write_text("0\n2\n1 0\n3 20\n")
    assert main(["dump-log", str(d), "--verify"]) == 1
    assert "PROBLEM" in capsys.readouterr().out


def test_missing_path_is_usage_error(tmp_path: Path) -> None:
    assert main(["dump-log", str(tmp_path / "nope")]) == 2


@pytest.mark.parametrize("bad", ["lying-value-length", "count-larger-than-records", "lz4-bomb"])
def test_verify_checks_the_records_inside_a_batch_with_a_valid_crc(
    tmp_path: Path, capsys: pytest.CaptureFixture, bad: str
) -> None:
    """A bad batch that reached a log without the leader's record check (here: appended as a follower)."""
    from fluss_py.record.batch import set_base_offset_and_epoch
    from fluss_py.testing import bad_batches

    forged = {
        "lying-value-length": bad_batches.lying_value_length,
        "count-larger-than-records": bad_batches.count_larger_than_records,
        "lz4-bomb": lambda: bad_batches.lz4_bomb(80 * 1024 * 1024),
    }[bad]()
    d = tmp_path / "1-0"
    t = open_log(d, LogConfig(max_batch_bytes=8 * 1024 * 1024))
    t.append_as_leader(batch(2), 0)
    data = bytearray(forged)
    set_base_offset_and_epoch(data, 0, 2, 0)
    t.append_as_follower(bytes(data))
    t.close()
    assert main(["dump-log", str(d), "--verify"]) == 1
    out = capsys.readouterr().out
    assert "crcValid: true" in out
    problems = [line for line in out.splitlines() if line.startswith("PROBLEM")]
    assert len(problems) == 1 and "batch at offset 2" in problems[0], problems
