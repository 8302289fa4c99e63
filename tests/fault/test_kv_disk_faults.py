"""A KV's disk fails under a primary-key table (docs/primary-key-tables.md §9), on real processes.

One tablet server (the victim) keeps its data dir on the power-cut filesystem (``testing/powercut_fs.py``),
whose writes fail on demand; the other two and ZooKeeper stay on the real disk. A table of three buckets,
replicated on all three servers; rows are upserted with acks=all, each key once per round, and every
acknowledged row is remembered.

- the next write of one of the victim's RocksDB WAL files fails with ENOSPC: the data directory goes offline
  as for a log's full disk (every replica of it, not only that KV), the victim's leaderships move at once,
  /health says why (`offline: KV store: ... No space left on device (ENOSPC)`), a lookup of every
  acknowledged key on the new leaders returns its row; then the disk has room again: the directory comes
  back, the KVs reopen in the same process and catch up with their HW, the victim rejoins every ISR;
- the next write fails with EIO: offline again, and this time it stays offline over several recovery checks;
  the new leaders still answer every key.

Before this, a KV's disk error stopped only that KV (lookups KV_NOT_READY on a leader that kept leading).

Reproduce: ``.venv/bin/python -m pytest tests/fault/test_kv_disk_faults.py -s``.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import pytest

from fluss_py.client import SyncAdmin
from fluss_py.errors import ErrorCode, spec
from fluss_py.log.dirs import PROBE_FILE
from fluss_py.record.batch import KV_BATCH, RecordBatchBuilder
from fluss_py.rpc import convert
from fluss_py.rpc.pb import tablet_pb2, tablet_pb2_grpc
from fluss_py.schema import KvOp, RowCodec, encode_kv_value, parse_schema
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.powercut import PowerCutFs
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from tests.fault.replication_support import FAULT_OVERRIDES, leader_isr, server_name, wait_full_isr

pytestmark = pytest.mark.fault

OVERRIDES = {**FAULT_OVERRIDES, "log.dir.recovery-check-interval": "500ms", "log.dir.min-free": "1MB"}
VICTIM, SERVERS, BUCKETS = 3, (1, 2, 3), 3
TABLE = "fluss.kv_disk"
SCHEMA = parse_schema("id BIGINT NOT NULL, name STRING, n INT", primary_key="id")
CODEC = RowCodec(SCHEMA)
KEYS_PER_BUCKET = 20
PROBES_WHILE_FULL = 20  # failed probe writes of the recovery check (every 500 ms) before the disk has room


def _keys() -> dict[int, list[int]]:
    """``KEYS_PER_BUCKET`` ids of each bucket (a leader refuses a key of another bucket)."""
    out: dict[int, list[int]] = {b: [] for b in range(BUCKETS)}
    i = 0
    while min(len(v) for v in out.values()) < KEYS_PER_BUCKET:
        ids = out[CODEC.bucket_of(CODEC.encode_key([i]), BUCKETS)]
        if len(ids) < KEYS_PER_BUCKET:
            ids.append(i)
        i += 1
    return out


def _retrying(what: str, call: Callable[[], tablet_pb2.ProduceBucketResult | tablet_pb2.LookupBucketResult]):
    """``call()`` again while its answer is a retriable error (a leader changing, a KV catching up)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            result = call()
        except grpc.RpcError as e:  # (a server the metadata named is going away)
            result, code = None, e.code()
        else:
            code = result.error.code
            if code == 0 or not spec(ErrorCode(code))[0]:
                return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still failing after 60 s: {code}")
        time.sleep(0.1)


class KvTable:
    """The table through gRPC, to each bucket's leader as ZooKeeper names it; remembers what was acknowledged."""

    def __init__(self, cluster: LocalCluster, zk: ZkView, table_id: int) -> None:
        self.cluster, self.zk = cluster, zk
        self.tbs = [TableBucket(table_id, b) for b in range(BUCKETS)]
        self.keys = _keys()
        self.acked: dict[int, list] = {}  # id -> the row its last acknowledged upsert wrote
        self._channels: dict[int, grpc.Channel] = {}

    def _stub(self, tb: TableBucket) -> tablet_pb2_grpc.TabletServiceStub:
        lai = leader_isr(self.zk, self.cluster, tb)
        leader = lai.leader if lai is not None and lai.leader >= 0 else SERVERS[0]
        if leader not in self._channels:
            self._channels[leader] = grpc.insecure_channel(self.cluster.get(server_name(leader)).rpc_address)
        return tablet_pb2_grpc.TabletServiceStub(self._channels[leader])

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()

    def upsert_round(self, tag: str) -> None:
        """One acks=all upsert of every key, one batch per bucket, to its current leader."""
        for tb in self.tbs:
            rows = [[i, f"{tag}-{i}", len(tag)] for i in self.keys[tb.bucket]]
            builder = RecordBatchBuilder(attributes=KV_BATCH)
            for values in rows:
                builder.append(encode_kv_value(KvOp.UPSERT, CODEC.encode_row(values)), CODEC.key_of_row(values))
            bucket = tablet_pb2.ProduceBucket(table_bucket=convert.table_bucket_to_pb(tb), records=builder.build())
            request = tablet_pb2.ProduceLogRequest(acks=-1, timeout_ms=10_000, buckets=[bucket])
            _retrying(f"upsert to {tb}", lambda tb=tb, r=request: self._stub(tb).ProduceLog(r, timeout=15).buckets[0])
            self.acked.update({values[0]: values for values in rows})

    def lookup_every_key(self) -> None:
        """Each acknowledged key, looked up on its bucket's leader (read-your-writes): its last row."""
        for tb in self.tbs:
            ids = self.keys[tb.bucket]
            bucket = tablet_pb2.LookupBucket(
                table_bucket=convert.table_bucket_to_pb(tb), keys=[CODEC.encode_key([i]) for i in ids]
            )
            request = tablet_pb2.LookupRequest(buckets=[bucket], timeout_ms=5_000)
            answer = _retrying(
                f"lookup on {tb}", lambda tb=tb, r=request: self._stub(tb).Lookup(r, timeout=10).buckets[0]
            )
            for i, value in zip(ids, answer.values, strict=True):
                assert value.found and CODEC.decode_current(value.row) == self.acked[i], f"key {i} of {tb}"


