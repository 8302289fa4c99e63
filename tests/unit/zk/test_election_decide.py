"""The pure election rule: smallest sequence wins, everyone else watches exactly its predecessor."""

import itertools

from fluss_py.zk.election import Decision, decide


def name(seq: int) -> str:
    return f"candidate_{seq:010d}"


def test_smallest_wins():
    assert decide(name(3), [name(7), name(3), name(5)]) == Decision(leader=True)


def test_others_watch_predecessor_not_the_leader():
    children = [name(1), name(4), name(9), name(12)]
    assert decide(name(12), children).predecessor == name(9)
    assert decide(name(9), children).predecessor == name(4)
    assert decide(name(4), children).predecessor == name(1)


def test_missing_own_candidate():
    assert decide(name(2), [name(1), name(3)]).missing


def test_order_is_numeric_and_foreign_children_ignored():
    children = [name(10), name(9), "lock-0000000001", name(100)]
    assert decide(name(9), children).leader
    assert decide(name(100), children).predecessor == name(10)


def test_every_permutation_gives_a_chain_without_herd():
    seqs = [2, 5, 6, 11]
    for perm in itertools.permutations(name(s) for s in seqs):
        decisions = {c: decide(c, perm) for c in perm}
        assert sum(d.leader for d in decisions.values()) == 1
        watched = [d.predecessor for d in decisions.values() if not d.leader]
        assert len(set(watched)) == len(watched) == len(seqs) - 1  # each node watched by at most one
