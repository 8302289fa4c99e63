"""What the console shows, decided without I/O: a JSON snapshot of the leader's view, the failover
timeline and per-table rates.

``build_snapshot(source)`` reads a ``ConsoleSource`` (the leader's ClusterView, live servers, registrations,
led-bucket sizes, rebalance progress) in one synchronous pass, so it sees one consistent state of the
single-threaded event loop (only while a console watches). ``Timeline.record`` turns each change of a
bucket's LeaderAndIsr (told by the view, ``ClusterView.on_leader_and_isr``) into leader and ISR change
events and keeps the last ``window_s`` seconds: it costs O(changes), also while nobody watches.
``Rates.observe`` turns size totals and LEOs into bytes/s and records/s per table.

Who may call: ``fluss_py/console/routes.py`` (ConsoleFeed's sampling task; the view's hook, from the event
processor's task), on the coordinator's loop.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fluss_py.console.groups import groups_view
from fluss_py.console.leader_view import GroupView, LeaderView
from fluss_py.types import CoordinatorLeaderInfo, LeaderAndIsr, TableBucket
from fluss_py.zk.codecs import CoordinatorRegistration, TabletServerRegistration

TIMELINE_WINDOW_S = 3600.0
TIMELINE_MAX_EVENTS = 5000  # a mass failover of thousands of buckets still fits; older events are dropped


@dataclass
class ConsoleSource:
    """One read of the leader's state. ``view`` is None on a coordinator that is not the serving leader."""

    coordinator: dict[str, Any]
    view: LeaderView | None = None
    live: set[int] = field(default_factory=set)
    servers: Mapping[int, TabletServerRegistration] = field(default_factory=dict)
    sizes: Mapping[TableBucket, int] = field(default_factory=dict)
    offsets: Mapping[int, Mapping[TableBucket, tuple[int, int]]] = field(default_factory=dict)  # per server
    rebalance: dict[str, Any] | None = None
    coordinators: list[dict[str, Any]] = field(default_factory=list)
    disk: Mapping[int, tuple[int, list[tuple[str, int, int]]]] = field(default_factory=dict)  # per server
    groups: Mapping[str, GroupView] = field(default_factory=dict)  # the leader's in-memory membership
    committed: Mapping[str, Mapping[TableBucket, int]] = field(default_factory=dict)  # last read from ZooKeeper
    committed_at: float | None = None  # when (wall clock) that read finished; None: never


def coordinators_view(
    registered: list[CoordinatorRegistration], candidates: list[int], leader: CoordinatorLeaderInfo | None
) -> list[dict[str, Any]]:
    """Every coordinator as ZooKeeper knows it (pure): ``registered`` from ``coordinator/servers``,
    ``candidates`` the server ids of ``coordinator/election`` in election order, ``leader`` the leader node.
    State: ``Leader`` (the leader node names it), ``Standby`` (registered and in the election, ``rank`` its
    place in the line of succession), ``Registered`` (registered, not a candidate: starting or stepping
    down). A leader or candidate without a registration is listed too (its address unknown)."""
    regs = {r.server_id: r for r in registered}
    ids = set(regs) | set(candidates) | ({leader.server_id} if leader is not None else set())
    leader_id = leader.server_id if leader is not None else None
    standbys = [sid for sid in candidates if sid != leader_id]
    out = []
    for sid in sorted(ids):
        reg = regs.get(sid)
        state = "Leader" if sid == leader_id else "Standby" if sid in standbys else "Registered"
        out.append({
            "id": sid,
            "host": f"{reg.host}:{reg.port}" if reg is not None else "",
            "http_port": reg.http_port if reg is not None else 0,
            "state": state,
            "epoch": leader.epoch if leader is not None and sid == leader_id else None,
            "rank": standbys.index(sid) + 1 if state == "Standby" else None,
        })  # fmt: skip
    return out


