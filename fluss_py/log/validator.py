"""Validation of an append request before anything is written (docs/storage.md §1, invariant 6).

The leader path is the one place where a server looks inside batches: header, CRC, then every record's
lengths and the record count, compressed records decompressed up to ``log.max-batch-size``
(``RecordBatch.ensure_valid_records``). It also assigns offsets and stamps the leader epoch into the request
buffer in place. The follower path checks headers and CRCs only: what it copies was validated by a leader.
Neither path touches disk or tablet state, so a raise here leaves the log exactly as it was.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from fluss_py.errors import (
    DuplicateSequenceError,
    InvalidRecordBatchError,
    InvalidTimestampError,
    RecordBatchTooLargeError,
)
from fluss_py.log.epoch_cache import LeaderEpochCache
from fluss_py.log.segment import BatchMeta
from fluss_py.log.writer_state import BatchMetadata, WriterStateManager
from fluss_py.record.batch import (
    BATCH_HEADER_SIZE,
    HEADER,
    LOG_OVERHEAD,
    RecordBatch,
    ensure_batch_kind,
    increment_sequence,
    set_base_offset_and_epoch,
)
from fluss_py.types import TableBucket


@dataclass(slots=True)
class ValidatedAppend:
    """What the tablet writes and records after a request passed validation.

    ``next_offset`` is one past the last offset of the request; ``metas`` locate the batches in the buffer.
    Leader only: ``writer_updates`` (arguments of ``WriterStateManager.update``) and ``duplicates`` (when the
    whole request is an idempotent retry: the original batches, and ``metas`` is empty). Follower only:
    ``headers`` (for the writer-state replay), ``new_epochs`` ((epoch, start offset) to assign, in order)
    and ``epoch`` (the latest epoch after the request).
    """

    metas: list[BatchMeta] = field(default_factory=list)
    next_offset: int = 0
    record_count: int = 0
    max_timestamp: int = -1
    writer_updates: list[tuple] = field(default_factory=list)
    duplicates: list[BatchMetadata] = field(default_factory=list)
    headers: list[tuple] = field(default_factory=list)
    new_epochs: list[tuple[int, int]] = field(default_factory=list)
    epoch: int | None = None


def split_batches(view: memoryview) -> Iterator[tuple[int, int, tuple]]:
    """(position, size, header) of each batch; the buffer must be whole batches exactly."""
    if not len(view):
        raise InvalidRecordBatchError("empty records")
    pos, n = 0, len(view)
    while pos < n:
        if n - pos < BATCH_HEADER_SIZE:
            raise InvalidRecordBatchError(f"{n - pos} trailing bytes after the last batch (a torn batch)")
        h = HEADER.unpack_from(view, pos)
        size = h[1] + LOG_OVERHEAD
        if size < BATCH_HEADER_SIZE or pos + size > n:
            raise InvalidRecordBatchError(f"batch at position {pos} declares {size} bytes, {n - pos} present")
        yield pos, size, h
        pos += size


def validate_leader_append(
    buf: bytearray,
    log_end_offset: int,
    leader_epoch: int,
    max_batch_bytes: int,
    writers: WriterStateManager,
    table_bucket: TableBucket,
    latest_timestamp: int | None = None,
    changelog: bool = False,
) -> ValidatedAppend:
    """Check size, header, CRC, kind (``changelog``: the log of a primary-key bucket, ``ensure_batch_kind``)
    and records of every batch, that no batch's max timestamp is above ``latest_timestamp`` (None: no bound;
    the server clock plus ``log.message.timestamp.after.max.ms``) and the idempotent writers' sequences
    (``writers`` is only read); assign offsets from ``log_end_offset`` and stamp ``leader_epoch`` into ``buf``."""
    view = memoryview(buf)
    out = ValidatedAppend(next_offset=log_end_offset)
    pending: dict[int, tuple[int, int]] = {}
    for pos, size, h in split_batches(view):
        if size > max_batch_bytes:
            raise RecordBatchTooLargeError(f"batch of {size} bytes exceeds log.max-batch-size ({max_batch_bytes})")
        batch = RecordBatch(view[pos : pos + size])
        batch.ensure_valid()
        ensure_batch_kind(h[5], changelog, f"{table_bucket}: batch at position {pos}")
        batch.ensure_valid_records(max_batch_bytes)
        if latest_timestamp is not None and h[8] > latest_timestamp:
            raise InvalidTimestampError(
                f"{table_bucket}: batch at position {pos} has max timestamp {h[8]}, {h[8] - latest_timestamp} ms "
                f"past what log.message.timestamp.after.max.ms allows ({latest_timestamp})"
            )
        offset = out.next_offset
        if h[9] >= 0:
            last_seq = increment_sequence(h[11], h[6])
            dup = writers.check(h[9], h[10], h[11], last_seq, pending)
            if dup is not None:
                out.duplicates.append(dup)
                continue
            out.writer_updates.append((h[9], h[10], h[11], last_seq, offset, offset + h[6], h[8]))
        set_base_offset_and_epoch(buf, pos, offset, leader_epoch)
        out.metas.append(BatchMeta(pos, size, offset, offset + h[6], h[8]))
        out.next_offset = offset + h[6] + 1
        out.record_count += h[12]
        out.max_timestamp = max(out.max_timestamp, h[8])
    if out.duplicates and out.metas:
        raise DuplicateSequenceError(f"{table_bucket}: request mixes duplicate and new batches")
    return out


def validate_follower_append(
    view: memoryview,
    log_end_offset: int,
    epoch_cache: LeaderEpochCache,
    table_bucket: TableBucket,
    changelog: bool = False,
) -> ValidatedAppend:
    """Check header, CRC and kind of replicated batches, that they continue ``log_end_offset`` and that their
    epochs never go back over data (``epoch_cache`` is only read)."""
    out = ValidatedAppend(next_offset=log_end_offset)
    epoch = epoch_cache.latest_epoch
    for pos, size, h in split_batches(view):
        RecordBatch(view[pos : pos + size]).ensure_valid()
        ensure_batch_kind(h[5], changelog, f"{table_bucket}: replicated batch at offset {h[0]}")
        if h[0] != out.next_offset:
            raise InvalidRecordBatchError(
                f"{table_bucket}: replicated batch starts at offset {h[0]}, expected {out.next_offset}"
            )
        if epoch is not None and 0 <= h[2] < epoch:
            # Allowed only over epochs that hold no data yet (an election-time assign at our LEO);
            # assign() then drops them, as Kafka's follower path does.
            if out.new_epochs or any(e.epoch > h[2] and e.start_offset < h[0] for e in epoch_cache.entries()):
                raise InvalidRecordBatchError(
                    f"{table_bucket}: replicated batch at {h[0]} has epoch {h[2]} < latest {epoch}"
                )
            out.new_epochs.append((h[2], h[0]))
            epoch = h[2]
        elif h[2] >= 0 and (epoch is None or h[2] > epoch):
            out.new_epochs.append((h[2], h[0]))
            epoch = h[2]
        out.metas.append(BatchMeta(pos, size, h[0], h[0] + h[6], h[8]))
        out.headers.append(h)
        out.next_offset = h[0] + h[6] + 1
        out.record_count += h[12]
        out.max_timestamp = max(out.max_timestamp, h[8])
    out.epoch = epoch
    return out
