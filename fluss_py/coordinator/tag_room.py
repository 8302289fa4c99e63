"""The server-tag room of the coordinator leader (docs/rebalance.md §12): the tags, their znode, the check.

    SetServerTag       refusal rule (server_tags.check_tag_change, pure) -> fenced write of
                       <root>/cluster/server_tags -> view.tagged -> the check
    DescribeServerTags every known server with its tag, replicas and leaderships; the last replacement
    ServerTagCheck     every second, after a tag write and after a membership change:
                       1. a server dead for tablet-server.replace-dead-after is tagged permanent-offline (auto)
                       2. leaderships leave live tagged servers (server_tags.leaders_off, pure)
                       3. no rebalance runs and permanent-offline servers hold replicas: the replacement plan
                          (rebalance/replacement.py, pure) runs on the rebalance executor with ``replacing``

The tags are desired state and the check is idempotent: a failover at any moment only delays it. A new
leader reads the node in its first reconciliation (``on_started``, a ProcessorListener hook, before any
other event runs with the live servers known).

Who may call: the event loop's task only (handlers, listener hooks); ``start``/``close`` by the leader
services (they own the tick task).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from fluss_py import config as cfg
from fluss_py.coordinator.event_loop import Ticker
from fluss_py.coordinator.events import DescribeServerTags, Event, ServerTagCheck, SetServerTag
from fluss_py.coordinator.leader_balance import write_leaders
from fluss_py.coordinator.rebalance.executor import RebalanceExecutor
from fluss_py.coordinator.rebalance.planner import BucketPlacement, Plan
from fluss_py.coordinator.rebalance.progress import RebalanceStatus
from fluss_py.coordinator.rebalance.replacement import plan_replacement
from fluss_py.coordinator.server_tags import (
    ServerTag,
    TagEntry,
    check_tag_change,
    decode_tags,
    due_for_replacement,
    encode_tags,
    leaders_off,
    min_isr_of,
    tag_name,
)
from fluss_py.coordinator.unreadable import Unreadable, decode_or_report
from fluss_py.coordinator.view_store import node_write_ops
from fluss_py.errors import ConfigError, InvalidRebalancePlanError, InvalidServerTagError
from fluss_py.types import TableBucket
from fluss_py.zk.paths import ServerTagsZNode
from fluss_py.zk.values import EpochFencedError, ZkError

log = logging.getLogger(__name__)


def cluster_min_isr(entries: Mapping[str, str]) -> int:
    """The min ISR tablet servers apply to a table without its own: the cluster's dynamic value, else the
    option's default (a value that does not parse was refused at write time; the default then)."""
    raw = entries.get(cfg.MIN_INSYNC_REPLICAS.key)
    try:
        return int(cfg.MIN_INSYNC_REPLICAS.parse(raw)) if raw is not None else int(cfg.MIN_INSYNC_REPLICAS.default)
    except ConfigError:
        return int(cfg.MIN_INSYNC_REPLICAS.default)


PERM = ServerTag.PERMANENT_OFFLINE
RETRY_AFTER_FAILURE = 30.0  # seconds between a FAILED replacement and the next attempt


