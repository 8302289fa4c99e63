"""Server tags, pure (docs/rebalance.md §12): parsing, the stored form, the refusal rule case by case and
against a brute-force count, leaderships off tagged servers, when a dead server is due."""

import itertools

import pytest

from fluss_py.coordinator.rebalance.planner import BucketPlacement
from fluss_py.coordinator.server_tags import (
    ServerTag,
    TagEntry,
    check_tag_change,
    decode_tags,
    due_for_replacement,
    encode_tags,
    leaders_off,
    min_isr_of,
    serving,
)
from fluss_py.coordinator.tables import BucketInfo
from fluss_py.errors import ErrorCode, InvalidRequestError, InvalidServerTagError, TabletServerNotExistError
from fluss_py.types import LeaderAndIsr, TableBucket

PERM, TEMP = ServerTag.PERMANENT_OFFLINE, ServerTag.TEMPORARY_OFFLINE


def tb(b: int) -> TableBucket:
    return TableBucket(1, b)


def placement(*buckets: tuple[int, ...]) -> dict[TableBucket, BucketPlacement]:
    return {tb(i): BucketPlacement(r, r[0]) for i, r in enumerate(buckets)}


def check(server, new, *, tags=None, live, placement, min_isr=2, covered=(), known=None):
    if known is None:
        known = set(live) | {s for p in placement.values() for s in p.replicas} | set(tags or {})
    check_tag_change(
        server, new, tags=tags or {}, live=set(live), known=known, placement=placement,
        min_isr=lambda _tb, n: min(min_isr, n), covered=set(covered),
    )  # fmt: skip


# ---------------------------------------------------------------- parsing and the stored form


def test_parse_spellings():
    assert ServerTag.parse("permanent-offline") is PERM
    assert ServerTag.parse("temporary-offline") is TEMP
    assert ServerTag.parse("none") is None
    for bad in ("", "PERMANENT_OFFLINE", "offline", "none ", "permanent-offline\n"):
        with pytest.raises(InvalidRequestError, match="permanent-offline, temporary-offline or none"):
            ServerTag.parse(bad)


def test_encode_decode_round_trip_and_bad_input():
    tags = {3: TagEntry(PERM, 1700, "auto", "dead for 600s"), 1: TagEntry(TEMP, 5)}
    assert decode_tags(encode_tags(tags)) == tags
    assert encode_tags(tags) == {
        "1": {"tag": "temporary-offline", "since_ms": 5, "by": "operator", "reason": ""},
        "3": {"tag": "permanent-offline", "since_ms": 1700, "by": "auto", "reason": "dead for 600s"},
    }
    for bad in ({"x": {"tag": "permanent-offline"}}, {"1": {"tag": "gone"}}, {"1": "permanent-offline"},
                {"-1": {"tag": "permanent-offline"}}):  # fmt: skip
        with pytest.raises(ValueError):
            decode_tags(bad)


# ---------------------------------------------------------------- refusals, case by case (the table in §12.2)


def test_unknown_server_is_refused():
    with pytest.raises(TabletServerNotExistError, match="tablet server 9 is unknown") as e:
        check(9, PERM, live={1, 2, 3}, placement=placement((1, 2, 3)))
    assert e.value.code is ErrorCode.TABLET_SERVER_NOT_EXIST
    # a dead server hosting replicas is known; so is a tagged one that hosts nothing any more
    check(4, PERM, live={1, 2, 3}, placement=placement((4, 2, 3)), covered={tb(0)})
    check(5, None, tags={5: PERM}, live={1, 2, 3}, placement=placement((1, 2, 3)))


def test_the_last_live_untagged_server_cannot_be_tagged():
    p = placement((1,), (2,))
    with pytest.raises(InvalidServerTagError, match="last live"):
        check(1, TEMP, tags={2: TEMP}, live={1, 2}, placement=p, min_isr=1)
    with pytest.raises(InvalidServerTagError, match="last live"):
        check(1, PERM, live={1}, placement={}, known={1})
    check(1, None, tags={1: TEMP}, live={1}, placement=p, min_isr=1)  # untagging is always fine


def test_permanent_offline_of_a_dead_server_is_never_refused_for_min_isr():
    # 2 of 3 dead: buckets are already below min ISR; the tag only adds replicas
    p = placement((1, 2, 3), (3, 1, 2))
    check(3, PERM, live={1, 4}, placement=p, covered=set())
    check(3, PERM, live={1, 4}, placement=p, covered={tb(0)})


def test_temporary_offline_of_a_dead_server_changes_nothing_serving():
    check(3, TEMP, live={1}, placement=placement((1, 2, 3)))


def test_temporary_offline_of_a_live_server_below_min_isr_is_refused_naming_the_bucket():
    p = placement((1, 2, 3), (4, 5, 6))
    with pytest.raises(InvalidServerTagError) as e:
        check(1, TEMP, live={1, 2, 4, 5, 6}, placement=p)  # 3 is dead: bucket 0 serves on 1, 2
    assert "1-0" in e.value.message and "2 -> 1" in e.value.message and "min ISR 2" in e.value.message
    check(1, TEMP, live={1, 2, 3}, placement=placement((1, 2, 3)))  # 3 -> 2 serving: fine
    check(1, TEMP, live={1, 2, 4, 5, 6}, placement=p, min_isr=1)  # min ISR 1: 2 -> 1 is fine


