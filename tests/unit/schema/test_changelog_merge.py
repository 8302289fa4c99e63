"""KV record and changelog record values (docs §3.3-3.4), and the merge-engine rule table of docs §2."""

from __future__ import annotations

from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fluss_py.errors import ConfigError, InvalidRowError
from fluss_py.record import CHANGELOG, KV_BATCH, RecordBatch, RecordBatchBuilder
from fluss_py.schema import (
    Change,
    ChangeType,
    KvInput,
    KvOp,
    MergeEngine,
    MergeRule,
    RowCodec,
    change_rows,
    decode_change,
    decode_kv_record,
    decode_kv_value,
    encode_change,
    encode_kv_value,
    merge,
    parse_schema,
)

SCHEMA = parse_schema("id BIGINT, v STRING, n INT, ver BIGINT NOT NULL", "id")
CODEC = RowCodec(SCHEMA)
ROW = CODEC.encode_row([1, "a", 10, 5])
KEY = CODEC.encode_key([1])


def test_kv_values_have_the_documented_bytes_and_round_trip() -> None:
    assert encode_kv_value(KvOp.UPSERT, ROW) == b"\x00" + ROW
    assert encode_kv_value(KvOp.DELETE) == b"\x01"
    partial, targets = CODEC.encode_partial_row({"id": 1, "n": 3}, ["id", "n"])
    value = encode_kv_value(KvOp.PARTIAL_UPSERT, partial, targets)
    assert value == b"\x02\x00\x02\x00\x00\x00\x02" + partial
    assert decode_kv_value(value, CODEC) == KvInput(KvOp.PARTIAL_UPSERT, partial, (0, 2))
    assert decode_kv_value(b"\x00" + ROW, CODEC) == KvInput(KvOp.UPSERT, ROW)
    assert decode_kv_value(b"\x01") == KvInput(KvOp.DELETE)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (b"", "empty"),
        (b"\x07" + ROW, "unknown KV op"),
        (b"\x01\x00", "DELETE record with 1 bytes"),
        (b"\x00\x00", "row has 1 bytes"),
        (b"\x02\x00", "truncated"),
        (b"\x02\x00\x00" + ROW, "0 targets"),
        (b"\x02\xff\xff\x00\x00" + ROW, "65535 targets"),
        (b"\x02\x00\x02\x00\x02\x00\x00" + ROW, "not ascending"),
        (b"\x00" + ROW + b"!", "after its last column"),
        (b"\x02\x00\x01\x00\x00" + ROW, "not a target"),
        (b"\x02\x00\x01\x00\x01" + ROW, "primary key"),
    ],
)
def test_decode_kv_value_refuses_malformed_values(value: bytes, fragment: str) -> None:
    with pytest.raises(InvalidRowError, match=fragment):
        decode_kv_value(value, CODEC)


def test_decode_kv_record_checks_the_key_against_the_row() -> None:
    assert decode_kv_record(CODEC, KEY, b"\x00" + ROW).row == ROW
    assert decode_kv_record(CODEC, KEY, b"\x01").op is KvOp.DELETE
    with pytest.raises(InvalidRowError, match="not the key of its row"):
        decode_kv_record(CODEC, CODEC.encode_key([2]), b"\x00" + ROW)
    with pytest.raises(InvalidRowError, match="after its last column"):
        decode_kv_record(CODEC, KEY + b"x", b"\x01")
    with pytest.raises(InvalidRowError, match="needs a key and a value"):
        decode_kv_record(CODEC, None, b"\x01")


def test_encode_kv_value_refuses_arguments_that_do_not_fit() -> None:
    with pytest.raises(ValueError):
        encode_kv_value(KvOp.DELETE, ROW)
    with pytest.raises(ValueError):
        encode_kv_value(KvOp.UPSERT)
    with pytest.raises(ValueError):
        encode_kv_value(KvOp.PARTIAL_UPSERT, ROW, [2, 1])


