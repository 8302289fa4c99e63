"""Every bucket replica's KV of the primary-key workload's table, next to the KV its own log describes.

``replica_kvs(cluster, table_id, hw, keys)`` reads, for each tablet server holding a replica of a bucket, its
RocksDB (read only, ``testing/kv_files.py``) once it applied everything below the bucket's high watermark
(waiting at most ``timeout``; a replica still behind then is read as it is, and the checker says how far it
got), and replays the replica's own log up to the same applied offset. Who calls: the verify runner's and the
fault tests' thread, after healing.
"""

from __future__ import annotations

import time

from fluss_py.schema.row import row_codec
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from fluss_py.testing.kv_files import bucket_dir, kv_dir, read_kv, replay_log
from fluss_py.types import TableBucket
from fluss_py.verify.kv_checker import ReplicaKv, Write
from fluss_py.verify.kv_workload import KV_SCHEMA

POLL_S = 0.2


def replica_kvs(
    cluster: LocalCluster, table_id: int, hw: dict[int, int], keys: int, timeout: float = 60.0
) -> dict[str, ReplicaKv]:
    codec = row_codec(KV_SCHEMA)
    key_bucket = {k: codec.bucket_of(codec.encode_key([k]), len(hw)) for k in range(keys)}

    def as_writes(rows: dict[bytes, bytes]) -> dict[int, Write]:
        out = {}
        for row in rows.values():
            _, values = codec.decode_row(row)
            out[values[0]] = (values[1], values[2])
        return out

    deadline = time.monotonic() + timeout
    out: dict[str, ReplicaKv] = {}
    for server in cluster.names(TABLET_SERVER):
        for b, limit in sorted(hw.items()):
            tb = TableBucket(table_id, b)
            directory = kv_dir(cluster, server, tb)
            if not directory.is_dir():
                continue  # no replica of this bucket there
            applied, rows = _read_at(directory, limit, deadline)
            out[f"{server} bucket {b}"] = ReplicaKv(
                as_writes(rows),
                as_writes(replay_log(bucket_dir(cluster, server, tb), applied)),
                frozenset(k for k, kb in key_bucket.items() if kb == b),
                applied,
                limit,
            )
    return out


def _read_at(directory, hw: int, deadline: float) -> tuple[int, dict[bytes, bytes]]:
    """The KV once it applied up to ``hw``, or as it is at ``deadline``. A read that fails (a RocksDB changing
    while it is opened) is tried again until the deadline, then raised."""
    while True:
        try:
            applied, rows = read_kv(directory)
        except Exception:
            if time.monotonic() >= deadline:
                raise
        else:
            if applied >= hw or time.monotonic() >= deadline:
                return applied, rows
        time.sleep(POLL_S)  # polling a file the server writes; bounded by the deadline
