"""The consumer-group assignor: uniform and sticky, a pure function (docs/consumer-groups.md).

    assign(subscriptions, buckets, previous) -> target

``subscriptions``: member id -> subscribed table ids; ``buckets``: table id -> bucket count (tables absent
from it are not assigned); ``previous``: the last target (member id -> TableBuckets). Per table its
subscribers split its buckets into shares of ``n // k`` or ``n // k + 1`` (exactly ``n % k`` members get
the larger one); a member keeps as many of its previous buckets as its share allows (the members that held
the most get the larger shares), and the buckets left over go to the members below their share, the least
loaded over all tables first, then by member id. So a join takes from the others only what it must and a
leave spreads only the leaver's buckets. Deterministic: the same inputs give the same target.

Who calls it: ``GroupMembers`` (coordinator event loop) when the group epoch moves; unit tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

from fluss_py.types import TableBucket


def assign(
    subscriptions: Mapping[str, Set[int]],
    buckets: Mapping[int, int],
    previous: Mapping[str, Set[TableBucket]],
) -> dict[str, set[TableBucket]]:
    target: dict[str, set[TableBucket]] = {m: set() for m in subscriptions}
    load = dict.fromkeys(subscriptions, 0)
    for table_id in sorted(buckets):
        n = buckets[table_id]
        members = sorted(m for m, tables in subscriptions.items() if table_id in tables)
        if not members or n <= 0:
            continue
        kept = {
            m: sorted(tb.bucket for tb in previous.get(m, ()) if tb.table_id == table_id and 0 <= tb.bucket < n)
            for m in members
        }
        _drop_duplicates(kept, members)
        base, extra = divmod(n, len(members))
        # The members holding the most get the larger shares (ties: the least loaded overall, then lower id),
        # so fewer buckets move and tables with fewer buckets than members spread over different members.
        by_holding = sorted(members, key=lambda m: (-len(kept[m]), load[m], m))
        share = {m: base + (1 if i < extra else 0) for i, m in enumerate(by_holding)}
        owned: set[int] = set()
        for m in members:
            kept[m] = kept[m][: share[m]]
            owned.update(kept[m])
        for bucket in range(n):
            if bucket in owned:
                continue
            m = min((m for m in members if len(kept[m]) < share[m]), key=lambda m: (load[m], len(kept[m]), m))
            kept[m].append(bucket)
        for m in members:
            target[m].update(TableBucket(table_id, b) for b in kept[m])
            load[m] += len(kept[m])
    return target


def _drop_duplicates(kept: dict[str, list[int]], members: list[str]) -> None:
    """A bucket claimed by two previous targets (never produced by ``assign``) stays with the first member."""
    seen: set[int] = set()
    for m in members:
        kept[m] = [b for b in kept[m] if not (b in seen or seen.add(b))]  # type: ignore[func-returns-value]
