"""The leader's ISR changes: proposals (from follower fetches and the shrink scan), the one batched AdjustIsr
sender, and the counts of applied shrinks and expansions for /metrics.

The decisions (who lags, whom to add back) are the ``Replica``'s (``shrink_proposal``,
``update_follower_fetch``, ``finish_isr_change``); this module queues, sends and applies them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from fluss_py.errors import ApiError, ErrorCode
from fluss_py.replica.messages import AdjustIsrItem
from fluss_py.replica.replica import Replica
from fluss_py.types import TableBucket

if TYPE_CHECKING:
    from fluss_py.replica.manager import ReplicaManager

log = logging.getLogger(__name__)

# Refusals of a repeated proposal that leave open whether an earlier attempt was written: the coordinator's
# state moved past the proposal's epochs (and its NotifyLeaderAndIsr for that move is on its way). Any other
# refusal of a proposal carrying the coordinator's current epochs proves nothing was written since.
_MAYBE_WRITTEN = frozenset({ErrorCode.INVALID_UPDATE_VERSION, ErrorCode.FENCED_LEADER_EPOCH})


class IsrChanges:
    """Owns the pending AdjustIsr proposals (one per led bucket, the newest wins) and the two loops that the
    ``ReplicaManager`` runs as owned tasks: the shrink scan (every lag/2, which also evicts idle fetch
    sessions) and the sender (woken by each proposal). Called from the loop only: by the read path (a follower
    fetch proposes an expansion), by the manager's role changes (``forget``) and by its own loops."""

    def __init__(self, manager: ReplicaManager, replicas: Mapping[TableBucket, Replica]) -> None:
        self._rm = manager
        self._replicas = replicas
        self._pending: dict[TableBucket, AdjustIsrItem] = {}
        self._uncertain: set[TableBucket] = set()  # a call carrying the proposal failed: it may be written
        self._wakeup: asyncio.Event | None = None
        self.send_failures = 0
        self.shrinks = 0  # ISR changes of led buckets (AdjustIsr answers or coordinator updates), /metrics
        self.expands = 0

    def start(self) -> None:
        """Make the sender's wake-up event (on the loop, before the loops run)."""
        self._wakeup = asyncio.Event()

    @property
    def started(self) -> bool:
        return self._wakeup is not None

    def forget(self, tb: TableBucket) -> None:
        """Drop ``tb``'s pending proposal (its role changed, or it left this server)."""
        self._pending.pop(tb, None)
        self._uncertain.discard(tb)

    def propose(self, replica: Replica, new_isr: tuple[int, ...]) -> None:
        """Queue an AdjustIsr; the replica counts the maximal ISR until the coordinator answers."""
        replica.start_isr_change(new_isr)
        self._pending[replica.table_bucket] = AdjustIsrItem(
            replica.table_bucket, replica.leader_epoch, replica.bucket_epoch, tuple(new_isr)
        )
        if self._wakeup is not None:
            self._wakeup.set()

    def maybe_shrink_isr(self) -> int:
        """One scan over all leaders: propose removing followers lagging > replica.lag.time.max, and those that
        stopped fetching for as long while KV reads wait for them (``ReadFence.stopped``: a caught-up follower
        of an idle bucket is in sync, but reads cannot be confirmed without it). Returns how many buckets got
        a proposal."""
        n = 0
        fence = self._rm.reads.fence
        for replica in self._replicas.values():
            proposal = replica.shrink_proposal(fence.stopped(replica))
            if proposal is not None:
                self.propose(replica, proposal)
                n += 1
        return n

    async def send_isr_changes(self) -> int:
        """Send every queued AdjustIsr in one request and apply the answers. Returns how many were sent.

        A failed call has an unknown outcome (the coordinator may have written the change and the answer been
        lost): the proposals stay pending — the HW keeps counting the maximal ISR — and are sent again, as they
        are, after the backoff; the coordinator answers a repeated proposal it already applied with its state.
        A stale-epoch refusal of a proposal that may have been written earlier proves nothing either: the
        maximal ISR is kept until the coordinator's NotifyLeaderAndIsr replaces it (docs/replication.md
        "ISR changes of unknown outcome")."""
        items, self._pending = list(self._pending.values()), {}
        if not items:
            return 0
        try:
            results = await self._rm.gateway.adjust_isr(self._rm.server_id, items)
        except ApiError as e:
            log.warning(
                "AdjustIsr for %d buckets failed (it may have been applied: sending it again): %s", len(items), e
            )
            self.send_failures += 1
            self._send_again(items)
            return len(items)
        for item in items:
            tb = item.table_bucket
            replica = self._replicas.get(tb)
            if replica is None or tb in self._pending:
                continue
            uncertain = tb in self._uncertain
            self._uncertain.discard(tb)
            result = results.get(tb)
            if result is not None and result.error is not None:
                log.info("bucket %s: AdjustIsr to %s refused: %s", tb, list(item.new_isr), result.error)
                if uncertain and result.error.code in _MAYBE_WRITTEN and replica.leader_epoch == item.leader_epoch:
                    log.warning(
                        "bucket %s: an earlier AdjustIsr to %s may have been written; counting ISR %s until the "
                        "coordinator says what it holds", tb, list(item.new_isr), list(replica.maximal_isr),
                    )  # fmt: skip
                    continue  # pending stays: make_leader (NotifyLeaderAndIsr) replaces it
            committed = result.leader_and_isr if result is not None and result.error is None else None
            isr_before = replica.isr
            if replica.finish_isr_change(item.leader_epoch, committed, self._rm.settings.isr_retry_backoff_s):
                self._rm.hw_maybe_moved(tb, replica)
            elif replica.flush_on_ack:  # a shrink may leave only members that already fsynced
                self._rm.durable_maybe_moved(tb, replica)
            self.isr_changed(tb, isr_before, replica.isr)
        return len(items)

    def _send_again(self, items: list[AdjustIsrItem]) -> None:
        """Queue the proposals of a failed call again, unchanged, for the buckets still waiting on them."""
        for item in items:
            tb = item.table_bucket
            replica = self._replicas.get(tb)
            if replica is None or tb in self._pending:
                continue
            if replica.is_leader and replica.leader_epoch == item.leader_epoch and replica.pending_isr == item.new_isr:
                self._pending[tb] = item
                self._uncertain.add(tb)
        if self._pending and self._wakeup is not None:
            self._wakeup.set()

    def isr_changed(self, tb: TableBucket, before: tuple[int, ...], after: tuple[int, ...]) -> None:
        """The ISR of led ``tb`` may have changed (an AdjustIsr answer, or the coordinator's word): counted for
        /metrics, and KV reads waiting for their ISR's confirmation look again (a member that left no longer
        holds them)."""
        self._rm.reads.fence.recheck(tb)
        if set(after) < set(before):
            self.shrinks += 1
        elif set(after) > set(before):
            self.expands += 1

    async def shrink_loop(self) -> None:
        while True:
            await asyncio.sleep(max(self._rm.settings.lag_time_s / 2, 0.01))  # read each time: it may change live
            self.maybe_shrink_isr()
            self._rm.reads.fetch_sessions.evict_idle()

    async def sender_loop(self) -> None:
        if self._wakeup is None:
            raise RuntimeError("IsrChanges.start() must run before its sender loop")
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            failures = self.send_failures
            await self.send_isr_changes()
            if self.send_failures != failures:
                await asyncio.sleep(self._rm.settings.isr_retry_backoff_s)
