"""The KV commands' input and output without a cluster: rows from JSON lines and CSV checked before anything is
sent (a bad line is one message and exit 2), key and prefix arguments, how consume shows a changelog."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import pytest

from fluss_py.cli.common import EXIT_USAGE, CliError
from fluss_py.cli.kv import _key_args, _prefix_args, read_rows
from fluss_py.cli.record_text import RecordText
from fluss_py.client import ConsumerRecord
from fluss_py.client.kv import kv_table
from fluss_py.client.metadata import TableInfo
from fluss_py.schema.changelog import ChangeType, encode_change
from fluss_py.schema.row import row_codec
from fluss_py.schema.schema import parse_schema
from fluss_py.types import TableBucket, TablePath

SCHEMA = parse_schema(
    "region STRING, id BIGINT, score DECIMAL(6,2), ts TIMESTAMP(6) NOT NULL, note STRING",
    primary_key="region,id",
    bucket_key="region",
)
TABLE = kv_table(TableInfo(1, TablePath("fluss", "t"), 3, 1, schema=SCHEMA))


def test_json_lines_and_csv_give_the_same_checked_rows() -> None:
    json_text = (
        '{"region": "eu", "id": 1, "score": "1.50", "ts": "2024-05-01T10:00:00"}\n'
        "\n"
        '{"region": "us", "id": 2, "score": 2, "ts": "2024-05-01 10:00:00.25", "note": "x"}\n'
    )
    csv_text = "id,region,score,ts,note\n1,eu,1.50,2024-05-01T10:00:00,\n2,us,2,2024-05-01 10:00:00.25,x\n"
    from_json = [values for _, values in read_rows(TABLE, json_text, "json")]
    from_csv = [values for _, values in read_rows(TABLE, csv_text, "csv")]
    assert (
        from_json
        == from_csv
        == [
            ["eu", 1, Decimal("1.50"), datetime(2024, 5, 1, 10), None],
            ["us", 2, Decimal(2), datetime(2024, 5, 1, 10, 0, 0, 250000), "x"],
        ]
    )


@pytest.mark.parametrize(
    ("text", "fmt", "message"),
    [
        ('{"region": "eu", "id": 1, "ts": "2024-05-01"}\n{"region": "eu", "id": 2}\n', "json", "line 2: .*ts"),
        ('{"region": "eu", "id": 1, "ts": "2024-05-01", "colour": 3}\n', "json", "line 1: unknown column"),
        ('{"region": "eu", "id": "x", "ts": "2024-05-01"}\n', "json", "line 1: .*id"),
        ("[1, 2]\n", "json", "line 1: a JSON object"),
        ("{not json\n", "json", "line 1: not JSON"),
        ("region,id,ts\neu,1\n", "csv", "line 2: .*fields"),
        ('{"region": "eu", "id": 1, "score": "12345.678", "ts": "2024-05-01"}\n', "json", "line 1: .*score"),
    ],
)
def test_a_bad_line_is_one_usage_error_naming_it(text: str, fmt: str, message: str) -> None:
    with pytest.raises(CliError, match=message) as e:
        read_rows(TABLE, text, fmt)
    assert e.value.code == EXIT_USAGE


def test_keys_and_partial_rows() -> None:
    keys = read_rows(TABLE, '{"id": 5, "region": "eu"}\n', "json", keys_only=True)
    assert [values for _, values in keys] == [["eu", 5]]
    with pytest.raises(CliError, match="only its primary key"):
        read_rows(TABLE, '{"id": 5, "region": "eu", "note": "n"}\n', "json", keys_only=True)
    rows = read_rows(TABLE, "region,id,note\neu,5,hi\n", "csv", partial=("region", "id", "note"))
    assert [values for _, values in rows] == [["eu", 5, None, None, "hi"]]  # ts NOT NULL, yet not a target
    with pytest.raises(CliError, match=r"line 1: .*score"):
        read_rows(TABLE, '{"region": "eu", "id": 5, "score": 1}\n', "json", partial=("region", "id", "note"))
    assert _key_args(TABLE, ["id=7", "region=us"]) == ["us", 7]
    assert _prefix_args(TABLE, ["region=us"]) == ["us"]
    for bad in (["id=7"], ["region=us", "region=eu"], ["id=x", "region=us"]):
        with pytest.raises(CliError):
            _key_args(TABLE, bad)
    with pytest.raises(Exception, match="bucket-key"):
        _prefix_args(TABLE, ["id=1"])


async def test_consume_shows_each_change_with_its_type() -> None:
    codec = row_codec(SCHEMA)
    old = codec.encode_row(["eu", 1, None, datetime(2024, 1, 1), "a"])
    new = codec.encode_row(["eu", 1, Decimal("3.00"), datetime(2024, 1, 1), "b"])
    key = codec.encode_key(["eu", 1])
    tb = TableBucket(1, 0)
    records = [
        ConsumerRecord(tb, 0, 1000, key, encode_change(ChangeType.INSERT, new=old)),
        ConsumerRecord(tb, 1, 1001, key, encode_change(ChangeType.UPDATE, old, new)),
        ConsumerRecord(tb, 2, 1002, key, encode_change(ChangeType.NOOP)),
        ConsumerRecord(tb, 3, 1003, key, encode_change(ChangeType.DELETE, new)),
    ]
    plain = await RecordText(TABLE.info, print_offsets=False, as_json=False).lines(records, None)  # type: ignore[arg-type]
    assert [line.split(b" ")[0] for line in plain] == [b"+I", b"-U", b"+U", b"-D"]
    assert plain[2] == b'+U {"region": "eu", "id": 1, "score": "3.00", "ts": "2024-01-01T00:00:00", "note": "b"}\n'
    as_json = await RecordText(TABLE.info, print_offsets=False, as_json=True).lines(records, None)  # type: ignore[arg-type]
    assert as_json[1].startswith(b'{"change": "-U", "row": {"region": "eu", "id": 1, "score": null')
    assert b'"offset": 1, "bucket": 0' in as_json[1]
    log = await RecordText(TableInfo(2, TablePath("fluss", "l"), 1, 1), print_offsets=True, as_json=False).lines(
        [ConsumerRecord(tb, 9, 0, None, b"v\xff")],
        None,  # type: ignore[arg-type]
    )
    assert log == [b"0\t9\tv\xff\n"]
