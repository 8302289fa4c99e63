"""Leader-epoch cache: Kafka checkpoint format, KIP-279 end_offset_for, truncation, follower decision."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.errors import LogCorruptedError
from fluss_py.log.epoch_cache import LeaderEpochCache, follower_truncation_offset
from fluss_py.types import EpochEntry


def cache(tmp_path: Path, *pairs: tuple[int, int]) -> LeaderEpochCache:
    c = LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")
    for e, o in pairs:
        c.assign(e, o)
    return c


def test_checkpoint_is_kafka_format_byte_for_byte(tmp_path: Path) -> None:
    cache(tmp_path, (0, 0), (3, 1500))
    path = tmp_path / "leader-epoch-checkpoint"
    assert path.read_bytes() == b"0\n2\n0 0\n3 1500\n"  # the example of reference/kafka.md §1.3
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
        (b"0\n1\n0\n", "fields"),
        (b"0\n2\n3 10\n1 20\n", "not increasing"),
        (b"0\n1\nx 1\n", "non-integer"),
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


def test_seed_004_section_4_3_divergence(tmp_path: Path) -> None:
    """Seed 004 §4.3: old leader B1 has epoch 0 = msg0-2, epoch 1 = msg3..msg6 (LEO 7); new leader B2 has only
    up to msg5 (LEO 6) and leads epoch 2. B1 asks for the end of epoch 1: B2 says (1, 6), so B1 keeps msg0-msg5
    (the seed's "truncate to offset 5" = last kept offset 5 = truncate_to(6))."""
    b1 = LeaderEpochCache(tmp_path / "b1", [EpochEntry(0, 0), EpochEntry(1, 3)])
    b2 = LeaderEpochCache(tmp_path / "b2", [EpochEntry(0, 0), EpochEntry(1, 3), EpochEntry(2, 6)])
    l_epoch, l_end = b2.end_offset_for(1, 6)
    assert (l_epoch, l_end) == (1, 6)
    assert follower_truncation_offset(l_epoch, l_end, b1, follower_leo=7, follower_hw=5) == (6, True)


def test_seed_004_follower_epoch_3_ends_at_4_on_new_leader(tmp_path: Path) -> None:
    """Seed 004 §4.3 (HW case): the follower's epoch 3 started at 2; the new leader (epoch 4 from 4) says epoch 3
    ended at 4 on its log, so the follower truncates to 4, not to its HW (5)."""
    leader = LeaderEpochCache(None, [EpochEntry(3, 2), EpochEntry(4, 4)])
    follower = LeaderEpochCache(None, [EpochEntry(3, 2)])
    l_epoch, l_end = leader.end_offset_for(3, 6)
    assert (l_epoch, l_end) == (3, 4)
    assert follower_truncation_offset(l_epoch, l_end, follower, follower_leo=6, follower_hw=5) == (4, True)


def test_kip_279_fast_failover_needs_iteration() -> None:
    """KIP-279 (§4.3/§4.6): follower has epochs 1@0, 2@5 (LEO 8); the leader never saw epoch 2 (its epochs 1@0,
    3@6). Asking for 2 the leader answers (1, 6); the follower never wrote epoch 1 up to 6 ... it has 1 until 5,
    so truncates to min(5, LEO)=5 — F_epoch == L_epoch == 1 -> min(F_end 5, L_end 6, LEO 8) = 5, complete."""
    leader = LeaderEpochCache(None, [EpochEntry(1, 0), EpochEntry(3, 6)])
    follower = LeaderEpochCache(None, [EpochEntry(1, 0), EpochEntry(2, 5)])
    assert leader.end_offset_for(2, 9) == (1, 6)
    assert follower_truncation_offset(1, 6, follower, follower_leo=8, follower_hw=3) == (5, True)


def test_follower_truncation_rules_of_section_4_6() -> None:
    follower = LeaderEpochCache(None, [EpochEntry(1, 0), EpochEntry(4, 10)])
    # 1. leader cannot tell -> follower HW
    assert follower_truncation_offset(2, -1, follower, follower_leo=20, follower_hw=7) == (7, True)
    # 2. old protocol without epoch -> min(L_end, LEO)
    assert follower_truncation_offset(-1, 12, follower, follower_leo=20, follower_hw=7) == (12, True)
    # 3a. follower never saw L_epoch (3): its floor is 1 ending at 10 -> truncate to 10, not complete
    assert follower_truncation_offset(3, 15, follower, follower_leo=20, follower_hw=7) == (10, False)
    # 3b. same epoch -> min(F_end, L_end, LEO)
    assert follower_truncation_offset(4, 15, follower, follower_leo=20, follower_hw=7) == (15, True)
    assert follower_truncation_offset(1, 12, follower, follower_leo=20, follower_hw=7) == (10, True)
    # 3c. follower has nothing at or below L_epoch -> (L_epoch, first start) == same epoch branch
    late = LeaderEpochCache(None, [EpochEntry(5, 30)])
    assert follower_truncation_offset(2, 25, late, follower_leo=40, follower_hw=30) == (25, True)


def test_diverging_epoch_check_of_section_4_5(tmp_path: Path) -> None:
    """§4.5: the leader answers a fetch (fetch_offset, last_fetched_epoch) with e = end_offset_for(last epoch);
    divergence when e.epoch < last_fetched_epoch or e.end < fetch_offset."""
    leader = LeaderEpochCache(None, [EpochEntry(1, 0), EpochEntry(3, 50), EpochEntry(4, 80)])
    leo = 100

    def diverging(fetch_offset: int, last_epoch: int) -> tuple[int, int] | None:
        e = leader.end_offset_for(last_epoch, leo)
        return e if e[0] < last_epoch or e[1] < fetch_offset else None

    assert diverging(90, 4) is None  # in sync
    assert diverging(60, 3) is None  # epoch 3 ends at 80 >= 60
    assert diverging(85, 3) == (3, 80)  # follower wrote epoch 3 past where the leader's epoch 3 ended
    assert diverging(55, 2) == (1, 50)  # the leader never had epoch 2


def test_unchanged_entries_write_nothing(tmp_path: Path) -> None:
    """Creating a bucket costs no checkpoint write: clear()/replace([]) of a missing file leave it missing, and a
    change that restores what is on disk does not rewrite it."""
    path = tmp_path / "leader-epoch-checkpoint"
    c = LeaderEpochCache.load(path)
    c.clear()
    c.replace([])
    assert not path.exists()
    c.assign(2, 0)
    assert path.read_bytes() == b"0\n1\n2 0\n"
    path.write_bytes(b"0\n1\n2 0\n")  # same content, marker of "not rewritten" below: the inode
    inode = path.stat().st_ino
    c.replace([EpochEntry(2, 0)])
    assert path.stat().st_ino == inode
    c.assign(3, 5)
    assert LeaderEpochCache.load(path).entries() == [EpochEntry(2, 0), EpochEntry(3, 5)]
