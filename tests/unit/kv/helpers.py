"""Shared pieces of the KV unit tests: a table, KV batches as a client builds them, the KV a log replays to."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import rocksdict

from fluss_py.kv.changes import read_all_changes
from fluss_py.kv.store import KvResources
from fluss_py.kv.tablet import KvTable, KvTablet
from fluss_py.log import LogConfig
from fluss_py.log.tablet import LogTablet
from fluss_py.record.batch import KV_BATCH, RecordBatchBuilder
from fluss_py.schema import ChangeType, KvOp, decode_change, encode_kv_value, parse_schema
from fluss_py.types import TableBucket

TB = TableBucket(7, 0)
SCHEMA = parse_schema("id BIGINT NOT NULL, name STRING, v INT", primary_key="id")
TABLE = KvTable.of(SCHEMA, {}, 1)
CODEC = TABLE.codec
RESOURCES = KvResources(32 * 1024 * 1024)
CONFIG = LogConfig(segment_bytes=16 * 1024, index_interval_bytes=256, timestamp_after_max_s=0)


def key(i: int) -> bytes:
    return CODEC.encode_key([i])


def row(i: int, name: str | None, v: int | None) -> bytes:
    return CODEC.encode_row([i, name, v])


def upsert(i: int, name: str | None = "n", v: int | None = 0) -> tuple[bytes, bytes]:
    return key(i), encode_kv_value(KvOp.UPSERT, row(i, name, v))


def delete(i: int) -> tuple[bytes, bytes]:
    return key(i), encode_kv_value(KvOp.DELETE)


def partial(i: int, v: int) -> tuple[bytes, bytes]:
    """Set only ``v`` of key ``i`` (targets: id and v)."""
    values, targets = [i, None, v], (0, 2)
    return key(i), encode_kv_value(KvOp.PARTIAL_UPSERT, CODEC.encode_row(values), targets)


def kv_batch(
    records: Iterable[tuple[bytes, bytes]], writer_id: int = -1, writer_epoch: int = -1, base_sequence: int = -1
) -> bytes:
    builder = RecordBatchBuilder(
        writer_id=writer_id, writer_epoch=writer_epoch, base_sequence=base_sequence, attributes=KV_BATCH
    )
    for k, v in records:
        builder.append(v, k, 1_000)
    return builder.build()


def open_log(path: Path) -> LogTablet:
    t = LogTablet.open(path, TB, CONFIG)
    t.holds_changelog = True
    return t


def open_kv(log: LogTablet, table: KvTable = TABLE) -> KvTablet:
    return KvTablet.open(TB, log, table, RESOURCES)


def replay(log: LogTablet, end: int) -> dict[bytes, bytes]:
    """The KV the log's changelog gives from its start to ``end``, checking on the way that every change's old
    row is the row the replay holds for its key (what the leader merged against was the right state)."""
    state: dict[bytes, bytes] = {}
    for rec in read_all_changes(log, log.log_start_offset, end, 1 << 20):
        change = decode_change(rec.value, CODEC)
        held = state.get(rec.key)
        if change.type is ChangeType.INSERT:
            assert held is None, f"offset {rec.offset}: INSERT of a key the log holds"
            state[rec.key] = change.new  # type: ignore[assignment]
        elif change.type is ChangeType.UPDATE:
            assert held == change.old, f"offset {rec.offset}: UPDATE whose old row is not the held one"
            state[rec.key] = change.new  # type: ignore[assignment]
        elif change.type is ChangeType.DELETE:
            assert held == change.old, f"offset {rec.offset}: DELETE whose old row is not the held one"
            del state[rec.key]
    return state


def kv_contents(kv: KvTablet) -> dict[bytes, bytes]:
    return dict(kv.store.items())


# RocksDB's own texts (rocksdict raises Exception(text)): a write a full disk refused, one a failing disk
# refused, a sync the disk failed, a block that reads back wrong
ENOSPC_WRITE = "IO error: No space left on device: While appending to file: {}/000008.log: No space left on device"
EIO_WRITE = "IO error: While appending to file: {}/000008.log: Input/output error"
ENOSPC_FSYNC = "IO error: No space left on device: While fdatasync: {}/000008.log: No space left on device"
CORRUPT_BLOCK = "Corruption: block checksum mismatch: stored = 1, computed = 2 in {}/000011.sst offset 0 size 93"


class FailingDb:
    """Stands for a store's RocksDB handle on a failing disk: each method named in ``failing`` raises what
    rocksdict raises (``Exception`` with RocksDB's text) and changes nothing; the rest go to the real one.
    Hold no reference to it once the store is closed (it holds the real RocksDB, and RocksDB's lock)."""

    def __init__(self, db: rocksdict.Rdict, **failing: str) -> None:
        self._db = db
        self.failing = failing

    def __getattr__(self, name: str):
        text = self.failing.get(name)
        if text is None:
            return getattr(self._db, name)

        def fail(*args, **kwargs):
            raise Exception(text)

        return fail


def fail_store(kv: KvTablet, **failing: str) -> None:
    """From now on, the named RocksDB calls of ``kv``'s store fail with the given texts (``{}``: its path)."""
    store = kv.store
    store._db = FailingDb(store.db, **{m: t.format(store.path) for m, t in failing.items()})  # type: ignore[assignment]
