"""``table create`` schema flags -> a checked TableSchema and merge-engine properties; ``--add-column``;
the ``describe`` schema document (cli/table_schema.py, docs/primary-key-tables.md §2). Every bad input is a
usage error (exit 2) before anything is sent."""

import argparse

import pytest

from fluss_py.cli.common import EXIT_USAGE, CliError
from fluss_py.cli.table_schema import added_column, schema_document, schema_lines, schema_of_args
from fluss_py.client.metadata import TableInfo
from fluss_py.schema.schema import parse_column, parse_schema
from fluss_py.types import TablePath


def args(**kw) -> argparse.Namespace:
    base = {"schema": None, "primary_key": None, "bucket_key": None, "merge_engine": None, "version_column": None}
    return argparse.Namespace(**{**base, **kw})


def test_flags_become_a_schema_and_properties():
    props: dict[str, str] = {}
    assert schema_of_args(args(), props) is None and props == {}
    schema = schema_of_args(
        args(schema="a INT, b BIGINT NOT NULL, v BIGINT NOT NULL, s STRING", primary_key="a,b", bucket_key="a",
             merge_engine="versioned", version_column="v"), props,
    )  # fmt: skip
    assert schema == parse_schema("a INT, b BIGINT NOT NULL, v BIGINT NOT NULL, s STRING", "a,b", "a")
    assert schema.current.columns[0].nullable is False  # a primary-key column is NOT NULL
    assert props == {"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "v"}
    log_table = schema_of_args(args(schema="a INT, b STRING"), {})
    assert log_table is not None and not log_table.is_primary_key_table


@pytest.mark.parametrize(
    "kw, props, words",
    [
        ({"schema": "a WHAT"}, {}, "WHAT"),
        ({"schema": ""}, {}, "empty"),
        ({"schema": "a INT", "primary_key": "b"}, {}, "'b'"),
        ({"schema": "a INT, b INT", "primary_key": "a", "bucket_key": "b"}, {}, "prefix"),
        ({"schema": "a DOUBLE", "primary_key": "a"}, {}, "DOUBLE"),
        ({"primary_key": "a"}, {}, "--schema"),
        ({"schema": "a INT", "merge_engine": "first_row"}, {}, "primary-key"),
        ({"merge_engine": "first_row"}, {}, "primary-key"),
        (
            {"schema": "a INT, v STRING", "primary_key": "a", "merge_engine": "versioned", "version_column": "v"},
            {},
            "INT, BIGINT or TIMESTAMP",
        ),
        (
            {"schema": "a INT, v INT", "primary_key": "a", "merge_engine": "versioned", "version_column": "v"},
            {},
            "NOT NULL",
        ),
        ({"schema": "a INT", "primary_key": "a", "merge_engine": "versioned"}, {}, "version column"),
        ({"schema": "a INT, v INT NOT NULL", "primary_key": "a", "version_column": "v"}, {}, "versioned"),
        ({"schema": "a INT", "primary_key": "a"}, {"table.partition.key": "dt"}, "partitioned"),
        ({"schema": "a INT", "primary_key": "a"}, {"table.log.ttl": "7d"}, "whole changelog"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(kw, props, words):
    with pytest.raises(CliError) as caught:
        schema_of_args(args(**kw), dict(props))
    assert caught.value.code == EXIT_USAGE and words in str(caught.value) and "\n" not in str(caught.value)


def test_add_column_parses_and_refuses_not_null():
    assert added_column("note STRING") == parse_column("note STRING")
    for bad in ("note", "note WHAT", "note STRING NOT NULL", "1x INT"):
        with pytest.raises(CliError) as caught:
            added_column(bad)
        assert caught.value.code == EXIT_USAGE


def test_describe_shows_columns_keys_and_merge_engine():
    schema = parse_schema("id BIGINT, v INT NOT NULL, s STRING", "id").add_column(parse_column("n DATE"))
    props = {"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "v"}
    info = TableInfo(1, TablePath("fluss", "t"), 2, 3, props, schema=schema)
    doc = schema_document(info)
    columns = [("id", "BIGINT", False), ("v", "INT", False), ("s", "STRING", True), ("n", "DATE", True)]
    assert doc == {
        "schema_id": 2,
        "columns": [{"name": n, "type": t, "nullable": nullable} for n, t, nullable in columns],
        "primary_key": ["id"],
        "bucket_key": ["id"],
        "merge_engine": "versioned",
        "version_column": "v",
    }
    assert schema_lines(doc) == [
        "schema (id 2): id BIGINT NOT NULL, v INT NOT NULL, s STRING, n DATE",
        "primary key: id; bucket key: id; merge engine: versioned (version column v)",
    ]
    plain = TableInfo(2, TablePath("fluss", "p"), 1, 1)
    assert schema_document(plain) == {} and schema_lines({}) == []
    log_schema = schema_document(TableInfo(3, TablePath("fluss", "l"), 1, 1, schema=parse_schema("a INT")))
    assert log_schema["merge_engine"] is None and schema_lines(log_schema) == ["schema (id 1): a INT"]
