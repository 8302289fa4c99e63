"""TableBucket: the per-bucket key of every server's dicts and sets hashes and compares without Python code.
Names: which ones ZooKeeper can store as a znode name; database and table names match whole."""

import pytest

from fluss_py.errors import InvalidDatabaseNameError, InvalidTableNameError
from fluss_py.types import TableBucket, validate_name, znode_name_problem


def test_table_bucket_hashes_and_orders_as_a_tuple() -> None:
    # a frozen dataclass runs a generated Python __hash__/__eq__/__lt__ building a tuple per call
    assert TableBucket.__hash__ is tuple.__hash__
    assert TableBucket.__eq__ is tuple.__eq__
    assert TableBucket.__lt__ is tuple.__lt__
    tb = TableBucket(3, 7)
    assert (tb.table_id, tb.bucket) == (3, 7) and str(tb) == "3-7"
    assert sorted([TableBucket(2, 1), TableBucket(1, 9), TableBucket(1, 2)]) == [(1, 2), (1, 9), (2, 1)]
    assert {TableBucket(1, 2): "x"}[TableBucket(1, 2)] == "x"


@pytest.mark.parametrize("name", ["g", "orders-2026", "g.v1", "g:1", "Grüße", "名前", "a b", "\uf900", "\uffef"])
def test_names_zookeeper_stores(name) -> None:
    assert znode_name_problem(name) is None


@pytest.mark.parametrize(
    "name",
    [
        "", ".", "..", "a/b", "/a", "a/", "a\x00", "a\n", "a\x7f", "a\x85", "a\x9f",
        "g\U0001f600",  # above U+FFFF: a surrogate pair in Java, refused
        "a\ud800", "a\ue000", "a\uf8ff",  # surrogates, private use
        "a\ufff0", "a\ufffc", "a\ufffd", "a\uffff",
    ],
)  # fmt: skip
def test_names_zookeeper_refuses(name) -> None:
    # ZooKeeper's PathUtils.validatePath over UTF-16 code units, plus '/' (a name is one component)
    assert znode_name_problem(name) is not None


@pytest.mark.parametrize("name", ["db\n", "db\r\n", "\ndb", "t$2026120105\n", "t\n$1"])
def test_database_and_table_names_match_whole(name) -> None:
    # "$" of a re.match pattern also matches before a final "\n"
    with pytest.raises(InvalidDatabaseNameError):
        validate_name(name, what="database")
    with pytest.raises(InvalidTableNameError):
        validate_name(name, what="table")
