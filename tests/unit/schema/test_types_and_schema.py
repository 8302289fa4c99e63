"""Types and schemas: canonical type text, the DDL parser, the schema rules and their errors, the znode form."""

from __future__ import annotations

import json

import pytest

from fluss_py.errors import InvalidRequestError, UnknownSchemaIdError
from fluss_py.schema import Column, DataType, SchemaVersion, TableSchema, TypeRoot, parse_schema, parse_type


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("BIGINT", "BIGINT"),
        ("bigint", "BIGINT"),
        ("Integer", "INT"),
        ("INT", "INT"),
        ("decimal", "DECIMAL(10,0)"),
        ("DECIMAL(5)", "DECIMAL(5,0)"),
        ("decimal( 38 , 38 )", "DECIMAL(38,38)"),
        ("TIMESTAMP", "TIMESTAMP(6)"),
        ("timestamp(0)", "TIMESTAMP(0)"),
        ("DATE", "DATE"),
        ("BYTES", "BYTES"),
        ("  string ", "STRING"),
        ("FLOAT", "FLOAT"),
        ("DOUBLE", "DOUBLE"),
        ("BOOLEAN", "BOOLEAN"),
    ],
)
def test_parse_type_gives_the_canonical_spelling(text: str, canonical: str) -> None:
    t = parse_type(text)
    assert str(t) == canonical
    assert parse_type(str(t)) == t


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("VARCHAR", "unknown type"),
        ("DECIMAL(0,0)", "precision 0"),
        ("DECIMAL(39,2)", "precision 39"),
        ("DECIMAL(5,6)", "scale 6"),
        ("TIMESTAMP(7)", "precision 7"),
        ("TIMESTAMP(3,1)", "at most one parameter"),
        ("INT(4)", "takes no parameters"),
        ("BIGINT)", "cannot parse"),
        ("", "cannot parse"),
        ("DECIMAL(1000,1)", "cannot parse"),
    ],
)
def test_parse_type_refuses_bad_text(text: str, fragment: str) -> None:
    with pytest.raises(InvalidRequestError, match=fragment.replace("(", r"\(")):
        parse_type(text)


def test_datatype_constructor_checks_parameters() -> None:
    with pytest.raises(InvalidRequestError):
        DataType(TypeRoot.DECIMAL)  # no defaults without DataType.of
    assert DataType.of(TypeRoot.DECIMAL) == DataType(TypeRoot.DECIMAL, 10, 0)


def test_parse_schema_makes_key_columns_not_null_and_keeps_the_rest() -> None:
    s = parse_schema("id BIGINT, region STRING NOT NULL, amount DECIMAL(10, 2), note STRING NULL", "id, region", "id")
    assert s.primary_key == ("id", "region")
    assert s.bucket_key == ("id",)
    assert s.bucket_key_names == ("id",)
    assert [c.nullable for c in s.current.columns] == [False, False, True, True]
    assert s.describe() == "id BIGINT NOT NULL, region STRING NOT NULL, amount DECIMAL(10,2), note STRING"
    assert parse_schema(s.describe(), ["id", "region"], ["id"]) == s
    assert s.pk_indexes == (0, 1)
    assert s.is_primary_key_table
    assert s.current.schema_id == 1


def test_a_log_table_schema_has_no_key() -> None:
    s = parse_schema("a INT, b STRING")
    assert not s.is_primary_key_table
    assert s.bucket_key_names == ()


@pytest.mark.parametrize(
    ("ddl", "pk", "bk", "fragment"),
    [
        ("", (), (), "empty"),
        ("id BIGINT,", (), (), "cannot parse column"),
        ("id", (), (), "cannot parse column"),
        ("1id BIGINT", (), (), "column name"),
        ("id BIGINT, id STRING", (), (), "appears twice"),
        ("id NUMBER", (), (), "column 'id': unknown type"),
        ("id BIGINT", ("nope",), (), "not a column"),
        ("id BIGINT", ("id", "id"), (), "twice"),
        ("id BIGINT, k STRING", ("id", "k"), ("k",), "prefix"),
        ("id BIGINT", (), ("id",), "needs a primary key"),
        ("x DOUBLE", ("x",), (), "may not be DOUBLE"),
        ("x FLOAT", ("x",), (), "may not be FLOAT"),
        (", ".join(f"c{i} INT" for i in range(1025)), (), (), "at most 1024"),
        ("a" * 129 + " INT", (), (), "column name"),
    ],
)
def test_parse_schema_refuses_bad_input(ddl: str, pk: tuple, bk: tuple, fragment: str) -> None:
    with pytest.raises(InvalidRequestError, match=fragment):
        parse_schema(ddl, pk, bk)


