"""Reading a primary-key bucket's changelog back from its log: the records of ``[start, end)`` in bounded reads.

The apply loop (new rows of committed changes), the leader's pre-write buffer rebuild (new rows of
uncommitted ones) and the undo before a truncation (old rows) all read the log through ``read_changes``. A
batch whose CRC does not match, that is not a changelog batch, or a record without a key or value means the
log is not what this KV can be built from: ``CorruptMessageError`` / ``InvalidRecordBatchError`` (the caller
stops applying and says so).

Synchronous; called by the ``KvTablet`` on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from fluss_py.errors import CorruptMessageError
from fluss_py.log.tablet import LogTablet
from fluss_py.record.batch import CHANGELOG, iter_batches


@dataclass(frozen=True, slots=True)
class ChangeRecord:
    """One changelog record as the log holds it (the value is decoded by ``schema.changelog.decode_change``)."""

    offset: int
    key: bytes
    value: bytes


def read_changes(
    log: LogTablet, start: int, end: int, max_bytes: int, max_records: int = 2**62
) -> tuple[list[ChangeRecord], int]:
    """The changelog records of ``log`` in ``[start, end)``, reading about ``max_bytes`` (at least one batch:
    a batch holding ``end`` is read and cut there) and at most ``max_records`` (a batch may be cut: the next
    read starts inside it), and the offset reading continues from (``end`` when everything was read)."""
    end = min(end, log.log_end_offset)
    if start >= end:
        return [], start
    data = log.read(start, max_bytes, log.log_end_offset).records
    out: list[ChangeRecord] = []
    next_offset = start
    for batch in iter_batches(data):
        batch.ensure_valid()  # the CRC: what a KV applies or undoes is what its leader wrote
        if not batch.attributes & CHANGELOG:
            raise CorruptMessageError(
                f"{log.table_bucket}: batch at offset {batch.base_offset} of a primary-key bucket is not a changelog"
            )
        for offset, _, key, value in batch.record_tuples():
            if offset < start:
                continue
            if offset >= end or len(out) >= max_records:
                return out, next_offset
            if key is None or value is None:
                raise CorruptMessageError(f"{log.table_bucket}: changelog record at offset {offset} lacks key or value")
            out.append(ChangeRecord(offset, key, value))
            next_offset = offset + 1
    return out, next_offset


def read_all_changes(log: LogTablet, start: int, end: int, chunk_bytes: int) -> list[ChangeRecord]:
    """Every changelog record of ``[start, end)`` (the caller bounds how many there can be)."""
    out: list[ChangeRecord] = []
    offset = start
    while offset < min(end, log.log_end_offset):
        records, after = read_changes(log, offset, end, chunk_bytes)
        out.extend(records)
        offset = after
    return out
