"""Replica assignment for a new table: which servers host each bucket, preferred leader first. Pure.

Rules (checked by ``tests/unit/coordinator/test_assignment.py`` with hypothesis):

1. A bucket's replicas are distinct servers; replication factor > live servers ->
   INVALID_REPLICATION_FACTOR and nothing is assigned.
2. Leaders (first replicas) go round-robin over the servers, so leader counts differ by at most 1.
3. Followers: each pick goes to the server with the lowest *projected* replica count (replicas placed
   so far + leaderships still to come), ties broken by Kafka's shifted ring order
   ``(first + 1 + (shift + j) % (n - 1)) % n`` with ``shift`` growing once per round of n buckets, so
   the followers of one server's buckets spread over many servers (a dead leader's load spreads out).
   Result: replica counts differ by at most 1 when racks do not constrain the choice.
4. Racks (used only when every server has one, like Kafka's "safe" mode): the leader order alternates
   racks, and a follower comes from a rack the bucket does not use yet while such a rack exists, so
   no two replicas of a bucket share a rack when replication factor <= number of racks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from fluss_py.errors import InvalidReplicationFactorError, InvalidRequestError


def rack_alternated(servers: Mapping[int, str]) -> list[int]:
    """Server ids interleaved by rack: r1's first, r2's first, ..., r1's second, ... (Kafka's order).

    Without racks (any server lacks one) simply the ids in ascending order.
    """
    ids = sorted(servers)
    if not ids or not all(servers[i] for i in ids):
        return ids
    by_rack: dict[str, list[int]] = {}
    for i in ids:
        by_rack.setdefault(servers[i], []).append(i)
    columns = [by_rack[r] for r in sorted(by_rack)]
    out: list[int] = []
    for row in range(max(len(c) for c in columns)):
        out.extend(c[row] for c in columns if row < len(c))
    return out


def assign_replicas(
    servers: Mapping[int, str],
    num_buckets: int,
    replication_factor: int,
    *,
    start_index: int = 0,
    first_shift: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Assign ``num_buckets`` buckets of ``replication_factor`` replicas over ``servers`` (id -> rack).

    ``start_index`` and ``first_shift`` rotate the layout (callers vary them per table, e.g. from the
    table id, so that bucket 0 of every table does not land on the same server). Returns
    ``{bucket: (leader, follower, ...)}``.
    """
    n = len(servers)
    if num_buckets < 1:
        raise InvalidRequestError(f"bucket count must be at least 1, got {num_buckets}")
    if replication_factor < 1:
        raise InvalidReplicationFactorError(f"replication factor must be at least 1, got {replication_factor}")
    if replication_factor > n:
        raise InvalidReplicationFactorError(
            f"replication factor {replication_factor} is larger than the number of live tablet servers ({n})"
        )
    order = rack_alternated(servers)
    racks = {s: servers[s] for s in order} if all(servers[s] for s in order) else {}
    leaders = [order[(start_index + b) % n] for b in range(num_buckets)]
    rack_names = sorted(set(racks.values()))
    if racks and replication_factor <= len(rack_names):
        return _assign_rack_spread(order, racks, rack_names, leaders, replication_factor, start_index, first_shift)
    weights = dict.fromkeys(order, 1)
    placed = _place(order, weights, leaders, replication_factor, first_shift, prefer_new_rack=racks)
    return dict(enumerate(placed))


def _ring(units: list, leader_pos: int, shift: int) -> list:
    """Kafka's follower order after the unit at ``leader_pos``: ``(first + 1 + (shift + j) % (n-1)) % n``."""
    n = len(units)
    return [units[(leader_pos + 1 + (shift + j) % (n - 1)) % n] for j in range(n - 1)] if n > 1 else []


