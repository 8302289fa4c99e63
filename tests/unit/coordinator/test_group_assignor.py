"""The uniform sticky assignor (coordinator/group_assignor.py), exhaustively over small groups."""

from __future__ import annotations

import itertools
import random

from fluss_py.coordinator.group_assignor import assign, assign_units
from fluss_py.types import TableBucket


def _check_uniform(target: dict[str, set[TableBucket]], subs: dict[str, set[int]], counts: dict[int, int]) -> None:
    owners: dict[TableBucket, str] = {}
    for m, tbs in target.items():
        for tb in tbs:
            assert tb not in owners, f"{tb} given to {owners[tb]} and {m}"
            assert tb.table_id in subs[m], f"{tb} given to {m}, which does not subscribe to its table"
            owners[tb] = m
    for t, n in counts.items():
        members = [m for m in subs if t in subs[m]]
        expected = {TableBucket(t, b) for b in range(n)} if members else set()
        assert {tb for tb in owners if tb.table_id == t} == expected
        shares = [sum(1 for tb in target[m] if tb.table_id == t) for m in members]
        if shares:
            assert max(shares) - min(shares) <= 1, shares


def test_every_bucket_once_and_shares_differ_by_at_most_one_exhaustively() -> None:
    for n_members, n_buckets in itertools.product(range(0, 7), range(0, 14)):
        subs = {f"m{i}": {1} for i in range(n_members)}
        target = assign(subs, {1: n_buckets}, {})
        _check_uniform(target, subs, {1: n_buckets})


def test_twelve_buckets_three_members_four_each() -> None:
    target = assign({"a": {1}, "b": {1}, "c": {1}}, {1: 12}, {})
    assert sorted(len(v) for v in target.values()) == [4, 4, 4]


def test_join_moves_only_what_it_must_exhaustively() -> None:
    for n_members, n_buckets in itertools.product(range(1, 7), range(0, 14)):
        subs = {f"m{i}": {1} for i in range(n_members)}
        before = assign(subs, {1: n_buckets}, {})
        subs["new"] = {1}
        after = assign(subs, {1: n_buckets}, before)
        _check_uniform(after, subs, {1: n_buckets})
        moved = sum(len(before[m] - after[m]) for m in before)
        assert moved == len(after["new"]), (n_members, n_buckets)  # only the newcomer's share moved
        assert len(after["new"]) == n_buckets // (n_members + 1)


def test_leave_spreads_only_the_leavers_buckets_exhaustively() -> None:
    for n_members, n_buckets in itertools.product(range(2, 7), range(0, 14)):
        subs = {f"m{i}": {1} for i in range(n_members)}
        before = assign(subs, {1: n_buckets}, {})
        for leaver in list(subs):
            rest = {m: s for m, s in subs.items() if m != leaver}
            after = assign(rest, {1: n_buckets}, before)
            _check_uniform(after, rest, {1: n_buckets})
            for m in rest:
                assert before[m] <= after[m], f"{m} lost buckets when {leaver} left"


def test_buckets_added_stay_sticky() -> None:
    subs = {"a": {1}, "b": {1}, "c": {1}}
    before = assign(subs, {1: 6}, {})
    after = assign(subs, {1: 12}, before)
    _check_uniform(after, subs, {1: 12})
    for m in subs:
        assert before[m] <= after[m]


def test_bucket_removed_or_table_gone_is_not_assigned() -> None:
    subs = {"a": {1, 2}, "b": {1, 2}}
    before = assign(subs, {1: 4, 2: 4}, {})
    after = assign(subs, {1: 4}, before)  # table 2 was dropped
    _check_uniform(after, subs, {1: 4})
    assert all(tb.table_id == 1 for tbs in after.values() for tb in tbs)


def test_mixed_subscriptions_and_global_balance() -> None:
    # three one-bucket tables, three members: one bucket each (not all to the same member)
    subs = {"a": {1, 2, 3}, "b": {1, 2, 3}, "c": {1, 2, 3}}
    target = assign(subs, {1: 1, 2: 1, 3: 1}, {})
    assert sorted(len(v) for v in target.values()) == [1, 1, 1]
    subs = {"a": {1}, "b": {1, 2}, "c": {2}}
    target = assign(subs, {1: 4, 2: 4}, {})
    _check_uniform(target, subs, {1: 4, 2: 4})


def test_random_histories_keep_invariants_and_determinism() -> None:
    rng = random.Random(15)
    for _ in range(300):
        counts = {t: rng.randrange(0, 10) for t in range(1, rng.randrange(2, 4))}
        subs = {f"m{i}": set(rng.sample(sorted(counts), rng.randrange(1, len(counts) + 1)))
                for i in range(rng.randrange(1, 6))}  # fmt: skip
        previous = assign(subs, counts, {})
        for _step in range(5):
            if rng.random() < 0.5 and len(subs) > 1:
                subs.pop(rng.choice(sorted(subs)))
            else:
                subs[f"x{rng.randrange(1000)}"] = set(rng.sample(sorted(counts), 1))
            target = assign(subs, counts, previous)
            _check_uniform(target, subs, counts)
            assert target == assign(subs, counts, previous)
            previous = target


def test_a_corrupt_previous_target_with_a_bucket_twice_is_repaired() -> None:
    prev = {"a": {TableBucket(1, 0)}, "b": {TableBucket(1, 0)}}
    target = assign({"a": {1}, "b": {1}}, {1: 2}, prev)
    _check_uniform(target, {"a": {1}, "b": {1}}, {1: 2})


def _unit(*tables: tuple[int, int]) -> list[TableBucket]:
    return [TableBucket(t, b) for t, n in tables for b in range(n)]


def test_a_partitioned_unit_is_balanced_over_all_its_partitions() -> None:
    subs = {"a": {1}, "b": {1}, "c": {1}}
    target = assign_units(subs, {1: _unit((11, 2), (12, 2), (13, 2))}, {})
    assert sorted(len(v) for v in target.values()) == [2, 2, 2]
    assert set().union(*target.values()) == set(_unit((11, 2), (12, 2), (13, 2)))


def test_partitions_appearing_and_going_move_no_bucket_the_shares_let_stay_exhaustively() -> None:
    for n_members, n_parts, per_part in itertools.product(range(1, 5), range(0, 5), range(1, 4)):
        subs = {f"m{i}": {1} for i in range(n_members)}
        parts = [(100 + p, per_part) for p in range(n_parts)]
        before = assign_units(subs, {1: _unit(*parts)}, {})
        grown = assign_units(subs, {1: _unit(*parts, (200, per_part))}, before)
        assert set().union(*grown.values()) == set(_unit(*parts, (200, per_part)))
        assert max(map(len, grown.values())) - min(map(len, grown.values())) <= 1
        assert all(before[m] <= grown[m] for m in subs)  # shares only grow: no existing bucket moves
        if parts:
            shrunk = assign_units(subs, {1: _unit(*parts[1:])}, before)
            gone = set(_unit(parts[0]))
            assert set().union(*shrunk.values()) == set(_unit(*parts[1:]))
            for m in subs:  # a member keeps what it had, minus the dropped partition, up to its share
                assert len((before[m] - gone) - shrunk[m]) <= 1


def test_a_bucket_two_units_stand_for_goes_to_the_lower_unit_only() -> None:
    # member a subscribes to the logical table 1 (partition 11), b to the partition 11 by name
    target = assign_units({"a": {1}, "b": {11}}, {1: _unit((11, 3)), 11: _unit((11, 3))}, {})
    assert target == {"a": set(_unit((11, 3))), "b": set()}