def build_snapshot(source: ConsoleSource, now: float) -> dict[str, Any]:
    """The console's JSON document (docs/console.md lists its fields)."""
    view = source.view
    out: dict[str, Any] = {"ts": now, "coordinator": source.coordinator, "coordinators": source.coordinators,
                           "servers": [], "tables": [], "buckets": []}  # fmt: skip
    if view is None:
        return out
    # a server that holds replicas but is not registered (dead) is shown too, as not alive; so is a tagged one
    known = set(source.servers) | {sid for b in view.buckets.values() for sid in b.replicas} | set(view.tagged)
    stats = {sid: {"leaders": 0, "replicas": 0, "under_replicated": 0} for sid in known}
    tables: dict[int, dict[str, Any]] = {}
    for table_id, info in sorted(view.tables.items()):
        tables[table_id] = {
            "id": table_id,
            "name": f"{info.path.database}.{info.path.table}",
            "buckets": info.num_buckets,
            "replication_factor": info.replication_factor,
            "bytes": 0,
            "records": 0,  # the sum of the buckets' known LEOs
            "under_replicated": 0,
            "offline": 0,
        }
    for tb, bucket in sorted(view.buckets.items()):
        lai = bucket.leader_and_isr
        leader = lai.leader if lai is not None else -1
        isr = list(lai.isr) if lai is not None else []
        offline = leader not in source.live or view.is_offline(tb)
        under = not offline and len(isr) < len(bucket.replicas)
        size = int(source.sizes.get(tb, 0))
        hw, leo = source.offsets.get(leader, {}).get(tb, (-1, -1))  # the current leader's last report
        table = tables.get(tb.table_id)
        if table is not None:
            table["bytes"] += size
            table["records"] += max(0, leo)
            table["under_replicated"] += under
            table["offline"] += offline
        for sid in bucket.replicas:
            if sid in stats:
                stats[sid]["replicas"] += 1
                stats[sid]["under_replicated"] += under and sid == leader
        if leader in stats:
            stats[leader]["leaders"] += 1
        out["buckets"].append(
            {
                "table_id": tb.table_id,
                "bucket": tb.bucket,
                "leader": leader,
                "leader_epoch": lai.leader_epoch if lai is not None else -1,
                "replicas": list(bucket.replicas),
                "isr": isr,
                "size": size,
                "hw": hw,
                "leo": leo,
                "under_replicated": under,
                "offline": offline,
            }
        )
    out["tables"] = list(tables.values())
    out["servers"] = [{"id": sid, **_server(source.servers.get(sid)), "alive": sid in source.live,
                       "tag": view.tagged.get(sid, "none"), **stats[sid], **_disk(source.disk.get(sid))}
                      for sid in sorted(known)]  # fmt: skip
    out["rebalance"] = source.rebalance

    def hw(tb: TableBucket) -> int:
        bucket = view.buckets.get(tb)
        lai = bucket.leader_and_isr if bucket is not None else None
        return source.offsets.get(lai.leader, {}).get(tb, (-1, -1))[0] if lai is not None else -1

    committed = {
        g: {tb: o for tb, o in offsets.items() if tb.table_id in view.tables} for g, offsets in source.committed.items()
    }  # a dropped table's offsets stay in ZooKeeper only
    out["groups"] = groups_view(source.groups, committed, hw)
    out["groups_read"] = source.committed_at
    return out


def _server(reg: TabletServerRegistration | None) -> dict[str, str]:
    return {"host": f"{reg.host}:{reg.port}", "rack": reg.rack} if reg is not None else {"host": "", "rack": ""}


def _disk(report: tuple[int, list[tuple[str, int, int]]] | None) -> dict[str, Any]:
    """``held``: bytes of its replicas; ``free``/``total``: summed over its data directories whose filesystem
    answered (None when none did, or before its first report); ``dirs``: [path, free, total] each, -1 unknown."""
    if report is None:
        return {"held": None, "free": None, "total": None, "dirs": []}
    held, dirs = report
    known = [(f, t) for _, f, t in dirs if f >= 0 and t >= 0]
    free, total = (sum(f for f, _ in known), sum(t for _, t in known)) if known else (None, None)
    return {"held": held, "free": free, "total": total, "dirs": [list(d) for d in dirs]}


