"""The follower's truncation decision (docs/replication.md) on real epoch caches: KIP-101, KIP-279."""

from __future__ import annotations

from pathlib import Path

from fluss_py.log.epoch_cache import LeaderEpochCache
from fluss_py.replica.isr import truncation_offset
from fluss_py.types import EpochEntry


def decide(leader_epoch: int, leader_end: int, follower: LeaderEpochCache, *, leo: int, hw: int) -> tuple[int, bool]:
    t = truncation_offset(leader_epoch, leader_end, leo, hw, lambda e: follower.end_offset_for(e, leo))
    return t.offset, t.complete


def test_textbook_divergence_truncates_to_last_common_offset(tmp_path: Path) -> None:
    """Epoch lookup: old leader B1 has epoch 0 = msg0-2, epoch 1 = msg3..msg6 (LEO 7); new leader B2 has only
    up to msg5 (LEO 6) and leads epoch 2. B1 asks for the end of epoch 1: B2 says (1, 6), so B1 keeps msg0-msg5
    (the usual "truncate to offset 5" = last kept offset 5 = truncate_to(6))."""
    b1 = LeaderEpochCache(tmp_path / "b1", [EpochEntry(0, 0), EpochEntry(1, 3)])
    b2 = LeaderEpochCache(tmp_path / "b2", [EpochEntry(0, 0), EpochEntry(1, 3), EpochEntry(2, 6)])
    l_epoch, l_end = b2.end_offset_for(1, 6)
    assert (l_epoch, l_end) == (1, 6)
    assert decide(l_epoch, l_end, b1, leo=7, hw=5) == (6, True)


def test_epoch_lookup_follower_epoch_3_ends_at_4_on_new_leader(tmp_path: Path) -> None:
    """Epoch lookup (HW case): the follower's epoch 3 started at 2; the new leader (epoch 4 from 4) says epoch 3
    ended at 4 on its log, so the follower truncates to 4, not to its HW (5)."""
    leader = LeaderEpochCache(None, [EpochEntry(3, 2), EpochEntry(4, 4)])
    follower = LeaderEpochCache(None, [EpochEntry(3, 2)])
    l_epoch, l_end = leader.end_offset_for(3, 6)
    assert (l_epoch, l_end) == (3, 4)
    assert decide(l_epoch, l_end, follower, leo=6, hw=5) == (4, True)


def test_kip_279_fast_failover_needs_iteration() -> None:
    """KIP-279 (§4.3/§4.6): follower has epochs 1@0, 2@5 (LEO 8); the leader never saw epoch 2 (its epochs 1@0,
    3@6). Asking for 2 the leader answers (1, 6); the follower never wrote epoch 1 up to 6 ... it has 1 until 5,
    so truncates to min(5, LEO)=5 — F_epoch == L_epoch == 1 -> min(F_end 5, L_end 6, LEO 8) = 5, complete."""
    leader = LeaderEpochCache(None, [EpochEntry(1, 0), EpochEntry(3, 6)])
    follower = LeaderEpochCache(None, [EpochEntry(1, 0), EpochEntry(2, 5)])
    assert leader.end_offset_for(2, 9) == (1, 6)
    assert decide(1, 6, follower, leo=8, hw=3) == (5, True)


def test_follower_truncation_rules_of_section_4_6() -> None:
    follower = LeaderEpochCache(None, [EpochEntry(1, 0), EpochEntry(4, 10)])
    # 1. leader cannot tell -> follower HW
    assert decide(2, -1, follower, leo=20, hw=7) == (7, True)
    # 2. old protocol without epoch -> min(L_end, LEO)
    assert decide(-1, 12, follower, leo=20, hw=7) == (12, True)
    # 3a. follower never saw L_epoch (3): its floor is 1 ending at 10 -> truncate to 10, not complete
    assert decide(3, 15, follower, leo=20, hw=7) == (10, False)
    # 3b. same epoch -> min(F_end, L_end, LEO)
    assert decide(4, 15, follower, leo=20, hw=7) == (15, True)
    assert decide(1, 12, follower, leo=20, hw=7) == (10, True)
    # 3c. follower has nothing at or below L_epoch -> (L_epoch, first start) == same epoch branch
    late = LeaderEpochCache(None, [EpochEntry(5, 30)])
    assert decide(2, 25, late, leo=40, hw=30) == (25, True)


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
