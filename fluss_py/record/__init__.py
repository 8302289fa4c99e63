"""Record-batch wire and disk format: building, reading, validating and header patching. No I/O."""

from fluss_py.record.batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    NO_LEADER_EPOCH,
    NO_SEQUENCE,
    NO_WRITER_EPOCH,
    NO_WRITER_ID,
    CompressionType,
    Record,
    RecordBatch,
    RecordBatchBuilder,
    increment_sequence,
    iter_batches,
    read_header,
    set_base_offset_and_epoch,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "LOG_OVERHEAD",
    "MAGIC",
    "NO_LEADER_EPOCH",
    "NO_SEQUENCE",
    "NO_WRITER_EPOCH",
    "NO_WRITER_ID",
    "CompressionType",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "increment_sequence",
    "iter_batches",
    "read_header",
    "set_base_offset_and_epoch",
]
