"""Synchronous KV of one primary-key bucket replica, beside its log (docs/primary-key-tables.md §3.5-§7).

    store.py     KvStore: the RocksDB (rows + applied offset in one WriteBatch), KvResources (shared memory)
    prewrite.py  PreWriteBuffer: the leader's changes appended but not yet applied
    changes.py   reading the changelog back from the log
    prepare.py   the leader's step: KV batches -> changelog batches
    tablet.py    KvTablet: open and its check, roles, writes, apply, truncation, reads

Knows nothing of asyncio, gRPC or kazoo; the replica layer (replica/kv_apply.py) owns the task that applies.
"""

from fluss_py.kv.prewrite import PreWriteBuffer
from fluss_py.kv.store import KvResources, KvStore
from fluss_py.kv.tablet import KvTable, KvTablet

__all__ = ["KvResources", "KvStore", "KvTable", "KvTablet", "PreWriteBuffer"]
