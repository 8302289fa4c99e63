"""The TableProcessor's replica handlers: failed, corrupt and recovered replicas, AdjustIsr and ControlledShutdown.

Part of ``TableProcessor`` (a mixin: the same object, the same single writer of ``ClusterView``, on the event
loop's task); the events are in ``events.py`` (docs/control-plane.md §1.1).
"""

from __future__ import annotations

import logging
from typing import Any

from fluss_py.coordinator import election
from fluss_py.coordinator.channel import NOTIFY
from fluss_py.coordinator.events import (
    AdjustIsr,
    ControlledShutdown,
    ReplicasCorrupt,
    ReplicasFailed,
    ReplicasRecovered,
)
from fluss_py.coordinator.view_store import (
    Change,
)
from fluss_py.errors import (
    ApiError,
    ErrorCode,
    InvalidUpdateVersionError,
    UnknownTableOrBucketError,
)
from fluss_py.rpc import convert
from fluss_py.rpc.pb import coordinator_pb2
from fluss_py.types import TableBucket

# not __name__: the runbook shows its lines by this name, docs/coordinator-ha.md (the membership lines)
log = logging.getLogger("fluss_py.coordinator.CoordinatorEventProcessor")

FAILED_REPLICA_CODES = frozenset({ErrorCode.STORAGE_ERROR, ErrorCode.LOG_CORRUPTED})


