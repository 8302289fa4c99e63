"""The authorization decision: DENY wins, nothing allowing means no, resources nest, DESCRIBE is implied."""

import pytest

from fluss_py.security.acl import (
    CLUSTER,
    Acl,
    Operation,
    PatternType,
    Permission,
    Resource,
    ResourceType,
    decide,
    enclosing,
    table,
)

pytestmark = pytest.mark.unit

T, D, G, C = ResourceType.TABLE, ResourceType.DATABASE, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = Permission.ALLOW, Permission.DENY


def acl(principal: str, kind: ResourceType, name: str, op: Operation, perm: Permission = ALLOW, pattern=LIT) -> Acl:
    return Acl(principal, kind, pattern, name, op, perm)


def test_nothing_allows_means_denied() -> None:
    assert not decide([], "alice", Operation.READ, table("db", "t"))
    assert not decide([acl("bob", T, "db.t", Operation.READ)], "alice", Operation.READ, table("db", "t"))


def test_literal_prefix_and_wildcards() -> None:
    assert decide([acl("alice", T, "db.t", Operation.READ)], "alice", Operation.READ, table("db", "t"))
    assert not decide([acl("alice", T, "db.t", Operation.READ)], "alice", Operation.READ, table("db", "t2"))
    assert decide([acl("alice", T, "db.", Operation.WRITE, pattern=PRE)], "alice", Operation.WRITE, table("db", "x"))
    assert not decide(
        [acl("alice", T, "db.", Operation.WRITE, pattern=PRE)], "alice", Operation.WRITE, table("dc", "x")
    )
    assert decide([acl("*", T, "*", Operation.READ)], "anyone", Operation.READ, table("a", "b"))


def test_deny_wins_over_any_allow_at_any_level() -> None:
    acls = [acl("alice", C, "cluster", Operation.WRITE), acl("alice", T, "db.secret", Operation.WRITE, DENY)]
    assert decide(acls, "alice", Operation.WRITE, table("db", "open"))
    assert not decide(acls, "alice", Operation.WRITE, table("db", "secret"))
    assert not decide([*acls, acl("*", D, "db", Operation.WRITE, DENY)], "alice", Operation.WRITE, table("db", "open"))


def test_enclosing_resources_cover_what_they_hold() -> None:
    assert enclosing(table("db", "t")) == [table("db", "t"), Resource(D, "db"), CLUSTER]
    assert enclosing(Resource(G, "g")) == [Resource(G, "g"), CLUSTER]
    assert decide([acl("alice", D, "db", Operation.READ)], "alice", Operation.READ, table("db", "t"))
    assert decide([acl("alice", C, "cluster", Operation.ALTER)], "alice", Operation.ALTER, CLUSTER)


def test_describe_is_implied_by_other_allows_but_deny_is_not_widened() -> None:
    assert decide([acl("alice", T, "db.t", Operation.WRITE)], "alice", Operation.DESCRIBE, table("db", "t"))
    assert not decide([acl("alice", T, "db.t", Operation.DESCRIBE)], "alice", Operation.READ, table("db", "t"))
    acls = [acl("alice", T, "db.t", Operation.READ), acl("alice", T, "db.t", Operation.WRITE, DENY)]
    assert decide(acls, "alice", Operation.DESCRIBE, table("db", "t"))
