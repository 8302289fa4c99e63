"""Pure ISR/HW/truncation decisions, exhaustively."""

from __future__ import annotations

import itertools

import pytest

from fluss_py.replica.isr import (
    FollowerProgress,
    Truncation,
    effective_min_isr,
    expanded_isr,
    high_watermark_candidate,
    is_caught_up,
    maximal_isr,
    may_join_isr,
    out_of_sync_replicas,
    record_fetch,
    shrunk_isr,
    truncation_offset,
)

LAG = 10.0


def test_record_fetch_at_leader_leo_is_caught_up_now() -> None:
    p = record_fetch(FollowerProgress(), fetch_offset=5, leader_leo=5, now=100.0)
    assert p == FollowerProgress(5, 100.0, 100.0, 5)


def test_record_fetch_reaching_previous_leader_leo_is_caught_up_at_previous_fetch() -> None:
    p = FollowerProgress(3, 50.0, 90.0, 5)  # last fetch at t=90 saw leader LEO 5
    p2 = record_fetch(p, fetch_offset=5, leader_leo=8, now=100.0)
    assert p2.last_caught_up_time == 90.0 and p2.log_end_offset == 5 and p2.last_fetch_leader_leo == 8


def test_record_fetch_behind_keeps_last_caught_up() -> None:
    p = FollowerProgress(3, 50.0, 90.0, 5)
    p2 = record_fetch(p, fetch_offset=4, leader_leo=8, now=100.0)
    assert p2.last_caught_up_time == 50.0


def test_record_fetch_never_moves_caught_up_time_back() -> None:
    p = FollowerProgress(5, 120.0, 120.0, 5)
    assert record_fetch(p, 5, 9, now=121.0).last_caught_up_time == 120.0


@pytest.mark.parametrize(
    ("leo", "caught_up", "now", "expected"),
    [(10, 0.0, 100.0, True), (9, 95.0, 100.0, True), (9, 90.0, 100.0, True), (9, 89.9, 100.0, False)],
)
def test_is_caught_up(leo: int, caught_up: float, now: float, expected: bool) -> None:
    assert is_caught_up(FollowerProgress(leo, caught_up), leader_leo=10, now=now, lag_time=LAG) is expected


def test_out_of_sync_never_the_leader_and_unknown_followers_count_as_lagging() -> None:
    followers = {2: FollowerProgress(10, 0.0), 3: FollowerProgress(7, 95.0), 4: FollowerProgress(7, 80.0)}
    out = out_of_sync_replicas((1, 2, 3, 4, 5), 1, followers, leader_leo=10, now=100.0, lag_time=LAG)
    assert out == (4, 5)


def test_shrink_and_expand_keep_assignment_order() -> None:
    assert shrunk_isr((1, 2, 3), [2]) == (1, 3)
    assert shrunk_isr((1, 2, 3), []) == (1, 2, 3)
    assert expanded_isr((3, 1), 2, (1, 2, 3)) == (1, 2, 3)
    assert expanded_isr((1,), 1, (1, 2)) == (1,)


@pytest.mark.parametrize(
    ("follower", "isr", "leo", "hw", "epoch_start", "expected"),
    [
        (2, (1,), 10, 10, 5, True),
        (2, (1,), 11, 10, 5, True),
        (2, (1,), 9, 10, 5, False),  # below HW
        (2, (1,), 10, 10, 11, False),  # below the current epoch's start
        (2, (1, 2), 10, 10, 5, False),  # already in
        (4, (1,), 10, 10, 5, False),  # not assigned
    ],
)
def test_may_join_isr(follower, isr, leo, hw, epoch_start, expected) -> None:
    assert may_join_isr(follower, (1, 2, 3), isr, leo, hw, epoch_start) is expected


def test_maximal_isr_is_the_union_while_pending() -> None:
    assert maximal_isr((1, 2, 3), None) == (1, 2, 3)
    assert maximal_isr((1, 2, 3), (1, 2)) == (1, 2, 3)  # pending shrink: keep the removed one
    assert maximal_isr((1, 2), (1, 2, 3)) == (1, 2, 3)  # pending expand: count the new one


