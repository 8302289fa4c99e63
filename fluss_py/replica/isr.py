"""Pure decisions of replication: follower progress, ISR shrink/expand, high watermark, truncation offset.

No I/O, no clocks: every input is a value. ``Replica`` calls these; tests call them exhaustively.

Caught-up rule (Kafka's ``Replica.updateFetchState``): on each follower fetch at time ``now``::

    fetch_offset >= leader LEO now                 -> last_caught_up = now
    fetch_offset >= leader LEO at the previous fetch -> last_caught_up = time of the previous fetch
    otherwise                                      -> unchanged

A follower is in sync when its LEO equals the leader's LEO or it was caught up within ``lag_time``.
This catches both a stuck follower (no fetches) and a slow one (never reaching the LEO).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

UNKNOWN_OFFSET = -1


@dataclass(frozen=True, slots=True)
class FollowerProgress:
    """What a leader knows of one follower (times in the replica clock's seconds)."""

    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_time: float = 0.0
    last_fetch_time: float = 0.0
    last_fetch_leader_leo: int = UNKNOWN_OFFSET
    flushed_offset: int = UNKNOWN_OFFSET  # below it the follower's log is fsynced (as it last reported)


def record_fetch(
    progress: FollowerProgress, fetch_offset: int, leader_leo: int, now: float, flushed_offset: int = UNKNOWN_OFFSET
) -> FollowerProgress:
    """The follower's progress after it fetched from ``fetch_offset`` while the leader's LEO was ``leader_leo``,
    reporting its log fsynced below ``flushed_offset`` (clamped to ``fetch_offset``: nothing beyond what it
    holds of our log counts)."""
    caught_up = progress.last_caught_up_time
    if fetch_offset >= leader_leo:
        caught_up = max(caught_up, now)
    elif fetch_offset >= progress.last_fetch_leader_leo >= 0:
        caught_up = max(caught_up, progress.last_fetch_time)
    return FollowerProgress(fetch_offset, caught_up, now, leader_leo, min(flushed_offset, fetch_offset))


def polled_caught_up(progress: FollowerProgress, offset: int, until: float) -> FollowerProgress:
    """The follower's progress when its fetch session kept polling at ``offset`` (its recorded fetch offset,
    the leader's LEO) until ``until`` without the leader re-reading the bucket: caught up, and fetching, until
    then. Unchanged if its recorded offset is not ``offset``."""
    if progress.log_end_offset != offset:
        return progress
    return FollowerProgress(
        offset,
        max(progress.last_caught_up_time, until),
        max(progress.last_fetch_time, until),
        progress.last_fetch_leader_leo,
        progress.flushed_offset,
    )


def is_caught_up(progress: FollowerProgress, leader_leo: int, now: float, lag_time: float) -> bool:
    """In sync: holds everything the leader holds, or was caught up less than ``lag_time`` ago."""
    return progress.log_end_offset == leader_leo or now - progress.last_caught_up_time <= lag_time


def out_of_sync_replicas(
    isr: Iterable[int],
    leader_id: int,
    followers: Mapping[int, FollowerProgress],
    leader_leo: int,
    now: float,
    lag_time: float,
) -> tuple[int, ...]:
    """ISR members (never the leader) that are not caught up; a member with no progress is out of sync."""
    out = []
    for replica_id in isr:
        if replica_id == leader_id:
            continue
        progress = followers.get(replica_id)
        if progress is None or not is_caught_up(progress, leader_leo, now, lag_time):
            out.append(replica_id)
    return tuple(out)


def shrunk_isr(isr: tuple[int, ...], remove: Iterable[int]) -> tuple[int, ...]:
    """``isr`` without ``remove`` (order kept)."""
    gone = set(remove)
    return tuple(r for r in isr if r not in gone)


def may_join_isr(
    follower_id: int,
    replicas: tuple[int, ...],
    maximal_isr: tuple[int, ...],
    follower_leo: int,
    high_watermark: int,
    leader_epoch_start_offset: int,
) -> bool:
    """A follower joins once it holds everything committed and everything of the current leader epoch's start.

    It must be an assigned replica not already in the (maximal) ISR, with LEO >= HW and LEO >= the
    start offset of the leader's current epoch (so it cannot hold a diverged tail from an older epoch).
    """
    return (
        follower_id in replicas
        and follower_id not in maximal_isr
        and follower_leo >= high_watermark
        and follower_leo >= leader_epoch_start_offset
    )


def expanded_isr(isr: tuple[int, ...], follower_id: int, replicas: tuple[int, ...]) -> tuple[int, ...]:
    """``isr`` plus ``follower_id``, ordered as in the assignment (members outside it keep their place last)."""
    members = set(isr) | {follower_id}
    ordered = [r for r in replicas if r in members]
    ordered += [r for r in isr if r not in replicas]
    return tuple(ordered)


def maximal_isr(isr: tuple[int, ...], pending: tuple[int, ...] | None) -> tuple[int, ...]:
    """While an ISR change is in flight, count every replica of either the committed or the proposed ISR."""
    if pending is None:
        return isr
    return isr + tuple(r for r in pending if r not in isr)


def high_watermark_candidate(leader_leo: int, isr_leos: Iterable[int]) -> int:
    """min LEO over the leader and its (maximal) ISR; an unknown follower LEO (-1) yields -1 (cannot move)."""
    hw = leader_leo
    for leo in isr_leos:
        hw = min(hw, leo)
    return hw


def durable_offset_candidate(high_watermark: int, leader_flushed: int, isr_flushed: Iterable[int]) -> int:
    """The durable offset (docs/replication.md "Durable acknowledgement"): min of the HW, the leader's
    recovery point and every (maximal) ISR follower's flushed offset; an unknown one (-1) yields -1."""
    return high_watermark_candidate(min(high_watermark, leader_flushed), isr_flushed)


def effective_min_isr(min_insync_replicas: int, replication_factor: int) -> int:
    """min.insync.replicas clamped to the replication factor (Kafka's effective min ISR), at least 1."""
    return max(1, min(min_insync_replicas, replication_factor))


# ---------------------------------------------------------------- truncation (docs/replication.md)


@dataclass(frozen=True, slots=True)
class Truncation:
    """Where a follower truncates to, and whether it is done (else it asks again with its new latest epoch)."""

    offset: int
    complete: bool


def truncation_offset(
    leader_epoch: int,
    leader_end_offset: int,
    follower_leo: int,
    follower_hw: int,
    follower_end_for_epoch: Callable[[int], tuple[int, int]],
) -> Truncation:
    """The follower's truncation point from the leader's answer (epoch, end offset) for its latest epoch.

    ``follower_end_for_epoch(e)`` is the follower's own KIP-279 lookup (largest epoch <= e, its end offset),
    (-1, -1) when it has none.
    """
    if leader_end_offset < 0:
        # The leader cannot tell (it has no epoch <= ours): keep what is committed, nothing more.
        return Truncation(min(follower_hw, follower_leo), True)
    if leader_epoch < 0:
        return Truncation(min(leader_end_offset, follower_leo), True)
    follower_epoch, follower_end = follower_end_for_epoch(leader_epoch)
    if follower_end < 0:
        return Truncation(min(leader_end_offset, follower_leo), True)
    if follower_epoch != leader_epoch:
        # We never had the leader's epoch: cut our epochs above it, then ask again with the older epoch.
        return Truncation(min(follower_end, follower_leo), False)
    return Truncation(min(leader_end_offset, follower_end, follower_leo), True)
