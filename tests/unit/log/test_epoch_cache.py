"""Leader-epoch cache: Kafka checkpoint format, KIP-279 end_offset_for, truncation."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.errors import LogCorruptedError
from fluss_py.log.epoch_cache import LeaderEpochCache
from fluss_py.types import EpochEntry


def cache(tmp_path: Path, *pairs: tuple[int, int]) -> LeaderEpochCache:
    c = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for e, o in pairs:
        c.assign(e, o)
    return c


def test_checkpoint_is_kafka_format_byte_for_byte(tmp_path: Path) -> None:
    cache(tmp_path, (0, 0), (3, 1500))
    path = tmp_path / "leader-epoch-checkpoint"
    assert path.read_bytes() == b"0\n2\n0 0\n3 1500\n"  # Kafka's own example of the file
    again = LeaderEpochCache.load(path)
    assert again.entries() == [EpochEntry(0, 0), EpochEntry(3, 1500)]
    again.flush()
    assert path.read_bytes() == b"0\n2\n0 0\n3 1500\n"


def test_empty_checkpoint_round_trip(tmp_path: Path) -> None:
    c = cache(tmp_path)
    c.flush()
    assert (tmp_path / "leader-epoch-checkpoint").read_bytes() == b"0\n0\n"
    assert LeaderEpochCache.load(tmp_path / "leader-epoch-checkpoint").entries() == []


@pytest.mark.parametrize(
    "content, what",
    [
        (b"1\n0\n", "version"),
        (b"0\n2\n0 0\n", "header says 2"),
        (b"0\n1\n0\n", "is not 2 integers"),
        (b"0\n2\n3 10\n1 20\n", "not increasing"),
        (b"0\n2\n1 10\n3 10\n", "not increasing"),
        (b"0\n1\nx 1\n", "is not 2 integers"),
        (b"0\n1\n1_0 1\n", "is not 2 integers"),
        (b"0\n1\n\xd9\xa1 1\n", "not a text checkpoint"),  # ARABIC-INDIC DIGIT ONE: int() would take it
        (b"0\n1\n\xff\xfe 1\n", "not a text checkpoint"),
        (b"0\n1\n-1 5\n", "negative"),
        (b"0\n1\n1 99999999999999999999\n", "is not 2 integers"),
        (b"0\n1\n1 9999999999999999999\n", "outside int64"),
        (b"0\nx\n", "bad entry count"),
    ],
)
def test_corrupt_checkpoint_names_file_and_problem(tmp_path: Path, content: bytes, what: str) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(content)
    with pytest.raises(LogCorruptedError, match=what) as e:
        LeaderEpochCache.load(path)
    assert "leader-epoch-checkpoint" in str(e.value)


def test_end_offset_for_kip_279_rules(tmp_path: Path) -> None:
    # §4.2: epochs 1@0, 3@100, 6@250; LEO 400.
    c = cache(tmp_path, (1, 0), (3, 100), (6, 250))
    leo = 400
    assert c.end_offset_for(-1, leo) == (-1, -1)  # undefined
    assert c.end_offset_for(6, leo) == (6, 400)  # latest -> LEO
    assert c.end_offset_for(3, leo) == (3, 250)  # known epoch ends where the next starts
    assert c.end_offset_for(4, leo) == (3, 250)  # unknown: the largest epoch below it
    assert c.end_offset_for(5, leo) == (3, 250)
    assert c.end_offset_for(0, leo) == (0, 0)  # nothing <= requested: (requested, first start)
    assert c.end_offset_for(7, leo) == (-1, -1)  # above everything known
    assert LeaderEpochCache(None).end_offset_for(0, 0) == (-1, -1)


def test_assign_removes_conflicting_entries(tmp_path: Path) -> None:
    c = cache(tmp_path, (1, 0), (2, 10), (3, 20))
    assert not c.assign(3, 25)  # same epoch later: no change
    c.assign(4, 15)  # conflicts with (3, 20): its start is >= 15
    assert c.entries() == [EpochEntry(1, 0), EpochEntry(2, 10), EpochEntry(4, 15)]
    c.assign(2, 30)  # an older epoch re-assigned later removes epochs >= 2
    assert c.entries() == [EpochEntry(1, 0), EpochEntry(2, 30)]


def test_truncate_from_end_and_start(tmp_path: Path) -> None:
    c = cache(tmp_path, (1, 0), (2, 10), (3, 20))
    assert c.truncate_from_end(20)  # drops entries starting at or after 20
    assert c.entries() == [EpochEntry(1, 0), EpochEntry(2, 10)]
    assert not c.truncate_from_end(50)
    assert c.truncate_from_start(15)  # (2, 10) becomes (2, 15); (1, 0) goes
    assert c.entries() == [EpochEntry(2, 15)]
    assert LeaderEpochCache.load(tmp_path / "leader-epoch-checkpoint").entries() == [EpochEntry(2, 15)]
