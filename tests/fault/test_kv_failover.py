"""Issue 34's acceptance on real processes: kill -9 of the leader of a primary-key table while three clients
upsert and delete random keys with acks=all and a fourth looks them up — once, and twice (the killed server
restarts, rejoins every ISR, then the new leader is killed too: the double failover of the log's kill-twice
test).

After healing (every server back, full ISRs) and the writers stopped:
- every key's row equals its last acknowledged write (0 lost updates, 0 resurrected deletes), through the
  leader's lookups and in every replica's own KV (RocksDB opened read only once it applied up to the HW);
- every replica's KV equals the KV rebuilt by replaying its own log (invariant 1);
- no lookup returned a value later lost (every row read is a new row of the committed changelog), nor one older
  than a write acknowledged before the lookup began (read your acknowledged writes), nor one never written;
- no write failed: with acks=all and idempotence the leader's death is a pause, not an error.
A report prints the writes, lookups and the longest write stall around each kill.
"""

from __future__ import annotations

import time

import grpc
import pytest

from fluss_py.client import SyncLookuper, SyncUpserter
from fluss_py.errors import ErrorCode
from fluss_py.rpc.pb import tablet_pb2, tablet_pb2_grpc
from fluss_py.schema.row import row_codec
from fluss_py.testing.faults import kill9
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from fluss_py.verify.kv_checker import KV_FAIL
from fluss_py.verify.kv_workload import KV_SCHEMA
from tests.fault.kv_support import (
    READER_OPTIONS,
    WRITER_OPTIONS,
    KvWorkload,
    create_kv_table,
    kv_verdict,
    write_latencies,
)
from tests.fault.replication_support import (
    FAULT_OVERRIDES,
    bootstrap,
    leader_isr,
    server_name,
    wait_for_leader_change,
    wait_full_isr,
)

pytestmark = pytest.mark.fault

REPLICAS = (1, 2, 3)
BUCKETS = 3
KEYS = 300
FAILOVER_TIMEOUT_S = SESSION_TIMEOUT_S + 10.0


@pytest.mark.parametrize("kills", [1, 2], ids=["kill9", "kill9-twice"])
def test_kill9_of_a_kv_leader_under_upserts_deletes_and_lookups(cluster_factory, capsys, kills):
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=FAULT_OVERRIDES)
    table = "fluss.kv_failover"
    table_id = create_kv_table(cluster, table, BUCKETS)
    tbs = [TableBucket(table_id, b) for b in range(BUCKETS)]
    killed: list[tuple[str, float]] = []
    with ZkView(cluster.zookeeper_address) as zk:
        for tb in tbs:
            wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        workload = KvWorkload(cluster, table, writers=3, keys=KEYS).start()
        try:
            workload.wait_acked_after(cluster, time.monotonic(), 300, 60)  # a steady state before the first kill
            for n in range(kills):
                before = leader_isr(zk, cluster, tbs[0])
                assert before is not None
                name = server_name(before.leader)
                t_kill = kill9(cluster, name)
                killed.append((name, t_kill))
                wait_for_leader_change(zk, cluster, tbs[0], before, FAILOVER_TIMEOUT_S)
                workload.wait_acked_after(cluster, t_kill, 600, FAILOVER_TIMEOUT_S + 60)  # served by the new leader
                if n + 1 < kills:
                    cluster.start_process(name, wait=True, timeout=30)
                    for tb in tbs:
                        wait_full_isr(zk, cluster, tb, REPLICAS, 60)
        finally:
            events = workload.stop()
        for name, _ in killed:
            if not cluster.alive(name):
                cluster.start_process(name, wait=True, timeout=30)
        for tb in tbs:
            wait_full_isr(zk, cluster, tb, REPLICAS, 60)

    report = kv_verdict(cluster, table, table_id, events, KEYS)
    latencies = write_latencies(events)
    lines = [
        "",
        f"KV leader kill -9 x{kills}: 3 tablet servers, {BUCKETS} buckets RF 3, 3 writers (acks=all) + 1 reader",
        f"writes {report.sends}, acknowledged {report.acked}, failed {report.failed}, unanswered {report.unanswered}; "
        f"lookups recorded {report.reads} (answered/failed {workload.lookups}); rows at the end {report.final_records}",
    ]
    for name, t_kill in killed:
        since = t_kill - workload.clock.t0
        around = [lat for sent, lat in latencies if since - 1.0 <= sent <= since + FAILOVER_TIMEOUT_S]
        lines.append(f"  kill -9 {name}: longest write around it {max(around, default=0.0) * 1000:.0f} ms")
    lines.append(f"violations: {report.violations}")
    with capsys.disabled():
        print("\n".join(lines))
    assert report.ok, report.examples
    failed = [e for e in events if e["k"] == KV_FAIL]
    assert not failed, failed[:3]
    assert report.unanswered == 0
    assert report.reads > 0 and report.final_records > 0


def test_a_resumed_zombie_leader_answers_no_stale_lookup(cluster_factory):
    """SIGSTOP of a primary-key bucket's leader past its session: a new leader is elected and acknowledges an
    upsert; on SIGCONT, a client with stale metadata asks the old leader at once. It must not answer the row it
    held (the value the acknowledged upsert replaced): the issue's "a lookup after an acknowledged upsert sees
    it or a later value". It may answer an error (not the leader, not ready) or the new value."""
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=FAULT_OVERRIDES)
    table = "fluss.kv_zombie"
    table_id = create_kv_table(cluster, table, 1)
    tb = TableBucket(table_id, 0)
    security = cluster.client_identity()
    with ZkView(cluster.zookeeper_address) as zk:
        wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        with SyncUpserter(bootstrap(cluster), table, WRITER_OPTIONS, security=security) as up:
            up.upsert_and_wait({"k": 1, "p": 0, "s": 1, "pad": "old"})
        before = leader_isr(zk, cluster, tb)
        assert before is not None
        zombie = server_name(before.leader)
        address = cluster.get(zombie).rpc_address
        key = row_codec(KV_SCHEMA).encode_key([1])
        with SyncLookuper(bootstrap(cluster), READER_OPTIONS, security=security) as lk:
            assert lk.lookup(table, 1)["pad"] == "old"  # the zombie-to-be applied it
        cluster.pause(zombie)
        try:
            wait_for_leader_change(zk, cluster, tb, before, FAILOVER_TIMEOUT_S)
            survivors = ",".join(cluster.get(server_name(s)).rpc_address for s in REPLICAS if s != before.leader)
            with SyncUpserter(survivors, table, WRITER_OPTIONS, security=security) as up:
                up.upsert_and_wait({"k": 1, "p": 0, "s": 2, "pad": "new"})
        finally:
            cluster.resume(zombie)
        answers = []
        with grpc.insecure_channel(address) as channel:  # a client whose metadata still names the zombie
            stub = tablet_pb2_grpc.TabletServiceStub(channel)
            request = tablet_pb2.LookupRequest(
                buckets=[tablet_pb2.LookupBucket(table_bucket={"table_id": table_id, "bucket": 0}, keys=[key])],
                timeout_ms=2000,
            )
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline:
                result = stub.Lookup(request, timeout=10).buckets[0]
                if result.error.code:
                    answers.append(ErrorCode(result.error.code).name)
                else:
                    row = result.values[0].row if result.values[0].found else None
                    answers.append(row_codec(KV_SCHEMA).decode_current(row)[3] if row else None)
    summary = {a: answers.count(a) for a in answers}
    assert "old" not in answers, f"the deposed leader answered the replaced row ({summary} in 3 s): {answers[:10]}"
