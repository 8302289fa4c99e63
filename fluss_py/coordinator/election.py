"""Leader election and ISR decisions as pure functions: (assignment, current LeaderAndIsr, live servers)
-> the next LeaderAndIsr, or None when nothing can (or needs to) change.

No I/O, no clock: the event processor reads state, calls one of these, writes the result to ZooKeeper
with an epoch-checked transaction and only then tells the tablet servers. Rules (``docs/control-plane.md``):

- initial      first live replica in assignment order leads; ISR = live assigned replicas; epochs 0.
- offline      first replica in assignment order that is live, in the ISR and not shutting down; the
               new ISR keeps only live members. No live ISR member: no election (no unclean election
               unless asked for), the bucket stays leaderless and keeps its last ISR member.
- controlled   as offline, and servers shutting down leave the ISR (unless that would empty it).
  shutdown
- preferred    the first assigned replica, if it is live, in the ISR and not already leader.
- reassignment first replica of the target assignment that is live and in the ISR.
- liveness     (``reconcile_liveness``) a dead leader is replaced as in offline, else the bucket becomes
               leaderless; dead members leave the ISR, except that an ISR never becomes empty.

Every leader change bumps leader_epoch and bucket_epoch; every ISR-only change bumps bucket_epoch
(``LeaderAndIsr.with_leader`` / ``with_isr``).
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass

from fluss_py.errors import (
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidRequestError,
    InvalidUpdateVersionError,
    NotCoordinatorLeaderError,
)
from fluss_py.types import NO_LEADER, LeaderAndIsr

INITIAL_LEADER_EPOCH = 0
INITIAL_BUCKET_EPOCH = 0

_EMPTY: frozenset[int] = frozenset()


def _candidates(replicas: Sequence[int], isr: Sequence[int], live: Set[int], shutting_down: Set[int]) -> list[int]:
    in_isr = set(isr)
    return [r for r in replicas if r in live and r in in_isr and r not in shutting_down]


def initial_leader(
    replicas: Sequence[int], live: Set[int], coordinator_epoch: int, shutting_down: Set[int] = _EMPTY
) -> LeaderAndIsr | None:
    """A new bucket: the first live replica leads, every live replica is in the ISR; None if none is live."""
    available = tuple(r for r in replicas if r in live and r not in shutting_down)
    if not available:
        return None
    return LeaderAndIsr(available[0], INITIAL_LEADER_EPOCH, available, coordinator_epoch, INITIAL_BUCKET_EPOCH)


def offline_leader(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    live: Set[int],
    coordinator_epoch: int,
    shutting_down: Set[int] = _EMPTY,
    *,
    unclean: bool = False,
) -> LeaderAndIsr | None:
    """The leader is gone (dead, or NO_LEADER): elect the first live ISR member in assignment order.

    The new ISR is the live part of the current one. Returns None when the current leader is still
    eligible, or when no live ISR member exists and ``unclean`` is False. With ``unclean`` the first
    live replica leads alone (it may lack acknowledged writes).
    """
    candidates = _candidates(replicas, current.isr, live, shutting_down)
    if current.leader in candidates:
        return None  # the leader is fine: no election (an ISR change is remove_from_isr's business)
    if candidates:
        leader = candidates[0]
        isr = tuple(r for r in current.isr if r in live)
        return current.with_leader(leader, isr, coordinator_epoch)
    if unclean:
        for r in replicas:
            if r in live and r not in shutting_down:
                return current.with_leader(r, (r,), coordinator_epoch)
    return None


def controlled_shutdown_leader(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    live: Set[int],
    shutting_down: Set[int],
    coordinator_epoch: int,
) -> LeaderAndIsr | None:
    """Move leadership away from a shutting-down leader; shutting-down servers leave the ISR.

    Returns None if no live ISR member outside ``shutting_down`` exists (the leader must stay).
    """
    candidates = _candidates(replicas, current.isr, live, shutting_down)
    if not candidates:
        return None
    isr = tuple(r for r in current.isr if r in live and r not in shutting_down)
    return current.with_leader(candidates[0], isr, coordinator_epoch)


def preferred_leader(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    live: Set[int],
    coordinator_epoch: int,
    shutting_down: Set[int] = _EMPTY,
) -> LeaderAndIsr | None:
    """Give leadership back to the first assigned replica when it is live, in the ISR and not leading."""
    if not replicas:
        return None
    preferred = replicas[0]
    if preferred == current.leader or preferred not in _candidates(replicas, current.isr, live, shutting_down):
        return None
    return current.with_leader(preferred, current.isr, coordinator_epoch)


def reassignment_leader(
    target_replicas: Sequence[int],
    current: LeaderAndIsr,
    live: Set[int],
    coordinator_epoch: int,
    shutting_down: Set[int] = _EMPTY,
) -> LeaderAndIsr | None:
    """Rebalance: the first replica of the target assignment that is live and in the ISR leads.

    Returns None if there is no such replica, or if it already leads.
    """
    candidates = _candidates(target_replicas, current.isr, live, shutting_down)
    if not candidates or candidates[0] == current.leader:
        return None
    return current.with_leader(candidates[0], current.isr, coordinator_epoch)


def remove_from_isr(current: LeaderAndIsr, server: int, coordinator_epoch: int) -> LeaderAndIsr | None:
    """``server`` died or is shutting down and could not be replaced as leader: take it out of the ISR.

    - not in the ISR: None (nothing to write).
    - the last ISR member: it stays (it holds every acknowledged write, so it must be able to lead
      again when it returns); if it led, the bucket becomes leaderless (NO_LEADER, leader_epoch + 1).
    - the leader (other members exist but none could be elected, e.g. all shutting down): leaderless,
      ``server`` leaves the ISR.
    - a follower: leaves the ISR (bucket_epoch + 1, same leader and leader_epoch).
    """
    if server not in current.isr:
        return None
    rest = tuple(r for r in current.isr if r != server)
    if current.leader == server:
        return current.with_leader(NO_LEADER, rest or current.isr, coordinator_epoch)
    if not rest:
        return None
    return current.with_isr(rest, coordinator_epoch)


def corrupt_replica(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    server: int,
    live: Set[int],
    coordinator_epoch: int,
    shutting_down: Set[int] = _EMPTY,
) -> LeaderAndIsr | None:
    """``server`` found a corrupt segment in its replica: it must not count as a full copy while it repairs
    itself from another. A leader hands leadership to the first other live ISR member (which leaves it out of
    the ISR); a follower leaves the ISR. None when it is not in the ISR, or when it is the only ISR member that
    could lead (a damaged copy beats none: it keeps leading, and the operator is told by its log)."""
    if server not in current.isr:
        return None
    if current.leader == server:
        return controlled_shutdown_leader(replicas, current, live, {*shutting_down, server}, coordinator_epoch)
    return remove_from_isr(current, server, coordinator_epoch)


def reconcile_liveness(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    live: Set[int],
    coordinator_epoch: int,
    shutting_down: Set[int] = _EMPTY,
    *,
    unclean: bool = False,
) -> LeaderAndIsr | None:
    """Bring one bucket in line with the live servers (a server died, joined, or a coordinator loaded).

    - live leader: dead members leave the ISR (bucket_epoch + 1); nothing else changes.
    - dead or no leader: offline election among live ISR members; if nobody can lead, the bucket is
      leaderless (NO_LEADER; leader_epoch + 1 if it had a leader) and its ISR keeps its live members,
      or, when none is live, every member: each holds all acknowledged writes and may lead on return.
    Returns None when the stored state is already right.
    """
    live_isr = tuple(r for r in current.isr if r in live)
    if current.leader != NO_LEADER and current.leader in live:
        return current.with_isr(live_isr, coordinator_epoch) if live_isr != current.isr else None
    elected = offline_leader(replicas, current, live, coordinator_epoch, shutting_down, unclean=unclean)
    if elected is not None:
        return elected
    if current.leader != NO_LEADER:
        return current.with_leader(NO_LEADER, live_isr or current.isr, coordinator_epoch)
    if live_isr and live_isr != current.isr:
        return current.with_isr(live_isr, coordinator_epoch)
    return None


@dataclass(frozen=True, slots=True)
class IsrChange:
    """A leader's AdjustIsr proposal for one bucket (the request fields)."""

    leader: int
    leader_epoch: int
    bucket_epoch: int
    new_isr: tuple[int, ...]


