"""The authorization decision: DENY wins, nothing allowing means no, resources nest, DESCRIBE is implied."""

import pytest

from fluss_py.security.acl import decide, enclosing
from fluss_py.security_types import CLUSTER, Acl, Operation, PatternType, Permission, Resource, ResourceType, table

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


PAYROLL, PART = table("db", "payroll"), table("db", "payroll$20261201")
EVERY_TABLE_OP = (Operation.READ, Operation.WRITE, Operation.DROP, Operation.DESCRIBE, Operation.ALTER)


def test_a_partition_lies_in_its_logical_table() -> None:
    assert enclosing(PART) == [PART, PAYROLL, Resource(D, "db"), CLUSTER]
    assert enclosing(table("db", "plain")) == [table("db", "plain"), Resource(D, "db"), CLUSTER]


@pytest.mark.parametrize("op", EVERY_TABLE_OP)
def test_deny_on_a_partitioned_table_covers_its_partitions(op: Operation) -> None:
    acls = [acl("alice", D, "db", op), acl("alice", T, "db.payroll", op, DENY)]
    assert decide(acls, "alice", op, table("db", "other"))
    assert not decide(acls, "alice", op, PAYROLL)
    assert not decide(acls, "alice", op, PART)


@pytest.mark.parametrize("op", EVERY_TABLE_OP)
def test_allow_on_a_partitioned_table_covers_its_partitions(op: Operation) -> None:
    acls = [acl("alice", T, "db.payroll", op)]
    assert decide(acls, "alice", op, PART)
    assert not decide(acls, "alice", op, table("db", "payroll2$20261201"))  # another table's partition


def test_prefixed_acls_match_partitions_by_their_own_or_their_tables_name() -> None:
    deny = [acl("alice", D, "db", Operation.READ), acl("alice", T, "db.pay", Operation.READ, DENY, PRE)]
    assert not decide(deny, "alice", Operation.READ, PART)
    # a prefix reaching into partition names covers those partitions only, not the table nor the others
    acls = [acl("alice", D, "db", Operation.READ), acl("alice", T, "db.payroll$2026", Operation.READ, DENY, PRE)]
    assert not decide(acls, "alice", Operation.READ, PART)
    assert decide(acls, "alice", Operation.READ, table("db", "payroll$20251201"))
    assert decide(acls, "alice", Operation.READ, PAYROLL)


def test_an_acl_naming_a_partition_covers_that_partition_only() -> None:
    acls = [acl("alice", T, "db.payroll$20261201", Operation.READ)]
    assert decide(acls, "alice", Operation.READ, PART)
    assert not decide(acls, "alice", Operation.READ, PAYROLL)
    assert not decide(acls, "alice", Operation.READ, table("db", "payroll$20261202"))
    # it can narrow a grant on the table, never widen a DENY on it (DENY wins)
    narrowed = [acl("alice", T, "db.payroll", Operation.READ), acl("alice", T, PART.name, Operation.READ, DENY)]
    assert not decide(narrowed, "alice", Operation.READ, PART)
    assert decide(narrowed, "alice", Operation.READ, table("db", "payroll$20261202"))
    widened = [acl("alice", T, "db.payroll", Operation.READ, DENY), acl("alice", T, PART.name, Operation.READ)]
    assert not decide(widened, "alice", Operation.READ, PART)


def test_describe_configs_is_implied_by_alter_only_and_implies_nothing() -> None:

    def grant(op: Operation) -> list[Acl]:
        return [Acl("p", ResourceType.CLUSTER, PatternType.LITERAL, "cluster", op, Permission.ALLOW)]

    assert decide(grant(Operation.DESCRIBE_CONFIGS), "p", Operation.DESCRIBE_CONFIGS, CLUSTER)
    assert decide(grant(Operation.ALTER), "p", Operation.DESCRIBE_CONFIGS, CLUSTER)  # Kafka: ALTER_CONFIGS does
    for op in (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DROP, Operation.DESCRIBE):
        assert not decide(grant(op), "p", Operation.DESCRIBE_CONFIGS, CLUSTER), op
    # a scraper's grant shows no table: DESCRIBE_CONFIGS does not imply DESCRIBE
    assert not decide(grant(Operation.DESCRIBE_CONFIGS), "p", Operation.DESCRIBE, CLUSTER)
    assert not decide(grant(Operation.DESCRIBE_CONFIGS), "p", Operation.DESCRIBE, Resource(ResourceType.TABLE, "d.t"))
