"""Replica: one bucket on this tablet server — its role, leader epoch, ISR, follower progress and HW.

Lifecycle (per bucket, docs/design.md)::

    New ──► Online ──► Leader ◄──► Follower
     │        ▲          │            │
     │        │          ▼            ▼
     └──────► Offline ◄───────────────┘        Offline ──► Online (reloaded)

``Leader -> Leader`` and ``Follower -> Follower`` are legal: a new leader epoch or a new ISR for the same role.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import Enum

from fluss_py.common.state_machine import check_transition
from fluss_py.errors import (
    CorruptMessageError,
    FencedLeaderEpochError,
    InvalidRecordBatchError,
    InvalidRowError,
    InvalidTimestampError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    TableTypeMismatchError,
    UnknownLeaderEpochError,
)
from fluss_py.kv.tablet import KvTablet
from fluss_py.log.results import LogAppendInfo
from fluss_py.log.tablet import LogTablet
from fluss_py.replica import isr as isr_rules
from fluss_py.replica.isr import FollowerProgress
from fluss_py.replica.messages import NO_EPOCH, EpochEndOffset
from fluss_py.types import LeaderAndIsr, TableBucket

log = logging.getLogger(__name__)

ACKS_ALL = -1


REFUSED_WARNING_INTERVAL_S = 10.0


class LocalReplicaState(Enum):
    NEW = "New"
    ONLINE = "Online"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    OFFLINE = "Offline"


VALID_PREVIOUS: dict[LocalReplicaState, frozenset[LocalReplicaState]] = {
    LocalReplicaState.NEW: frozenset(),
    LocalReplicaState.ONLINE: frozenset({LocalReplicaState.NEW, LocalReplicaState.OFFLINE}),
    LocalReplicaState.LEADER: frozenset(
        {LocalReplicaState.ONLINE, LocalReplicaState.FOLLOWER, LocalReplicaState.LEADER}
    ),
    LocalReplicaState.FOLLOWER: frozenset(
        {LocalReplicaState.ONLINE, LocalReplicaState.LEADER, LocalReplicaState.FOLLOWER}
    ),
    LocalReplicaState.OFFLINE: frozenset(
        {
            LocalReplicaState.NEW,
            LocalReplicaState.ONLINE,
            LocalReplicaState.LEADER,
            LocalReplicaState.FOLLOWER,
            LocalReplicaState.OFFLINE,
        }
    ),
}


class Replica:
    """One bucket's replica: the only mutator of its ``LogTablet`` (which is synchronous and lock-free).

    Owned by ``ReplicaManager`` and called only from the event-loop thread (manager handlers, the ISR task,
    the replica fetcher task). No method awaits, so each one is atomic with respect to the others.
    Leader side: follower progress, HW = min LEO over the maximal ISR (never backwards), ISR proposals.
    Follower side: appends and truncation driven by the ``ReplicaFetcher``.
    """

    def __init__(
        self,
        table_bucket: TableBucket,
        server_id: int,
        log_tablet: LogTablet,
        *,
        min_insync_replicas: int,
        lag_time_s: float,
        clock: Callable[[], float],
    ) -> None:
        self.table_bucket = table_bucket
        self.server_id = server_id
        self.log = log_tablet
        self.min_insync_replicas = min_insync_replicas
        self.lag_time_s = lag_time_s
        self._clock = clock
        self.state = LocalReplicaState.NEW
        self.leader_id = -1
        self.leader_epoch = NO_EPOCH
        self.bucket_epoch = -1
        self.isr: tuple[int, ...] = ()
        self.replicas: tuple[int, ...] = ()
        self.adding_replicas: tuple[int, ...] = ()  # a rebalance move is adding them (docs/rebalance.md §6)
        self.pending_isr: tuple[int, ...] | None = None
        self.isr_retry_at = 0.0
        self.followers: dict[int, FollowerProgress] = {}
        self.leader_epoch_start_offset = 0
        self.durable_offset = 0  # leader, log.flush.on-ack: fsynced on every maximal-ISR member below it
        self._refused_batches = 0  # malformed batches refused as leader since the last warning about them
        self._refused_warned_at: float | None = None
        # told after every state change (the replica manager's led-size report: leadership came or went)
        self.on_transition: Callable[[Replica], None] | None = None
        self.kv: KvTablet | None = None  # a primary-key bucket's KV, beside the log (replica/kv_apply.py)

    def __repr__(self) -> str:
        return f"Replica({self.table_bucket}, {self.state.value}, epoch={self.leader_epoch}, isr={self.isr})"

    # ------------------------------------------------------------ state

    def transition(self, target: LocalReplicaState) -> None:
        check_transition(f"bucket {self.table_bucket}", self.state, target, VALID_PREVIOUS[target], log)
        self.state = target
        if self.on_transition is not None:
            self.on_transition(self)

    @property
    def is_leader(self) -> bool:
        return self.state is LocalReplicaState.LEADER

    def is_follower_of(self, leader_id: int, leader_epoch: int) -> bool:
        return (
            self.state is LocalReplicaState.FOLLOWER
            and self.leader_id == leader_id
            and self.leader_epoch == leader_epoch
        )

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        return isr_rules.maximal_isr(self.isr, self.pending_isr)

    @property
    def min_isr(self) -> int:
        return isr_rules.effective_min_isr(self.min_insync_replicas, len(self.replicas) or 1)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def flush_on_ack(self) -> bool:
        """log.flush.on-ack: acks=all waits for the durable offset, not the HW."""
        return bool(getattr(self.log.config, "flush_on_ack", False))

    @property
    def ack_offset(self) -> int:
        """What an acks=all produce waits to pass: the HW, or the durable offset with log.flush.on-ack."""
        return self.durable_offset if self.flush_on_ack else self.log.high_watermark

    def _check_new_epoch(self, lai: LeaderAndIsr) -> bool:
        """True when ``lai`` is new to us; raises FENCED_LEADER_EPOCH when it is older than what we know."""
        if lai.leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"bucket {self.table_bucket}: leader epoch {lai.leader_epoch} < current {self.leader_epoch}"
            )
        return lai.leader_epoch > self.leader_epoch or lai.bucket_epoch > self.bucket_epoch

    def make_leader(self, lai: LeaderAndIsr, replicas: tuple[int, ...]) -> bool:
        """Become (or stay) leader. Returns True when a new leader epoch started (a new term)."""
        if not self._check_new_epoch(lai) and self.state is LocalReplicaState.LEADER:
            if tuple(replicas) != self.replicas:  # same epochs, new assignment: docs/replication.md "Assignment"
                self._track_assignment(replicas)
                log.info("bucket %s: replicas are now %s (same epochs)", self.table_bucket, self.replicas)
            return False
        new_term = lai.leader_epoch > self.leader_epoch or self.state is not LocalReplicaState.LEADER
        self.transition(LocalReplicaState.LEADER)
        self.leader_id, self.replicas = self.server_id, tuple(replicas)
        self.isr, self.bucket_epoch, self.pending_isr = tuple(lai.isr), lai.bucket_epoch, None
        if new_term:
            self.leader_epoch = lai.leader_epoch
            now, leo = self._clock(), self.log.log_end_offset
            # KAFKA-7415: the new epoch starts at our LEO at once, before any write of this term.
            latest = self.log.latest_epoch
            if latest is None or latest < lai.leader_epoch:
                # starts at the LEO: recovery drops such an entry, so the file waits for the term's first batch
                self.log.epoch_cache.assign(lai.leader_epoch, leo, write=False)
            self.leader_epoch_start_offset = leo
            if self.kv is not None:
                self.kv.become_leader(self.log)  # the pre-write buffer, from [applied, LEO)
            self.durable_offset = 0  # followers' flushed offsets are unknown until they fetch in this term
            self.followers = {
                r: FollowerProgress(last_caught_up_time=now if r in self.isr else 0.0)
                for r in self.replicas
                if r != self.server_id
            }
            log.info(
                "bucket %s: leader at epoch %d, LEO %d, ISR %s", self.table_bucket, lai.leader_epoch, leo, self.isr
            )
        else:  # same term, maybe a new assignment: track added followers, forget removed ones
            self._track_assignment(self.replicas)
        self.maybe_increment_hw()
        return new_term

    def _track_assignment(self, replicas: tuple[int, ...]) -> None:
        """Leader, same term: take the replica list, track added followers, forget removed ones (the
        progress of kept followers, the ISR and an in-flight ISR change are kept)."""
        now = self._clock()
        self.replicas = tuple(replicas)
        self.followers = {
            r: self.followers.get(r) or FollowerProgress(last_caught_up_time=now if r in self.isr else 0.0)
            for r in self.replicas
            if r != self.server_id
        }

    def make_follower(self, lai: LeaderAndIsr, replicas: tuple[int, ...]) -> bool:
        """Become (or stay) follower of ``lai.leader``. True when the fetcher must (re)start truncating."""
        if not self._check_new_epoch(lai) and self.state is LocalReplicaState.FOLLOWER:
            self.replicas = tuple(replicas)  # same epochs: at most a new assignment (no refetch)
            return False
        restart = (
            self.state is not LocalReplicaState.FOLLOWER
            or lai.leader_epoch > self.leader_epoch
            or lai.leader != self.leader_id
        )
        self.transition(LocalReplicaState.FOLLOWER)
        if self.kv is not None:
            self.kv.become_follower()
        self.leader_id, self.leader_epoch, self.bucket_epoch = lai.leader, lai.leader_epoch, lai.bucket_epoch
        self.isr, self.replicas, self.pending_isr = tuple(lai.isr), tuple(replicas), None
        self.followers = {}
        if restart:
            log.info(
                "bucket %s: follower of %d at epoch %d, LEO %d",
                self.table_bucket,
                lai.leader,
                lai.leader_epoch,
                self.log.log_end_offset,
            )
        return restart

    def go_offline(self) -> None:
        self.transition(LocalReplicaState.OFFLINE)
        if self.kv is not None:
            self.kv.become_follower()
        self.followers, self.pending_isr = {}, None

    # ------------------------------------------------------------ checks

    def check_leader(self, current_leader_epoch: int = NO_EPOCH) -> None:
        """Raise unless we lead this bucket (and the caller's leader epoch matches, when given)."""
        if self.state is not LocalReplicaState.LEADER:
            raise NotLeaderOrFollowerError(
                f"server {self.server_id} is not the leader of bucket {self.table_bucket}", leader_id=self.leader_id
            )
        self.check_epoch(current_leader_epoch)

    def check_epoch(self, current_leader_epoch: int) -> None:
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"bucket {self.table_bucket}: request epoch {current_leader_epoch} < leader epoch {self.leader_epoch}"
            )
        raise UnknownLeaderEpochError(
            f"bucket {self.table_bucket}: request epoch {current_leader_epoch} > leader epoch {self.leader_epoch}"
        )

    # ------------------------------------------------------------ leader side

    def append_as_leader(self, records: bytes, acks: int) -> LogAppendInfo:
        """Append a client's batches (a primary-key bucket: KV batches, appended as their changelog); acks=all
        below min ISR is refused before anything is written."""
        self.check_leader()
        if acks == ACKS_ALL and len(self.isr) < self.min_isr:
            raise NotEnoughReplicasError(
                f"bucket {self.table_bucket}: ISR {list(self.isr)} is smaller than min.insync.replicas {self.min_isr}"
            )
        try:
            if self.kv is not None:
                info = self.kv.append_as_leader(self.log, records, self.leader_epoch)
            else:
                info = self.log.append_as_leader(records, self.leader_epoch)
        except (
            CorruptMessageError, InvalidRecordBatchError, InvalidTimestampError, InvalidRowError, TableTypeMismatchError
        ) as e:  # fmt: skip
            self._refused(e)
            raise
        self.maybe_increment_hw()
        return info

    def _refused(self, e: Exception) -> None:
        """Warn about a malformed batch a producer sent (a client bug, or someone probing): at most one line
        per bucket every ``REFUSED_WARNING_INTERVAL_S``, counting the others."""
        self._refused_batches += 1
        now = self._clock()
        if self._refused_warned_at is not None and now - self._refused_warned_at < REFUSED_WARNING_INTERVAL_S:
            return
        log.warning(
            "bucket %s: refused %d malformed batch(es) from producers, nothing written; latest: %s",
            self.table_bucket,
            self._refused_batches,
            e,
        )
        self._refused_batches, self._refused_warned_at = 0, now

    def maybe_increment_hw(self) -> bool:
        """HW := min LEO over the maximal ISR, only ever forwards. True when it moved."""
        if self.state is not LocalReplicaState.LEADER:
            return False
        leos = (
            self.followers[r].log_end_offset if r in self.followers else isr_rules.UNKNOWN_OFFSET
            for r in self.maximal_isr
            if r != self.server_id
        )
        candidate = isr_rules.high_watermark_candidate(self.log.log_end_offset, leos)
        if candidate > self.log.high_watermark:
            return bool(self.log.update_high_watermark(candidate))
        return False

    def maybe_advance_durable(self) -> bool:
        """Durable offset := min(HW, our recovery point, flushed offsets of the maximal ISR), only ever
        forwards (docs/replication.md "Durable acknowledgement"). True when it moved."""
        if self.state is not LocalReplicaState.LEADER:
            return False
        flushed = (
            self.followers[r].flushed_offset if r in self.followers else isr_rules.UNKNOWN_OFFSET
            for r in self.maximal_isr
            if r != self.server_id
        )
        candidate = isr_rules.durable_offset_candidate(self.log.high_watermark, self.log.recovery_point, flushed)
        if candidate > self.durable_offset:
            self.durable_offset = candidate
            return True
        return False

    def read(self, fetch_offset: int, max_bytes: int, *, for_follower: bool) -> bytes:
        """Whole batches from ``fetch_offset``: below the HW for clients, below the LEO for followers.
        ``max_bytes`` <= 0 reads nothing but still checks the offset (OFFSET_OUT_OF_RANGE names the range)."""
        lg = self.log
        upper = lg.log_end_offset if for_follower else lg.high_watermark
        if max_bytes <= 0:
            if not lg.log_start_offset <= fetch_offset <= lg.log_end_offset:
                lg.read(fetch_offset, 1, upper)  # raises with the valid range
            return b""
        return bytes(lg.read(fetch_offset, max_bytes, upper).records)

    def diverging_epoch(self, fetch_offset: int, last_fetched_epoch: int) -> EpochEndOffset | None:
        """KIP-595 check of a follower fetch: where its last epoch ends here, if its log goes beyond that."""
        if last_fetched_epoch < 0:
            return None
        epoch, end = self.log.end_offset_for_epoch(last_fetched_epoch)
        if end < 0:
            return None
        if epoch < last_fetched_epoch or end < fetch_offset:
            return EpochEndOffset(epoch, end)
        return None

    def is_throttled(self, follower_id: int) -> bool:
        """Leader: ``follower_id`` is not in the maximal ISR and a replica a rebalance move is adding (the
        coordinator's last NotifyLeaderAndIsr named it in ``adding_replicas``): its fetches are throttled
        (docs/rebalance.md §6). A follower back from a restart is assigned and not being added: never
        throttled. A server not assigned as far as we know (a move's target told before us) is not served at
        all (REPLICA_NOT_ASSIGNED, docs/peer-trust.md) until we are told."""
        return (
            self.state is LocalReplicaState.LEADER
            and follower_id not in self.maximal_isr
            and follower_id in self.adding_replicas
        )

    def update_follower_fetch(
        self, follower_id: int, fetch_offset: int, flushed_offset: int = isr_rules.UNKNOWN_OFFSET
    ) -> tuple[bool, tuple[int, ...] | None]:
        """Record a follower fetch (and the offset below which it reports its log fsynced). Returns (HW moved,
        ISR to propose when the follower may join, else None). With log.flush.on-ack a follower joins only
        once it has also fsynced up to the HW (docs/replication.md "Durable acknowledgement")."""
        if follower_id not in self.followers:
            return False, None
        leo = self.log.log_end_offset
        self.followers[follower_id] = isr_rules.record_fetch(
            self.followers[follower_id], fetch_offset, leo, self._clock(), flushed_offset
        )
        proposal = None
        durable_enough = not self.flush_on_ack or min(flushed_offset, fetch_offset) >= self.log.high_watermark
        if (
            durable_enough
            and self._may_propose()
            and isr_rules.may_join_isr(
                follower_id,
                self.replicas,
                self.maximal_isr,
                fetch_offset,
                self.log.high_watermark,
                self.leader_epoch_start_offset,
            )
        ):
            proposal = isr_rules.expanded_isr(self.isr, follower_id, self.replicas)
        return self.maybe_increment_hw(), proposal

    def note_caught_up(self, follower_id: int, offset: int, until: float) -> None:
        """A fetch session of ``follower_id`` kept polling at ``offset`` (the LEO before an append) until
        ``until`` without this bucket being re-read (docs/replication.md "Fetch sessions")."""
        progress = self.followers.get(follower_id)
        if progress is not None:
            self.followers[follower_id] = isr_rules.polled_caught_up(progress, offset, until)

    def shrink_proposal(self, stopped: tuple[int, ...] = ()) -> tuple[int, ...] | None:
        """The ISR without followers lagging more than replica.lag.time.max, nor ``stopped`` ones (KV reads wait
        for them: ``ReadFence.stopped``). None: nothing to do, or a change in flight."""
        if self.state is not LocalReplicaState.LEADER or not self._may_propose():
            return None
        lag, leo = self.lag_time_s, self.log.log_end_offset
        lagging = isr_rules.out_of_sync_replicas(self.isr, self.server_id, self.followers, leo, self._clock(), lag)
        lagging += tuple(r for r in stopped if r in self.isr and r != self.server_id and r not in lagging)
        if not lagging:
            return None
        log.info("bucket %s: followers %s lag (or stopped fetching) more than %.1fs, shrinking ISR",
                 self.table_bucket, lagging, lag)  # fmt: skip
        return isr_rules.shrunk_isr(self.isr, lagging)

    def _may_propose(self) -> bool:
        """One ISR change in flight at a time, and none during the back-off after a refusal."""
        return self.pending_isr is None and self._clock() >= self.isr_retry_at

    def start_isr_change(self, new_isr: tuple[int, ...]) -> None:
        """An AdjustIsr is in flight: until answered the HW counts the maximal ISR (old + new)."""
        self.pending_isr = tuple(new_isr)

    def finish_isr_change(self, leader_epoch: int, committed: LeaderAndIsr | None, retry_after_s: float = 0.0) -> bool:
        """Apply the coordinator's answer (None: refused or failed: no new proposal for ``retry_after_s``).
        True when the HW moved."""
        if self.state is not LocalReplicaState.LEADER or leader_epoch != self.leader_epoch:
            return False
        self.pending_isr = None
        if committed is None:
            self.isr_retry_at = self._clock() + retry_after_s
        if (
            committed is not None
            and committed.leader_epoch == self.leader_epoch
            and committed.bucket_epoch > self.bucket_epoch
        ):
            self.isr, self.bucket_epoch = tuple(committed.isr), committed.bucket_epoch
            log.info("bucket %s: ISR is now %s (bucket epoch %d)", self.table_bucket, self.isr, self.bucket_epoch)
        return self.maybe_increment_hw()

    # ------------------------------------------------------------ follower side

    def append_as_follower(self, records: bytes, leader_hw: int) -> bool:
        """Append fetched batches (offsets and epochs kept) and take HW = min(leader HW, LEO). True if HW moved."""
        if records:
            self.log.append_as_follower(records)
        return self.update_follower_hw(leader_hw)

    def update_follower_hw(self, leader_hw: int) -> bool:
        hw = min(leader_hw, self.log.log_end_offset)
        if hw > self.log.high_watermark:
            return bool(self.log.update_high_watermark(hw))
        return False

    def truncate_to(self, offset: int) -> None:
        """Drop everything from ``offset`` on (the epoch cache too, even when nothing is in the log there)."""
        if offset < self.log.high_watermark:
            log.warning(
                "bucket %s: truncating to %d, below the HW %d", self.table_bucket, offset, self.log.high_watermark
            )
        if offset < self.log.log_end_offset:
            log.info("bucket %s: truncating from LEO %d to %d", self.table_bucket, self.log.log_end_offset, offset)
            self._truncate(self.log.truncate_to, offset)
        else:
            self.log.epoch_cache.truncate_from_end(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        log.info("bucket %s: log restarts at %d (leader's log start)", self.table_bucket, offset)
        self._truncate(self.log.truncate_fully_and_start_at, offset)

    def truncate_at_corruption(self) -> None:
        """Cut the log where its recorded corrupt batch starts (a follower's repair: ``log_faults``)."""
        self._truncate(lambda _: self.log.truncate_at_corruption(), None)

    def _truncate(self, cut: Callable[[int], None], offset: int | None) -> None:
        """Every truncation of the log goes through here: a KV undoes what it applied of the cut part first
        (``None``: a cut at a corrupt batch, whose bytes cannot be read back: the KV is rebuilt if needed)."""
        if self.kv is not None and offset is not None:
            self.kv.before_truncate(self.log, offset)
        cut(offset)  # type: ignore[arg-type]
        if self.kv is not None:
            self.kv.after_truncate(self.log, corrupt=offset is None)
