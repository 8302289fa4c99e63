"""TableBucket: the per-bucket key of every server's dicts and sets hashes and compares without Python code."""

from fluss_py.types import TableBucket


def test_table_bucket_hashes_and_orders_as_a_tuple() -> None:
    # a frozen dataclass runs a generated Python __hash__/__eq__/__lt__ building a tuple per call
    assert TableBucket.__hash__ is tuple.__hash__
    assert TableBucket.__eq__ is tuple.__eq__
    assert TableBucket.__lt__ is tuple.__lt__
    tb = TableBucket(3, 7)
    assert (tb.table_id, tb.bucket) == (3, 7) and str(tb) == "3-7"
    assert sorted([TableBucket(2, 1), TableBucket(1, 9), TableBucket(1, 2)]) == [(1, 2), (1, 9), (2, 1)]
    assert {TableBucket(1, 2): "x"}[TableBucket(1, 2)] == "x"
