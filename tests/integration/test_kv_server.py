"""The server side of primary-key tables through real processes (docs/primary-key-tables.md §3.5-§5): real
ZooKeeper, one coordinator, three tablet servers; KV batches sent with ProduceLog and rows read with Lookup,
PrefixLookup and ScanKv over gRPC, as any client would.

- upserts, deletes and a partial update acknowledged with acks=all are seen by a Lookup on the leader at once
  (read-your-writes), prefix lookups and a paged scan return the same rows in key order;
- every replica's KV (leader and followers alike) applies the committed changelog: each tablet server's
  /metrics shows the KV at the bucket's HW with the right row count, and its RocksDB is in ``<bucket>/kv``;
- a log table refuses KV batches and a primary-key table plain ones (TABLE_TYPE_MISMATCH), a lookup on a
  follower names the leader (NOT_LEADER_OR_FOLLOWER), a malformed key is INVALID_ROW; nothing is written;
- kill -9 of the leader: the new leader serves every row at once from its own KV (a hot standby);
- dropping the table deletes every replica's KV with its log.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest

from fluss_py.client import SyncAdmin
from fluss_py.errors import ErrorCode, spec
from fluss_py.log.manager import bucket_dir_name
from fluss_py.record.batch import KV_BATCH, RecordBatchBuilder
from fluss_py.rpc import convert
from fluss_py.rpc.pb import tablet_pb2, tablet_pb2_grpc
from fluss_py.schema import KvOp, RowCodec, encode_kv_value, parse_schema
from fluss_py.testing.cluster_file import TABLET_SERVER
from fluss_py.testing.health import fetch_text
from fluss_py.types import TableBucket

pytestmark = pytest.mark.integration

TABLE, LOG_TABLE = "fluss.kv_users", "fluss.kv_plain"
SCHEMA = parse_schema("region STRING, id BIGINT, name STRING, score INT", primary_key="region,id", bucket_key="region")
CODEC = RowCodec(SCHEMA)


def _kv_batch(*records: tuple[list, KvOp, tuple[int, ...] | None]) -> bytes:
    builder = RecordBatchBuilder(attributes=KV_BATCH)
    for values, op, targets in records:
        key = CODEC.key_of_row(values) if op is not KvOp.DELETE else CODEC.encode_key(values[:2])
        value = encode_kv_value(op) if op is KvOp.DELETE else encode_kv_value(op, CODEC.encode_row(values), targets)
        builder.append(value, key)
    return builder.build()


def _retrying(call: Callable[[], Any]) -> Any:
    """``call()`` again while its bucket's answer is a retriable error (a leader the coordinator named but not yet
    told, a new leader's KV not ready), as a client does; the last answer after 30 s."""
    deadline = time.monotonic() + 30
    while True:
        result = call()
        code = result.error.code
        if code == 0 or not spec(ErrorCode(code))[0] or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def _produce(stub, tb: TableBucket, records: bytes, retry: bool = False) -> tablet_pb2.ProduceBucketResult:
    bucket = tablet_pb2.ProduceBucket(table_bucket=convert.table_bucket_to_pb(tb), records=records)

    def once() -> tablet_pb2.ProduceBucketResult:
        request = tablet_pb2.ProduceLogRequest(acks=-1, timeout_ms=10_000, buckets=[bucket])
        answer = stub.ProduceLog(request, timeout=15)
        assert answer.error.code == 0, answer.error
        return answer.buckets[0]

    return _retrying(once) if retry else once()


def _lookup(stub, tb: TableBucket, keys: list[bytes], retry: bool = True) -> tablet_pb2.LookupBucketResult:
    bucket = tablet_pb2.LookupBucket(table_bucket=convert.table_bucket_to_pb(tb), keys=keys)

    def once() -> tablet_pb2.LookupBucketResult:
        answer = stub.Lookup(tablet_pb2.LookupRequest(buckets=[bucket], timeout_ms=5_000), timeout=10)
        assert answer.error.code == 0, answer.error
        return answer.buckets[0]

    return _retrying(once) if retry else once()


def _rows(result: tablet_pb2.LookupBucketResult) -> list[list | None]:
    assert result.error.code == 0, result.error
    return [CODEC.decode_current(v.row) if v.found else None for v in result.values]


def _metric(text: str, name: str, tb: TableBucket) -> int | None:
    m = re.search(rf'^{name}{{bucket="{tb.bucket}",table_id="{tb.table_id}"}} (\S+)$', text, re.M)
    return None if m is None else int(float(m.group(1)))


