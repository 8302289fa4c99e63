"""Read-only views of a replica's KV and of the KV its log describes (docs/primary-key-tables.md §3.5), for
tests and ``fluss-py verify``.

``read_kv(dir)`` opens a bucket replica's RocksDB read only — safe while its tablet server runs: RocksDB lets
read-only instances open a live database and shows them what it held at that moment — and returns its
applied offset and rows. ``replay_log(bucket_dir, upto)`` applies the changelog of the replica's own segment
files below ``upto`` to an empty KV (invariant 1: the two must be equal at the applied offset).
Who calls: a test's or the verify runner's thread.
"""

from __future__ import annotations

import struct
from pathlib import Path

from rocksdict import AccessType, Options, Rdict

from fluss_py.log.manager import bucket_dir_name
from fluss_py.record.batch import iter_batches
from fluss_py.schema.changelog import ChangeType, decode_change
from fluss_py.testing.cluster import LocalCluster
from fluss_py.types import TableBucket

ROW_PREFIX = b"r"
APPLIED_KEY = b"m:applied"


def bucket_dir(cluster: LocalCluster, server: str, tb: TableBucket) -> Path:
    return Path(cluster.get(server).data_dir) / bucket_dir_name(tb)


def kv_dir(cluster: LocalCluster, server: str, tb: TableBucket) -> Path:
    return bucket_dir(cluster, server, tb) / "kv"


def read_kv(directory: Path) -> tuple[int, dict[bytes, bytes]]:
    """(applied offset, {key: row}) of the RocksDB in ``directory``: the offset below which every change of the log
    is in the rows (0 for a store that never applied anything)."""
    db = Rdict(str(directory), options=Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        raw = db.get(APPLIED_KEY)
        applied = struct.unpack(">q", raw)[0] if raw is not None else 0
        rows = {}
        it = db.iter()
        it.seek(ROW_PREFIX)
        while it.valid():
            key = it.key()
            if not key.startswith(ROW_PREFIX):
                break
            rows[key[len(ROW_PREFIX) :]] = it.value()
            it.next()
        del it
        return applied, rows
    finally:
        db.close()


def replay_log(directory: Path, upto: int) -> dict[bytes, bytes]:
    """The KV that the changelog in ``directory``'s segment files describes below offset ``upto``."""
    kv: dict[bytes, bytes] = {}
    for segment in sorted(directory.glob("*.log")):
        for batch in iter_batches(segment.read_bytes()):
            if batch.base_offset >= upto:
                return kv
            for record in batch.records():
                if record.offset >= upto:
                    return kv
                change = decode_change(record.value or b"")
                assert record.key is not None
                if change.type in (ChangeType.INSERT, ChangeType.UPDATE):
                    assert change.new is not None
                    kv[record.key] = change.new
                elif change.type is ChangeType.DELETE:
                    kv.pop(record.key, None)
    return kv
