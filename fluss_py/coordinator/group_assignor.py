"""The consumer-group assignor: uniform and sticky, a pure function (docs/consumer-groups.md).

    assign_units(subscriptions, units, previous) -> target
    assign(subscriptions, buckets, previous) -> target        (every unit one plain table: id -> count)

``subscriptions``: member id -> subscribed table ids; ``units``: subscribed table id -> the buckets it
stands for (a plain table: its own buckets; the logical table of a partitioned table: every bucket of every
live partition), units absent from it are not assigned; ``previous``: the last target (member id ->
TableBuckets). Per unit its subscribers split its buckets into shares of ``n // k`` or ``n // k + 1``
(exactly ``n % k`` members get the larger one); a member keeps as many of its previous buckets as its share
allows (the members that held the most get the larger shares), and the buckets left over go to the members
below their share, the least loaded over all units first, then by member id. So a join takes from the
others only what it must, a leave spreads only the leaver's buckets, and a partition that appears is
spread over the members below their new share without moving any existing bucket the shares allow to stay.
A bucket that two units stand for (a partition subscribed both by name and through its logical table)
belongs to the unit with the lower table id only. Deterministic: the same inputs give the same target.

Who calls it: ``GroupMembers`` (coordinator event loop) when the group epoch moves; unit tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set

from fluss_py.types import TableBucket


def _order(tb: TableBucket) -> tuple[int, int]:
    return tb.table_id, tb.bucket


def assign(
    subscriptions: Mapping[str, Set[int]],
    buckets: Mapping[int, int],
    previous: Mapping[str, Set[TableBucket]],
) -> dict[str, set[TableBucket]]:
    """``assign_units`` where every unit is one plain table with ``buckets[table_id]`` buckets."""
    units = {t: [TableBucket(t, b) for b in range(n)] for t, n in buckets.items()}
    return assign_units(subscriptions, units, previous)


def assign_units(
    subscriptions: Mapping[str, Set[int]],
    units: Mapping[int, Sequence[TableBucket]],
    previous: Mapping[str, Set[TableBucket]],
) -> dict[str, set[TableBucket]]:
    target: dict[str, set[TableBucket]] = {m: set() for m in subscriptions}
    load = dict.fromkeys(subscriptions, 0)
    claimed: set[TableBucket] = set()  # by a unit with a lower id
    for unit in sorted(units):
        members = sorted(m for m, tables in subscriptions.items() if unit in tables)
        buckets = sorted({tb for tb in units[unit] if tb not in claimed}, key=_order)
        if not members or not buckets:
            continue
        claimed.update(buckets)
        n, in_unit = len(buckets), set(buckets)
        kept = {m: sorted((tb for tb in previous.get(m, ()) if tb in in_unit), key=_order) for m in members}
        _drop_duplicates(kept, members)
        base, extra = divmod(n, len(members))
        # The members holding the most get the larger shares (ties: the least loaded overall, then lower id),
        # so fewer buckets move and units with fewer buckets than members spread over different members.
        by_holding = sorted(members, key=lambda m: (-len(kept[m]), load[m], m))
        share = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_holding)}
        owned: set[TableBucket] = set()
        for m in members:
            kept[m] = kept[m][: share[m]]
            owned.update(kept[m])
        for tb in buckets:
            if tb in owned:
                continue
            m = min((m for m in members if len(kept[m]) < share[m]), key=lambda m: (load[m], len(kept[m]), m))
            kept[m].append(tb)
        for m in members:
            target[m].update(kept[m])
            load[m] += len(kept[m])
    return target


def _drop_duplicates(kept: dict[str, list[TableBucket]], members: list[str]) -> None:
    """A bucket claimed by two previous targets (never produced by ``assign``) stays with the first member."""
    seen: set[TableBucket] = set()
    for m in members:
        kept[m] = [tb for tb in kept[m] if not (tb in seen or seen.add(tb))]  # type: ignore[func-returns-value]
