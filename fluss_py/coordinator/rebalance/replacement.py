"""The replacement plan: the replicas on permanent-offline servers, each to an eligible server. Pure.

It moves exactly those replicas (no balancing move, no leadership transfer; docs/rebalance.md §12.3). For
each replica on a replaced server S, buckets in (table, bucket) order, the target T is an eligible server
(live, untagged, not shutting down) that does not host the bucket; with a rack on every eligible server, the
one that maximises the racks spanned by the bucket's other replicas (not on replaced servers) plus T; then
the fewest replicas (the plan so far counted), the fewest planned bytes, the smallest id. Skipped with a
note: a bucket whose leader is not live (nothing to copy from) and a bucket with no eligible target.

Batches as a rebalance's (``make_batches``), except that a move's copy source is the bucket's leader, not S:
a dead S serves nothing, so the concurrency cap counts the copies each leader serves and each target takes.

Who may call: anyone (no I/O, no clock). The tag room calls it on the coordinator's event loop, through
the rebalance executor that runs the plan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Set

from fluss_py.coordinator.rebalance.planner import BucketPlacement, Move, Plan, PlanOptions, make_batches
from fluss_py.types import TableBucket

MAX_NAMED = 10  # buckets a note names


def plan_replacement(
    placement: Mapping[TableBucket, BucketPlacement],
    gone: Set[int],
    eligible: Mapping[int, str | None],
    live: Set[int],
    sizes: Mapping[TableBucket, int],
    options: PlanOptions | None = None,
    racks: Mapping[int, str | None] | None = None,
) -> Plan:
    """Moves of every replica on a ``gone`` server to an ``eligible`` one (id -> rack). ``live``: the live
    servers (a bucket's leader must be one to copy from); ``sizes``: bytes per bucket (missing: 0);
    ``racks``: the racks of other known servers (the buckets' surviving replicas)."""
    options = options or PlanOptions()
    rack_of = {**(racks or {}), **eligible}
    use_racks = bool(eligible) and all(eligible.values())
    counts: Counter[int] = Counter(s for p in placement.values() for s in p.replicas)
    before = Counter(counts)
    leaders_before = Counter(p.leader for p in placement.values())
    planned: Counter[int] = Counter()  # bytes planned onto each target
    replicas = {tb: list(p.replicas) for tb, p in placement.items()}
    leader = {tb: p.leader for tb, p in placement.items()}
    moves: list[Move] = []
    sources: list[int] = []
    leaderless: list[TableBucket] = []
    stuck: list[TableBucket] = []
    for tb in sorted(placement):
        on_gone = [r for r in placement[tb].replicas if r in gone]
        if not on_gone:
            continue
        if leader[tb] not in live:
            leaderless.append(tb)
            continue
        size = int(sizes.get(tb, 0))
        for s in on_gone:
            others = {rack_of.get(r) for r in replicas[tb] if r != s and r not in gone} - {None, ""}
            candidates = [c for c in eligible if c not in replicas[tb]]
            if not candidates:
                stuck.append(tb)
                continue

            def key(c: int, others: set = others) -> tuple[int, int, int, int]:
                spanned = len(others | {eligible[c]}) if use_racks else 0
                return (-spanned, counts[c], planned[c], c)

            target = min(candidates, key=key)
            moves.append(Move(tb, s, target, size, leader[tb] == s))
            sources.append(leader[tb])
            replicas[tb] = [target if r == s else r for r in replicas[tb]]
            counts[s] -= 1
            counts[target] += 1
            planned[target] += size
            if leader[tb] == s:
                leader[tb] = target
    notes = []
    if leaderless:
        notes.append(f"{len(leaderless)} bucket(s) have no live leader, nothing to copy from (moved once one "
                     f"leads again): {_named(leaderless)}")  # fmt: skip
    if stuck:
        notes.append(f"{len(stuck)} bucket(s) have no eligible server to take a replica (fewer live untagged "
                     f"servers than replicas): {_named(stuck)}")  # fmt: skip
    servers = sorted(set(eligible) | set(gone))
    moved = [tb for tb in placement if replicas[tb] != list(placement[tb].replicas)]
    after = {tb: BucketPlacement(tuple(replicas[tb]), leader[tb]) for tb in moved}
    return Plan(
        tuple(moves),
        make_batches(moves, options.batch_ratio, options.max_concurrent, sources),
        {s: before[s] for s in servers},
        {s: counts[s] for s in servers},
        {s: leaders_before[s] for s in servers},
        {s: sum(1 for tb in placement if leader[tb] == s) for s in servers},
        options.threshold,
        tuple(notes),
        after,
    )


def _named(buckets: list[TableBucket]) -> str:
    shown = ", ".join(str(tb) for tb in sorted(set(buckets))[:MAX_NAMED])
    return shown + (f" and {len(set(buckets)) - MAX_NAMED} more" if len(set(buckets)) > MAX_NAMED else "")
