"""Replica: state machine, epoch fencing, HW rules, min ISR, maximal ISR."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from fluss_py.common.state_machine import IllegalStateTransition
from fluss_py.errors import (
    FencedLeaderEpochError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    UnknownLeaderEpochError,
)
from fluss_py.log.config import LogConfig
from fluss_py.log.tablet import LogTablet
from fluss_py.replica.replica import VALID_PREVIOUS, LocalReplicaState, Replica
from fluss_py.types import LeaderAndIsr, TableBucket
from tests.unit.replica.fakes import FakeClock, batch, epochs

TB = TableBucket(1, 0)
REPLICAS = (1, 2, 3)


@pytest.fixture(autouse=True)
def _dirs(tmp_path: Path) -> None:
    global _ROOT
    _ROOT = tmp_path


_ROOT = Path()


def new_log(server_id: int) -> LogTablet:
    return LogTablet.open(_ROOT / f"s{server_id}-{TB}", TB, LogConfig())


def make(clock: FakeClock, server_id: int = 1, min_isr: int = 2) -> Replica:
    r = Replica(TB, server_id, new_log(server_id), min_insync_replicas=min_isr, lag_time_s=10.0, clock=clock)
    r.transition(LocalReplicaState.ONLINE)
    return r


def lai(leader=1, epoch=0, isr=REPLICAS, bucket_epoch=0) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, tuple(isr), 1, bucket_epoch)


@pytest.mark.parametrize(("source", "target"), list(itertools.product(LocalReplicaState, LocalReplicaState)))
def test_transition_table(source: LocalReplicaState, target: LocalReplicaState) -> None:
    r = Replica(TB, 1, new_log(1), min_insync_replicas=1, lag_time_s=1.0, clock=FakeClock())
    r.state = source
    if source in VALID_PREVIOUS[target]:
        r.transition(target)
        assert r.state is target
    else:
        with pytest.raises(IllegalStateTransition):
            r.transition(target)
        assert r.state is source


def test_states_follow_the_design_diagram() -> None:
    assert VALID_PREVIOUS[LocalReplicaState.ONLINE] == {LocalReplicaState.NEW, LocalReplicaState.OFFLINE}
    assert LocalReplicaState.NEW not in VALID_PREVIOUS[LocalReplicaState.LEADER]  # not serving before the log is loaded
    assert LocalReplicaState.OFFLINE not in VALID_PREVIOUS[LocalReplicaState.FOLLOWER]


def test_make_leader_assigns_the_new_epoch_at_the_current_leo() -> None:
    clock = FakeClock()
    r = make(clock)
    r.make_leader(lai(isr=(1,)), REPLICAS)
    r.append_as_leader(batch(b"a", b"b"), acks=1)
    r.make_follower(lai(leader=2, epoch=1), REPLICAS)
    assert r.make_leader(lai(epoch=2), REPLICAS) is True
    assert epochs(r.log) == [(0, 0), (2, 2)]
    assert r.leader_epoch_start_offset == 2


def test_stale_leader_epoch_is_fenced_and_changes_nothing() -> None:
    r = make(FakeClock())
    r.make_leader(lai(epoch=3), REPLICAS)
    with pytest.raises(FencedLeaderEpochError):
        r.make_follower(lai(leader=2, epoch=2), REPLICAS)
    assert r.is_leader and r.leader_epoch == 3


def test_same_epoch_resend_is_idempotent_and_newer_bucket_epoch_updates_isr() -> None:
    r = make(FakeClock())
    assert r.make_leader(lai(epoch=3), REPLICAS) is True
    assert r.make_leader(lai(epoch=3), REPLICAS) is False
    assert r.make_leader(lai(epoch=3, isr=(1, 2), bucket_epoch=1), REPLICAS) is False
    assert r.isr == (1, 2) and r.bucket_epoch == 1


def test_request_epoch_checks() -> None:
    r = make(FakeClock())
    r.make_leader(lai(epoch=3), REPLICAS)
    r.check_leader(3)
    r.check_leader(-1)
    with pytest.raises(FencedLeaderEpochError):
        r.check_leader(2)
    with pytest.raises(UnknownLeaderEpochError):
        r.check_leader(4)


def test_only_the_leader_appends() -> None:
    r = make(FakeClock())
    r.make_follower(lai(leader=2), REPLICAS)
    with pytest.raises(NotLeaderOrFollowerError) as e:
        r.append_as_leader(batch(b"x"), acks=1)
    assert e.value.leader_id == 2
    assert r.log_end_offset == 0


def test_acks_all_below_min_isr_rejected_before_append() -> None:
    r = make(FakeClock(), min_isr=2)
    r.make_leader(lai(isr=(1,)), REPLICAS)
    with pytest.raises(NotEnoughReplicasError):
        r.append_as_leader(batch(b"x"), acks=-1)
    assert r.log_end_offset == 0
    r.append_as_leader(batch(b"x"), acks=1)  # acks=1 still works
    assert r.log_end_offset == 1


def test_min_isr_is_clamped_to_the_replication_factor() -> None:
    r = make(FakeClock(), min_isr=2)
    r.make_leader(lai(isr=(1,)), (1,))
    r.append_as_leader(batch(b"x"), acks=-1)
    assert r.high_watermark == 1


def test_hw_is_min_leo_over_isr_and_never_moves_backwards() -> None:
    clock = FakeClock()
    r = make(clock)
    r.make_leader(lai(isr=(1, 2)), REPLICAS)
    r.append_as_leader(batch(b"a", b"b", b"c"), acks=1)
    assert r.high_watermark == 0  # follower 2's LEO unknown
    r.update_follower_fetch(2, 2)
    assert r.high_watermark == 2
    r.update_follower_fetch(2, 3)
    assert r.high_watermark == 3
    # Follower 3 (LEO 1) put into the ISR by a committed change must not pull the HW back.
    r.update_follower_fetch(3, 1)
    r.finish_isr_change(0, lai(isr=(1, 2, 3), bucket_epoch=1))
    assert r.isr == (1, 2, 3)
    assert r.high_watermark == 3
    r.update_follower_fetch(2, 1)  # a stale/older fetch offset
    assert r.high_watermark == 3


def test_follower_joins_isr_only_at_hw_and_current_epoch_start() -> None:
    r = make(FakeClock())
    r.make_leader(lai(isr=(1, 2)), REPLICAS)
    r.append_as_leader(batch(b"a", b"b"), acks=1)
    r.update_follower_fetch(2, 2)
    assert r.high_watermark == 2
    assert r.update_follower_fetch(3, 1) == (False, None)
    assert r.update_follower_fetch(3, 2) == (False, (1, 2, 3))


def test_maximal_isr_during_pending_shrink_holds_the_hw() -> None:
    clock = FakeClock()
    r = make(clock)
    r.make_leader(lai(isr=(1, 2, 3)), REPLICAS)
    r.update_follower_fetch(2, 0)
    r.update_follower_fetch(3, 0)
    r.append_as_leader(batch(b"a"), acks=1)
    r.update_follower_fetch(2, 1)
    clock.advance(11)
    r.update_follower_fetch(2, 1)
    proposal = r.shrink_proposal()
    assert proposal == (1, 2)
    r.start_isr_change(proposal)
    r.update_follower_fetch(2, 1)
    assert r.high_watermark == 0  # 3 still counts until the coordinator accepts
    assert r.shrink_proposal() is None  # one change in flight at a time
    assert r.finish_isr_change(0, lai(isr=(1, 2), bucket_epoch=1)) is True
    assert r.high_watermark == 1


def test_refused_isr_change_restores_the_committed_isr_and_backs_off() -> None:
    clock = FakeClock()
    r = make(clock)
    r.make_leader(lai(isr=(1, 2)), REPLICAS)
    r.start_isr_change((1, 2, 3))
    assert r.maximal_isr == (1, 2, 3)
    r.finish_isr_change(0, None, retry_after_s=0.5)
    assert r.maximal_isr == (1, 2) and r.pending_isr is None
    assert r.update_follower_fetch(3, 0) == (False, None)  # no new proposal during the back-off
    clock.advance(0.5)
    assert r.update_follower_fetch(3, 0) == (False, (1, 2, 3))


def test_follower_hw_is_min_of_leader_hw_and_own_leo() -> None:
    leader = make(FakeClock(), server_id=1)
    leader.make_leader(lai(isr=(1,)), (1, 2))
    leader.append_as_leader(batch(b"a", b"b"), acks=1)
    f = make(FakeClock(), server_id=2)
    f.make_follower(lai(isr=(1,)), (1, 2))
    data = leader.log.read(0, 1 << 20, 2).records
    f.append_as_follower(data, leader_hw=5)
    assert f.high_watermark == 2 and epochs(f.log) == [(0, 0)]


def test_new_assignment_in_the_same_term_tracks_the_added_follower() -> None:
    r = make(FakeClock())
    r.make_leader(lai(isr=(1, 2)), (1, 2))
    r.append_as_leader(batch(b"a"), acks=1)
    r.update_follower_fetch(2, 1)
    assert r.make_leader(lai(isr=(1, 2), bucket_epoch=1), (1, 2, 4)) is False
    assert r.update_follower_fetch(4, 1) == (False, (1, 2, 4))
    assert r.followers[2].log_end_offset == 1  # progress of existing followers kept


def test_same_epoch_notify_with_a_new_replica_list_is_applied_after_an_adjust_isr_answer() -> None:
    """The AdjustIsr answer carries the reassignment's bucket epoch (not its replica list); the
    NotifyLeaderAndIsr of that same epoch must still make the leader track the added follower."""
    r = make(FakeClock())
    r.make_leader(lai(isr=(1, 2)), (1, 2))
    r.append_as_leader(batch(b"a"), acks=1)
    r.update_follower_fetch(2, 1)
    r.start_isr_change((1, 2))
    assert r.finish_isr_change(0, lai(isr=(1, 2), bucket_epoch=1)) is False  # coordinator is at epoch 1
    assert r.bucket_epoch == 1 and r.replicas == (1, 2)
    assert r.make_leader(lai(isr=(1, 2), bucket_epoch=1), (1, 2, 4)) is False  # same term and epoch
    assert r.replicas == (1, 2, 4) and r.isr == (1, 2)
    assert r.update_follower_fetch(4, 1) == (False, (1, 2, 4))
    assert r.followers[2].log_end_offset == 1
    assert r.make_leader(lai(isr=(1, 2), bucket_epoch=1), (1, 2, 4)) is False  # a resend changes nothing
    assert set(r.followers) == {2, 4}


def test_same_epoch_notify_with_a_new_replica_list_updates_a_follower() -> None:
    f = make(FakeClock(), server_id=2)
    assert f.make_follower(lai(isr=(1, 2), bucket_epoch=1), (1, 2)) is True
    assert f.make_follower(lai(isr=(1, 2), bucket_epoch=1), (1, 2, 4)) is False  # no refetch
    assert f.replicas == (1, 2, 4) and f.min_isr == 2