def test_another_tag_counts_as_not_serving():
    p = placement((1, 2, 3))
    with pytest.raises(InvalidServerTagError):
        check(3, TEMP, tags={2: TEMP}, live={1, 2, 3}, placement=p)


def test_decommission_of_a_live_server_is_refused_only_without_a_target():
    p = placement((1, 2, 3))
    check(1, PERM, live={1, 2, 3, 4}, placement=p, covered={tb(0)})
    with pytest.raises(InvalidServerTagError, match="min ISR"):
        check(1, PERM, live={1, 2, 3}, placement=placement((1, 2)), covered=set())
    check(1, PERM, live={1, 2, 3}, placement=p, covered=set())  # 3 -> 2 serving, still min ISR 2


def test_a_single_replica_bucket_cannot_lose_its_only_serving_replica():
    with pytest.raises(InvalidServerTagError, match="1 -> 0"):
        check(1, TEMP, live={1, 2}, placement=placement((1,), (2,)))


def test_min_isr_of_a_bucket():
    assert min_isr_of({}, 3, 2) == 2
    assert min_isr_of({"min.insync.replicas": "3"}, 3, 2) == 3
    assert min_isr_of({"min.insync.replicas": "3"}, 2, 2) == 2  # clamped to the replica count
    assert min_isr_of({}, 1, 2) == 1
    assert min_isr_of({"min.insync.replicas": "bogus"}, 3, 2) == 2  # as the tablet servers: the server's value


def test_serving_counts_live_untagged_replicas():
    assert serving((1, 2, 3), {1, 2, 3}, {}) == 3
    assert serving((1, 2, 3), {1, 2}, {2: TEMP}) == 1


@pytest.mark.parametrize("servers", [3, 4])
def test_every_change_on_small_clusters_agrees_with_a_brute_force_count(servers):
    """Every (server, old tag, new tag, live set, replica sets, coverage) on 3-4 servers: refused exactly when
    some bucket of the server loses a serving replica and ends below its min ISR, or no live untagged server
    would be left. Nothing else raises."""
    ids = range(1, servers + 1)
    buckets = [(1, 2, 3), (2, 3), (3,), tuple(ids)[-3:]]
    p = placement(*buckets)
    options = (None, PERM, TEMP)
    cases = refused = 0
    for s, old, new in itertools.product(ids, options, options):
        if old == new:
            continue
        for live_n in range(1, servers + 1):
            for live in itertools.combinations(ids, live_n):
                for cover in (set(), {t for t, b in p.items() if s in b.replicas}):
                    tags = {s: old} if old else {}
                    after = {**tags, s: new} if new else {}
                    cases += 1
                    expect = bool(new) and not (set(live) - set(after))
                    for t, b in p.items():
                        if s not in b.replicas:
                            continue
                        before_n = serving(b.replicas, set(live), tags)
                        after_n = serving(b.replicas, set(live), after) + (new is PERM and t in cover)
                        expect |= after_n < before_n and after_n < min(2, len(b.replicas))
                    try:
                        check(s, new, tags=tags, live=live, placement=p, covered=cover, known=set(ids))
                        got = False
                    except InvalidServerTagError:
                        got = True
                    assert got == expect, (s, old, new, live, cover)
                    refused += got
    assert 0 < refused < cases


# ---------------------------------------------------------------- leaderships off tagged servers


def lai(leader, isr, epoch=3):
    return LeaderAndIsr(leader, epoch, tuple(isr), 1, 7)


def test_leaders_move_to_the_first_live_untagged_isr_member_with_the_isr_unchanged():
    buckets = {
        tb(0): BucketInfo((1, 2, 3), lai(1, (1, 2, 3))),  # 1 tagged: -> 2
        tb(1): BucketInfo((3, 1, 2), lai(1, (1, 2, 3))),  # -> 3 (assignment order)
        tb(2): BucketInfo((1, 2, 3), lai(1, (1, 3))),  # 2 out of sync: -> 3
        tb(3): BucketInfo((1, 2, 3), lai(1, (1,))),  # nobody else in sync: stays
        tb(4): BucketInfo((2, 1, 3), lai(2, (1, 2, 3))),  # not led by a tagged server
        tb(5): BucketInfo((1, 2, 3), lai(1, (1, 2, 3))),  # busy (a rebalance move)
        tb(6): BucketInfo((1, 2, 4), lai(1, (1, 2, 4))),  # -> 2, unless 2 is shutting down (4 is dead)
    }
    changes = dict(leaders_off(buckets, {1}, {1, 2, 3}, set(), {tb(5)}, 9))
    assert {t: c.leader for t, c in changes.items()} == {tb(0): 2, tb(1): 3, tb(2): 3, tb(6): 2}
    for t, c in changes.items():
        old = buckets[t].leader_and_isr
        assert c.isr == old.isr and c.leader_epoch == old.leader_epoch + 1 and c.coordinator_epoch == 9
    assert tb(6) not in dict(leaders_off(buckets, {1}, {1, 2, 3}, {2}, set(), 9))
    assert leaders_off(buckets, set(), {1, 2, 3}, set(), set(), 9) == []


# ---------------------------------------------------------------- when a dead server is due


def test_due_for_replacement():
    dead = {3: 100.0, 4: 150.0, 5: 10.0}
    assert due_for_replacement(dead, 700.0, 600.0, {}) == [3, 5]
    assert due_for_replacement(dead, 700.0, 600.0, {5: TEMP}) == [3]  # an operator's tag wins
    assert due_for_replacement(dead, 700.0, 0.0, {}) == []  # off