def test_add_column_appends_a_nullable_column_as_the_next_schema_id() -> None:
    s = parse_schema("id BIGINT", "id")
    s2 = s.add_column(Column("name", parse_type("STRING")))
    assert [v.schema_id for v in s2.versions] == [1, 2]
    assert s2.current.names == ("id", "name")
    assert s2.version(1) == s.current
    assert s2.pk_indexes == (0,)
    with pytest.raises(InvalidRequestError, match="nullable"):
        s2.add_column(Column("x", parse_type("INT"), nullable=False))
    with pytest.raises(InvalidRequestError, match="already exists"):
        s2.add_column(Column("name", parse_type("INT")))
    with pytest.raises(UnknownSchemaIdError):
        s2.version(3)
    with pytest.raises(UnknownSchemaIdError):
        s2.version(0)


def test_the_znode_form_round_trips_and_is_plain_json() -> None:
    s = parse_schema("id BIGINT, ts TIMESTAMP(3), amount DECIMAL(12,4)", "id").add_column(
        Column("extra", parse_type("BYTES"))
    )
    text = json.dumps(s.to_json())
    assert TableSchema.from_json(text) == s
    assert TableSchema.from_json(json.loads(text)) == s
    assert TableSchema.from_json(text.encode()) == s


def _znode(**changes: object) -> dict:
    obj = parse_schema("id BIGINT, name STRING", "id").add_column(Column("c", parse_type("INT"))).to_json()
    obj.update(changes)
    return obj


@pytest.mark.parametrize(
    ("obj", "fragment"),
    [
        ("{not json", "not JSON"),
        ("[]", "JSON object"),
        (_znode(versions=[]), "at least one version"),
        (_znode(versions="x"), "must be a list"),
        (_znode(primary_key=[1]), "list of column names"),
        (_znode(versions=[{"schema_id": 2, "columns": [{"name": "a", "type": "INT", "nullable": True}]}]), "1, 2, 3"),
        (_znode(versions=[{"schema_id": "1", "columns": []}]), "int schema_id"),
        (_znode(versions=[{"schema_id": 1, "columns": [{"name": "a", "type": "INT"}]}]), "nullable: bool"),
        (_znode(versions=[{"schema_id": 1, "columns": [{"name": "a", "type": "WAT", "nullable": True}]}]), "type"),
        (_znode(versions=[{"schema_id": 1, "columns": []}]), "no columns"),
        (
            _znode(
                versions=[
                    {"schema_id": 1, "columns": [{"name": "id", "type": "BIGINT", "nullable": False}]},
                    {"schema_id": 2, "columns": [{"name": "x", "type": "BIGINT", "nullable": True}]},
                ]
            ),
            "plus columns at the end",
        ),
        (
            _znode(
                versions=[
                    {"schema_id": 1, "columns": [{"name": "id", "type": "BIGINT", "nullable": False}]},
                    {
                        "schema_id": 2,
                        "columns": [
                            {"name": "id", "type": "BIGINT", "nullable": False},
                            {"name": "x", "type": "BIGINT", "nullable": False},
                        ],
                    },
                ]
            ),
            "must be nullable",
        ),
        (
            _znode(versions=[{"schema_id": 1, "columns": [{"name": "id", "type": "BIGINT", "nullable": True}]}]),
            "NOT NULL",
        ),
    ],
)
def test_from_json_refuses_anything_malformed(obj: object, fragment: str) -> None:
    with pytest.raises(InvalidRequestError, match=fragment):
        TableSchema.from_json(obj)  # type: ignore[arg-type]


def test_schema_version_index() -> None:
    v = SchemaVersion(1, (Column("a", parse_type("INT")),))
    assert v.index("a") == 0
    with pytest.raises(InvalidRequestError, match="no column 'b'"):
        v.index("b")
