"""A table's schema on the wire (rpc/convert.py): every version, the keys and each column's canonical type
round-trip; what comes in is checked as any schema is (INVALID_REQUEST naming the column or the rule)."""

import pytest

from fluss_py.errors import InvalidRequestError
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2
from fluss_py.schema.schema import parse_column, parse_schema

ALL_TYPES = ("k1 INT, k2 STRING, b BOOLEAN, i INTEGER, l BIGINT, f FLOAT, d DOUBLE, s STRING, y BYTES, "
             "m DECIMAL(38, 10), dt DATE, ts TIMESTAMP, ts0 TIMESTAMP(0)")  # fmt: skip


def test_every_type_and_version_round_trips():
    schema = parse_schema(ALL_TYPES, "k1,k2", "k1").add_column(parse_column("extra DECIMAL(5,2)"))
    pb = convert.schema_to_pb(schema)
    assert [v.schema_id for v in pb.versions] == [1, 2] and list(pb.bucket_key) == ["k1"]
    assert pb.versions[0].columns[3].type == "INT" and pb.versions[0].columns[9].type == "DECIMAL(38,10)"
    assert convert.schema_from_pb(common_pb2.TableSchema.FromString(pb.SerializeToString())) == schema
    column = parse_column("c TIMESTAMP(3)")
    assert convert.column_from_pb(convert.column_to_pb(column)) == column


def _pb(columns, pk=(), bucket_key=(), schema_id=1):
    cols = [common_pb2.SchemaColumn(name=n, type=t, nullable=nullable) for n, t, nullable in columns]
    version = common_pb2.SchemaVersion(schema_id=schema_id, columns=cols)
    return common_pb2.TableSchema(versions=[version], primary_key=list(pk), bucket_key=list(bucket_key))


@pytest.mark.parametrize(
    "pb, words",
    [
        (common_pb2.TableSchema(), "at least one version"),
        (_pb([("a", "VARCHAR", True)]), "'a'"),
        (_pb([("a", "DECIMAL(39,0)", True)]), "'a'"),
        (_pb([("a", "INT", True)], pk=["a"]), "NOT NULL"),
        (_pb([("a", "INT", False)], pk=["b"]), "'b'"),
        (_pb([("a", "INT", False), ("b", "INT", False)], pk=["a"], bucket_key=["b"]), "prefix"),
        (_pb([("a b", "INT", True)]), "column name"),
        (_pb([("a", "INT", True), ("a", "INT", True)]), "twice"),
        (_pb([("a", "INT", True)], schema_id=2), "schema ids"),
    ],
)
def test_bad_schemas_are_refused_naming_what_is_wrong(pb, words):
    with pytest.raises(InvalidRequestError, match=words):
        convert.schema_from_pb(pb)