def adjust_isr(
    replicas: Sequence[int],
    current: LeaderAndIsr,
    change: IsrChange,
    live: Set[int],
    shutting_down: Set[int],
    coordinator_epoch: int,
) -> LeaderAndIsr:
    """Validate a leader's ISR change against the coordinator's current state; return the new state.

    Checks, in order (Kafka's validateAlterPartitionData / Fluss's validateLeaderAndIsr):
    1. request epochs newer than ours -> NOT_COORDINATOR_LEADER (we are a stale coordinator);
    2. older leader epoch, or the sender is not the leader -> FENCED_LEADER_EPOCH;
    3. the requested state equals the current one -> accepted as is (an idempotent retry);
    4. older bucket epoch -> INVALID_UPDATE_VERSION;
    5. empty ISR, leader missing from it, member not assigned, duplicates -> INVALID_REQUEST;
    6. an added member that is dead or shutting down -> INELIGIBLE_REPLICA.
    Raises the ApiError; the caller answers with its code for that bucket.
    """
    if change.leader_epoch > current.leader_epoch or change.bucket_epoch > current.bucket_epoch:
        raise NotCoordinatorLeaderError(
            f"request epochs (leader {change.leader_epoch}, bucket {change.bucket_epoch}) are newer than the "
            f"coordinator's (leader {current.leader_epoch}, bucket {current.bucket_epoch})"
        )
    if change.leader_epoch < current.leader_epoch or change.leader != current.leader:
        raise FencedLeaderEpochError(
            f"server {change.leader} at leader epoch {change.leader_epoch} is not the leader "
            f"(leader {current.leader}, epoch {current.leader_epoch})",
            leader_id=current.leader,
        )
    new_isr = tuple(change.new_isr)
    if new_isr == current.isr:
        return current
    if change.bucket_epoch < current.bucket_epoch:
        raise InvalidUpdateVersionError(f"bucket epoch {change.bucket_epoch} is older than {current.bucket_epoch}")
    if not new_isr or change.leader not in new_isr:
        raise InvalidRequestError(f"new ISR {list(new_isr)} must contain the leader {change.leader}")
    if len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(replicas):
        raise InvalidRequestError(f"new ISR {list(new_isr)} must be distinct assigned replicas {list(replicas)}")
    added = [r for r in new_isr if r not in current.isr]
    ineligible = [r for r in added if r not in live or r in shutting_down]
    if ineligible:
        raise IneligibleReplicaError(f"replicas {ineligible} are not live or are shutting down")
    return current.with_isr(new_isr, coordinator_epoch)
