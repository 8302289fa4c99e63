"""The rebalance planner: current placement + live servers + bucket sizes -> a plan of moves. Pure.

Objective (docs/rebalance.md): minimise moved bytes (moved replicas x their size) subject to

1. a bucket's replicas stay on distinct servers, and its rack spread never shrinks (with racks on every
   server: a bucket on 3 racks stays on 3 racks; one on 2 of 3 racks may only gain racks);
2. replica counts per server end with ``spread = pstdev / mean <= threshold`` — or, when no placement can
   reach the threshold (few replicas over many servers), as close as counts allow (max - min <= 1) and
   the plan says so in ``notes``;
3. leaders balanced too, by the same criterion, with leadership transfers to existing ISR members
   (no data moves for leader balance);
4. batches of ``ceil(batch_ratio x moves)`` moves, in which no server is touched (as source or target)
   by more than ``max_concurrent`` moves, and a bucket appears at most once.

Algorithm (greedy, deterministic): the most even counts put ``total mod servers`` servers at ceil(mean)
and the rest at floor(mean). While the counts are not balanced, make the cheapest legal move from a
server that must shed (above ceil, or at ceil while too many are) to one that must receive (below
floor, or at floor while too few are at ceil), count gap >= 2; ties: the emptiest target, the most
loaded source, followers before leaders, bucket order. No move is wasted (no server both sheds and
receives), so the number of moves is the least that reaches the final counts. Without racks the most
and least loaded servers always have a legal move, so the counts always end balanced. A replica placed
by a move is never moved again; a moved leader hands its leadership to its replacement. The greedy is
not a global optimum of bytes (a min-cost-flow assignment would be).
Then leaders: while not balanced, move a leadership from the most to the least leading server, to an ISR
member (a replica placed by an earlier move counts: it joins the ISR before its move completes; the
leadership transfer runs in a later batch).

No move when both counts are already balanced (``spread <= threshold`` or max - min <= 1).

Who may call: anyone (no I/O, no clock). The executor calls it on the coordinator's event loop.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fluss_py import config as cfg
from fluss_py.errors import InvalidRebalancePlanError
from fluss_py.types import TableBucket


@dataclass(frozen=True, slots=True)
class BucketPlacement:
    """Where a bucket lives now: replicas (preferred leader first), its leader and ISR (empty: = replicas)."""

    replicas: tuple[int, ...]
    leader: int
    isr: tuple[int, ...] = ()

    @property
    def in_sync(self) -> tuple[int, ...]:
        return self.isr or self.replicas


class MoveKind(enum.Enum):
    REPLICA = "replica"  # copy the bucket to to_server, then delete it on from_server
    LEADERSHIP = "leadership"  # to_server already holds an in-sync replica: a controlled leader switch


@dataclass(frozen=True, slots=True)
class Move:
    """One step of a plan. For a REPLICA move ``leader_move`` says the moved replica led the bucket and the
    new replica takes the leadership; a LEADERSHIP move always has ``leader_move`` and 0 bytes."""

    bucket: TableBucket
    from_server: int
    to_server: int
    bytes: int
    leader_move: bool
    kind: MoveKind = MoveKind.REPLICA

    def to_json(self) -> dict[str, Any]:
        return {
            "table_id": self.bucket.table_id,
            "bucket": self.bucket.bucket,
            "from": self.from_server,
            "to": self.to_server,
            "bytes": self.bytes,
            "leader_move": self.leader_move,
            "kind": self.kind.value,
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Move:
        return cls(
            TableBucket(int(d["table_id"]), int(d["bucket"])),
            int(d["from"]),
            int(d["to"]),
            int(d["bytes"]),
            bool(d["leader_move"]),
            MoveKind(d.get("kind", MoveKind.REPLICA.value)),
        )

    def __str__(self) -> str:
        what = "leadership" if self.kind is MoveKind.LEADERSHIP else f"replica ({self.bytes} B)"
        lead = " +leader" if self.kind is MoveKind.REPLICA and self.leader_move else ""
        return f"{self.bucket} {what}{lead}: {self.from_server} -> {self.to_server}"


@dataclass(frozen=True, slots=True)
class PlanOptions:
    threshold: float = 0.1
    batch_ratio: float = 0.2
    max_concurrent: int = 5

    @classmethod
    def from_config(cls, config: Any) -> PlanOptions:
        return cls(
            float(config[cfg.REBALANCE_TRIGGER_THRESHOLD]),
            float(config[cfg.REBALANCE_BATCH_RATIO]),
            int(config[cfg.REBALANCE_MAX_CONCURRENT]),
        )

    def __post_init__(self) -> None:
        if not 0 < self.batch_ratio <= 1:
            raise InvalidRebalancePlanError(f"batch ratio must be in (0, 1], got {self.batch_ratio}")
        if self.max_concurrent < 1:
            raise InvalidRebalancePlanError(f"max concurrent migrations must be >= 1, got {self.max_concurrent}")
        if self.threshold < 0:
            raise InvalidRebalancePlanError(f"threshold must be >= 0, got {self.threshold}")


def spread(counts: Iterable[int]) -> float:
    """Population standard deviation over mean (0 for no servers or no replicas)."""
    values = list(counts)
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return statistics.pstdev(values) / mean if mean else 0.0


def is_balanced(counts: Sequence[int], threshold: float) -> bool:
    """Under the threshold, or as even as whole numbers allow (max - min <= 1)."""
    return not counts or spread(counts) <= threshold or max(counts) - min(counts) <= 1


@dataclass(frozen=True)
class Plan:
    """A rebalance plan: moves in execution order, grouped into batches (indices into ``moves``)."""

    moves: tuple[Move, ...]
    batches: tuple[tuple[int, ...], ...]
    replicas_before: Mapping[int, int]
    replicas_after: Mapping[int, int]
    leaders_before: Mapping[int, int]
    leaders_after: Mapping[int, int]
    threshold: float
    notes: tuple[str, ...] = ()
    assignment_after: Mapping[TableBucket, BucketPlacement] = field(default_factory=dict, compare=False)

    @property
    def moved_bytes(self) -> int:
        return sum(m.bytes for m in self.moves if m.kind is MoveKind.REPLICA)

    @property
    def replica_moves(self) -> int:
        return sum(1 for m in self.moves if m.kind is MoveKind.REPLICA)

    @property
    def spread_before(self) -> float:
        return spread(self.replicas_before.values())

    @property
    def spread_after(self) -> float:
        return spread(self.replicas_after.values())

    @property
    def leader_spread_before(self) -> float:
        return spread(self.leaders_before.values())

    @property
    def leader_spread_after(self) -> float:
        return spread(self.leaders_after.values())

    @property
    def threshold_met(self) -> bool:
        return self.spread_after <= self.threshold

    def batch(self, index: int) -> list[Move]:
        return [self.moves[i] for i in self.batches[index]]

    def to_json(self) -> dict[str, Any]:
        def counts(m: Mapping[int, int]) -> dict[str, int]:
            return {str(k): v for k, v in sorted(m.items())}

        return {
            "moves": [m.to_json() for m in self.moves],
            "batches": [list(b) for b in self.batches],
            "replicas_before": counts(self.replicas_before),
            "replicas_after": counts(self.replicas_after),
            "leaders_before": counts(self.leaders_before),
            "leaders_after": counts(self.leaders_after),
            "threshold": self.threshold,
            "notes": list(self.notes),
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Plan:
        def counts(m: Mapping[str, Any]) -> dict[int, int]:
            return {int(k): int(v) for k, v in m.items()}

        return cls(
            tuple(Move.from_json(m) for m in d["moves"]),
            tuple(tuple(int(i) for i in b) for b in d["batches"]),
            counts(d["replicas_before"]),
            counts(d["replicas_after"]),
            counts(d["leaders_before"]),
            counts(d["leaders_after"]),
            float(d["threshold"]),
            tuple(str(n) for n in d.get("notes", ())),
        )

    def summary(self) -> str:
        """Human-readable: totals, spreads, and a per-server before/after table."""
        lines = [
            f"{self.replica_moves} replica move(s), {len(self.moves) - self.replica_moves} leadership transfer(s), "
            f"{self.moved_bytes} bytes, {len(self.batches)} batch(es)",
            f"replica spread (stddev/mean) {self.spread_before:.3f} -> {self.spread_after:.3f} "
            f"(threshold {self.threshold}); leader spread {self.leader_spread_before:.3f} -> "
            f"{self.leader_spread_after:.3f}",
            f"{'server':>8} {'replicas':>14} {'leaders':>14}",
        ]
        for s in sorted(set(self.replicas_before) | set(self.replicas_after)):
            rb, ra = self.replicas_before.get(s, 0), self.replicas_after.get(s, 0)
            lb, la = self.leaders_before.get(s, 0), self.leaders_after.get(s, 0)
            lines.append(f"{s:>8} {f'{rb} -> {ra}':>14} {f'{lb} -> {la}':>14}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)


class _State:
    """The evolving placement while planning."""

    def __init__(self, assignment: Mapping[TableBucket, BucketPlacement], servers: Mapping[int, str | None]) -> None:
        self.servers = sorted(servers)
        racks = {s: (servers[s] or "") for s in self.servers}
        self.racks = racks if self.servers and all(racks.values()) else None
        self.num_racks = len(set(racks.values())) if self.racks else 0
        self.replicas = {tb: list(p.replicas) for tb, p in assignment.items()}
        self.leader = {tb: p.leader for tb, p in assignment.items()}
        self.isr = {tb: set(p.in_sync) for tb, p in assignment.items()}
        self.placed: set[tuple[TableBucket, int]] = set()  # replicas a move created: never moved again
        self.replica_moved: set[TableBucket] = set()

    def counts(self) -> dict[int, int]:
        c = Counter(s for r in self.replicas.values() for s in r)
        return {s: c[s] for s in self.servers}

    def leader_counts(self) -> dict[int, int]:
        c = Counter(self.leader.values())
        return {s: c[s] for s in self.servers}

    def rack_spread(self, replicas: Iterable[int]) -> int:
        assert self.racks is not None
        return len({self.racks[s] for s in replicas})

    def may_move(self, tb: TableBucket, src: int, dst: int) -> bool:
        replicas = self.replicas[tb]
        if dst in replicas or (tb, src) in self.placed:
            return False
        if self.racks is None:
            return True
        after = [dst if s == src else s for s in replicas]
        return self.rack_spread(after) >= self.rack_spread(replicas)


def _check(assignment: Mapping[TableBucket, BucketPlacement], servers: Mapping[int, str | None]) -> None:
    if not servers:
        raise InvalidRebalancePlanError("no live tablet servers")
    for tb, p in assignment.items():
        if len(set(p.replicas)) != len(p.replicas) or not p.replicas:
            raise InvalidRebalancePlanError(f"bucket {tb} has an invalid replica list {list(p.replicas)}")
        if len(p.replicas) > len(servers):
            raise InvalidRebalancePlanError(
                f"bucket {tb} has {len(p.replicas)} replicas but only {len(servers)} tablet server(s) are live"
            )
        dead = [s for s in p.replicas if s not in servers]
        if dead:
            raise InvalidRebalancePlanError(
                f"bucket {tb} has replicas on tablet server(s) {dead} that are not live; "
                "a rebalance needs every replica's server up"
            )


def plan_rebalance(
    assignment: Mapping[TableBucket, BucketPlacement],
    servers: Mapping[int, str | None],
    sizes: Mapping[TableBucket, int],
    options: PlanOptions = PlanOptions(),
) -> Plan:
    """Plan moves over ``servers`` (live id -> rack, "" or None for none). ``sizes``: bytes per bucket
    (missing: 0). Raises INVALID_REBALANCE_PLAN when no plan can be made (replicas on dead servers,
    more replicas than live servers)."""
    _check(assignment, servers)
    state = _State(assignment, servers)
    replicas_before, leaders_before = state.counts(), state.leader_counts()
    notes: list[str] = []
    moves = _replica_moves(state, sizes, options.threshold, notes)
    moves += _leader_moves(state, options.threshold, notes)
    replicas_after = state.counts()
    if moves and spread(replicas_after.values()) > options.threshold and not notes:
        notes.append(
            f"threshold {options.threshold} not achievable: the most even counts give spread "
            f"{spread(replicas_after.values()):.3f}"
        )
    after = {
        tb: BucketPlacement(_leader_first(state.replicas[tb], state.leader[tb]), state.leader[tb])
        if tb in state.replica_moved or state.leader[tb] != assignment[tb].leader
        else assignment[tb]
        for tb in assignment
    }
    return Plan(
        tuple(moves),
        make_batches(moves, options.batch_ratio, options.max_concurrent),
        replicas_before,
        replicas_after,
        leaders_before,
        state.leader_counts(),
        options.threshold,
        tuple(notes),
        after,
    )


def _leader_first(replicas: list[int], leader: int) -> tuple[int, ...]:
    return (leader, *[r for r in replicas if r != leader]) if leader in replicas else tuple(replicas)


def _replica_moves(state: _State, sizes: Mapping[TableBucket, int], threshold: float, notes: list[str]) -> list[Move]:
    on: dict[int, list[TableBucket]] = {s: [] for s in state.servers}
    for tb, replicas in state.replicas.items():
        for s in replicas:
            on[s].append(tb)
    for s, tbs in on.items():  # smallest first; followers before leaders; bucket order
        tbs.sort(key=lambda tb, s=s: (sizes.get(tb, 0), state.leader[tb] == s, tb))
    moves: list[Move] = []
    counts = state.counts()
    while not is_balanced(list(counts.values()), threshold):
        chosen = _next_replica_move(state, on, counts, sizes)
        if chosen is None:
            notes.append(
                f"threshold {threshold} not reached: no further legal replica move (rack or placement constraints); "
                f"spread {spread(counts.values()):.3f}"
            )
            break
        tb, src, dst = chosen
        leader_move = state.leader[tb] == src
        state.replicas[tb] = [dst if s == src else s for s in state.replicas[tb]]
        if leader_move:
            state.leader[tb] = dst
        state.isr[tb] = (state.isr[tb] - {src}) | {dst}
        state.placed.add((tb, dst))
        state.replica_moved.add(tb)
        on[src].remove(tb)
        counts[src] -= 1
        counts[dst] += 1
        moves.append(Move(tb, src, dst, int(sizes.get(tb, 0)), leader_move))
    return moves


def _next_replica_move(
    state: _State, on: Mapping[int, list[TableBucket]], counts: Mapping[int, int], sizes: Mapping[TableBucket, int]
) -> tuple[TableBucket, int, int] | None:
    """The cheapest legal move that brings the counts toward the most even ones (floor/ceil of the mean).

    With ``k`` = total mod servers, the most even counts put ``k`` servers at ceil and the rest at floor.
    A source must shed: above ceil, or at ceil while more than ``k`` servers are at ceil or above. A
    target must receive: below floor, or at floor while fewer than ``k`` are at ceil or above. With a
    count gap >= 2 every move is one that any most-even placement needs, so no move is wasted. Each
    (source, target) pair offers the source's first legal replica (smallest first); the smallest offer
    wins, ties going to the emptiest target, then the most loaded source."""
    total, n = sum(counts.values()), len(counts)
    floor, k = divmod(total, n)
    ceil = floor + (1 if k else 0)
    high = sum(1 for c in counts.values() if c >= ceil)
    sources = [s for s in state.servers if counts[s] > ceil or (counts[s] == ceil and high > k and k)]
    targets = [s for s in state.servers if counts[s] < floor or (counts[s] == floor and high < k)]
    best: tuple[tuple[int, int, int, int, int], tuple[TableBucket, int, int]] | None = None
    for src in sources:
        for dst in targets:
            if counts[src] - counts[dst] < 2:
                continue
            tb = next((tb for tb in on[src] if state.may_move(tb, src, dst)), None)
            if tb is not None:
                key = (int(sizes.get(tb, 0)), counts[dst], -counts[src], src, dst)
                if best is None or key < best[0]:
                    best = (key, (tb, src, dst))
    return best[1] if best else None


def _leader_moves(state: _State, threshold: float, notes: list[str]) -> list[Move]:
    moves: list[Move] = []
    counts = state.leader_counts()
    while not is_balanced(list(counts.values()), threshold):
        chosen = None
        by_load = sorted(state.servers, key=lambda s: (-counts[s], s))
        by_space = sorted(state.servers, key=lambda s: (counts[s], s))
        for src in by_load:
            for dst in by_space:
                if counts[src] - counts[dst] < 2:
                    break
                for tb in sorted(state.leader):
                    if state.leader[tb] == src and dst in state.replicas[tb] and dst in state.isr[tb]:
                        chosen = (tb, src, dst)
                        break
                if chosen:
                    break
            if chosen:
                break
        if chosen is None:
            notes.append(
                f"leaders not balanced: no in-sync replica can take over a leadership; "
                f"leader spread {spread(counts.values()):.3f}"
            )
            break
        tb, src, dst = chosen
        state.leader[tb] = dst
        counts[src] -= 1
        counts[dst] += 1
        moves.append(Move(tb, src, dst, 0, True, MoveKind.LEADERSHIP))
    return moves


def make_batches(
    moves: Sequence[Move], batch_ratio: float, max_concurrent: int, sources: Sequence[int] | None = None
) -> tuple[tuple[int, ...], ...]:
    """Group moves (indices) into batches of at most ``ceil(batch_ratio x len(moves))``; in a batch no server
    is touched by more than ``max_concurrent`` moves and no bucket twice; a bucket's moves keep their order
    (each lands in a later batch than the bucket's previous move). First fit, in plan order. ``sources``: per
    move the server its copy comes from (default: ``from_server``; a replacement's is the bucket's leader)."""
    if not moves:
        return ()
    size = max(1, math.ceil(batch_ratio * len(moves)))
    batches: list[list[int]] = []
    touched: list[Counter[int]] = []
    last_batch: dict[TableBucket, int] = {}
    # Every batch before first_free[s] already has max_concurrent moves touching server s, and every batch
    # before first_room is full: first fit may start there (both only move forward: linear, not moves x batches).
    first_free: dict[int, int] = {}
    first_room = 0
    for i, move in enumerate(moves):
        source = move.from_server if sources is None else sources[i]
        ends = (source, move.to_server)
        b = max(last_batch.get(move.bucket, -1) + 1, first_room, *(first_free.get(s, 0) for s in ends))
        while b < len(batches) and (len(batches[b]) >= size or any(touched[b][s] >= max_concurrent for s in ends)):
            b += 1
        if b == len(batches):
            batches.append([])
            touched.append(Counter())
        batches[b].append(i)
        for s in ends:
            touched[b][s] += 1
            f = first_free.get(s, 0)
            while f < len(batches) and touched[f][s] >= max_concurrent:
                f += 1
            first_free[s] = f
        while first_room < len(batches) and len(batches[first_room]) >= size:
            first_room += 1
        last_batch[move.bucket] = b
    return tuple(tuple(b) for b in batches)
