"""KvTablet, KvStore and the pre-write buffer, one rule at a time (real LogTablet and RocksDB in tmp_path)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import rocksdict

from fluss_py.errors import (
    DuplicateSequenceError,
    InvalidRowError,
    KvNotReadyError,
    OutOfOrderSequenceError,
    TableTypeMismatchError,
)
from fluss_py.kv import tablet as kv_tablet
from fluss_py.kv.prewrite import PreWriteBuffer
from fluss_py.kv.store import APPLIED_KEY, ROW_PREFIX
from fluss_py.kv.tablet import KvTable
from fluss_py.record.batch import CHANGELOG, RecordBatchBuilder, iter_batches
from fluss_py.schema import KvOp, encode_kv_value, parse_schema
from tests.unit.kv.helpers import (
    RESOURCES,
    SCHEMA,
    delete,
    key,
    kv_batch,
    kv_contents,
    open_kv,
    open_log,
    replay,
    row,
    upsert,
)


def leader(tmp_path: Path, table: KvTable | None = None):
    log = open_log(tmp_path / "7-0")
    kv = open_kv(log, table) if table is not None else open_kv(log)
    kv.become_leader(log)
    return log, kv


def commit_all(log, kv) -> None:
    log.update_high_watermark(log.log_end_offset)
    while kv.applied_offset < log.high_watermark:
        kv.apply_committed(log, 1 << 20)


def test_the_buffer_keeps_the_latest_pending_change_per_key_until_applied() -> None:
    b = PreWriteBuffer()
    b.put(3, b"k", b"r3")
    b.put(4, b"j", None)
    b.put(5, b"k", b"r5")
    assert b.get(b"k") == (5, b"r5") and b.get(b"j") == (4, None) and b.get(b"x") is None
    assert b.drop_below(4) == 0  # offset 3 was replaced by 5: k stays
    assert b.drop_below(5) == 1 and b.get(b"j") is None and len(b) == 1
    assert b.drop_below(6) == 1 and len(b) == 0
    b.put(6, b"k", b"r")
    with pytest.raises(ValueError):
        b.put(6, b"k", b"r")  # offsets only grow


def test_a_changelog_batch_keeps_the_writer_count_and_timestamps_of_its_kv_batch(tmp_path: Path) -> None:
    log, kv = leader(tmp_path)
    info = kv.append_as_leader(log, kv_batch([upsert(1), upsert(1, "b"), delete(2)], 9, 0, 0), 0)
    assert (info.first_offset, info.last_offset, info.duplicate) == (0, 2, False)
    (batch,) = list(iter_batches(log.read(0, 1 << 20, 3).records))
    assert batch.attributes & CHANGELOG and batch.record_count == 3
    assert (batch.writer_id, batch.writer_epoch, batch.base_sequence) == (9, 0, 0)
    assert [r.timestamp_ms for r in batch.records()] == [1000, 1000, 1000]
    assert batch.records().__next__().key == key(1)
    again = kv.append_as_leader(log, kv_batch([upsert(1), upsert(1, "b"), delete(2)], 9, 0, 0), 0)
    assert again.duplicate and (again.first_offset, again.last_offset) == (0, 2) and log.log_end_offset == 3


def test_refused_requests_write_and_buffer_nothing(tmp_path: Path) -> None:
    log, kv = leader(tmp_path, KvTable.of(SCHEMA, {}, 4))
    in_bucket_0 = next(i for i in range(100) if kv.codec.bucket_of(key(i), 4) == 0)
    other = next(i for i in range(100) if kv.codec.bucket_of(key(i), 4) != 0)
    kv.append_as_leader(log, kv_batch([upsert(in_bucket_0)], 5, 0, 0), 0)
    plain = RecordBatchBuilder()
    plain.append(b"v", b"k")
    for records, error in (
        (plain.build(), TableTypeMismatchError),
        (kv_batch([upsert(in_bucket_0), upsert(other)]), InvalidRowError),  # a key of another bucket
        (kv_batch([upsert(in_bucket_0), (key(in_bucket_0), b"\x00\x00")]), InvalidRowError),  # a torn row
        (kv_batch([(key(1), upsert(2)[1])]), InvalidRowError),  # the key is not the row's
        (kv_batch([upsert(in_bucket_0)], 5, 0, 7), OutOfOrderSequenceError),
        (kv_batch([upsert(in_bucket_0)], 5, 0, 0) + kv_batch([upsert(in_bucket_0)], 5, 0, 1), DuplicateSequenceError),
    ):
        with pytest.raises(error):
            kv.append_as_leader(log, records, 0)
        assert log.log_end_offset == 1 and len(kv.buffer) == 1  # type: ignore[arg-type]
    with pytest.raises(InvalidRowError, match="record 1 of the batch at position 0"):
        kv.append_as_leader(log, kv_batch([upsert(in_bucket_0), (key(in_bucket_0), b"\x07")]), 0)


def test_first_row_refuses_deletes_and_keeps_the_first_row(tmp_path: Path) -> None:
    log, kv = leader(tmp_path, KvTable.of(SCHEMA, {"table.merge-engine": "first_row"}, 1))
    kv.append_as_leader(log, kv_batch([upsert(1, "first"), upsert(1, "second")]), 0)
    with pytest.raises(InvalidRowError, match="refuses deletes"):
        kv.append_as_leader(log, kv_batch([delete(1)]), 0)
    commit_all(log, kv)
    assert kv.lookup([key(1)]) == [row(1, "first", 0)]


def test_reads_see_only_applied_rows_in_key_order(tmp_path: Path) -> None:
    log, kv = leader(tmp_path)
    kv.append_as_leader(log, kv_batch([upsert(i, f"n{i}") for i in (5, 1, 3, 2, 4)]), 0)
    assert kv.lookup([key(1)]) == [None]  # appended, not committed
    commit_all(log, kv)
    assert kv.lookup([key(1), key(9)]) == [row(1, "n1", 0), None]
    page, more = kv.scan(None, 2)
    assert [k for k, _ in page] == [key(1), key(2)] and more
    page, more = kv.scan(key(4), 2)
    assert [k for k, _ in page] == [key(5)] and not more
    rows, more = kv.prefix_lookup(key(3), 10)
    assert rows == [row(3, "n3", 0)] and not more


def test_open_rebuilds_a_kv_its_log_cannot_explain(tmp_path: Path) -> None:
    log, kv = leader(tmp_path)
    kv.append_as_leader(log, kv_batch([upsert(1), upsert(2)]), 0)
    commit_all(log, kv)
    kv.close()
    for bad in (struct.pack(">q", 99), b"\x01"):  # above the log end; unreadable
        db = rocksdict.Rdict(str(tmp_path / "7-0" / "kv"), RESOURCES.options())
        db[APPLIED_KEY] = bad
        db[ROW_PREFIX + key(7)] = row(7, "ghost", 7)
        db.close()
        kv = open_kv(log)
        assert kv.rebuilds == 1 and kv.applied_offset == 0 and kv_contents(kv) == {}
        commit_all(log, kv)
        assert kv_contents(kv) == replay(log, 2) and key(7) not in kv_contents(kv)
        kv.close()


def test_a_new_leader_far_behind_refuses_writes_until_its_kv_catches_up(tmp_path: Path, monkeypatch) -> None:
    log, kv = leader(tmp_path)
    for i in range(6):
        kv.append_as_leader(log, kv_batch([upsert(i)]), 0)
    kv.become_follower()
    monkeypatch.setattr(kv_tablet, "BUFFER_REBUILD_MAX_OFFSETS", 2)
    kv.become_leader(log)  # 6 changes above its applied offset: too many to buffer now
    with pytest.raises(KvNotReadyError):
        kv.append_as_leader(log, kv_batch([upsert(9)]), 0)
    log.update_high_watermark(5)
    kv.apply_committed(log, 1 << 20)  # 1 offset left: the buffer is built
    kv.append_as_leader(log, kv_batch([upsert(5, "again")]), 0)
    commit_all(log, kv)
    assert kv_contents(kv) == replay(log, log.log_end_offset)


def test_a_schema_version_added_later_is_used_by_later_writes(tmp_path: Path) -> None:
    log, kv = leader(tmp_path)
    kv.append_as_leader(log, kv_batch([upsert(1)]), 0)
    newer = SCHEMA.add_column(parse_schema("note STRING").current.columns[0])
    kv.update_table(KvTable.of(newer, {}, 1))
    row2 = kv.codec.encode_row([2, "b", 2, "hi"])
    kv.append_as_leader(log, kv_batch([(key(2), encode_kv_value(KvOp.UPSERT, row2))]), 0)
    commit_all(log, kv)
    assert [kv.codec.decode_current(r) for r in kv.lookup([key(1), key(2)])] == [[1, "n", 0, None], [2, "b", 2, "hi"]]
