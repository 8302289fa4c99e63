"""Primary-key tables end to end: real ZooKeeper, a real coordinator, three real tablet servers, the Python
client and the ``fluss-py`` CLI over gRPC (docs/primary-key-tables.md).

- upserts, partial updates and deletes (SyncUpserter, acks=all) land as exactly one changelog record each; a
  lookup right after each acknowledged write sees it (read your acknowledged writes); batched lookups of every
  key, prefix lookups and scans of every bucket equal the model of what was written; the changelog consumed
  from the start replays to the same model (+I/-U/+U/-D);
- bad input: a bad row raises on the call and sends nothing; the leader refuses what a client could still send
  (a malformed row, a key of another bucket, a plain batch to a primary-key table, a KV batch to a log table),
  per record, and writes nothing; a lookup on a log table is TABLE_TYPE_MISMATCH from the server too;
- the CLI: upsert (JSON lines, CSV, --partial), lookup --key / --prefix, delete, scan, consume --json; a bad
  line is one message, exit 2, and nothing written;
- a column added at the end (schema id 2): old rows read back with it null, new rows carry it.
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime
from decimal import Decimal
from typing import Any

import grpc
import pytest

from fluss_py.client import ConsumerOptions, LookupOptions, ProducerOptions, SyncAdmin, SyncConsumer, SyncLookuper
from fluss_py.client.sync import SyncUpserter
from fluss_py.errors import ErrorCode, InvalidRowError, TableTypeMismatchError
from fluss_py.record.batch import KV_BATCH, RecordBatchBuilder
from fluss_py.rpc.pb import common_pb2, tablet_pb2, tablet_pb2_grpc
from fluss_py.schema.changelog import KvOp, change_rows, decode_change, encode_kv_value
from fluss_py.schema.row import row_codec
from fluss_py.schema.schema import parse_schema
from fluss_py.types import TableBucket
from tests.fault.group_support import FLUSS_PY

pytestmark = pytest.mark.integration

USERS = parse_schema(
    "id BIGINT, name STRING, score DECIMAL(10,2), active BOOLEAN, ts TIMESTAMP(6), tag BYTES", primary_key="id"
)
ORDERS = parse_schema("user_id INT, order_id BIGINT, item STRING", primary_key="user_id,order_id", bucket_key="user_id")
BUCKETS = 3
FAST = ProducerOptions(linger=0.005, request_timeout=20.0, delivery_timeout=60.0)


def _bootstrap(cluster) -> str:
    return ",".join(cluster.get(n).rpc_address for n in cluster.names("tablet-server") + cluster.names("coordinator"))


def _create(admin: SyncAdmin, table: str, schema, buckets: int = BUCKETS, **kw: Any) -> int:
    return admin.create_table(table, num_buckets=buckets, replication_factor=3, schema=schema, **kw)


def _user(i: int, version: int = 0) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"user-{i}-v{version}",
        "score": Decimal(i * 10 + version).scaleb(-2),
        "active": (i + version) % 2 == 0,
        "ts": datetime(2024, 1, 1, 0, 0, i % 60, version),
        "tag": bytes([i % 256, version % 256]),
    }


def _replay(records: list, codec) -> dict[int, dict[str, Any]]:
    """The table a changelog describes: +I/+U put the new row, -D removes the key; -U must match what is there."""
    state: dict[int, list[Any]] = {}
    for r in sorted(records, key=lambda r: (r.bucket.bucket, r.offset)):
        for label, row in change_rows(decode_change(r.value)):
            values = codec.decode_current(row)
            if label in ("+I", "+U"):
                assert (label == "+I") == (values[0] not in state), f"{label} of {values[0]} at offset {r.offset}"
                state[values[0]] = values
            elif label == "-U":
                assert state[values[0]] == values
            else:
                assert state.pop(values[0]) == values
    names = [c.name for c in codec.schema.current.columns]
    return {k: dict(zip(names, v, strict=True)) for k, v in state.items()}


def _consume(cluster, table: str, expected: int, timeout: float = 60.0) -> list:
    opts = ConsumerOptions(auto_offset_reset="earliest", fetch_max_wait=0.2)
    with SyncConsumer(_bootstrap(cluster), opts) as consumer:
        consumer.assign(table)
        records: list = []
        deadline = time.monotonic() + timeout
        while len(records) < expected and time.monotonic() < deadline:
            records.extend(consumer.poll(0.5))
    return records


def test_upserts_deletes_lookups_scans_and_the_changelog(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=3)
    bootstrap = _bootstrap(cluster)
    with SyncAdmin(bootstrap, request_timeout=15.0) as admin:
        _create(admin, "fluss.users", USERS)
        _create(admin, "fluss.orders", ORDERS, buckets=4)
        admin.create_table("fluss.events", num_buckets=1, replication_factor=3)
    model: dict[int, dict[str, Any]] = {}
    writes = 0
    with (
        SyncUpserter(bootstrap, "fluss.users", FAST) as up,
        SyncLookuper(bootstrap, LookupOptions(request_timeout=20.0)) as lk,
    ):
        # read your acknowledged writes: each lookup right after an acknowledged upsert sees it
        for i in range(30):
            up.upsert_and_wait(_user(i))
            model[i] = _user(i)
            writes += 1
            assert lk.lookup("fluss.users", i) == model[i]
        futures = []
        for i in range(30, 300):
            futures.append(up.upsert(_user(i)))
            model[i] = _user(i)
        for i in range(0, 300, 3):  # updates
            futures.append(up.upsert(_user(i, 1)))
            model[i] = _user(i, 1)
        for i in range(0, 300, 7):  # deletes, some of absent keys
            futures.append(up.delete(i))
            model.pop(i, None)
        futures.append(up.delete(10_000))
        writes += len(futures)
        offsets = {(f.result(60).bucket.bucket, f.result(60).offset) for f in futures}
        assert len(offsets) == len(futures)  # one changelog record per write
        with pytest.raises(InvalidRowError):
            up.upsert({"id": 1, "score": "not a decimal"})
        with pytest.raises(InvalidRowError):
            up.upsert({"name": "no key"})
        with SyncUpserter(bootstrap, "fluss.users", FAST, partial=("id", "score")) as partial:
            for i in (1, 2, 4):
                partial.upsert_and_wait({"id": i, "score": Decimal("0.01")})
                model[i] = {**model[i], "score": Decimal("0.01")}
                writes += 1
        assert lk.lookup_many("fluss.users", range(310)) == [model.get(i) for i in range(310)]
        scanned = {r["id"]: r for b in range(BUCKETS) for r in lk.scan("fluss.users", b, page_rows=17)}
        assert scanned == model
        with pytest.raises(TableTypeMismatchError):
            lk.lookup("fluss.events", 1)
    records = _consume(cluster, "fluss.users", writes)
    assert len(records) == writes
    assert _replay(records, row_codec(USERS)) == model

    with SyncUpserter(bootstrap, "fluss.orders", FAST) as up, SyncLookuper(bootstrap) as lk:
        for f in [up.upsert([u, o, f"item-{u}-{o}"]) for u in range(10) for o in range(5)]:
            f.result(60)
        rows = lk.prefix_lookup("fluss.orders", {"user_id": 7})
        assert [(r["user_id"], r["order_id"], r["item"]) for r in rows] == [(7, o, f"item-7-{o}") for o in range(5)]
        assert lk.prefix_lookup("fluss.orders", 99) == []


def _produce_raw(stub, tb: TableBucket, batch: bytes) -> tablet_pb2.ProduceLogBucketResult:
    request = tablet_pb2.ProduceLogRequest(
        acks=-1,
        timeout_ms=10_000,
        buckets=[tablet_pb2.ProduceBucket(table_bucket=_tb(tb), records=batch)],
    )
    (result,) = stub.ProduceLog(request, timeout=15).buckets
    return result


def _tb(tb: TableBucket) -> common_pb2.TableBucket:
    return common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket)


def _kv_batch(*records: tuple[bytes, bytes], attributes: int = KV_BATCH) -> bytes:
    builder = RecordBatchBuilder(attributes=attributes)
    for key, value in records:
        builder.append(value, key)
    return builder.build()


def test_the_leader_refuses_bad_kv_input_and_writes_nothing(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=3)
    bootstrap = _bootstrap(cluster)
    with SyncAdmin(bootstrap, request_timeout=15.0) as admin:
        users = _create(admin, "fluss.users", USERS, buckets=2)
        events = admin.create_table("fluss.events", num_buckets=1, replication_factor=3)
        _, placement = admin.get_table_placement("fluss.users")
        _, event_placement = admin.get_table_placement("fluss.events")
        servers = {n.id: f"{n.host}:{n.port}" for n in admin.describe_cluster().tablet_servers}
    codec = row_codec(USERS)
    leader = {b.table_bucket.bucket: b.leader for b in placement}
    good = [1, "ada", None, None, None, None]
    key = codec.key_of_row(good)
    home = codec.bucket_of(key, 2)
    tb, other = TableBucket(users, home), TableBucket(users, 1 - home)
    row = codec.encode_row(good)
    with grpc.insecure_channel(servers[leader[home]]) as channel:
        stub = tablet_pb2_grpc.TabletServiceStub(channel)
        refused = {
            "a malformed row": _produce_raw(
                stub, tb, _kv_batch((key, encode_kv_value(KvOp.UPSERT, row[:-1] + b"\xff\xff")))
            ),
            "a row under another key": _produce_raw(
                stub, tb, _kv_batch((codec.encode_key([2]), encode_kv_value(KvOp.UPSERT, row)))
            ),
            "an unknown schema id": _produce_raw(stub, tb, _kv_batch((key, b"\x00\x00\x07" + row[2:]))),
            "a plain batch": _produce_raw(stub, tb, _kv_batch((key, row), attributes=0)),
            "a good row after a bad one": _produce_raw(
                stub, tb, _kv_batch((key, encode_kv_value(KvOp.UPSERT, row)), (key, b"\x09"))
            ),
        }
        codes = {what: ErrorCode(r.error.code).name for what, r in refused.items()}
        assert codes == {
            "a malformed row": "INVALID_ROW",
            "a row under another key": "INVALID_ROW",
            "an unknown schema id": "UNKNOWN_SCHEMA_ID",
            "a plain batch": "TABLE_TYPE_MISMATCH",
            "a good row after a bad one": "INVALID_ROW",
        }, codes
        assert all(r.error.message for r in refused.values())
    with grpc.insecure_channel(servers[leader[1 - home]]) as channel:
        wrong = _produce_raw(
            tablet_pb2_grpc.TabletServiceStub(channel), other, _kv_batch((key, encode_kv_value(KvOp.UPSERT, row)))
        )
        assert ErrorCode(wrong.error.code).name == "INVALID_ROW"  # the key of another bucket
    event_leader = servers[event_placement[0].leader]
    with grpc.insecure_channel(event_leader) as channel:
        stub = tablet_pb2_grpc.TabletServiceStub(channel)
        kv_to_log = _produce_raw(stub, TableBucket(events, 0), _kv_batch((key, encode_kv_value(KvOp.UPSERT, row))))
        assert ErrorCode(kv_to_log.error.code).name == "TABLE_TYPE_MISMATCH"
        answer = stub.Lookup(
            tablet_pb2.LookupRequest(
                buckets=[tablet_pb2.LookupBucket(table_bucket=_tb(TableBucket(events, 0)), keys=[key])]
            ),
            timeout=10,
        )
        assert ErrorCode(answer.buckets[0].error.code).name == "TABLE_TYPE_MISMATCH"
    # nothing was written anywhere: empty logs, no row
    with SyncAdmin(bootstrap) as admin:
        for table in ("fluss.users", "fluss.events"):
            assert all(b.log_end_offset == 0 for b in admin.describe_table(table).buckets), table
    with SyncLookuper(bootstrap) as lk:
        assert lk.lookup("fluss.users", 1) is None


def _cli(cluster, *argv: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [FLUSS_PY, *argv, "--dir", str(cluster.directory)],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_command_line_upserts_looks_up_deletes_scans_and_consumes(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=3)
    created = _cli(
        cluster, "table", "create", "users", "--buckets", "2", "--schema",
        "id BIGINT, name STRING, score DECIMAL(6,2), ts TIMESTAMP", "--primary-key", "id",
    )  # fmt: skip
    assert created.returncode == 0, created.stderr
    lines = "".join(
        json.dumps({"id": i, "name": f"n{i}", "score": f"{i}.50", "ts": f"2024-05-0{1 + i % 9}T10:00:00"}) + "\n"
        for i in range(20)
    )
    up = _cli(cluster, "upsert", "users", stdin=lines)
    assert up.returncode == 0 and "upserted 20, acknowledged 20, failed 0" in up.stderr, up.stderr
    csv_up = _cli(cluster, "upsert", "users", "--format", "csv", "--partial", "id,score", stdin="id,score\n3,9.25\n")
    assert csv_up.returncode == 0, csv_up.stderr
    found = _cli(cluster, "lookup", "users", "--key", "id=3")
    assert json.loads(found.stdout) == {"id": 3, "name": "n3", "score": "9.25", "ts": "2024-05-04T10:00:00"}
    bad = _cli(cluster, "upsert", "users", stdin='{"id": 100, "name": "fine"}\n{"id": "x"}\n')
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "line 2" in bad.stderr, bad.stderr
    assert _cli(cluster, "lookup", "users", "--key", "id=100").returncode == 1  # the good first line was not sent
    assert _cli(cluster, "lookup", "users", "--key", "id=x").returncode == 2
    assert _cli(cluster, "lookup", "users", "--key", "name=n1").returncode == 2
    deleted = _cli(cluster, "delete", "users", "--key", "id=5")
    assert deleted.returncode == 0, deleted.stderr
    gone = _cli(cluster, "delete", "users", stdin='{"id": 6}\n{"id": 7}\n')
    assert gone.returncode == 0, gone.stderr
    assert _cli(cluster, "lookup", "users", "--key", "id=5").returncode == 1
    scanned = _cli(cluster, "scan", "users")
    ids = sorted(json.loads(line)["id"] for line in scanned.stdout.splitlines())
    assert ids == [i for i in range(20) if i not in (5, 6, 7)]
    consumed = _cli(cluster, "consume", "users", "--from-beginning", "--json", "--timeout", "3")
    changes = [json.loads(line) for line in consumed.stdout.splitlines()]
    labels = sorted(c["change"] for c in changes)
    assert labels == sorted(["+I"] * 20 + ["-U", "+U"] + ["-D"] * 3), labels
    update = next(c for c in changes if c["change"] == "+U")
    assert update["row"]["score"] == "9.25" and update["offset"] >= 0
    assert _cli(cluster, "table", "create", "events").returncode == 0
    log_lookup = _cli(cluster, "lookup", "events", "--key", "id=1")
    assert log_lookup.returncode == 2 and "log table" in log_lookup.stderr, log_lookup.stderr


def test_a_column_added_at_the_end_reads_back_as_null_in_old_rows(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=3)
    bootstrap = _bootstrap(cluster)
    with SyncAdmin(bootstrap, request_timeout=15.0) as admin:
        _create(admin, "fluss.orders", ORDERS, buckets=2)
        with SyncUpserter(bootstrap, "fluss.orders", FAST) as up:
            up.upsert_and_wait([1, 1, "old"])
        admin.add_column("fluss.orders", "note STRING")
    with SyncUpserter(bootstrap, "fluss.orders", FAST) as up, SyncLookuper(bootstrap) as lk:
        up.upsert_and_wait({"user_id": 1, "order_id": 2, "item": "new", "note": "hi"})
        assert lk.lookup("fluss.orders", [1, 1]) == {"user_id": 1, "order_id": 1, "item": "old", "note": None}
        assert lk.prefix_lookup("fluss.orders", 1)[1]["note"] == "hi"