class ReplicaEventHandlers:
    """The replica half of ``TableProcessor`` (see the module docstring)."""

    # ---------------------------------------------------------------- failed replicas
    def _check_notify(self, loop: Any, server: int, kind: str, response: Any) -> None:
        """Channel hook (on the loop): queue ReplicasFailed for buckets that answered a storage failure."""
        if kind != NOTIFY:
            return
        failed = [
            convert.table_bucket_from_pb(r.table_bucket)
            for r in getattr(response, "buckets", ())
            if r.error.code in FAILED_REPLICA_CODES
        ]
        if failed:
            loop.put(ReplicasFailed(server, failed))

    async def replicas_failed(self, event: ReplicasFailed) -> None:
        """A replica that cannot serve (disk failure) counts as dead for its bucket until its server
        re-registers: a new leader is elected if it led, and it leaves the ISR (Fluss's offline replicas)."""
        await self._ensure_loaded()
        buckets = self.view.buckets
        tbs = [tb for tb in event.buckets if tb in buckets and event.server_id in buckets[tb].replicas]
        for tb in tbs:
            self.view.failed_replicas.add(tb, event.server_id)
        changed = await self._reconcile(tbs)
        batch = self._batch()
        for tb, _ in changed:
            self._notify(batch, tb)
        if changed:
            batch.metadata_delta(self.live(), [tb for tb, _ in changed])
        self._send(batch)
        log.error("Tablet server %d reported failed replicas %s: %d leadership/ISR change(s)", event.server_id,
                  [str(tb) for tb in tbs], len(changed))  # fmt: skip

    async def replicas_corrupt(self, event: ReplicasCorrupt) -> None:
        """Take corrupt replicas out of the ISR, and out of leadership when another ISR member can lead."""
        await self._ensure_loaded()
        sid, changes = event.server_id, []
        for tb in event.buckets:
            bucket = self.view.buckets.get(tb)
            if bucket is None or bucket.leader_and_isr is None or sid not in bucket.replicas:
                continue
            live = self.live() - self.view.failed_on(tb)
            new = election.corrupt_replica(
                bucket.replicas, bucket.leader_and_isr, sid, live, self.epoch, self.view.shutting_down
            )
            if new is not None:
                changes.append((tb, new))
            elif bucket.leader_and_isr.leader == sid:
                log.error("bucket %s: leader %d reports a corrupt log, but no other ISR member can lead", tb, sid)
        changed = await self.store.write_leader_isr(changes)
        batch = self._batch()
        for tb, _ in changed:
            self._notify(batch, tb)
            self._set_states(tb)
        if changed:
            batch.metadata_delta(self.live(), [tb for tb, _ in changed])
        self._send(batch)
        log.warning("Tablet server %d reported corrupt replicas %s: %d leadership/ISR change(s)", sid,
                    [str(tb) for tb in event.buckets], len(changed))  # fmt: skip

    async def replicas_recovered(self, event: ReplicasRecovered) -> None:
        """A data directory came back: its replicas count as live again; their server learns their roles (as
        a returning server does), and leaderless buckets among them may elect."""
        await self._ensure_loaded()
        sid = event.server_id
        tbs = [tb for tb in event.buckets if tb in self.view.buckets and sid in self.view.buckets[tb].replicas]
        for tb in tbs:
            self.view.failed_replicas.discard(tb, sid)
        changed = await self._reconcile(tbs)
        batch = self._batch()
        batch.metadata_delta(self.live(), [tb for tb, _ in changed])
        for tb in tbs:
            self._notify(batch, tb, [sid])
            self._set_states(tb)
        for tb, _ in changed:
            self._notify(batch, tb)
        self._send(batch)
        log.info("Tablet server %d reports replicas %s back: %d change(s)", sid, [str(tb) for tb in tbs], len(changed))

    # ---------------------------------------------------------------- ISR and shutdown
    async def adjust_isr(self, event: AdjustIsr) -> coordinator_pb2.AdjustIsrResponse:
        """Apply a leader's ISR changes; per bucket the new state or the reason it was refused."""
        await self._ensure_loaded()
        req = event.request
        live, shutting = self.live(), self.view.shutting_down
        errors: dict[TableBucket, ApiError] = {}
        order: list[TableBucket] = []
        changes: list[Change] = []
        for item in req.buckets:
            tb = convert.table_bucket_from_pb(item.table_bucket)
            order.append(tb)
            bucket = self.view.buckets.get(tb)
            if bucket is None or bucket.leader_and_isr is None:
                errors[tb] = UnknownTableOrBucketError(f"bucket {tb} does not exist")
                continue
            change = election.IsrChange(req.server_id, item.leader_epoch, item.bucket_epoch, tuple(item.new_isr))
            try:
                live_tb = live - self.view.failed_on(tb)
                new = election.adjust_isr(bucket.replicas, bucket.leader_and_isr, change, live_tb, shutting, self.epoch)
            except ApiError as e:
                errors[tb] = e
                log.info("AdjustIsr of %s from server %d refused: %s", tb, req.server_id, e)
                continue
            if new is not bucket.leader_and_isr:
                changes.append((tb, new))
        written = {tb for tb, _ in await self.store.write_leader_isr(changes)}
        if written:  # every server's client metadata shows the new ISR (collapsed per outbox when frequent)
            batch = self._batch()
            batch.metadata_delta(live, written)
            self._send(batch)
            for listener in self.listeners:
                await listener.on_isr_changed(sorted(written))
        proposed = {tb for tb, _ in changes}
        results = []
        for tb in order:
            if tb in errors:
                results.append(
                    coordinator_pb2.AdjustIsrBucketResult(
                        table_bucket=convert.table_bucket_to_pb(tb), error=convert.error_info(errors[tb])
                    )
                )
            elif tb in proposed and tb not in written:
                results.append(
                    coordinator_pb2.AdjustIsrBucketResult(
                        table_bucket=convert.table_bucket_to_pb(tb),
                        error=convert.error_info(InvalidUpdateVersionError(f"leader_isr of {tb} changed")),
                    )
                )
            else:
                results.append(
                    coordinator_pb2.AdjustIsrBucketResult(
                        table_bucket=convert.table_bucket_to_pb(tb),
                        error=convert.ok(),
                        leader_and_isr=self.view.bucket_pb(tb),
                    )
                )
        return coordinator_pb2.AdjustIsrResponse(error=convert.ok(), buckets=results)

    async def controlled_shutdown(self, event: ControlledShutdown) -> list[TableBucket]:
        """Move leadership off a stopping server and take it out of ISRs; returns buckets it still leads."""
        await self._ensure_loaded()
        sid = event.server_id
        if sid not in self.context.tablet_servers:
            log.info("Controlled shutdown of tablet server %d: not registered (already gone)", sid)
            return []
        self.view.shutting_down.add(sid)
        live, shutting = self.live(), self.view.shutting_down
        changes: list[Change] = []
        followed: list[TableBucket] = []
        for tb in self.view.buckets_on(sid):
            bucket = self.view.buckets[tb]
            lai = bucket.leader_and_isr
            if lai is None:
                continue
            if lai.leader == sid:
                if len(bucket.replicas) > 1:
                    new = election.controlled_shutdown_leader(bucket.replicas, lai, live, shutting, self.epoch)
                    if new is not None:
                        changes.append((tb, new))
            else:
                followed.append(tb)
                new = election.remove_from_isr(lai, sid, self.epoch)
                if new is not None:
                    changes.append((tb, new))
        changed = await self.store.write_leader_isr(changes)
        batch = self._batch()
        stopped = set(followed)
        for tb, _ in changed:
            if tb in stopped:  # the leader and the other followers learn the ISR; the stopping server stops it
                self._notify(batch, tb, [r for r in self.view.buckets[tb].replicas if r != sid])
            else:
                self._notify(batch, tb)  # the stopping server included: it learns it no longer leads
        for tb in followed:
            lai = self.view.buckets[tb].leader_and_isr
            batch.stop_replica(sid, tb, lai.leader_epoch if lai else 0, delete=False)
        batch.metadata_delta(live, [tb for tb, _ in changed])
        self._send(batch)
        for tb in self.view.buckets_on(sid):  # the coordinator's own bookkeeping: after the requests left
            self._set_states(tb)
        remaining = [tb for tb in self.view.buckets_led_by(sid) if len(self.view.buckets[tb].replicas) > 1]
        log.info(
            "Controlled shutdown of tablet server %d: %d leadership/ISR change(s), %d bucket(s) still led",
            sid,
            len(changed),
            len(remaining),
        )
        return remaining
