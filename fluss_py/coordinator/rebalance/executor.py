"""Runs a rebalance plan as events on the coordinator leader's single-writer loop (``docs/rebalance.md``).

Per replica move of bucket b from S to T (a reassignment: the replica set holds old + new for a while):

    begin     [check epoch, assignment RS = ORS + T, leader_isr bucket_epoch + 1, progress: adding]
              -> NotifyLeaderAndIsr to RS: T creates the replica and catches up as a follower
    in sync   the leader's AdjustIsr adds T to the ISR -> ``on_isr_changed`` (processor listener)
    complete  [check epoch, assignment RS = ORS - S + T, leader_isr (leader T if S led; ISR - S),
              progress: done] -> NotifyLeaderAndIsr to RS, StopReplica(delete) to S, last
    rollback  [check epoch, assignment RS = ORS, leader_isr ISR - T, progress: rolled_back]
              -> NotifyLeaderAndIsr to ORS, StopReplica(delete) to T

Assignment, leader_isr and progress of a step are one transaction, so after any crash ZooKeeper's
assignment and ``<root>/cluster/rebalance`` agree; a new leader resumes from them (``on_started``).
A batch ends when none of its moves is open; the next starts once the cluster is healthy.

Who may call: the event loop (handlers, processor listener hooks); ``start``/``close`` by the leader
services (they own the tick task).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from copy import deepcopy
from typing import Any

from fluss_py.coordinator import election
from fluss_py.coordinator.events import CancelRebalance, Event, GetRebalance, RebalanceTick, StartRebalance
from fluss_py.coordinator.processor import TableProcessor
from fluss_py.coordinator.rebalance.planner import BucketPlacement, Move, MoveKind, Plan, PlanOptions, plan_rebalance
from fluss_py.coordinator.rebalance.progress import MoveStatus, RebalanceProgress, RebalanceStatus
from fluss_py.coordinator.rebalance.triggers import decide
from fluss_py.coordinator.rebalance.writes import Change, RebalanceWrites
from fluss_py.errors import InvalidRebalancePlanError, RebalanceInProgressError
from fluss_py.types import TableBucket
from fluss_py.zk.paths import RebalanceZNode
from fluss_py.zk.values import EpochFencedError, ZkError

log = logging.getLogger(__name__)

Sizes = Callable[[], Mapping[TableBucket, int]]


class RebalanceExecutor(RebalanceWrites):
    """Owns the current RebalanceProgress and the tick task. Runs on the processor's loop task only."""

    def __init__(
        self,
        processor: TableProcessor,
        options: PlanOptions | None = None,
        *,
        auto: bool = True,
        check_interval: float = 300.0,
        join_delay: float = 5.0,
        move_timeout: float = 600.0,
        health_timeout: float = 60.0,
        tick_interval: float = 1.0,
        sizes: Sizes | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._p = processor
        self.options = options or PlanOptions()
        self.auto = auto
        self.check_interval = check_interval
        self.join_delay = join_delay
        self.move_timeout = move_timeout
        self.health_timeout = health_timeout
        self.tick_interval = tick_interval
        self._sizes = sizes or dict
        self._clock = clock
        self.progress: RebalanceProgress | None = None
        self._node_version = -1  # version of the rebalance node we last read or wrote (-1: absent)
        self._started_at: dict[int, float] = {}  # move index -> when its target was added
        self._unhealthy_since: float | None = None
        self._last_check = clock()
        self.peak_server_migrations = 0  # most in-flight moves touching one server seen (the cap, measured)
        self._task: asyncio.Task | None = None
        self.handlers: dict[type[Event], Callable[[Any], Any]] = {
            StartRebalance: self.start_rebalance,
            CancelRebalance: self.cancel_rebalance,
            GetRebalance: self.get_rebalance,
            RebalanceTick: self.tick,
        }

    # ---------------------------------------------------------------- wiring
    def install(self, loop: Any) -> None:
        for event_type, handler in self.handlers.items():
            loop.register(event_type, handler)
        self._p.listeners.append(self)

    def start(self, loop: Any) -> None:
        async def run() -> None:
            while True:
                await asyncio.sleep(self.tick_interval)
                loop.put(RebalanceTick())

        self._task = asyncio.get_running_loop().create_task(run(), name="rebalance-tick")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    @property
    def running(self) -> bool:
        return self.progress is not None and self.progress.running

    def migrations_per_server(self) -> dict[int, int]:
        """In-flight replica moves (adding) touching each server, as source or target."""
        touched: dict[int, int] = {}
        if self.progress is not None and self.progress.running:
            for i, m in self.progress.open_moves():
                if self.progress.moves[i] is MoveStatus.ADDING:
                    touched[m.from_server] = touched.get(m.from_server, 0) + 1
                    touched[m.to_server] = touched.get(m.to_server, 0) + 1
        return touched

    # ---------------------------------------------------------------- requests
    async def start_rebalance(self, event: StartRebalance) -> dict[str, Any]:
        if self.progress is not None and self.progress.running:
            view = self.progress.view()
            raise RebalanceInProgressError(
                f"rebalance {view['id']} is already running: batch {view['batch'] + 1}/{view['batches_total']}, "
                f"{view['moves_done']}/{view['moves_total']} moves done, {view['bytes_moved']} bytes moved"
            )
        plan = self.plan()
        view = {"status": "PLANNED" if plan.moves else "BALANCED", **plan.to_json(), "summary": plan.summary()}
        if event.dry_run or not plan.moves:
            return view
        return await self.run_plan(plan, event.reason) or view

    async def run_plan(self, plan: Plan, reason: str, replacing: tuple[int, ...] = ()) -> dict[str, Any] | None:
        """Start ``plan`` (no rebalance may run); ``replacing``: a replacement's servers, whose replicas the
        health check ignores (docs/rebalance.md §12). Returns the progress view."""
        problem = self.health(replacing)
        if problem is not None:
            raise InvalidRebalancePlanError(f"the cluster is not healthy ({problem}); nothing was moved")
        progress = RebalanceProgress(uuid.uuid4().hex, plan, reason, int(time.time() * 1000), replacing=replacing)
        self._node_version = await self._read_node_version()
        log.info("Rebalance %s starting (%s): %s", progress.id, reason, plan.summary().replace("\n", "; "))
        await self._begin_batch(progress)
        return self.progress.view() if self.progress else None

    def plan(self) -> Plan:
        """A plan for the current view (raises INVALID_REBALANCE_PLAN when none can be made)."""
        view, live = self._p.view, self._p.live()
        placement: dict[TableBucket, BucketPlacement] = {}
        for tb, b in view.buckets.items():
            lai = b.leader_and_isr
            if lai is None or lai.leader < 0:
                raise InvalidRebalancePlanError(f"bucket {tb} has no leader; nothing was moved")
            tagged = [s for s in b.replicas if s in view.tagged]
            if tagged:  # a tagged server's replicas are the replacement's (or wait for its return)
                raise InvalidRebalancePlanError(
                    f"bucket {tb} has a replica on tablet server {tagged[0]}, tagged "
                    f"{view.tagged[tagged[0]]} (docs/rebalance.md §12); nothing was moved"
                )
            placement[tb] = BucketPlacement(b.replicas, lai.leader, lai.isr)
        servers = view.placeable({s: r for s, r in self._p.context.tablet_servers.items() if s in live})
        return plan_rebalance(placement, servers, self._sizes(), self.options)

    async def abort(self, why: str) -> None:
        """Roll back the running rebalance's open moves: CANCELED with ``why`` (the tag room, on the loop)."""
        if self.running:
            await self._rollback(why, RebalanceStatus.CANCELED)

    async def cancel_rebalance(self, _event: CancelRebalance) -> dict[str, Any]:
        if self.progress is None or not self.progress.running:
            return {**(self.progress.view() if self.progress else {"status": "NONE"}), "message": "no rebalance runs"}
        await self._rollback("canceled by the operator", RebalanceStatus.CANCELED)
        return self.progress.view()

    async def get_rebalance(self, _event: GetRebalance) -> dict[str, Any]:
        return self.progress.view() if self.progress else {"status": "NONE"}

    def health(self, ignore: tuple[int, ...] = ()) -> str | None:
        """None when every bucket has a live leader and a full ISR; else what is wrong. ``ignore``: servers a
        replacement empties: their replicas need not be in sync, a bucket only on them is not checked."""
        live = self._p.live()
        for tb, b in sorted(self._p.view.buckets.items()):
            lai = b.leader_and_isr
            keep = [r for r in b.replicas if r not in ignore]
            if not keep:
                continue
            if lai is None or lai.leader not in live:
                return f"bucket {tb} is offline"
            if not set(keep) <= set(lai.isr):
                return f"bucket {tb} is under-replicated (ISR {list(lai.isr)} of {keep})"
        return None

    # ---------------------------------------------------------------- processor listener
    async def on_started(self) -> None:
        got = await self._p.store.get(RebalanceZNode.path(self._p.store.root))
        self._node_version = got[1].version if got else -1
        if got is None:
            self.progress = None
            return
        self.progress = RebalanceProgress.from_json(RebalanceZNode.decode(got[0]))
        if self.progress.running:
            await self._resume()

    async def on_isr_changed(self, buckets: list[TableBucket]) -> None:
        if not self.running:
            return
        assert self.progress is not None
        await self._forget_dropped()
        changed = set(buckets)
        ready = [i for i, m in self.progress.open_moves() if m.bucket in changed and self._in_sync(i, m)]
        if ready:
            await self._complete(ready)

    async def on_servers_changed(self, joined: set[int], died: list[int]) -> None:
        if self.running:
            assert self.progress is not None
            lost = sorted({m.to_server for _, m in self.progress.open_moves()} & set(died))
            if lost:
                await self._rollback(f"target server(s) {lost} died", RebalanceStatus.FAILED)
        elif joined and self.auto:  # let a group of new servers register before planning
            self._last_check = min(self._last_check, self._clock() - self.check_interval + self.join_delay)

    async def tick(self, _event: RebalanceTick | None = None) -> None:
        now = self._clock()
        if self.running:
            assert self.progress is not None
            await self._forget_dropped()
            stuck = [
                i
                for i, _ in self.progress.open_moves()
                if self.progress.moves[i] is MoveStatus.ADDING
                and now - self._started_at.get(i, now) > self.move_timeout
            ]
            if stuck:
                await self._rollback(
                    f"move(s) {stuck} did not join the ISR within {self.move_timeout:g}s", RebalanceStatus.FAILED
                )
            elif not self.progress.open_moves():
                await self._batch_finished()
            return
        if self.auto and now - self._last_check >= self.check_interval:
            self._last_check = now
            await self._maybe_trigger()

    async def _maybe_trigger(self) -> None:
        assignment = {tb: b.replicas for tb, b in self._p.view.buckets.items()}
        usable = self._p.live() - self._p.view.tagged.keys()  # a tagged server hosting replicas counts as down
        trigger = decide(assignment, usable, self.options.threshold, auto=self.auto, running=self.running)
        if trigger is None:
            return
        log.info("Rebalance triggered: %s (%s)", trigger.reason.value, trigger.detail)
        try:
            await self.start_rebalance(StartRebalance(reason=f"{trigger.reason.value}: {trigger.detail}"))
        except (InvalidRebalancePlanError, ZkError) as e:
            if isinstance(e, EpochFencedError):
                raise
            log.warning("Automatic rebalance not started: %s", e)

    # ---------------------------------------------------------------- steps
    def _in_sync(self, i: int, m: Move) -> bool:
        assert self.progress is not None
        b = self._p.view.buckets.get(m.bucket)
        lai = b.leader_and_isr if b else None
        return (
            self.progress.moves[i] is MoveStatus.ADDING
            and lai is not None
            and m.to_server in lai.isr
            and m.to_server in self._p.live()
        )

    async def _begin_batch(self, progress: RebalanceProgress) -> None:
        """Start every move of ``progress.batch`` (one transaction), or finish when no batch is left."""
        new = deepcopy(progress)
        live, epoch = self._p.live(), self._p.epoch
        if new.batch >= len(new.plan.batches):
            new.status, new.message = RebalanceStatus.COMPLETED, "all batches done"
            await self._commit({}, new)
            log.info(
                "Rebalance %s completed: %d move(s), %d bytes", new.id, new.count(MoveStatus.DONE), new.bytes_moved
            )
            return
        dead = sorted({m.to_server for _, m in new.batch_moves() if m.to_server not in live})
        if dead:
            new.status, new.message = RebalanceStatus.FAILED, f"target server(s) {dead} are not live; batch not started"
            await self._commit({}, new)
            log.error("Rebalance %s failed: %s", new.id, new.message)
            return
        changes: dict[TableBucket, Change] = {}
        for i, m in new.batch_moves():
            b = self._p.view.buckets.get(m.bucket)
            lai = b.leader_and_isr if b is not None else None
            if b is None or lai is None:
                new.moves[i] = MoveStatus.SKIPPED  # the table was dropped
                continue
            if m.kind is MoveKind.LEADERSHIP:
                order = (m.to_server, *[r for r in b.replicas if r != m.to_server])
                elected = election.reassignment_leader(order, lai, live, epoch, self._p.view.shutting_down)
                if elected is None or elected.leader != m.to_server:
                    new.moves[i] = MoveStatus.SKIPPED
                    continue
                changes[m.bucket] = (order, elected)
                new.moves[i] = MoveStatus.DONE
                continue
            if m.from_server not in b.replicas or m.to_server in b.replicas or m.to_server in self._p.view.tagged:
                new.moves[i] = MoveStatus.SKIPPED  # the placement changed since planning, or the target was tagged
                continue
            new.origin[i] = b.replicas
            changes[m.bucket] = ((*b.replicas, m.to_server), lai.with_isr(lai.isr, epoch))
            new.moves[i] = MoveStatus.ADDING
        await self._commit(changes, new)
        self.peak_server_migrations = max(self.peak_server_migrations, *self.migrations_per_server().values(), 0)
        now = self._clock()
        batch = self._p.new_batch()
        for i, m in new.batch_moves():
            if new.moves[i] is MoveStatus.ADDING:
                self._started_at[i] = now
                log.info("Rebalance %s: bucket %s adding replica on %d (moving off %d)", new.id, m.bucket,
                         m.to_server, m.from_server)  # fmt: skip
            elif new.moves[i] is MoveStatus.DONE:
                log.info("Rebalance %s: bucket %s leader %d -> %d", new.id, m.bucket, m.from_server, m.to_server)
        self._tell(batch, changes)
        log.info("Rebalance %s: batch %d/%d started (%d move(s))", new.id, new.batch + 1, len(new.plan.batches),
                 len(new.batch_moves()))  # fmt: skip
        ready = [i for i, m in new.open_moves() if self._in_sync(i, m)]
        if ready:
            await self._complete(ready)
        elif not new.open_moves():
            await self._batch_finished()

    async def _complete(self, indices: list[int], advance: bool = True) -> None:
        """Steps 2 and 3 for moves whose target is in the ISR: leadership to T if S leads, then S leaves.
        With ``advance`` a batch left without open moves is finished (health check, next batch)."""
        assert self.progress is not None
        new = deepcopy(self.progress)
        live, epoch = self._p.live(), self._p.epoch
        changes: dict[TableBucket, Change] = {}
        removed: dict[TableBucket, int] = {}
        for i in indices:
            m = new.plan.moves[i]
            b = self._p.view.buckets[m.bucket]
            lai = b.leader_and_isr
            assert lai is not None
            final = tuple(m.to_server if r == m.from_server else r for r in new.origin[i])
            isr = tuple(r for r in lai.isr if r != m.from_server)
            if lai.leader == m.from_server:
                if m.to_server not in live:
                    continue
                new_lai = lai.with_leader(m.to_server, isr, epoch)
            else:
                new_lai = lai.with_isr(isr, epoch)
            if new_lai.leader == m.to_server:
                final = (m.to_server, *[r for r in final if r != m.to_server])
            changes[m.bucket] = (final, new_lai)
            removed[m.bucket] = m.from_server
            new.moves[i] = MoveStatus.DONE
            new.bytes_moved += m.bytes
        if not changes:
            return
        await self._commit(changes, new)
        batch = self._p.new_batch()
        self._tell(batch, changes, removed)
        for i in indices:
            m = new.plan.moves[i]
            if new.moves[i] is MoveStatus.DONE:
                self._started_at.pop(i, None)
                log.info("Rebalance %s: bucket %s replica on %d in ISR; leader %d; removed replica on %d",
                         new.id, m.bucket, m.to_server, changes[m.bucket][1].leader, m.from_server)  # fmt: skip
        if advance and not new.open_moves():
            await self._batch_finished()

    async def _forget_dropped(self) -> None:
        """Open moves of buckets whose table was dropped are skipped (nothing is left to move)."""
        assert self.progress is not None
        gone = [i for i, m in self.progress.open_moves() if m.bucket not in self._p.view.buckets]
        if gone:
            new = deepcopy(self.progress)
            for i in gone:
                new.moves[i] = MoveStatus.SKIPPED
                self._started_at.pop(i, None)
            await self._commit({}, new)
            log.info("Rebalance %s: %d move(s) skipped: their table was dropped", new.id, len(gone))

    async def _rollback(self, why: str, status: RebalanceStatus) -> None:
        """End the rebalance: open moves of the batch are undone (T removed; S never left), or finished
        when T is already in sync (a finished move is as safe as an undone one)."""
        assert self.progress is not None
        await self._forget_dropped()
        ready = [i for i, m in self.progress.open_moves() if self._in_sync(i, m)]
        if ready:
            await self._complete(ready, advance=False)
        new = deepcopy(self.progress)
        epoch = self._p.epoch
        changes: dict[TableBucket, Change] = {}
        removed: dict[TableBucket, int] = {}
        for i, m in new.open_moves():
            if new.moves[i] is MoveStatus.ADDING:
                b = self._p.view.buckets[m.bucket]
                lai = b.leader_and_isr
                assert lai is not None
                changes[m.bucket] = (new.origin[i], lai.with_isr(tuple(r for r in lai.isr if r != m.to_server), epoch))
                removed[m.bucket] = m.to_server
                new.moves[i] = MoveStatus.ROLLED_BACK
            else:
                new.moves[i] = MoveStatus.SKIPPED
            self._started_at.pop(i, None)
        new.status, new.message = status, why
        await self._commit(changes, new)
        self._tell(self._p.new_batch(), changes, removed)
        log.warning("Rebalance %s %s: %s; %d open move(s) rolled back, %d done", new.id, status.value.lower(), why,
                    len(changes), new.count(MoveStatus.DONE))  # fmt: skip

    async def _batch_finished(self) -> None:
        assert self.progress is not None
        problem = self.health(self.progress.replacing)
        now = self._clock()
        if problem is not None:
            if self._unhealthy_since is None:
                self._unhealthy_since = now
                log.warning("Rebalance %s: batch %d done, waiting for health: %s", self.progress.id,
                            self.progress.batch + 1, problem)  # fmt: skip
            elif now - self._unhealthy_since > self.health_timeout:
                self._unhealthy_since = None
                await self._rollback(f"cluster unhealthy after batch {self.progress.batch + 1}: {problem}",
                                     RebalanceStatus.FAILED)  # fmt: skip
            return
        self._unhealthy_since = None
        new = deepcopy(self.progress)
        log.info("Rebalance %s: batch %d/%d done, cluster healthy", new.id, new.batch + 1, len(new.plan.batches))
        new.batch += 1
        await self._begin_batch(new)

    async def _resume(self) -> None:
        """A new leader continues the stored rebalance: statuses are re-derived from the assignment."""
        assert self.progress is not None
        pr = self.progress
        for i, m in pr.batch_moves():
            b = self._p.view.buckets.get(m.bucket)
            if m.kind is MoveKind.LEADERSHIP or b is None or pr.moves[i] not in (MoveStatus.ADDING, MoveStatus.DONE):
                continue
            has_t, has_s = m.to_server in b.replicas, m.from_server in b.replicas
            pr.moves[i] = MoveStatus.ADDING if has_t and has_s else MoveStatus.DONE if has_t else MoveStatus.ROLLED_BACK
            if pr.moves[i] is MoveStatus.ADDING:
                pr.origin.setdefault(i, tuple(r for r in b.replicas if r != m.to_server))
                self._started_at[i] = self._clock()
        log.info("Rebalance %s resumed at batch %d/%d (%d move(s) in flight)", pr.id, pr.batch + 1,
                 len(pr.plan.batches), pr.count(MoveStatus.ADDING))  # fmt: skip
        live = self._p.live()
        lost = sorted({m.to_server for _, m in pr.open_moves() if m.to_server not in live})
        if lost:
            await self._rollback(f"target server(s) {lost} not live after coordinator failover", RebalanceStatus.FAILED)
            return
        self._retell_adding()
        if any(s is MoveStatus.PENDING for s in (pr.moves[i] for i, _ in pr.batch_moves())):
            await self._begin_batch(pr)
        else:
            ready = [i for i, m in pr.open_moves() if self._in_sync(i, m)]
            if ready:
                await self._complete(ready)
            elif not pr.open_moves():
                await self._batch_finished()

    def _retell_adding(self) -> None:
        """After a failover: the startup NotifyLeaderAndIsr went out before the progress was read, so the
        buckets of moves still adding are told again, now naming their targets (same epochs: only the
        leader's throttle list changes, docs/rebalance.md §6)."""
        assert self.progress is not None
        adding = self._p.view.adding_replicas = self.progress.adding_replicas()
        if adding:
            batch = self._p.new_batch()
            for tb in sorted(adding):
                if tb in self._p.view.buckets:
                    self._p.notify(batch, tb)
            self._p.send(batch)