def test_changes_have_the_documented_bytes_and_labels() -> None:
    old, new = ROW, CODEC.encode_row([1, "b", None, 6])
    cases = {
        encode_change(ChangeType.INSERT, new=new): (b"\x00" + new, [("+I", new)]),
        encode_change(ChangeType.UPDATE, old, new): (
            b"\x01" + len(old).to_bytes(4, "big") + old + new,
            [("-U", old), ("+U", new)],
        ),
        encode_change(ChangeType.DELETE, old=old): (b"\x02" + old, [("-D", old)]),
        encode_change(ChangeType.NOOP): (b"\x03", []),
    }
    for value, (expected, rows) in cases.items():
        assert value == expected
        assert change_rows(decode_change(value, CODEC)) == rows


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        (b"", "empty"),
        (b"\x09", "unknown change type"),
        (b"\x03\x00", "NOOP record with 1"),
        (b"\x01\x00\x00", "truncated"),
        (b"\x01\x00\x00\x00\xff" + ROW, "runs past its end"),
        (b"\x00\x00", "row of 1 bytes"),
        (b"\x01\x00\x00\x00\x00" + ROW, "row of 0 bytes"),
        (b"\x02" + ROW[:-1], "truncated"),
    ],
)
def test_decode_change_refuses_malformed_values(value: bytes, fragment: str) -> None:
    with pytest.raises(InvalidRowError, match=fragment):
        decode_change(value, CODEC)


def test_encode_change_refuses_rows_that_do_not_fit() -> None:
    with pytest.raises(ValueError):
        encode_change(ChangeType.INSERT, old=ROW)
    with pytest.raises(ValueError):
        encode_change(ChangeType.UPDATE, new=ROW)
    with pytest.raises(ValueError):
        encode_change(ChangeType.NOOP, new=ROW)


def test_batch_attribute_bits() -> None:
    assert (KV_BATCH, CHANGELOG) == (0x08, 0x10)
    builder = RecordBatchBuilder()
    builder.append(b"v", b"k", 1)
    batch = bytearray(builder.build())
    assert not RecordBatch(bytes(batch)).is_kv_batch and not RecordBatch(bytes(batch)).is_changelog
    batch[22] |= KV_BATCH
    assert RecordBatch(bytes(batch)).is_kv_batch and not RecordBatch(bytes(batch)).is_changelog
    batch[22] ^= KV_BATCH | CHANGELOG
    assert RecordBatch(bytes(batch)).is_changelog and not RecordBatch(bytes(batch)).is_kv_batch


# ---------------------------------------------------------------- merge engines