def test_kv_writes_reads_apply_everywhere_failover_and_drop(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides={"replica.lag.time.max.ms": "3s"})
    cluster.wait_for_leader(15)
    servers = cluster.names(TABLET_SERVER)
    by_id = {cluster.get(n).id: n for n in servers}
    bootstrap = ",".join(cluster.get(n).rpc_address for n in servers)
    with SyncAdmin(bootstrap, request_timeout=10.0) as admin:
        table_id = admin.create_table(TABLE, num_buckets=1, replication_factor=3, schema=SCHEMA)
        log_table_id = admin.create_table(LOG_TABLE, num_buckets=1, replication_factor=3)
        tb, log_tb = TableBucket(table_id, 0), TableBucket(log_table_id, 0)

        def placement(path: str) -> tuple[int, tuple[int, ...]]:
            _, buckets = admin.get_table_placement(path)
            return buckets[0].leader, tuple(sorted(buckets[0].isr))

        cluster.wait_until(lambda: placement(TABLE)[1] == (1, 2, 3) and placement(LOG_TABLE)[0] >= 0, 30, "ISRs")
        leader_id = placement(TABLE)[0]
        leader = cluster.get(by_id[leader_id])
        with grpc.insecure_channel(leader.rpc_address) as channel:
            stub = tablet_pb2_grpc.TabletServiceStub(channel)
            written = _produce(stub, tb, retry=True, records=_kv_batch(
                (["eu", 1, "ann", 10], KvOp.UPSERT, None),
                (["eu", 2, "bob", 20], KvOp.UPSERT, None),
                (["us", 3, "cy", 30], KvOp.UPSERT, None),
                (["eu", 2, None, None], KvOp.DELETE, None),
                (["eu", 1, None, 11], KvOp.PARTIAL_UPSERT, (0, 1, 3)),
                (["eu", 4, "dee", 40], KvOp.UPSERT, None),
            ))  # fmt: skip
            assert written.error.code == 0 and (written.base_offset, written.last_offset) == (0, 5)
            keys = [CODEC.encode_key(k) for k in (["eu", 1], ["eu", 2], ["us", 3], ["eu", 4])]
            assert _rows(_lookup(stub, tb, keys)) == [["eu", 1, "ann", 11], None, ["us", 3, "cy", 30],
                                                      ["eu", 4, "dee", 40]]  # fmt: skip
            prefix = tablet_pb2.PrefixLookupBucket(
                table_bucket=convert.table_bucket_to_pb(tb), prefixes=[CODEC.bucket_key_bytes(keys[0])]
            )
            got = stub.PrefixLookup(tablet_pb2.PrefixLookupRequest(buckets=[prefix], timeout_ms=5000), timeout=10)
            group = got.buckets[0].results[0]
            assert [CODEC.decode_current(r)[1] for r in group.rows] == [1, 4] and not group.truncated
            pages, after = [], b""
            while True:
                page = stub.ScanKv(tablet_pb2.ScanKvRequest(
                    table_bucket=convert.table_bucket_to_pb(tb), after_key=after, max_rows=2, timeout_ms=5000
                ), timeout=10)  # fmt: skip
                assert page.error.code == 0, page.error
                pages.append([CODEC.decode_current(r.row)[:2] for r in page.rows])
                if not page.more:
                    break
                after = page.rows[-1].key
            assert pages == [[["eu", 1], ["eu", 4]], [["us", 3]]]

            # bad input: refused, nothing written
            plain = RecordBatchBuilder()
            plain.append(b"v")
            refused = _produce(stub, tb, plain.build())
            assert refused.error.code == ErrorCode.TABLE_TYPE_MISMATCH
            assert _produce(stub, tb, b"\x00" * 3).error.code != 0
            malformed = _lookup(stub, tb, [b"\x01"])
            assert malformed.error.code == ErrorCode.INVALID_ROW
            log_leader = cluster.get(by_id[placement(LOG_TABLE)[0]])
            with grpc.insecure_channel(log_leader.rpc_address) as log_channel:
                log_stub = tablet_pb2_grpc.TabletServiceStub(log_channel)
                upserts = _produce(log_stub, log_tb, _kv_batch((["eu", 9, "x", 1], KvOp.UPSERT, None)))
                assert upserts.error.code == ErrorCode.TABLE_TYPE_MISMATCH
                assert _lookup(log_stub, log_tb, keys[:1]).error.code == ErrorCode.TABLE_TYPE_MISMATCH

        follower = cluster.get(by_id[next(i for i in (1, 2, 3) if i != leader_id)])
        with grpc.insecure_channel(follower.rpc_address) as channel:
            answer = _lookup(tablet_pb2_grpc.TabletServiceStub(channel), tb, keys[:1], retry=False)
            assert answer.error.code == ErrorCode.NOT_LEADER_OR_FOLLOWER and answer.error.leader_id == leader_id

        # every replica applies the committed changelog to its own KV, on disk beside its log
        def all_applied() -> bool:
            for n in servers:
                text = fetch_text(f"http://{cluster.get(n).http_address}/metrics")
                hw = _metric(text, "fluss_log_high_watermark", tb)
                if hw != 6 or _metric(text, "fluss_kv_applied_offset", tb) != 6:
                    return False
                if _metric(text, "fluss_kv_apply_lag", tb) != 0 or _metric(text, "fluss_kv_rows", tb) is None:
                    return False
            return True

        cluster.wait_until(all_applied, 30, "every replica's KV applied up to the HW")
        kv_dirs = [Path(cluster.get(n).data_dir) / bucket_dir_name(tb) / "kv" for n in servers]
        assert all((d / "CURRENT").exists() for d in kv_dirs)

        # kill -9 of the leader: the new leader answers from its own KV
        cluster.kill(by_id[leader_id])
        cluster.wait_until(lambda: placement(TABLE)[0] not in (-1, leader_id), 30, "a new leader")
        new_leader = cluster.get(by_id[placement(TABLE)[0]])
        with grpc.insecure_channel(new_leader.rpc_address) as channel:
            stub = tablet_pb2_grpc.TabletServiceStub(channel)
            assert _rows(_lookup(stub, tb, keys)) == [["eu", 1, "ann", 11], None, ["us", 3, "cy", 30],
                                                      ["eu", 4, "dee", 40]]  # fmt: skip
            again = _produce(stub, tb, _kv_batch((["eu", 4, None, None], KvOp.DELETE, None)), retry=True)
            assert again.error.code == 0 and again.base_offset == 6
            assert _rows(_lookup(stub, tb, keys[3:])) == [None]

        cluster.start_process(by_id[leader_id], wait=True)
        admin.drop_table(TABLE)
        cluster.wait_until(lambda: not any(d.exists() for d in kv_dirs), 30, "every replica's KV deleted")
