"""Impostors on a shared network (issue 13, findings 1 and 2; docs/peer-trust.md), on real processes.

- Finding 1: with both real followers SIGSTOPped (still in the ISR: long lag time and sessions), a caller
  that fetches from the leader claiming to be a follower (or a server that hosts no replica, or the leader
  itself) must not move the high watermark: an acks=all write is not acknowledged, the impostor is refused
  with REPLICA_NOT_AUTHENTICATED, counted and logged; after the leader is killed a real follower leads and
  holds every acknowledged record (its files, ZooKeeper's leader_isr and a consumer agree).
- Finding 2: an UpdateMetadata with a huge coordinator epoch is refused and adopted by nobody (ZooKeeper's
  epoch node, each server's /health); a StopReplica delete=true and a demoting NotifyLeaderAndIsr at the
  current epoch (read off /health) are refused: the bucket directory stays, the leader keeps leading; the
  real coordinator still rules (a new table gets leaders and takes acks=all writes). The coordinator in turn
  refuses an AdjustIsr and a ControlledShutdown in a tablet server's name from a caller without its token.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import grpc
import pytest

from fluss_py.client import ProducerOptions, SyncProducer
from fluss_py.errors import ErrorCode
from fluss_py.log.manager import bucket_dir_name
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, coordinator_pb2_grpc, tablet_pb2, tablet_pb2_grpc
from fluss_py.testing.faults import kill9, pause, resume
from fluss_py.testing.health import fetch_text
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from fluss_py.zk.paths import CoordinatorEpochZNode
from tests.fault.replication_support import (
    PATIENT,
    PATIENT_TABLET,
    ReplicaFiles,
    consume,
    create_table,
    leader_isr,
    metric_value,
    produce,
    raw_produce,
    server_name,
    tb_pb,
    wait_for_leader_change,
    wait_full_isr,
)

pytestmark = pytest.mark.fault

REPLICAS = (1, 2, 3)


def _stub(channel: grpc.Channel) -> tablet_pb2_grpc.TabletServiceStub:
    return tablet_pb2_grpc.TabletServiceStub(channel)


def _offset(stub: tablet_pb2_grpc.TabletServiceStub, tb: TableBucket, spec: int) -> int:
    request = tablet_pb2.ListOffsetsRequest(buckets=[tablet_pb2.ListOffsetsBucket(table_bucket=tb_pb(tb), spec=spec)])
    result = stub.ListOffsets(request, timeout=10.0).buckets[0]
    assert result.error.code == ErrorCode.NONE, result.error
    return result.offset


class Impostor:
    """Fetches from the leader at its log end offset claiming to be each of ``claims``, until stopped; records
    the whole-request error codes it got. Runs on its own thread; never touches a process."""

    def __init__(self, address: str, tb: TableBucket, claims: tuple[int, ...]) -> None:
        self.address, self.tb, self.claims = address, tb, claims
        self.codes: dict[int, set[int]] = {c: set() for c in claims}
        self.rounds = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="impostor", daemon=True)

    def __enter__(self) -> Impostor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(15)

    def _run(self) -> None:
        with grpc.insecure_channel(self.address) as channel:
            stub = _stub(channel)
            while not self._stop.is_set():
                leo = _offset(stub, self.tb, tablet_pb2.LATEST)
                for claim in self.claims:
                    bucket = tablet_pb2.FetchBucket(
                        table_bucket=tb_pb(self.tb), fetch_offset=leo, max_bytes=1 << 20,
                        current_leader_epoch=-1, last_fetched_epoch=-1,
                    )  # fmt: skip
                    request = tablet_pb2.FetchLogRequest(replica_id=claim, max_wait_ms=0, max_bytes=1 << 20,
                                                         buckets=[bucket])  # fmt: skip
                    response = stub.FetchLog(request, timeout=10.0)
                    self.codes[claim].add(response.error.code)
                self.rounds += 1
                self._stop.wait(0.02)


def test_impostor_follower_fetches_cannot_acknowledge_what_no_follower_holds(cluster_factory):
    table = "impostor"
    cluster = cluster_factory(coordinators=1, tablet_servers=3, overrides=PATIENT, tablet_overrides=PATIENT_TABLET)
    tb = TableBucket(create_table(cluster, table), 0)
    with ZkView(cluster.zookeeper_address) as zk:
        start = wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        acked = [b"acked-%d" % i for i in range(20)]
        assert produce(cluster, table, acked) == list(range(20))
        followers = [s for s in REPLICAS if s != start.leader]
        leader_name = server_name(start.leader)
        leader = cluster.get(leader_name)
        for s in followers:
            pause(cluster, server_name(s))
        try:
            with Impostor(leader.rpc_address, tb, (*followers, 99, start.leader)) as impostor:
                cluster.wait_until(lambda: impostor.rounds >= 3, 15, "impostor fetch rounds")
                refused = raw_produce(
                    leader.rpc_address, tb, [b"lost-%d" % i for i in range(50)], acks=-1, timeout_s=3.0
                )
                rounds = impostor.rounds
            assert refused.code != ErrorCode.NONE, (
                f"50 records acknowledged with acks=all although both followers are stopped ({rounds} impostor rounds)"
            )
            assert refused.code == ErrorCode.REQUEST_TIMED_OUT, refused
            for claim, codes in impostor.codes.items():
                assert codes == {ErrorCode.REPLICA_NOT_AUTHENTICATED}, f"replica id {claim} answered {codes}"
            with grpc.insecure_channel(leader.rpc_address) as channel:
                assert _offset(_stub(channel), tb, tablet_pb2.HIGH_WATERMARK) == 20, "impostors moved the HW"
                assert _offset(_stub(channel), tb, tablet_pb2.LATEST) == 70
            text = cluster.log_text(leader_name)
            for claim in (*followers, 99, start.leader):
                assert re.search(rf"Refused FetchLog claiming replica {claim}\b", text), f"no log line for {claim}"
            metrics = fetch_text(leader.http_url + "/metrics")
            assert metric_value(metrics, "fluss_tablet_peer_refusals_total", kind="replica_not_authenticated") >= 4
            now = leader_isr(zk, cluster, tb)
            assert now is not None and now.leader == start.leader and sorted(now.isr) == list(REPLICAS)
            kill9(cluster, leader_name)
        finally:
            for s in followers:
                if cluster.paused(server_name(s)):
                    resume(cluster, server_name(s))
        new = wait_for_leader_change(zk, cluster, tb, start, 30)
        assert new.leader in followers
    files = ReplicaFiles(cluster, server_name(new.leader), tb)
    held = files.values_by_offset()
    assert [held.get(i) for i in range(20)] == acked, "the new leader lacks acknowledged records"
    # The unacknowledged records may survive: a follower's long poll parked on the leader is answered with
    # them into its socket while it is stopped, and it appends them when it resumes. Only acks are promised.
    [after] = produce(cluster, table, [b"after"])
    consumed = [v for _, v in consume(cluster, table, 0, after + 1)]
    assert consumed[:20] == acked and consumed[-1] == b"after"
    assert all(v.startswith(b"lost-") for v in consumed[20:-1]), consumed[20:-1]


def _health_epoch(cluster, name: str) -> int:
    health = cluster.health(name)
    assert health is not None, name
    return int(health["coordinator_epoch"])


def test_forged_coordinator_requests_are_refused_and_the_real_coordinator_still_rules(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=3)
    tb = TableBucket(create_table(cluster, "victim"), 0)
    assert produce(cluster, "victim", [b"v%d" % i for i in range(10)]) == list(range(10))
    names = cluster.names("tablet-server")
    with ZkView(cluster.zookeeper_address) as zk:
        start = wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        epoch = CoordinatorEpochZNode.decode(zk.get_bytes(CoordinatorEpochZNode.path(cluster.zk_root)))
        assert {_health_epoch(cluster, n) for n in names} == {epoch}
        coordinator_id = int(cluster.health(cluster.coordinator_leader())["server_id"])

        # 1. a huge epoch: adopted, it made every server refuse the real coordinator until restarted
        for n in names:
            with grpc.insecure_channel(cluster.get(n).rpc_address) as channel:
                huge = tablet_pb2.UpdateMetadataRequest(
                    coordinator_epoch=2**31 - 1, coordinator_id=77, metadata=common_pb2.ClusterMetadata()
                )
                answer = _stub(channel).UpdateMetadata(huge, timeout=10.0)
            assert answer.error.code != ErrorCode.NONE, f"{n} adopted coordinator epoch 2^31-1 from a stranger"
            assert answer.error.code == ErrorCode.COORDINATOR_NOT_AUTHENTICATED, (n, answer.error)
        assert {_health_epoch(cluster, n) for n in names} == {epoch}, "a server adopted the forged epoch"
        assert CoordinatorEpochZNode.decode(zk.get_bytes(CoordinatorEpochZNode.path(cluster.zk_root))) == epoch

        # 2. destructive requests at the current epoch (read off /health), not from the coordinator leader
        leader_name = server_name(start.leader)
        bucket_dir = Path(cluster.get(leader_name).data_dir) / bucket_dir_name(tb)
        assert bucket_dir.is_dir()
        with grpc.insecure_channel(cluster.get(leader_name).rpc_address) as channel:
            stop = tablet_pb2.StopReplicaRequest(
                coordinator_epoch=epoch, coordinator_id=coordinator_id,
                buckets=[tablet_pb2.StopReplicaBucket(table_bucket=tb_pb(tb), leader_epoch=start.leader_epoch,
                                                      delete=True)],
            )  # fmt: skip
            answer = _stub(channel).StopReplica(stop, timeout=10.0)
            assert answer.error.code != ErrorCode.NONE, f"StopReplica delete=true from a stranger answered {answer}"
            assert answer.error.code == ErrorCode.COORDINATOR_NOT_AUTHENTICATED, answer.error
            demote = tablet_pb2.NotifyLeaderAndIsrRequest(
                coordinator_epoch=epoch, coordinator_id=coordinator_id,
                buckets=[common_pb2.BucketLeaderAndIsr(
                    table_bucket=tb_pb(tb), leader=-1, leader_epoch=start.leader_epoch + 5, isr=list(start.isr),
                    replicas=list(REPLICAS), bucket_epoch=start.bucket_epoch + 5)],
            )  # fmt: skip
            answer = _stub(channel).NotifyLeaderAndIsr(demote, timeout=10.0)
            assert answer.error.code == ErrorCode.COORDINATOR_NOT_AUTHENTICATED, answer.error
        assert bucket_dir.is_dir() and any(bucket_dir.glob("*.log")), "the forged StopReplica deleted the bucket"
        assert leader_isr(zk, cluster, tb) == start

        # 3. the other direction: ISR changes and controlled shutdowns in a tablet server's name
        with grpc.insecure_channel(cluster.get(cluster.coordinator_leader()).rpc_address) as channel:
            coordinator = coordinator_pb2_grpc.CoordinatorServiceStub(channel)
            shrink = coordinator_pb2.AdjustIsrRequest(server_id=start.leader, buckets=[coordinator_pb2.AdjustIsrBucket(
                table_bucket=tb_pb(tb), leader_epoch=start.leader_epoch, bucket_epoch=start.bucket_epoch,
                new_isr=[start.leader])])  # fmt: skip
            answer = coordinator.AdjustIsr(shrink, timeout=10.0)
            assert answer.error.code != ErrorCode.NONE, f"AdjustIsr from a stranger answered {answer}"
            assert answer.error.code == ErrorCode.REPLICA_NOT_AUTHENTICATED, answer.error
            away = coordinator_pb2.ControlledShutdownRequest(server_id=start.leader)
            answer = coordinator.ControlledShutdown(away, timeout=10.0)
            assert answer.error.code == ErrorCode.REPLICA_NOT_AUTHENTICATED, answer.error
        assert leader_isr(zk, cluster, tb) == start, "a forged AdjustIsr or ControlledShutdown changed leader_isr"

    # the real coordinator is still obeyed: a new table gets a leader on every server and takes acks=all writes
    create_table(cluster, "after", buckets=3)
    for b in range(3):
        values = [b"a%d" % b]
        producer = SyncProducer(",".join(cluster.get(n).rpc_address for n in names), ProducerOptions(acks=-1))
        try:
            assert producer.send_and_wait("fluss.after", values[0], bucket=b).offset == 0
        finally:
            producer.close(timeout=5.0)
    assert produce(cluster, "victim", [b"more"]) == [10]
    assert [v for _, v in consume(cluster, "victim", 0, 11)] == [*(b"v%d" % i for i in range(10)), b"more"]
    for n in names:
        text = cluster.log_text(n)
        assert re.search(r"Refused UpdateMetadata .*epoch 2147483647", text), f"{n} did not log the forged epoch"
        metrics = fetch_text(cluster.get(n).http_url + "/metrics")
        assert metric_value(metrics, "fluss_tablet_peer_refusals_total", kind="coordinator_epoch_unconfirmed") >= 1
    text = cluster.log_text(leader_name)
    assert re.search(r"Refused StopReplica .*not from the current coordinator leader", text)
    assert metric_value(fetch_text(cluster.get(leader_name).http_url + "/metrics"), "fluss_tablet_peer_refusals_total",
                   kind="coordinator_not_leader") >= 2  # fmt: skip
    coordinator_name = cluster.coordinator_leader()
    text = cluster.log_text(coordinator_name)
    assert re.search(rf"Refused AdjustIsr claiming tablet server {start.leader} .*no replica token", text)
    assert re.search(rf"Refused ControlledShutdown claiming tablet server {start.leader} ", text)
    metrics = fetch_text(cluster.get(coordinator_name).http_url + "/metrics")
    assert metric_value(metrics, "fluss_coordinator_peer_refusals_total", kind="replica_not_authenticated") == 2