LAST, FIRST = MergeRule(), MergeRule(MergeEngine.FIRST_ROW)
VERSIONED = MergeRule.from_properties(
    {"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "ver"}, SCHEMA
)


def _row(v: str, ver: int) -> bytes:
    return CODEC.encode_row([1, v, None, ver])


UPSERT_NEW = KvInput(KvOp.UPSERT, _row("new", 5))
DELETE = KvInput(KvOp.DELETE)


@pytest.mark.parametrize(
    ("rule", "old", "inp", "expected"),
    [
        (LAST, None, UPSERT_NEW, (ChangeType.INSERT, UPSERT_NEW.row)),
        (LAST, _row("old", 9), UPSERT_NEW, (ChangeType.UPDATE, UPSERT_NEW.row)),
        (LAST, _row("old", 9), DELETE, (ChangeType.DELETE, None)),
        (LAST, None, DELETE, (ChangeType.NOOP, None)),
        (FIRST, None, UPSERT_NEW, (ChangeType.INSERT, UPSERT_NEW.row)),
        (FIRST, _row("old", 1), UPSERT_NEW, (ChangeType.NOOP, None)),
        (VERSIONED, None, UPSERT_NEW, (ChangeType.INSERT, UPSERT_NEW.row)),
        (VERSIONED, _row("old", 4), UPSERT_NEW, (ChangeType.UPDATE, UPSERT_NEW.row)),
        (VERSIONED, _row("old", 5), UPSERT_NEW, (ChangeType.UPDATE, UPSERT_NEW.row)),
        (VERSIONED, _row("old", 6), UPSERT_NEW, (ChangeType.NOOP, None)),
    ],
)
def test_the_merge_rule_table(rule: MergeRule, old: bytes | None, inp: KvInput, expected: tuple) -> None:
    assert merge(rule, CODEC, old, inp) == expected


@pytest.mark.parametrize("rule", [FIRST, VERSIONED])
def test_first_row_and_versioned_refuse_deletes_and_partial_updates(rule: MergeRule) -> None:
    with pytest.raises(InvalidRowError, match="refuses deletes"):
        merge(rule, CODEC, _row("old", 1), DELETE)
    partial, targets = CODEC.encode_partial_row({"id": 1, "n": 3, "ver": 1}, ["id", "n", "ver"])
    with pytest.raises(InvalidRowError, match="refuses partial updates"):
        merge(rule, CODEC, None, KvInput(KvOp.PARTIAL_UPSERT, partial, targets))


def test_a_partial_update_keeps_the_other_columns() -> None:
    partial, targets = CODEC.encode_partial_row({"id": 1, "n": 3}, ["id", "n"])
    inp = decode_kv_value(encode_kv_value(KvOp.PARTIAL_UPSERT, partial, targets), CODEC)
    change, new = merge(LAST, CODEC, CODEC.encode_row([1, "keep", 10, 7]), inp)
    assert change is ChangeType.UPDATE
    assert CODEC.decode_row(new) == (1, [1, "keep", 3, 7])  # type: ignore[arg-type]


def test_a_partial_update_of_an_absent_key() -> None:
    nullable = RowCodec(parse_schema("id BIGINT, v STRING, n INT", "id"))
    partial, targets = nullable.encode_partial_row({"id": 1, "n": 3}, ["id", "n"])
    change, new = merge(LAST, nullable, None, KvInput(KvOp.PARTIAL_UPSERT, partial, targets))
    assert change is ChangeType.INSERT
    assert nullable.decode_row(new) == (1, [1, None, 3])  # type: ignore[arg-type]
    partial, targets = CODEC.encode_partial_row({"id": 1, "n": 3}, ["id", "n"])
    with pytest.raises(InvalidRowError, match=r"'ver' .*NOT NULL and not a target"):
        merge(LAST, CODEC, None, KvInput(KvOp.PARTIAL_UPSERT, partial, targets))


def test_a_partial_update_of_an_old_row_is_written_in_the_current_schema() -> None:
    from fluss_py.schema import Column, parse_type

    evolved = RowCodec(SCHEMA.add_column(Column("extra", parse_type("STRING"))))
    old = CODEC.encode_row([1, "keep", 10, 7])  # schema 1
    partial, targets = evolved.encode_partial_row({"id": 1, "extra": "x"}, ["id", "extra"])
    change, new = merge(LAST, evolved, old, KvInput(KvOp.PARTIAL_UPSERT, partial, targets))
    assert change is ChangeType.UPDATE
    assert evolved.decode_row(new) == (2, [1, "keep", 10, 7, "x"])  # type: ignore[arg-type]


def test_versioned_by_timestamp() -> None:
    schema = parse_schema("id INT, ts TIMESTAMP NOT NULL", "id")
    codec = RowCodec(schema)
    rule = MergeRule.from_properties(
        {"table.merge-engine": "VERSIONED", "table.merge-engine.versioned.ver-column": "ts"}, schema
    )
    older, newer = codec.encode_row([1, datetime(2020, 1, 1)]), codec.encode_row([1, datetime(2021, 1, 1)])
    assert merge(rule, codec, newer, KvInput(KvOp.UPSERT, older)) == (ChangeType.NOOP, None)
    assert merge(rule, codec, older, KvInput(KvOp.UPSERT, newer)) == (ChangeType.UPDATE, newer)


def test_merge_rule_from_properties() -> None:
    assert MergeRule.from_properties({}, SCHEMA) == MergeRule()
    assert MergeRule.from_properties({}, None) == MergeRule()
    assert MergeRule.from_properties({"table.merge-engine": "first_row"}, SCHEMA).engine is MergeEngine.FIRST_ROW
    assert MergeRule(MergeEngine.VERSIONED, "ver", 3) == VERSIONED


@pytest.mark.parametrize(
    ("props", "schema", "fragment"),
    [
        ({"table.merge-engine": "newest"}, SCHEMA, "not allowed"),
        ({"table.merge-engine": "versioned"}, SCHEMA, "needs a version column"),
        ({"table.merge-engine.versioned.ver-column": "ver"}, SCHEMA, "needs table.merge-engine=versioned"),
        ({"table.merge-engine": "first_row", "table.merge-engine.versioned.ver-column": "ver"}, SCHEMA, "needs"),
        ({"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "zz"}, SCHEMA, "no column"),
        ({"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "n"}, SCHEMA, "NOT NULL"),
        ({"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "v"}, SCHEMA, "NOT NULL"),
        ({"table.merge-engine": "last_row"}, parse_schema("a INT"), "only a primary-key table"),
        ({"table.merge-engine": "last_row"}, None, "only a primary-key table"),
    ],
)
def test_merge_rule_refuses_properties_that_make_no_sense(props: dict, schema, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment):
        MergeRule.from_properties(props, schema)


def test_change_dataclass_defaults() -> None:
    assert Change(ChangeType.NOOP) == decode_change(b"\x03")


# ---------------------------------------------------------------- merge engines against a model

MODEL_SCHEMA = parse_schema("id INT, a STRING, b INT, ver BIGINT NOT NULL", "id")
MODEL_CODEC = RowCodec(MODEL_SCHEMA)
OPS = st.lists(
    st.tuples(
        st.sampled_from(["upsert", "delete", "partial"]),
        st.integers(0, 3),  # key
        st.one_of(st.none(), st.text(max_size=3)),  # a
        st.one_of(st.none(), st.integers(0, 9)),  # b
        st.integers(0, 5),  # ver
        st.sampled_from([("a",), ("b",), ("a", "b")]),  # partial targets besides the key
    ),
    max_size=30,
)


def _apply(rule: MergeRule, ops: list) -> tuple[dict, list[ChangeType]]:
    """Run ``ops`` through ``merge`` on a dict store, as the leader does; refused ops change nothing."""
    store: dict[bytes, bytes] = {}
    changes = []
    for op, k, a, b, ver, extra in ops:
        key = MODEL_CODEC.encode_key([k])
        if op == "upsert":
            inp = KvInput(KvOp.UPSERT, MODEL_CODEC.encode_row([k, a, b, ver]))
        elif op == "delete":
            inp = KvInput(KvOp.DELETE)
        else:
            values = {"id": k, "a": a, "b": b}
            names = ["id", *extra]
            inp = KvInput(KvOp.PARTIAL_UPSERT, *MODEL_CODEC.encode_partial_row({n: values[n] for n in names}, names))
        try:
            change, new = merge(rule, MODEL_CODEC, store.get(key), inp)
        except InvalidRowError:
            continue
        changes.append(change)
        if change is ChangeType.DELETE:
            del store[key]
        elif change is not ChangeType.NOOP:
            assert MODEL_CODEC.key_of_row_bytes(new) == key  # type: ignore[arg-type]
            store[key] = new  # type: ignore[assignment]
    return {MODEL_CODEC.decode_key(k)[0]: MODEL_CODEC.decode_row(v)[1] for k, v in store.items()}, changes


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_last_row_keeps_the_last_write_and_partial_updates_only_their_columns(ops: list) -> None:
    model: dict[int, list] = {}
    for op, k, a, b, ver, extra in ops:
        if op == "upsert":
            model[k] = [k, a, b, ver]
        elif op == "delete":
            model.pop(k, None)
        elif k in model:
            for name in extra:
                model[k][1 if name == "a" else 2] = a if name == "a" else b
        # a partial update of an absent key is refused here: ver is NOT NULL and never a target
    assert _apply(LAST, ops)[0] == model


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_first_row_keeps_the_first_write(ops: list) -> None:
    model: dict[int, list] = {}
    for op, k, a, b, ver, _ in ops:
        if op == "upsert":
            model.setdefault(k, [k, a, b, ver])
    store, changes = _apply(FIRST, ops)
    assert store == model
    assert changes.count(ChangeType.INSERT) == len(model)
    assert set(changes) <= {ChangeType.INSERT, ChangeType.NOOP}


@settings(max_examples=200, deadline=None)
@given(OPS)
def test_versioned_keeps_the_highest_version_and_the_last_of_equals(ops: list) -> None:
    model: dict[int, list] = {}
    for op, k, a, b, ver, _ in ops:
        if op == "upsert" and (k not in model or ver >= model[k][3]):
            model[k] = [k, a, b, ver]
    rule = MergeRule.from_properties(
        {"table.merge-engine": "versioned", "table.merge-engine.versioned.ver-column": "ver"}, MODEL_SCHEMA
    )
    assert _apply(rule, ops)[0] == model