def _victims_kvs_caught_up(cluster: LocalCluster, tbs: list[TableBucket]) -> Callable[[], bool]:
    def done() -> bool:
        kvs = (cluster.health(server_name(VICTIM)) or {}).get("kv_replicas", {})
        return all(kvs.get(str(tb), {}).get("state") == "applying" and kvs[str(tb)]["apply_lag"] == 0 for tb in tbs)

    return done


def test_a_kv_disk_error_takes_its_data_dir_offline_and_moves_leadership(
    powercut_fs: PowerCutFs, cluster_factory: Callable[..., LocalCluster]
) -> None:
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=OVERRIDES, start=False)
    name = server_name(VICTIM)
    data_dir = Path(cluster.get(name).data_dir)
    powercut_fs.hold(data_dir, name)
    cluster.start(timeout=60)
    with SyncAdmin(cluster.get(server_name(1)).rpc_address, request_timeout=10.0) as admin:
        table_id = admin.create_table(TABLE, num_buckets=BUCKETS, replication_factor=3, schema=SCHEMA)
    with ZkView(cluster.zookeeper_address) as zk, contextlib.closing(KvTable(cluster, zk, table_id)) as table:
        tbs = table.tbs
        for tb in tbs:
            wait_full_isr(zk, cluster, tb, SERVERS, 30)
        table.upsert_round("a")
        cluster.wait_until(_victims_kvs_caught_up(cluster, tbs), 30, "the victim's KVs applied round a")
        health = cluster.health(name)
        assert health["kv_states"] == {"applying": BUCKETS, "rebuilding": 0, "stopped": 0}, health
        led = [tb for tb in tbs if leader_isr(zk, cluster, tb).leader == VICTIM]
        assert led, "the victim leads nothing: the scenario would prove nothing"

        def away() -> bool:
            return all(VICTIM not in (lai := leader_isr(zk, cluster, tb)).isr and lai.leader != VICTIM for tb in tbs)

        def offline_says(reason: str) -> bool:
            health = cluster.health(name) or {}
            return health.get("log_dirs", {}).get(str(data_dir), "").startswith(f"offline: {reason}")

        # 1. a full disk under a KV: the whole directory goes offline, its leaderships move; then it comes back
        powercut_fs.fail_write("ENOSPC", f"{name}/{PROBE_FILE}", count=PROBES_WHILE_FULL)  # full for ~10 s more
        powercut_fs.fail_write("ENOSPC", f"{name}/*/kv/*.log")
        table.upsert_round("b")  # acknowledged by the ISR; the victim's apply of it fails
        full = "KV store: While appending to file: No space left on device (ENOSPC)"
        cluster.wait_until(lambda: offline_says(full), 30, lambda: f"/health says {full}: {cluster.health(name)}")
        cluster.wait_until(away, 30, lambda: f"leaderships away: {[leader_isr(zk, cluster, tb) for tb in tbs]}")
        assert sorted(cluster.health(name)["offline_replicas"]) == sorted(map(str, tbs))  # all, not only one KV
        table.lookup_every_key()  # on the new leaders, key by key
        text = Path(cluster.get(name).log_file).read_text()
        assert re.search(r"RocksDB failed: IO error: No space left on device: While appending to file: ", text)
        assert f"data directory {data_dir} failed (ENOSPC: KV store: While appending to file:" in text
        for tb in tbs:  # back: reloaded, told its roles again, followers that catch up
            wait_full_isr(zk, cluster, tb, SERVERS, 60)
        assert powercut_fs.pending() == 0  # (every probe failed first: it came back once the disk had room)
        table.upsert_round("c")
        cluster.wait_until(_victims_kvs_caught_up(cluster, tbs), 30, "the victim's KVs reopened and caught up")
        assert (cluster.health(name) or {})["log_dirs"][str(data_dir)] == "online"
        assert "back online" in Path(cluster.get(name).log_file).read_text()

        # 2. a failing disk under a KV: offline, and it stays offline
        powercut_fs.fail_write("EIO", f"{name}/*/kv/*.log")
        table.upsert_round("d")
        cluster.wait_until(lambda: powercut_fs.pending() == 0, 30, "the KV's failed write")
        cluster.wait_until(away, 30, "every ISR without the victim")
        for _ in range(8):  # 2 s: four recovery checks
            assert offline_says("KV store: While appending to file: Input/output error (EIO)"), cluster.health(name)
            time.sleep(0.25)
        health = cluster.health(name)
        assert health["status"] == "degraded" and sorted(health["offline_replicas"]) == sorted(map(str, tbs))
        assert health["problems"] == [f"data directory {data_dir} {health['log_dirs'][str(data_dir)]}"], health
        assert cluster.alive(name)
        table.upsert_round("e")  # the others serve on
        table.lookup_every_key()
