"""The row codec of primary-key tables (docs/primary-key-tables.md §3.1-3.3): what the leader pays per row.

The leader checks every row of a KV batch in Python (``RowCodec.validate_row``) and cuts its key out of it
(``key_of_row_bytes``), or does both and checks the record's key with ``decode_kv_record``. Rows are 100 B
(``id BIGINT, name STRING, score DOUBLE, ts TIMESTAMP, payload STRING``), in three shapes: every column set and
the key first (constant key offsets); some nullable columns null; a STRING key after a STRING column (the key is
found by walking the row). Rows per CPU second of one core (process time: other load on the machine
matters less), best of 5 rounds; encode and decode for comparison.
Not assertions.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from datetime import datetime

from fluss_py.schema import KvOp, RowCodec, decode_kv_record, encode_kv_value, parse_schema
from tests.bench.common import row

N = 20_000
ROUNDS = 5


def _rows(codec: RowCodec, make: Callable[[random.Random, int], list]) -> list[bytes]:
    rnd = random.Random(3)
    return [codec.encode_row(make(rnd, i)) for i in range(N)]


def _payload(rnd: random.Random, n: int) -> str:
    return "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))


def _rate(fn: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return N / best


def shapes() -> dict[str, tuple[RowCodec, list[bytes]]]:
    key_first = RowCodec(parse_schema("id BIGINT, name STRING, score DOUBLE, ts TIMESTAMP, payload STRING", "id"))
    ts = datetime(2024, 5, 1, 12, 0)

    def full(r: random.Random, i: int) -> list:
        return [i, _payload(r, 10), r.random(), ts, _payload(r, 55)]

    def with_nulls(r: random.Random, i: int) -> list:
        return [i, None, r.random(), None, _payload(r, 73)]

    walked = RowCodec(parse_schema("name STRING, id STRING, score DOUBLE, ts TIMESTAMP, payload STRING", "id"))

    def string_key(r: random.Random, i: int) -> list:
        return [_payload(r, 10), f"key-{i:08d}", r.random(), ts, _payload(r, 43)]

    return {
        "key first, no nulls": (key_first, _rows(key_first, full)),
        "key first, 2 nulls": (key_first, _rows(key_first, with_nulls)),
        "STRING key after a STRING": (walked, _rows(walked, string_key)),
    }


def _measure(tag: str, codec: RowCodec, rows: list[bytes]) -> list[dict]:
    keys = [codec.key_of_row_bytes(r) for r in rows]
    values = [encode_kv_value(KvOp.UPSERT, r) for r in rows]
    decoded = [codec.decode_row(r)[1] for r in rows]
    validate, key_of, validate_key = codec.validate_row, codec.key_of_row_bytes, codec.validate_row_key

    def check_and_key() -> None:
        for r in rows:
            validate(r)
            key_of(r)

    def check_with_key() -> None:
        for r in rows:
            validate_key(r)

    def whole_record() -> None:
        for k, v in zip(keys, values, strict=True):
            decode_kv_record(codec, k, v)

    return [
        row(f"validate_row + key_of_row_bytes, {tag}", _rate(check_and_key), "rows/s"),
        row(f"validate_row_key, {tag}", _rate(check_with_key), "rows/s"),
        row(f"decode_kv_record (leader's whole check), {tag}", _rate(whole_record), "rows/s"),
        row(f"decode_row, {tag}", _rate(lambda: [codec.decode_row(r) for r in rows]), "rows/s"),
        row(f"encode_row, {tag}", _rate(lambda: [codec.encode_row(v) for v in decoded]), "rows/s"),
    ]


def run() -> list[dict]:
    results = []
    for shape, (codec, rows) in shapes().items():
        size = sum(map(len, rows)) / len(rows)
        results += _measure(f"{shape} ({size:.0f} B)", codec, rows)
    return results


if __name__ == "__main__":
    for r in run():
        print(f"{r['name']:<75} {r['value']:>12,.0f} {r['unit']}")
