"""The replacement plan (pure, docs/rebalance.md §12.3): exactly the replicas on permanent-offline servers move,
to eligible servers not hosting the bucket, racks kept, counts even, batches capped per copy source."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from fluss_py.coordinator.assignment import assign_replicas
from fluss_py.coordinator.rebalance.planner import BucketPlacement, MoveKind, Plan, PlanOptions
from fluss_py.coordinator.rebalance.replacement import plan_replacement
from fluss_py.types import TableBucket


def placement_of(assignment: dict[int, tuple[int, ...]], dead: set[int] = frozenset()):
    """Leaders: the first replica not dead (as a failover would leave them); a bucket all dead: its first."""
    out = {}
    for b, replicas in assignment.items():
        alive = [r for r in replicas if r not in dead]
        out[TableBucket(1, b)] = BucketPlacement(replicas, alive[0] if alive else replicas[0])
    return out


def apply(placement, plan: Plan, gone, eligible) -> dict[TableBucket, list[int]]:
    """Apply the moves in order, checking I1 for each against the state it finds."""
    replicas = {tb: list(p.replicas) for tb, p in placement.items()}
    for m in plan.moves:
        assert m.kind is MoveKind.REPLICA
        assert m.from_server in gone and m.to_server in eligible, m
        assert m.from_server in replicas[m.bucket] and m.to_server not in replicas[m.bucket], m
        assert m.leader_move == (placement[m.bucket].leader == m.from_server)
        replicas[m.bucket] = [m.to_server if r == m.from_server else r for r in replicas[m.bucket]]
    return replicas


def test_a_dead_server_of_four_is_emptied_onto_the_three_others():
    a = assign_replicas({1: "", 2: "", 3: "", 4: ""}, 30, 3)
    p = placement_of(a, dead={3})
    plan = plan_replacement(p, {3}, {1: "", 2: "", 4: ""}, {1, 2, 4}, {})
    after = apply(p, plan, {3}, {1, 2, 4})
    assert plan.replica_moves == sum(1 for r in a.values() if 3 in r) and not plan.notes
    assert all(sorted(r) == [1, 2, 4] for tb, r in after.items() if 3 in p[tb].replicas)
    assert all(r == list(p[tb].replicas) for tb, r in after.items() if 3 not in p[tb].replicas)  # nothing else moves
    assert plan.replicas_after == {1: 30, 2: 30, 3: 0, 4: 30}


def test_counts_end_even_on_five_servers():
    a = assign_replicas({s: "" for s in range(1, 6)}, 40, 3)
    p = placement_of(a, dead={2})
    plan = plan_replacement(p, {2}, {1: "", 3: "", 4: "", 5: ""}, {1, 3, 4, 5}, {})
    apply(p, plan, {2}, {1, 3, 4, 5})
    counts = [plan.replicas_after[s] for s in (1, 3, 4, 5)]
    assert max(counts) - min(counts) <= 1 and plan.replicas_after[2] == 0


def test_racks_a_target_adds_a_rack_the_survivors_lack():
    # racks: 1,2 in a; 3,4 in b; 5,6 in c. Bucket on 1 (a), 3 (b), 5 (c); 5 dies: the target must be 6 (rack c)
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"}
    p = {TableBucket(1, 0): BucketPlacement((1, 3, 5), 1)}
    eligible = {s: r for s, r in racks.items() if s != 5}
    plan = plan_replacement(p, {5}, eligible, set(eligible), {}, racks=racks)
    assert [(m.from_server, m.to_server) for m in plan.moves] == [(5, 6)]


def test_a_live_decommissioned_leader_hands_over_and_is_the_copy_source():
    p = {TableBucket(1, b): BucketPlacement((1, 2, 3), 1) for b in range(6)}
    plan = plan_replacement(p, {1}, {2: "", 3: "", 4: ""}, {1, 2, 3, 4}, {}, PlanOptions(0.1, 1.0, 2))
    assert all(m.leader_move and m.to_server == 4 for m in plan.moves)
    assert [len(b) for b in plan.batches] == [2, 2, 2]  # the cap: 2 copies per source (1) and per target (4)


def test_a_dead_source_does_not_count_against_the_cap():
    """The copy comes from each bucket's leader: 6 buckets led by 3 different servers, cap 2 on each."""
    p = {TableBucket(1, b): BucketPlacement((b % 3 + 1, 9), b % 3 + 1) for b in range(6)}
    plan = plan_replacement(p, {9}, {1: "", 2: "", 3: "", 4: "", 5: "", 6: ""}, {1, 2, 3, 4, 5, 6}, {},
                            PlanOptions(0.1, 1.0, 2))  # fmt: skip
    assert len(plan.batches) == 1 and len(plan.moves) == 6


def test_leaderless_buckets_and_buckets_without_a_target_are_noted_not_moved():
    p = {
        TableBucket(1, 0): BucketPlacement((3,), 3),  # RF 1 on the dead server: nothing to copy from
        TableBucket(1, 1): BucketPlacement((1, 2, 3), 1),  # no eligible server left outside 1, 2
        TableBucket(1, 2): BucketPlacement((1, 3), 1),
    }
    plan = plan_replacement(p, {3}, {1: "", 2: ""}, {1, 2}, {})
    assert [(m.bucket.bucket, m.to_server) for m in plan.moves] == [(2, 2)]
    assert any("no live leader" in n and "1-0" in n for n in plan.notes)
    assert any("no eligible server" in n and "1-1" in n for n in plan.notes)