def _place(
    units: list,
    weights: Mapping,
    leaders: list,
    replication_factor: int,
    first_shift: int,
    prefer_new_rack: Mapping[int, str] | None = None,
) -> list[tuple]:
    """Leaders are given; pick ``replication_factor - 1`` distinct other units per bucket.

    Each pick: (if ``prefer_new_rack``) a unit of a rack the bucket does not use yet; then the unit with
    the least slack (buckets it can still follow minus followers it still needs); then the largest
    remaining quota; then the shifted ring order. With equal weights this keeps totals within 1.
    """
    quota = _follower_quotas(units, weights, leaders, replication_factor)
    could_follow = {u: sum(u != ld for ld in leaders) for u in units}
    racks = prefer_new_rack or {}
    position = {u: i for i, u in enumerate(units)}
    out: list[tuple] = []
    for b, leader in enumerate(leaders):
        ring = _ring(units, position[leader], first_shift + b // len(units))
        chosen = [leader]
        used_racks = {racks.get(leader)}
        for _ in range(replication_factor - 1):
            candidates = [(j, u) for j, u in enumerate(ring) if u not in chosen]
            _, pick = min(
                candidates,
                key=lambda ju: (
                    racks.get(ju[1]) in used_racks,
                    could_follow[ju[1]] - quota[ju[1]],
                    -quota[ju[1]],
                    ju[0],
                ),
            )
            chosen.append(pick)
            quota[pick] -= 1
            used_racks.add(racks.get(pick))
        for u in units:
            if u != leader:
                could_follow[u] -= 1
        out.append(tuple(chosen))
    return out


def _follower_quotas(units: list, weights: Mapping, leaders: list, replication_factor: int) -> dict:
    """How many follower replicas each unit should get so that totals follow the weights.

    Total replicas R = buckets * RF; unit u gets floor(R * w_u / W), and the remaining ones go first to
    the units that lead more buckets, then along ``units`` from the first leader on (so, with racks,
    the extra replicas alternate racks as the leaders do).
    """
    n = len(units)
    total = len(leaders) * replication_factor
    weight_sum = sum(weights[u] for u in units)
    led = Counter(leaders)
    target = {u: total * weights[u] // weight_sum for u in units}
    extra = total - sum(target.values())
    start = units.index(leaders[0])
    by_leads = sorted(range(n), key=lambda k: (-led[units[k]], (k - start) % n))
    for rank, k in enumerate(by_leads):
        target[units[k]] += 1 if rank < extra else 0
    return {u: target[u] - led[u] for u in units}


def _assign_rack_spread(
    order: list[int],
    racks: Mapping[int, str],
    rack_names: list[str],
    leaders: list[int],
    replication_factor: int,
    start_index: int,
    first_shift: int,
) -> dict[int, tuple[int, ...]]:
    """RF <= racks: first choose each bucket's racks (the leader's + RF-1 others, weighted by rack
    size), then a server inside each chosen rack, balancing servers within the rack."""
    members = {r: [s for s in order if racks[s] == r] for r in rack_names}
    leader_racks = [racks[ld] for ld in leaders]
    rack_units = sorted(rack_names, key=lambda r: order.index(members[r][0]))
    per_bucket_racks = _place(
        rack_units, {r: len(members[r]) for r in rack_names}, leader_racks, replication_factor, first_shift
    )
    # inside each rack: total replicas the rack received, spread over its servers, leaders fixed
    in_rack_quota: dict[int, int] = {}
    for r in rack_names:
        rack_total = sum(r in chosen for chosen in per_bucket_racks)
        rack_leaders = [ld for ld in leaders if racks[ld] == r]
        led = Counter(rack_leaders)
        p = len(members[r])
        by_leads = sorted(members[r], key=lambda s: (-led[s], members[r].index(s)))
        for rank, s in enumerate(by_leads):
            in_rack_quota[s] = rack_total // p + (1 if rank < rack_total % p else 0) - led[s]
    n = len(order)
    result: dict[int, tuple[int, ...]] = {}
    for b, leader in enumerate(leaders):
        rank = {s: j for j, s in enumerate(_ring(order, (start_index + b) % n, first_shift + b // n))}
        chosen = [leader]
        for r in per_bucket_racks[b][1:]:
            pick = min(members[r], key=lambda s: (-in_rack_quota[s], rank[s]))
            chosen.append(pick)
            in_rack_quota[pick] -= 1
        result[b] = tuple(chosen)
    return result
