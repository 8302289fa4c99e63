"""The leader's write step: a client's KV batches in, changelog batches out (docs/primary-key-tables.md §4).

For each KV batch of a ProduceLog request, in order::

    header, CRC, records well formed (as any batch); attribute KV set, else TABLE_TYPE_MISMATCH
    idempotent writer: a duplicate (retry) -> the original offsets, nothing merged; sequence errors raise here
    each record: decode_kv_record (key and row against the schema), the key of this bucket,
                 old row (earlier records of the request, else the pre-write buffer, else RocksDB),
                 merge engine -> (change type, new row) -> one changelog record
    one changelog batch: the client's writer id, epoch, base sequence, compression, record count and record
    timestamps, attribute CHANGELOG (invariant 6: idempotence works on it unchanged)

A refusal (InvalidRowError naming the record, UnknownSchemaIdError, ...) refuses the whole request: nothing is
merged, appended or buffered. Pure apart from reading the old rows: the caller appends the result and only
then puts the new rows in the pre-write buffer (``KvTablet.append_as_leader``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from fluss_py.errors import (
    ApiError,
    DuplicateSequenceError,
    InvalidRowError,
    RecordBatchTooLargeError,
    TableTypeMismatchError,
)
from fluss_py.log.validator import split_batches
from fluss_py.log.writer_state import WriterStateManager
from fluss_py.record.batch import (
    CHANGELOG,
    KV_BATCH,
    RecordBatch,
    RecordBatchBuilder,
    increment_sequence,
)
from fluss_py.record.compression import CompressionType
from fluss_py.schema.changelog import ChangeType, decode_kv_record, encode_change
from fluss_py.schema.merge import MergeRule, merge
from fluss_py.schema.row import RowCodec
from fluss_py.types import TableBucket

_UNBOUNDED = 2**62  # a changelog batch is as big as its records make it (the log's max-batch-size still applies)


@dataclass(slots=True)
class Prepared:
    """What ``prepare_changelog`` made of one request: the changelog batches to append and, per record in
    order, the key and the row it leaves (None: deleted), or None for a NOOP. ``duplicate`` (first, last
    offset of the original append) when the whole request is an idempotent retry: nothing to append."""

    changelog: bytes = b""
    rows: list[tuple[bytes, bytes | None] | None] = field(default_factory=list)
    duplicate: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class BucketRules:
    """What the leader checks and merges with: the table's codec and merge rule, the bucket and bucket count."""

    codec: RowCodec
    rule: MergeRule
    table_bucket: TableBucket
    num_buckets: int
    max_batch_bytes: int


def prepare_changelog(
    records: bytes, rules: BucketRules, writers: WriterStateManager, old_row: Callable[[bytes], bytes | None]
) -> Prepared:
    """Turn the KV batches of ``records`` into changelog batches (see the module docstring); ``old_row(key)``
    is the leader's view of a key before this request (pre-write buffer, then RocksDB)."""
    tb = rules.table_bucket
    view = memoryview(records)
    pending: dict[int, tuple[int, int]] = {}
    duplicates = []
    batches: list[tuple[int, RecordBatch, tuple]] = []
    for pos, size, h in split_batches(view):
        if size > rules.max_batch_bytes:
            raise RecordBatchTooLargeError(f"batch of {size} bytes exceeds log.max-batch-size {rules.max_batch_bytes}")
        batch = RecordBatch(view[pos : pos + size])
        batch.ensure_valid()
        if not h[5] & KV_BATCH:
            raise TableTypeMismatchError(f"{tb}: a primary-key table takes KV batches (upserts, deletes) only")
        batch.ensure_valid_records(rules.max_batch_bytes)
        if h[9] >= 0:
            dup = writers.check(h[9], h[10], h[11], increment_sequence(h[11], h[6]), pending)
            if dup is not None:
                duplicates.append(dup)
                continue
        batches.append((pos, batch, h))
    if duplicates and batches:
        raise DuplicateSequenceError(f"{tb}: request mixes duplicate and new batches")
    if duplicates:
        return Prepared(duplicate=(duplicates[0].first_offset, duplicates[-1].last_offset))
    out = Prepared()
    changelog = bytearray()
    overlay: dict[bytes, bytes | None] = {}  # what earlier records of this request left
    for pos, batch, h in batches:
        changes: list[tuple[int, bytes, bytes]] = []
        for i, (_, timestamp, key, value) in enumerate(batch.record_tuples(rules.max_batch_bytes)):
            try:
                change, row = _change(rules, key, value, overlay, old_row)
            except ApiError as e:
                raise type(e)(f"{tb}: record {i} of the batch at position {pos}: {e.message}") from None
            changes.append((timestamp, key, change))  # type: ignore[arg-type]
            if row is None:
                out.rows.append(None)
            else:
                overlay[row[0]] = row[1]
                out.rows.append(row)
        changelog += build_changelog_batch(h, changes)
    out.changelog = bytes(changelog)
    return out


def _change(
    rules: BucketRules,
    key: bytes | None,
    value: bytes | None,
    overlay: dict[bytes, bytes | None],
    old_row: Callable[[bytes], bytes | None],
) -> tuple[bytes, tuple[bytes, bytes | None] | None]:
    """One KV record -> (its changelog value, (key, row it leaves) or None for a NOOP)."""
    codec = rules.codec
    inp = decode_kv_record(codec, key, value)
    assert key is not None  # (decode_kv_record refuses a record without one)
    if rules.num_buckets > 0 and (bucket := codec.bucket_of(key, rules.num_buckets)) != rules.table_bucket.bucket:
        raise InvalidRowError(f"the key belongs to bucket {bucket} of {rules.num_buckets}, not this one")
    old = overlay[key] if key in overlay else old_row(key)
    change, new = merge(rules.rule, codec, old, inp)
    if change is ChangeType.NOOP:
        return encode_change(ChangeType.NOOP), None
    if change is ChangeType.INSERT:
        return encode_change(change, None, new), (key, new)
    if change is ChangeType.UPDATE:
        return encode_change(change, old, new), (key, new)
    return encode_change(ChangeType.DELETE, old, None), (key, None)


def build_changelog_batch(header: tuple, changes: list[tuple[int, bytes, bytes]]) -> bytearray:
    """One changelog batch of ``changes`` (timestamp, key, value) with the writer id, writer epoch, base
    sequence and compression of the KV batch whose ``header`` is given."""
    builder = RecordBatchBuilder(
        compression=CompressionType(header[5] & 0x07),
        writer_id=header[9],
        writer_epoch=header[10],
        base_sequence=header[11],
        max_bytes=_UNBOUNDED,
        attributes=CHANGELOG,
    )
    for timestamp, key, value in changes:
        builder.append(value, key, timestamp)
    return builder.build_buffer()
