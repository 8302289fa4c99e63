"""KvTablet: one primary-key bucket replica's KV — its RocksDB store, its table's rules and, on the leader, the
pre-write buffer (docs/primary-key-tables.md §1, invariants 1-7).

Lifecycle::

    open() --check (invariant 4: applied offset readable and inside the log, else rebuilt)--> follower
    follower --become_leader(log)--> leader --become_follower()--> follower     (either role applies)
    any --close() / close_without_flush() / delete()--> closed

Both roles apply committed changes (``apply_committed``: the log ``[applied, HW)`` in bounded rounds, one
``WriteBatch`` with the applied offset each). The leader also writes (``append_as_leader``: prepare the
changelog, append it, buffer the new rows) and keeps the pre-write buffer covering ``[applied, LEO)``. A
truncation of the log below the applied offset is undone in the KV first (``before_truncate``: the changelog
carries the old rows), or the KV is rebuilt when that cannot be done (``after_truncate``).

Synchronous and single-owner like the ``LogTablet`` beside it: its ``Replica`` calls it on the event loop.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fluss_py.errors import (
    CorruptMessageError,
    InvalidRecordBatchError,
    InvalidRowError,
    KvNotReadyError,
    OffsetOutOfRangeError,
)
from fluss_py.kv.changes import read_all_changes, read_changes
from fluss_py.kv.prepare import BucketRules, Prepared, prepare_changelog
from fluss_py.kv.prewrite import PreWriteBuffer
from fluss_py.kv.store import KvResources, KvStore, StoreFootprint
from fluss_py.log.loader import KV_DIR_NAME
from fluss_py.log.results import LogAppendInfo
from fluss_py.log.tablet import LogTablet
from fluss_py.record.batch import iter_batches
from fluss_py.schema.changelog import ChangeType, decode_change
from fluss_py.schema.merge import MergeRule
from fluss_py.schema.row import RowCodec, row_codec
from fluss_py.schema.schema import TableSchema
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 1024 * 1024  # one read of the log when rebuilding the buffer or undoing
# A new leader rebuilds its pre-write buffer at once when it has at most this many offsets above its applied
# offset; further behind (its KV was rebuilt), writes get KV_NOT_READY until the apply loop brings it there.
BUFFER_REBUILD_MAX_OFFSETS = 50_000


@dataclass(frozen=True, slots=True)
class KvTable:
    """What a bucket's KV needs to know of its table: the schema (and its codec), merge rule, bucket count
    (0: not known, the bucket of a key is not checked)."""

    schema: TableSchema
    rule: MergeRule
    num_buckets: int

    @classmethod
    def of(cls, schema: TableSchema, properties: Mapping[str, str], num_buckets: int) -> KvTable:
        """ConfigError when the merge-engine properties do not fit the schema (checked at create already)."""
        return cls(schema, MergeRule.from_properties(properties, schema), max(num_buckets, 0))

    @property
    def codec(self) -> RowCodec:
        return row_codec(self.schema)


class KvTablet:
    """Owns one ``KvStore`` and (leader) one ``PreWriteBuffer``; see the module docstring."""

    def __init__(self, table_bucket: TableBucket, store: KvStore, table: KvTable) -> None:
        self.table_bucket = table_bucket
        self.store = store
        self.table = table
        self._applied = 0
        self._leader = False
        self.buffer: PreWriteBuffer | None = None  # leader only, once it covers [applied, LEO)
        self.rebuilds = 0  # times the KV was emptied and replayed from the log (invariant 4, truncations)
        self.undone = 0  # changes undone before truncations
        self.applied_rows = 0  # changes applied since open
        self.failed: str | None = None  # why applying stopped: a log this KV cannot apply (see ``apply_committed``)
        self._reset_pending = False

    @classmethod
    def open(cls, table_bucket: TableBucket, log_: LogTablet, table: KvTable, resources: KvResources) -> KvTablet:
        """Open the store in the log's directory and check it against the log (invariant 4)."""
        kv = cls(table_bucket, KvStore.open(Path(log_.dir) / KV_DIR_NAME, resources), table)
        applied = kv.store.applied_offset()
        if applied is None:
            kv._reset(log_, "its applied offset is unreadable")
        else:
            kv._applied = applied
            kv._check_range(log_)
        return kv

    # ------------------------------------------------------------------ views
    @property
    def applied_offset(self) -> int:
        """Every change of the log below this offset is in the KV, and none at or above it."""
        return self._applied

    @property
    def is_leader(self) -> bool:
        return self._leader

    @property
    def codec(self) -> RowCodec:
        return self.table.codec

    def footprint(self) -> StoreFootprint:
        return self.store.footprint()

    def update_table(self, table: KvTable) -> None:
        """A new schema version (a column added) or new properties: later writes use them."""
        self.table = table

    # ------------------------------------------------------------------ the range check (invariant 4)
    def _check_range(self, log_: LogTablet) -> None:
        if self._applied > log_.log_end_offset:
            self._reset(log_, f"its applied offset {self._applied} is above the log end {log_.log_end_offset}")
        elif self._applied < log_.log_start_offset:
            log.error("%s: the log starts at %d, above the KV's applied offset %d: the changes below it are lost "
                      "to the KV (a primary-key bucket's log must keep its whole history)", self.table_bucket,
                      log_.log_start_offset, self._applied)  # fmt: skip
            self._reset(log_, f"its applied offset {self._applied} is below the log start {log_.log_start_offset}")

    def _reset(self, log_: LogTablet, why: str) -> None:
        start = log_.log_start_offset
        if self._applied or start:
            log.warning("%s: KV rebuilt from the log (from offset %d): %s", self.table_bucket, start, why)
        self.store.reset(start)
        self._applied = start
        self.rebuilds += 1
        self._reset_pending = False
        self.failed = None
        if self._leader:
            self.buffer = None
            self._maybe_build_buffer(log_)

    # ------------------------------------------------------------------ roles
    def become_leader(self, log_: LogTablet) -> None:
        """Rebuild the pre-write buffer from the log ``[applied, LEO)`` (now, or once close enough)."""
        self._leader = True
        self.buffer = None
        self._maybe_build_buffer(log_)

    def become_follower(self) -> None:
        self._leader = False
        self.buffer = None

    def _maybe_build_buffer(self, log_: LogTablet) -> None:
        if not self._leader or self.buffer is not None:
            return
        if log_.log_end_offset - self._applied > BUFFER_REBUILD_MAX_OFFSETS:
            return
        buffer = PreWriteBuffer()
        for rec in read_all_changes(log_, self._applied, log_.log_end_offset, READ_CHUNK_BYTES):
            change = decode_change(rec.value)
            if change.type is not ChangeType.NOOP:
                buffer.put(rec.offset, rec.key, change.new)
        self.buffer = buffer

    # ------------------------------------------------------------------ the leader's writes
    def append_as_leader(self, log_: LogTablet, records: bytes, leader_epoch: int) -> LogAppendInfo:
        """A client's KV batches: their changelog appended to ``log_`` (one record per input row, the
        client's writer id and sequences), the new rows buffered. Raises with nothing written."""
        if not self._leader or self.buffer is None:
            raise KvNotReadyError(
                f"{self.table_bucket}: the new leader's KV is catching up (applied {self._applied}, log end "
                f"{log_.log_end_offset}); retry"
            )
        buffer = self.buffer
        prepared = prepare_changelog(records, self._rules(log_), log_.writers, self._old_row)
        if prepared.duplicate is not None:
            first, last = prepared.duplicate
            now_ms = int(time.time() * 1000)
            return LogAppendInfo(first, last, -1, now_ms, 0, 0, duplicate=True, leader_epoch=leader_epoch)
        info = log_.append_as_leader(prepared.changelog, leader_epoch)
        self._buffer_appended(buffer, prepared, info.first_offset)
        return info

    def _rules(self, log_: LogTablet) -> BucketRules:
        t = self.table
        return BucketRules(t.codec, t.rule, self.table_bucket, t.num_buckets, log_.config.max_batch_bytes)

    def _old_row(self, key: bytes) -> bytes | None:
        pending = self.buffer.get(key) if self.buffer is not None else None
        if pending is not None:
            return pending[1]
        return self.store.get(key)

    @staticmethod
    def _buffer_appended(buffer: PreWriteBuffer, prepared: Prepared, first_offset: int) -> None:
        for i, row in enumerate(prepared.rows):
            if row is not None:
                buffer.put(first_offset + i, row[0], row[1])

    # ------------------------------------------------------------------ applying committed changes
    def apply_committed(self, log_: LogTablet, max_bytes: int, max_records: int = 2**62) -> int:
        """Apply the committed changes from the applied offset (about ``max_bytes`` of the log and at most
        ``max_records``: one round) in one WriteBatch with the new applied offset; returns how many changelog
        records it covered. A log
        that does not decode as a changelog stops applying (``failed``; logged): the KV keeps its last
        consistent state and the replica keeps serving its log."""
        if self.failed is not None:
            return 0
        self._check_range(log_)
        hw = log_.high_watermark
        if self._applied >= hw:
            self._maybe_build_buffer(log_)
            return 0
        try:
            records, after = read_changes(log_, self._applied, hw, max_bytes, max_records)
            rows: dict[bytes, bytes | None] = {}
            for rec in records:
                change = decode_change(rec.value)
                if change.type is not ChangeType.NOOP:
                    rows[rec.key] = change.new  # None after a DELETE
        except (CorruptMessageError, InvalidRecordBatchError, InvalidRowError) as e:
            self.failed = f"changelog at offset {self._applied} does not apply: {e}"
            log.error("%s: KV stops applying: %s", self.table_bucket, self.failed)
            return 0
        self.store.write(rows, after)
        self._applied = after
        self.applied_rows += len(records)
        if self.buffer is not None:
            self.buffer.drop_below(after)
        self._maybe_build_buffer(log_)
        return len(records)

    # ------------------------------------------------------------------ truncation
    def before_truncate(self, log_: LogTablet, offset: int) -> None:
        """The log is about to lose every batch from the one holding ``offset`` (``truncate_to``; an offset
        at or beyond its end: a whole-log restart there). Changes the KV holds from there on are undone
        now, while the log still has them; when that cannot be done the KV is rebuilt after the truncation."""
        if offset >= self._applied:
            return
        target = self._batch_start(log_, offset)
        if target is None or not self._undo(log_, target):
            self._reset_pending = True

    def after_truncate(self, log_: LogTablet, *, corrupt: bool = False) -> None:
        """After any truncation (``corrupt``: a cut at a corrupt batch, whose bytes cannot be trusted to undo:
        rebuilt when the cut reaches below the applied offset)."""
        if corrupt and log_.log_end_offset < self._applied:
            self._reset_pending = True
        if self._reset_pending:
            self._reset(log_, "the log was truncated below its applied offset and the changes could not be undone")
        self.failed = None  # (the part of the log that did not apply may be gone: try again)
        self._check_range(log_)
        if self._leader:
            self.buffer = None
            self._maybe_build_buffer(log_)

    @staticmethod
    def _batch_start(log_: LogTablet, offset: int) -> int | None:
        """Where the log will end after ``truncate_to(offset)``: the base offset of the batch holding it."""
        if offset < log_.log_start_offset:
            return None
        if offset >= log_.log_end_offset:
            return log_.log_end_offset
        try:
            data = log_.read(offset, 1, log_.log_end_offset).records
        except OffsetOutOfRangeError:
            return None
        batch = next(iter_batches(data), None)
        return None if batch is None else batch.base_offset

    def _undo(self, log_: LogTablet, target: int) -> bool:
        """Put back, in one WriteBatch, what every key held at ``target``: the old row of its first change in
        ``[target, applied)`` (absent before an INSERT). False when that part of the log does not decode."""
        try:
            records = read_all_changes(log_, target, self._applied, READ_CHUNK_BYTES)
            before: dict[bytes, bytes | None] = {}
            for rec in records:
                if rec.key in before:
                    continue
                change = decode_change(rec.value)
                if change.type is not ChangeType.NOOP:
                    before[rec.key] = change.old  # None before an INSERT: the key was absent
        except (CorruptMessageError, InvalidRecordBatchError, InvalidRowError, OffsetOutOfRangeError) as e:
            log.warning("%s: cannot undo the changes from %d: %s", self.table_bucket, target, e)
            return False
        if len(records) != self._applied - target:  # one record per offset: the log lacks some the KV applied
            return False
        log.warning("%s: undoing %d applied changes [%d, %d) before a truncation", self.table_bucket,
                    len(records), target, self._applied)  # fmt: skip
        self.store.write(before, target, sync=True)  # durable before the log forgets the changes
        self._applied = target
        self.undone += len(records)
        return True

    # ------------------------------------------------------------------ reads (committed rows only)
    def lookup(self, keys: Sequence[bytes]) -> list[bytes | None]:
        return self.store.multi_get(keys)

    def prefix_lookup(self, prefix: bytes, limit: int) -> tuple[list[bytes], bool]:
        rows, more = self.store.prefix(prefix, limit)
        return [row for _, row in rows], more

    def scan(self, after_key: bytes | None, limit: int) -> tuple[list[tuple[bytes, bytes]], bool]:
        return self.store.scan(after_key, limit)

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self.buffer = None
        self.store.close()

    def close_without_flush(self) -> None:
        self.buffer = None
        self.store.close_without_flush()

    def delete(self) -> None:
        self.buffer = None
        self.store.delete()

    @property
    def closed(self) -> bool:
        return self.store.closed

    def __repr__(self) -> str:
        role = "leader" if self._leader else "follower"
        return f"KvTablet({self.table_bucket}, {role}, applied={self._applied})"
