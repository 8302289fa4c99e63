"""The client of primary-key tables (docs/primary-key-tables.md, docs/client.md "Primary-key tables").

``Upserter``/``Deleter`` write through the producer's pipeline (KV batches, explicit buckets); ``Lookuper``
reads: batched point lookups, prefix lookups, bucket scans. ``KvTable`` is a table's schema and codec.
"""

from fluss_py.client.kv.batcher import LookupClosedError
from fluss_py.client.kv.lookuper import BucketScan, Lookuper, PrefixRows
from fluss_py.client.kv.table import KvTable, KvTables, kv_table
from fluss_py.client.kv.writer import Deleter, Upserter

__all__ = [
    "BucketScan",
    "Deleter",
    "KvTable",
    "KvTables",
    "LookupClosedError",
    "Lookuper",
    "PrefixRows",
    "Upserter",
    "kv_table",
]