def test_high_watermark_candidate() -> None:
    assert high_watermark_candidate(10, []) == 10
    assert high_watermark_candidate(10, [7, 12]) == 7
    assert high_watermark_candidate(10, [-1]) == -1


@pytest.mark.parametrize(("min_isr", "rf", "expected"), [(2, 3, 2), (2, 1, 1), (3, 2, 2), (0, 3, 1)])
def test_effective_min_isr(min_isr: int, rf: int, expected: int) -> None:
    assert effective_min_isr(min_isr, rf) == expected


# ---------------------------------------------------------------- truncation


def epochs_lookup(entries: list[tuple[int, int]], leo: int):
    """A follower's KIP-279 lookup over ``entries`` [(epoch, start)] (Kafka LeaderEpochFileCache.endOffsetFor)."""

    def lookup(epoch: int) -> tuple[int, int]:
        if not entries or epoch < 0:
            return (-1, -1)
        if epoch == entries[-1][0]:
            return (epoch, leo)
        higher = [e for e in entries if e[0] > epoch]
        if not higher:
            return (-1, -1)
        lower = [e for e in entries if e[0] <= epoch]
        return (lower[-1][0] if lower else epoch, higher[0][1])

    return lookup


def test_unclean_tail_divergence_truncates_to_the_new_leaders_epoch_end() -> None:
    # A led epoch 5 and wrote 100..110 nobody fetched; B (epoch 6) starts at 100. A asks about epoch 5.
    a = epochs_lookup([(4, 0), (5, 50)], leo=111)
    t = truncation_offset(5, 100, follower_leo=111, follower_hw=100, follower_end_for_epoch=a)
    assert t == Truncation(100, True)


def test_hw_truncation_case() -> None:
    # B1: epoch 0 [0,3), epoch 1 [3,7) (msg6 only on B1). B2 (new leader, epoch 2) has epoch 1 ending at 6.
    b1 = epochs_lookup([(0, 0), (1, 3)], leo=7)
    assert truncation_offset(1, 6, follower_leo=7, follower_hw=5, follower_end_for_epoch=b1) == Truncation(6, True)


def test_kip101_follower_keeps_unacknowledged_tail_the_leader_has() -> None:
    # Follower HW 1 but LEO 2: the leader's epoch ends at 2, so nothing is cut (never truncate blindly to HW).
    f = epochs_lookup([(0, 0)], leo=2)
    assert truncation_offset(0, 2, follower_leo=2, follower_hw=1, follower_end_for_epoch=f) == Truncation(2, True)


def test_kip279_leader_never_had_our_epoch_asks_again() -> None:
    # Follower has epochs 1 [0,5), 2 [5,9); leader: epoch 1 ends at 7 -> cut at our own end of epoch 1.
    f = epochs_lookup([(1, 0), (2, 5)], leo=9)
    assert truncation_offset(1, 7, 9, 0, f) == Truncation(5, True)
    # Follower only knows epochs 0 and 3; leader's answer epoch 2 -> follower's floor is epoch 0 ending at 4:
    g = epochs_lookup([(0, 0), (3, 4)], leo=9)
    assert truncation_offset(2, 6, 9, 0, g) == Truncation(4, False)


def test_undefined_answers() -> None:
    f = epochs_lookup([(3, 10)], leo=20)
    assert truncation_offset(-1, -1, 20, 12, f) == Truncation(12, True)  # leader cannot tell: keep the HW
    assert truncation_offset(-1, 15, 20, 12, f) == Truncation(15, True)  # old protocol
    assert truncation_offset(2, 15, 20, 12, f) == Truncation(10, True)  # we have nothing <= 2: (2, 10) floor
    empty = epochs_lookup([], leo=20)
    assert truncation_offset(2, 15, 20, 12, empty) == Truncation(15, True)


def test_truncation_never_above_own_leo_nor_leader_end_when_epochs_match() -> None:
    for leo, l_end, f_start in itertools.product(range(0, 12, 3), range(0, 12, 2), range(0, 6, 5)):
        f = epochs_lookup([(0, 0), (4, f_start)], leo=max(leo, f_start))
        t = truncation_offset(4, l_end, max(leo, f_start), 0, f)
        assert t.complete and t.offset <= max(leo, f_start) and t.offset <= l_end