def test_nothing_to_replace_is_an_empty_plan():
    p = {TableBucket(1, 0): BucketPlacement((1, 2), 1)}
    plan = plan_replacement(p, {3}, {1: "", 2: ""}, {1, 2}, {})
    assert plan.moves == () and plan.batches == ()


@st.composite
def clusters(draw):
    n = draw(st.integers(3, 7))
    servers = list(range(1, n + 1))
    with_racks = draw(st.booleans())
    racks = {s: draw(st.sampled_from("abc")) if with_racks else "" for s in servers}
    buckets = draw(st.integers(1, 25))
    assignment = {}
    for b in range(buckets):
        rf = draw(st.integers(1, min(3, n)))
        assignment[b] = tuple(draw(st.permutations(servers))[:rf])
    gone = set(draw(st.lists(st.sampled_from(servers), min_size=1, max_size=2, unique=True)))
    dead = {s for s in gone if draw(st.booleans())}
    others_dead = set(draw(st.lists(st.sampled_from([s for s in servers if s not in gone]), max_size=1)))
    live = set(servers) - dead - others_dead
    sizes = {TableBucket(1, b): draw(st.integers(0, 1000)) for b in range(buckets)}
    return racks, assignment, gone, live, dead | others_dead, sizes


@settings(max_examples=300, deadline=None)
@given(clusters(), st.integers(1, 4))
def test_properties(cluster, cap):
    racks, assignment, gone, live, dead, sizes = cluster
    p = placement_of(assignment, dead)
    eligible = {s: racks[s] for s in live if s not in gone}
    options = PlanOptions(0.1, 0.5, cap)
    plan = plan_replacement(p, gone, eligible, live, sizes, options, racks=racks)
    after = apply(p, plan, gone, eligible)  # I1, move by move
    for tb, replicas in after.items():
        assert len(set(replicas)) == len(replicas) == len(p[tb].replicas)
        left = [r for r in replicas if r in gone]
        if left:  # only when it could not be moved, and the plan says why
            leaderless = p[tb].leader not in live
            no_target = not [s for s in eligible if s not in replicas]
            assert leaderless or no_target, (tb, replicas)
            assert any(str(tb) in n or " more" in n for n in plan.notes)  # the first 10 are named
    if eligible and all(eligible.values()):  # I2: a target adds a new rack whenever one was offered
        state = {tb: list(x.replicas) for tb, x in p.items()}
        for m in plan.moves:
            others = {racks[r] for r in state[m.bucket] if r != m.from_server and r not in gone}
            offered = {eligible[s] for s in eligible if s not in state[m.bucket]} - others
            assert not offered or eligible[m.to_server] not in others, (m, others, offered)
            state[m.bucket] = [m.to_server if r == m.from_server else r for r in state[m.bucket]]
    # batches: every move once, no bucket twice in a batch, the cap per server (a move's copy source is its
    # bucket's leader when it runs: a moved leader hands over to its target)
    leader, source = {tb: x.leader for tb, x in p.items()}, []
    for m in plan.moves:
        source.append(leader[m.bucket])
        if leader[m.bucket] == m.from_server:
            leader[m.bucket] = m.to_server
    flat = [i for b in plan.batches for i in b]
    assert sorted(flat) == list(range(len(plan.moves)))
    for batch in plan.batches:
        assert len({plan.moves[i].bucket for i in batch}) == len(batch)
        touched = Counter()
        for i in batch:
            m = plan.moves[i]
            touched[m.to_server] += 1
            touched[source[i]] += 1
        assert max(touched.values()) <= cap
    assert sum(plan.replicas_after.values()) == sum(plan.replicas_before.values())


def first_fit(moves, batch_ratio, cap, sources):
    """make_batches as first written: every move scans the batches from its bucket's last one (moves x batches)."""
    size = max(1, -(-int(batch_ratio * 1000) * len(moves) // 1000))
    batches, touched, last = [], [], {}
    for i, m in enumerate(moves):
        for b in range(last.get(m.bucket, -1) + 1, len(batches) + 1):
            if b == len(batches):
                batches.append([])
                touched.append(Counter())
            t = touched[b]
            if len(batches[b]) < size and t[sources[i]] < cap and t[m.to_server] < cap:
                batches[b].append(i)
                t[sources[i]] += 1
                t[m.to_server] += 1
                last[m.bucket] = b
                break
    return tuple(tuple(b) for b in batches)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 6), st.integers(1, 6), st.integers(1, 6), st.integers(1, 6)), max_size=60),
    st.sampled_from([0.1, 0.25, 0.5, 1.0]),
    st.integers(1, 4),
)
def test_make_batches_is_the_plain_first_fit(raw, ratio, cap):
    """The pointers that make make_batches linear (20,000 buckets: one dead server's 10,000 moves plan in
    about 0.4 s here, batching was 1.5 s of it before) change no batch."""
    from fluss_py.coordinator.rebalance.planner import Move, make_batches

    moves = [Move(TableBucket(1, b), f, t if t != f else f % 6 + 1, 0, False) for b, f, t, _ in raw]
    sources = [s for *_, s in raw]
    assert make_batches(moves, ratio, cap, sources) == first_fit(moves, ratio, cap, sources)
    assert make_batches(moves, ratio, cap) == first_fit(moves, ratio, cap, [m.from_server for m in moves])