class ServerTagRoom:
    """Owns the tags of one leadership (and the tags node's version), when each dead server was seen dying,
    and the check's tick task. ``processor``: the TableProcessor (view, live servers, writes, requests);
    ``executor``: the RebalanceExecutor that runs replacements."""

    def __init__(
        self,
        processor: Any,
        executor: RebalanceExecutor,
        *,
        replace_dead_after: float = 0.0,
        default_min_isr: int = 2,
        sizes: Callable[[], Mapping[TableBucket, int]] = dict,
        check_interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._p = processor
        self._ex = executor
        self.replace_dead_after = replace_dead_after
        self.default_min_isr = default_min_isr
        self._sizes = sizes
        self._clock = clock
        self.tags: dict[int, TagEntry] = {}
        self.loaded = False
        self._version = -1  # of the tags node as last read or written (-1: absent)
        self.dead_since: dict[int, float] = {}  # servers holding replicas, not live: since when (our clock)
        self.auto_tagged = 0  # servers tagged by replace-dead-after in this leadership (metrics)
        self._override = ""  # id of a CANCELED replacement the operator restarted by tagging again
        self._failed: tuple[str, float] | None = None  # (id, first seen) of the last FAILED replacement
        self._problem = ""  # why the last replacement attempt did not start (logged once per change)
        self._load_problem = ""  # why the tags node could not be loaded (logged once per change)
        self._ticker = Ticker("server-tag-check", check_interval, ServerTagCheck)
        self.handlers: dict[type[Event], Callable[[Any], Any]] = {
            SetServerTag: self.set_tag,
            DescribeServerTags: self.describe,
            ServerTagCheck: self.check,
        }

    # ---------------------------------------------------------------- wiring
    def install(self, loop: Any) -> None:
        for event_type, handler in self.handlers.items():
            loop.register(event_type, handler)
        self._p.listeners.append(self)

    def start(self, loop: Any) -> None:
        self._ticker.start(loop)

    async def close(self) -> None:
        await self._ticker.close()

    # ---------------------------------------------------------------- processor listener
    async def on_started(self) -> None:
        live, now = self._p.live(), self._clock()
        self.dead_since = {s: now for s in self._hosting() if s not in live}  # a new leader counts from now
        if await self._ensure_loaded(quiet=True):
            await self.check()

    async def on_isr_changed(self, buckets: list[TableBucket]) -> None:
        return None

    async def on_servers_changed(self, joined: set[int], died: list[int]) -> None:
        now = self._clock()
        hosting = self._hosting()
        for sid in died:
            if sid in hosting:
                self.dead_since.setdefault(sid, now)
        for sid in joined:
            self.dead_since.pop(sid, None)
        await self.check()

    # ---------------------------------------------------------------- requests
    async def set_tag(self, event: SetServerTag) -> dict[str, Any]:
        new = ServerTag.parse(event.tag)  # INVALID_REQUEST for an unknown spelling
        await self._ensure_loaded(quiet=False)
        sid, old = event.server_id, self.tags.get(event.server_id)
        current = {s: e.tag for s, e in self.tags.items()}
        known = set(self._p.context.tablet_servers) | self._hosting() | set(current)
        if sid not in known:  # refused before anything else, "none" included (a mistyped id)
            check_tag_change(sid, new, tags=current, live=set(), known=known, placement={}, min_isr=self._min_isr,
                             covered=set())  # fmt: skip
        if (old.tag if old else None) is new:
            if new is PERM:  # again: restarts a replacement the operator canceled
                progress = self._ex.progress
                self._override = progress.id if progress is not None else ""
                await self.check()
            return self._answer(sid, f"tablet server {sid} is already tagged {tag_name(new)}; nothing was written")
        after = {s: t for s, t in current.items() if s != sid} | ({sid: new} if new is not None else {})
        plan = self.replacement_plan(after) if new is PERM else None
        covered = {m.bucket for m in plan.moves if m.from_server == sid} if plan is not None else set()
        live = self._p.live()
        check_tag_change(
            sid, new, tags=current, live=live, known=known, placement=self._placement(), min_isr=self._min_isr,
            covered=covered,
        )  # fmt: skip
        await self._write(sid, new, "operator", "")
        if sid in self.dead_since:  # an operator's word restarts replace-dead-after's clock for that server
            self.dead_since[sid] = self._clock()
        log.info("Server tag of %d: %s -> %s (operator)", sid, tag_name(old.tag if old else None), tag_name(new))
        progress = self._ex.progress
        replaced = self._ex.running and progress is not None and sid in progress.replacing
        if replaced and old is not None and old.tag is PERM:
            await self._ex.abort(f"tablet server {sid} is no longer tagged permanent-offline")
        progress = self._ex.progress
        if new is PERM or (old is not None and old.tag is PERM):  # (re)start for the servers still tagged
            self._override = progress.id if progress is not None else ""
        await self.check()
        message = f"tablet server {sid}: {tag_name(old.tag if old else None)} -> {tag_name(new)}"
        if plan is not None:
            message += f"; {sum(1 for m in plan.moves if m.from_server == sid)} replica(s) to move"
            message += "".join(f"; note: {n}" for n in plan.notes)
        return self._answer(sid, message)

    async def describe(self, _event: DescribeServerTags | None = None) -> dict[str, Any]:
        await self._ensure_loaded(quiet=False)
        view, live = self._p.view, self._p.live()
        replicas: dict[int, int] = {}
        leaders: dict[int, int] = {}
        for b in view.buckets.values():
            for r in b.replicas:
                replicas[r] = replicas.get(r, 0) + 1
            if b.leader_and_isr is not None and b.leader_and_isr.leader >= 0:
                leaders[b.leader_and_isr.leader] = leaders.get(b.leader_and_isr.leader, 0) + 1
        servers = []
        for sid in sorted(set(self._p.context.tablet_servers) | set(replicas) | set(self.tags)):
            entry = self.tags.get(sid)
            servers.append({
                "id": sid, "tag": tag_name(entry.tag if entry else None), "by": entry.by if entry else "",
                "since_ms": entry.since_ms if entry else 0, "reason": entry.reason if entry else "",
                "live": sid in live, "replicas": replicas.get(sid, 0), "leaders": leaders.get(sid, 0),
            })  # fmt: skip
        progress = self._ex.progress
        replacement = progress.view() if progress is not None and progress.replacing else None
        return {"servers": servers, "replacement": replacement, "to_replace": self.to_replace()}

    def _answer(self, sid: int, message: str) -> dict[str, Any]:
        entry = self.tags.get(sid)
        progress = self._ex.progress
        replacement = progress.view() if progress is not None and progress.replacing else None
        return {"server_id": sid, "tag": tag_name(entry.tag if entry else None), "message": message,
                "replacement": replacement}  # fmt: skip

    # ---------------------------------------------------------------- the check
    async def check(self, _event: ServerTagCheck | None = None) -> None:
        if not await self._ensure_loaded(quiet=True) or not self._p.started:
            return
        now = self._clock()
        if not self.tags and not (self.dead_since and self.replace_dead_after > 0):
            return  # the usual case: O(1)
        hosting = self._hosting()
        dead = {s: t for s, t in self.dead_since.items() if s in hosting}  # an emptied server is never due
        for sid in due_for_replacement(dead, now, self.replace_dead_after, self.tags):
            await self._auto_tag(sid, now - self.dead_since[sid])
        if not self.tags:
            return
        p = self._p
        live = p.live()
        avoid = {s for s in self.tags if s in live}
        progress = self._ex.progress
        busy = {m.bucket for _, m in progress.open_moves()} if progress is not None and progress.running else set()
        changes = leaders_off(p.view.buckets, avoid, live, p.view.shutting_down, busy, p.epoch)
        await write_leaders(p, changes, "Bucket %s led by %d: its leader is tagged (docs/rebalance.md §12)", log)
        await self._maybe_replace(now, hosting)

    async def _auto_tag(self, sid: int, dead_for: float) -> None:
        reason = f"dead for {dead_for:.0f}s (tablet-server.replace-dead-after {self.replace_dead_after:g}s)"
        log.warning("Tablet server %d has been %s: tagging it permanent-offline", sid, reason)
        current = {s: e.tag for s, e in self.tags.items()}
        try:
            check_tag_change(sid, PERM, tags=current, live=self._p.live(), known={sid}, placement=self._placement(),
                             min_isr=self._min_isr, covered=set())  # fmt: skip
        except InvalidServerTagError as e:  # cannot happen for a dead server; logged, never swallowed silently
            log.error("Automatic tag of tablet server %d refused: %s", sid, e.message)
            self.dead_since.pop(sid, None)
            return
        await self._write(sid, PERM, "auto", reason)
        self.auto_tagged += 1

    async def _maybe_replace(self, now: float, hosting: set[int]) -> None:
        gone = sorted(s for s, e in self.tags.items() if e.tag is PERM and s in hosting)
        progress = self._ex.progress
        if not gone or self._ex.running:
            return
        if progress is not None and progress.replacing:
            if progress.status is RebalanceStatus.CANCELED and progress.id != self._override:
                return  # the operator canceled it: tagging a server again restarts it
            if progress.status is RebalanceStatus.FAILED:
                if self._failed is None or self._failed[0] != progress.id:
                    self._failed = (progress.id, now)
                if now - self._failed[1] < RETRY_AFTER_FAILURE:
                    return
        problem = self._ex.health(tuple(gone))  # first: cheaper than a plan, and a plan would be refused
        if problem is not None:
            self._note(f"the cluster is not healthy ({problem})")
            return
        plan = self.replacement_plan({s: e.tag for s, e in self.tags.items()})
        if not plan.moves:
            self._note(f"nothing can move yet: {'; '.join(plan.notes)}")
            return
        try:
            await self._ex.run_plan(plan, f"replace: tablet server(s) {gone} permanent-offline", tuple(gone))
        except InvalidRebalancePlanError as e:
            self._note(e.message)
            return
        self._problem = ""
        log.info("Replacement of tablet server(s) %s started: %d replica move(s) in %d batch(es)%s", gone,
                 plan.replica_moves, len(plan.batches), "".join(f"; note: {n}" for n in plan.notes))  # fmt: skip

    def _note(self, problem: str) -> None:
        if problem != self._problem:
            self._problem = problem
            log.warning("Replacement of permanent-offline server(s) not started: %s (retried every check)", problem)

    # ---------------------------------------------------------------- views and the pure inputs
    def replacement_plan(self, tags: Mapping[int, ServerTag]) -> Plan:
        """The replacement plan under ``tags`` (the current ones, or those a SetServerTag would leave)."""
        p, live = self._p, self._p.live()
        servers = p.context.tablet_servers
        usable = live - p.view.shutting_down - tags.keys()
        eligible = {s: r.rack for s, r in servers.items() if s in usable}
        gone = {s for s, t in tags.items() if t is PERM}
        racks = {s: r.rack for s, r in servers.items()}
        return plan_replacement(self._placement(), gone, eligible, live, self._sizes(), self._ex.options, racks)

    def replacement_running(self) -> bool:
        progress = self._ex.progress
        return self._ex.running and progress is not None and bool(progress.replacing)

    def to_replace(self) -> int:
        """Replicas still on permanent-offline servers (0: every such server emptied)."""
        gone = {s for s, e in self.tags.items() if e.tag is PERM}
        return sum(1 for b in self._p.view.buckets.values() for r in b.replicas if r in gone)

    def _hosting(self) -> set[int]:
        return {s for b in self._p.view.buckets.values() for s in b.replicas}

    def _placement(self) -> dict[TableBucket, BucketPlacement]:
        out = {}
        for tb, b in self._p.view.buckets.items():
            lai = b.leader_and_isr
            out[tb] = BucketPlacement(b.replicas, lai.leader if lai is not None else -1, lai.isr if lai else ())
        return out

    def _min_isr(self, tb: TableBucket, replica_count: int) -> int:
        info = self._p.view.tables.get(tb.table_id)
        return min_isr_of(info.properties if info is not None else {}, replica_count, self.default_min_isr)

    # ---------------------------------------------------------------- ZooKeeper
    async def _load(self) -> None:
        """Read the tags node. ZkError when it cannot be read or does not decode: the tags stay unknown, and
        nothing is written over them (an operator's node is fixed or deleted by the operator)."""
        store = self._p.store
        path = ServerTagsZNode.path(store.root)
        got = await store.get(path)
        if got is None:
            self.tags, self._version = {}, -1
        else:
            decoded = decode_or_report(path, got[0], lambda data: decode_tags(ServerTagsZNode.decode(data)))
            if isinstance(decoded, Unreadable):
                raise ZkError(f"the server tags node {path} does not decode ({decoded.reason}): fix or delete it")
            self.tags, self._version = decoded, got[1].version
        self.loaded = True
        self._load_problem = ""
        self._p.view.tagged = {s: e.tag.value for s, e in self.tags.items()}
        if self.tags:
            log.info("Loaded server tags: %s", {s: e.tag.value for s, e in sorted(self.tags.items())})

    async def _ensure_loaded(self, quiet: bool) -> bool:
        """Load the tags if not yet done in this leadership. ``quiet`` (the check): a failure is logged once per
        reason and answered False; else it is raised (a request is answered with it)."""
        if self.loaded:
            return True
        try:
            await self._load()
        except ZkError as e:
            if isinstance(e, EpochFencedError) or not quiet:
                raise
            if e.message != self._load_problem:
                self._load_problem = e.message
                log.error("Server tags not loaded: %s (retried every check; until then nothing is tagged)", e.message)
            return False
        return True

    async def _write(self, sid: int, tag: ServerTag | None, by: str, reason: str) -> None:
        """One fenced transaction: the whole tags node at the version last read or written."""
        new = {s: e for s, e in self.tags.items() if s != sid}
        if tag is not None:
            new[sid] = TagEntry(tag, int(time.time() * 1000), by, reason)
        store = self._p.store
        data = ServerTagsZNode.encode(encode_tags(new))
        results = await store.commit(await node_write_ops(store, ServerTagsZNode.path(store.root), data, self._version))
        self._version = getattr(results[-1], "version", 0)
        self.tags = new
        self._p.view.tagged = {s: e.tag.value for s, e in new.items()}
