"""The TableProcessor's membership handlers: what a tablet server's death or arrival does to leaderships and ISRs.

Part of ``TableProcessor`` (a mixin: the same object, the same single writer of ``ClusterView``, on the event
loop's task); ``handlers.MetadataHandlers`` calls ``on_servers_changed`` after the live set changed
(docs/control-plane.md §1.1).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from fluss_py import config as cfg
from fluss_py.coordinator import election
from fluss_py.coordinator.events import DeadLeaveIsrs
from fluss_py.coordinator.view_store import (
    Change,
)
from fluss_py.types import TableBucket

# not __name__: the runbook shows its lines by this name, docs/coordinator-ha.md (the membership lines)
log = logging.getLogger("fluss_py.coordinator.CoordinatorEventProcessor")

LEAVE_ISRS_CHUNK = 2000  # buckets per event of a death's second round (its writes, tell and sends)


class MembershipHandlers:
    """The membership half of ``TableProcessor`` (see the module docstring)."""

    # ---------------------------------------------------------------- membership
    async def on_servers_changed(self, joined: dict[int, Any], died: list[int]) -> None:
        """Listener of MetadataHandlers: runs on the loop after the live set changed."""
        for sid in died:
            self.channel.remove(sid)
            self.view.shutting_down.discard(sid)
        for sid in joined:
            self.view.shutting_down.discard(sid)
            self.view.failed_replicas.forget_server(sid)
        for node in self.nodes().values():
            self.channel.add(node)
        self._membership_seen = True
        if not self._loaded:
            await self.load_tables()  # starts up, now that the live servers are known
            return
        if not self._started:
            await self._startup()
            return
        await self._leave_isrs()  # a death's second round before any other membership change (dead first)
        self._not_live = set(died)
        try:
            await self._servers_died(died)
        finally:
            self._not_live = set()
        await self._servers_joined(set(joined))
        for listener in self.listeners:
            await listener.on_servers_changed(set(joined), list(died))

    async def _startup(self) -> None:
        """First reconciliation of a leadership: elect what needs it, then tell every live server everything."""
        self._started = True
        batch = self._batch()
        changed = await self._reconcile(list(self.view.buckets))
        live = self.live()
        batch.update_metadata(live)
        for tb in sorted(self.view.buckets):
            self._set_states(tb)
            self._notify(batch, tb)
        self._send(batch)
        log.info(
            "Coordinator leader started: %d live tablet server(s), %d bucket(s), %d leadership change(s)",
            len(live),
            len(self.view.buckets),
            len(changed),
        )
        for listener in self.listeners:
            await listener.on_started()

    async def _reconcile(self, tbs: Iterable[TableBucket]) -> list[Change]:
        """Initial election for New buckets, reconcile_liveness for the others; write; return the changes."""
        all_live, shutting = self.live(), self.view.shutting_down
        changes: list[Change] = []
        unclean: dict[int, bool] = {}  # per table, looked up once
        for tb in sorted(set(tbs)):
            bucket = self.view.buckets[tb]
            failed = self.view.failed_on(tb)
            live = all_live - failed if failed else all_live
            if bucket.leader_and_isr is None:
                new = election.initial_leader(bucket.replicas, live, self.epoch, shutting)
            else:
                table_unclean = unclean.get(tb.table_id)
                if table_unclean is None:
                    table_unclean = unclean[tb.table_id] = self.unclean_for(tb.table_id)
                new = election.reconcile_liveness(
                    bucket.replicas, bucket.leader_and_isr, live, self.epoch, shutting, unclean=table_unclean
                )
            if new is not None:
                changes.append((tb, new))
        return await self.store.write_leader_isr(changes)

    def unclean_for(self, table_id: int) -> bool:
        """The table's ``unclean.leader.election.enable`` property, else the coordinator's default."""
        info = self.view.tables.get(table_id)
        raw = info.properties.get(cfg.UNCLEAN_LEADER_ELECTION.key) if info is not None else None
        return self._unclean if raw is None else bool(cfg.UNCLEAN_LEADER_ELECTION.parse(raw))

    async def _servers_died(self, died: list[int]) -> None:
        """Two rounds (docs/control-plane.md §6, "Tablet server died"): the buckets the dead servers led get a
        leader now; taking them out of the ISRs of the buckets they followed is a follow-up event, so that the
        events which waited (clients' GetMetadata among them) see every bucket led first."""
        if not died:
            return
        dead = set(died)
        affected: set[TableBucket] = set()
        leaderless: set[TableBucket] = set()
        for tb, bucket in self.view.buckets.items():  # one pass (20,000 buckets: no sort, no second lookup)
            if dead.isdisjoint(bucket.replicas):
                continue
            affected.add(tb)
            lai = bucket.leader_and_isr
            if lai is None or lai.leader < 0 or lai.leader in dead:
                leaderless.add(tb)
        changes = await self._reconcile_and_tell(leaderless)
        if self._followups is None:  # no event loop (unit tests of the handlers): the second round now
            changes += await self._reconcile_and_tell(affected - leaderless)
        else:
            self._isr_leavers |= dead
            self._followups.put(DeadLeaveIsrs(sorted(dead)))
        log.warning(
            "Tablet server(s) %s died: %d bucket(s) affected, %d leaderless: %d leadership change(s)%s",
            died,
            len(affected),
            len(leaderless),
            changes,
            "" if self._followups is None else "; leaving the other ISRs next",
        )

    async def dead_leave_isrs(self, _event: DeadLeaveIsrs) -> None:
        await self._leave_isrs(LEAVE_ISRS_CHUNK)

    async def _leave_isrs(self, limit: int | None = None) -> None:
        """The second round of the deaths not yet through it: those servers count as dead (also one that has
        registered again since: it is out of every ISR before its return is handled). ``limit``: this event
        does that many of the round's buckets and queues the rest as the next event, behind the events that
        waited (a GetMetadata waits for one chunk, not for the whole round); None: all that is left (before
        another membership change). The buckets not done yet are in the state the window between the two
        rounds already allows (docs/control-plane.md §6)."""
        leavers = self._isr_leavers
        if not leavers:
            return
        if self._isr_leave_todo is None:
            self._isr_leave_todo = sorted({tb for sid in leavers for tb in self.view.buckets_on(sid)})
        todo = self._isr_leave_todo
        n = len(todo) if limit is None else min(limit, len(todo))
        take = {tb for tb in todo[:n] if tb in self.view.buckets}  # a table dropped meanwhile: nothing to do
        del todo[:n]
        before = self._not_live
        self._not_live = before | leavers
        try:
            changes = await self._reconcile_and_tell(take)
        finally:
            self._not_live = before
        self._isr_leave_changes += changes
        if todo:
            self._followups.put(DeadLeaveIsrs(sorted(leavers)))
            log.info("Tablet server(s) %s leaving the ISRs: %d bucket(s) to go", sorted(leavers), len(todo))
            return
        changes, self._isr_leave_changes = self._isr_leave_changes, 0
        self._isr_leavers, self._isr_leave_todo = set(), None
        log.warning("Tablet server(s) %s left the ISRs of %d bucket(s)", sorted(leavers), changes)

    async def _reconcile_and_tell(self, tbs: set[TableBucket]) -> int:
        """Reconcile ``tbs``, write, tell the live servers (UpdateMetadata before NotifyLeaderAndIsr: Fluss's
        leader must know who is live), then update the coordinator's own states; returns the changes."""
        if not tbs:
            return 0
        changed = await self._reconcile(tbs)
        batch = self._batch()
        live = self.live()
        batch.metadata_delta(live, [tb for tb, _ in changed])
        for tb, _ in changed:
            self._notify(batch, tb, live=live)
        self._send(batch)
        for tb in tbs:
            self._set_states(tb, live)
        return len(changed)

    def _leader_of(self, tb: TableBucket) -> int:
        lai = self.view.buckets[tb].leader_and_isr
        return -1 if lai is None else lai.leader

    async def _servers_joined(self, joined: set[int]) -> None:
        if not joined:
            return
        hosted = {tb for sid in joined for tb in self.view.buckets_on(sid)}
        waiting = {tb for tb, b in self.view.buckets.items() if b.leader_and_isr is None or b.leader_and_isr.leader < 0}
        changed = await self._reconcile(hosted | waiting)
        batch = self._batch()
        batch.update_metadata(joined)  # a returning server may have missed anything
        batch.metadata_delta(self.live(), [tb for tb, _ in changed])
        for tb in hosted:
            self._notify(batch, tb, joined)  # the returning server learns its role (and truncates)
        for tb, _ in changed:
            self._notify(batch, tb)
        for tb in hosted | waiting:
            self._set_states(tb)
        self._send(batch)
        log.info(
            "Tablet server(s) %s joined: %d hosted bucket(s), %d change(s)", sorted(joined), len(hosted), len(changed)
        )