class Timeline:
    """Leader and ISR changes of the view's buckets as they happen, newest last, at most ``window_s`` old.
    Fed by ConsoleFeed from the leader's view (``ClusterView.on_leader_and_isr``), read by its sampling task."""

    def __init__(self, window_s: float = TIMELINE_WINDOW_S, max_events: int = TIMELINE_MAX_EVENTS) -> None:
        self.window_s = window_s
        self._events: deque[dict[str, Any]] = deque(maxlen=max_events)

    def record(self, now: float, table: str, bucket: int, old: LeaderAndIsr | None, new: LeaderAndIsr) -> None:
        """A bucket's LeaderAndIsr went from ``old`` to ``new`` at ``now``: a ``leader`` event when the leader
        changed, an ``isr`` event when the ISR set did (both, for an election that also shrank it). A bucket's
        first LeaderAndIsr (``old`` None: a new table) is no event."""
        if old is None:
            return
        if old.leader != new.leader:
            self._add(now, table, bucket, "leader", old.leader, new.leader, new.leader_epoch)
        if set(old.isr) != set(new.isr):
            self._add(now, table, bucket, "isr", list(old.isr), list(new.isr), new.leader_epoch)
        self._expire(now)

    def clear(self) -> None:
        """Another term's view: its timeline starts empty."""
        self._events.clear()

    def _expire(self, now: float) -> None:
        while self._events and self._events[0]["ts"] < now - self.window_s:
            self._events.popleft()

    def _add(self, ts: float, table: str, bucket: int, kind: str, old: Any, new: Any, epoch: int) -> None:
        self._events.append(
            {"ts": ts, "table": table, "bucket": bucket, "kind": kind, "from": old, "to": new, "leader_epoch": epoch}
        )

    def events(self, now: float) -> list[dict[str, Any]]:
        self._expire(now)
        return list(self._events)


class Rates:
    """Bytes/s and records/s per table from the growth of its size and of its buckets' LEOs over the last
    ``window_s`` seconds (both come with the liveness heartbeats, every few seconds, so a rate over one sample
    would jump between 0 and a spike). Records/s adds up the LEO growth of the buckets whose LEO is known at
    both ends of the window, each at least 0: a bucket whose LEO is unknown for a while (a failover, until
    the new leader reports) or goes back (a new leader truncated) is no spike. Owned by ConsoleFeed's
    sampling task."""

    def __init__(self, window_s: float = 10.0) -> None:
        self.window_s = window_s
        self._history: deque[tuple[float, dict[int, int], dict[tuple[int, int], int]]] = deque()

    def observe(self, snapshot: dict[str, Any]) -> None:
        now = float(snapshot["ts"])
        if self._history and self._history[-1][0] < now - self.window_s:
            self._history.clear()  # nobody watched for a while (no samples): a rate starts again from here
        totals = {t["id"]: int(t["bytes"]) for t in snapshot["tables"]}
        leos = {(b["table_id"], b["bucket"]): int(b["leo"]) for b in snapshot["buckets"] if b["leo"] >= 0}
        while len(self._history) > 1 and self._history[1][0] <= now - self.window_s:
            self._history.popleft()
        first = self._history[0] if self._history else None
        grown: dict[int, int] = {}
        if first is not None:
            for key, leo in leos.items():
                before = first[2].get(key)
                if before is not None and leo > before:
                    grown[key[0]] = grown.get(key[0], 0) + leo - before
        for t in snapshot["tables"]:
            rate = records = 0.0
            if first is not None and now > first[0]:
                if t["id"] in first[1]:
                    rate = max(0.0, (totals[t["id"]] - first[1][t["id"]]) / (now - first[0]))
                records = grown.get(t["id"], 0) / (now - first[0])
            t["bytes_per_s"] = round(rate, 1)
            t["records_per_s"] = round(records, 1)
        self._history.append((now, totals, leos))
