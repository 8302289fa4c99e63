"""Server identity from certificates on a secure cluster (docs/peer-trust.md, docs/security.md), real processes.

Every server of a secure cluster presents a certificate of its own, naming it (``fluss://tablet-server/<id>``,
``fluss://coordinator/<id>``). The impostors here hold what the token design alone would accept: valid
certificates of the cluster's CA with the internal principal's CN, *and* the replica and coordinator tokens
of the servers they pose as (read from ZooKeeper with the servers' credentials: leaked tokens). Only the
certificate identity tells them apart:

- with both real followers SIGSTOPped (still in the ISR), follower C's certificate fetches as follower B and
  B's as C, each with the right token; a certificate naming no server (the default ``server.pem``) and the
  client certificate fetch as B and C. An acks=all write is not acknowledged, the HW and ZooKeeper's
  leader_isr do not move, the leader logs and counts the refusals (REPLICA_NOT_AUTHENTICATED; the client
  certificate is refused before that, as it is no internal principal);
- follower C's certificate sends the coordinator a shrinking AdjustIsr in the leader's name (with its token):
  refused, leader_isr unchanged;
- follower C's certificate sends the leader a StopReplica delete=true claiming the coordinator leader, with
  its epoch and its token: refused, the bucket directory stays;
- once the followers resume, the real servers replicate and acknowledge as before.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import grpc
import pytest

from fluss_py.errors import ErrorCode
from fluss_py.log.manager import bucket_dir_name
from fluss_py.rpc.pb import coordinator_pb2, coordinator_pb2_grpc, tablet_pb2, tablet_pb2_grpc
from fluss_py.rpc.peer import COORDINATOR_TOKEN_KEY, REPLICA_TOKEN_KEY, call_metadata
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.faults import pause, resume
from fluss_py.testing.health import fetch_text
from fluss_py.testing.secure import SecureFiles, with_zookeeper
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from fluss_py.zk.paths import CoordinatorEpochZNode, CoordinatorLeaderZNode, TabletServerZNode
from tests.fault.replication_support import (
    PATIENT,
    PATIENT_TABLET,
    create_table,
    leader_isr,
    metric_value,
    produce,
    raw_produce,
    server_name,
    tb_pb,
    wait_full_isr,
)

pytestmark = pytest.mark.fault

REPLICAS = (1, 2, 3)


def _channel(files: SecureFiles, name: str, address: str) -> grpc.Channel:
    """A channel presenting the certificate ``DIR/security/<name>.pem`` (signed by the cluster's CA)."""
    cert, key = files.directory / f"{name}.pem", files.directory / f"{name}-key.pem"
    credentials = grpc.ssl_channel_credentials(files.ca.cert_file.read_bytes(), key.read_bytes(), cert.read_bytes())
    return grpc.secure_channel(address, credentials)


def _offset(channel: grpc.Channel, tb: TableBucket, spec: int) -> int:
    request = tablet_pb2.ListOffsetsRequest(buckets=[tablet_pb2.ListOffsetsBucket(table_bucket=tb_pb(tb), spec=spec)])
    result = tablet_pb2_grpc.TabletServiceStub(channel).ListOffsets(request, timeout=10.0).buckets[0]
    assert result.error.code == ErrorCode.NONE, result.error
    return result.offset


def _secrets(cluster: LocalCluster) -> tuple[dict[int, str], str]:
    """The replica tokens of the tablet servers and the coordinator leader's token, read from ZooKeeper with
    the servers' credentials (what a leaked ZooKeeper dump would reveal)."""
    assert cluster.security is not None

    async def read(zk, root):
        tokens = {}
        for sid in REPLICAS:
            got = await zk.get(TabletServerZNode.path(root, sid))
            tokens[sid] = TabletServerZNode.decode(got[0]).replica_token
        got = await zk.get(CoordinatorLeaderZNode.path(root))
        return tokens, CoordinatorLeaderZNode.decode(got[0]).token

    return with_zookeeper(cluster.security, cluster.zookeeper_address, cluster.zk_root, read)


class Impostor:
    """Fetches from the leader at its log end offset through each (certificate, claimed replica, token) of
    ``attempts``, until stopped; records what each got (error code, or the gRPC status of a refused call).
    Its own thread; never touches a process."""

    def __init__(self, files: SecureFiles, address: str, tb: TableBucket, attempts: list[tuple[str, int, str]]):
        self.files, self.address, self.tb, self.attempts = files, address, tb, attempts
        self.got: dict[tuple[str, int], set[object]] = {(cert, claim): set() for cert, claim, _ in attempts}
        self.messages: dict[tuple[str, int], str] = {}  # the last error message of each attempt
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
        channels = {cert: _channel(self.files, cert, self.address) for cert, _, _ in self.attempts}
        ops = _channel(self.files, "server", self.address)
        try:
            while not self._stop.is_set():
                leo = _offset(ops, self.tb, tablet_pb2.LATEST)
                for cert, claim, token in self.attempts:
                    bucket = tablet_pb2.FetchBucket(
                        table_bucket=tb_pb(self.tb), fetch_offset=leo, max_bytes=1 << 20,
                        current_leader_epoch=-1, last_fetched_epoch=-1,
                    )  # fmt: skip
                    request = tablet_pb2.FetchLogRequest(replica_id=claim, max_wait_ms=0, max_bytes=1 << 20,
                                                         buckets=[bucket])  # fmt: skip
                    stub = tablet_pb2_grpc.TabletServiceStub(channels[cert])
                    try:
                        response = stub.FetchLog(
                            request, timeout=10.0, metadata=call_metadata(REPLICA_TOKEN_KEY, token)
                        )
                        self.got[(cert, claim)].add(response.error.code)
                        self.messages[(cert, claim)] = response.error.message
                    except grpc.RpcError as e:
                        self.got[(cert, claim)].add(e.code())
                self.rounds += 1
                self._stop.wait(0.02)
        finally:
            for channel in (*channels.values(), ops):
                channel.close()


def test_a_server_certificate_cannot_act_as_another_server(cluster_factory):
    cluster = cluster_factory(
        coordinators=1, tablet_servers=3, overrides=PATIENT, tablet_overrides=PATIENT_TABLET, secure=True
    )
    files = cluster.security
    assert files is not None
    tb = TableBucket(create_table(cluster, "certs"), 0)
    with ZkView(cluster.zookeeper_address) as zk:
        start = wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        assert produce(cluster, "certs", [b"acked-%d" % i for i in range(20)]) == list(range(20))
        tokens, coordinator_token = _secrets(cluster)
        b, c = (s for s in REPLICAS if s != start.leader)
        cert_b, cert_c = f"tablet-server-{b}", f"tablet-server-{c}"
        leader_name = server_name(start.leader)
        leader = cluster.get(leader_name)
        attempts = [
            (cert_c, b, tokens[b]), (cert_b, c, tokens[c]),  # a real server's certificate, another's token
            ("server", b, tokens[b]), ("server", c, tokens[c]),  # CN fluss-server, but naming no server
            ("client", b, tokens[b]),  # a client's certificate
        ]  # fmt: skip
        for s in (b, c):
            pause(cluster, server_name(s))
        try:
            with Impostor(files, leader.rpc_address, tb, attempts) as impostor:
                cluster.wait_until(lambda: impostor.rounds >= 3, 15, "impostor fetch rounds")
                with _channel(files, "server", leader.rpc_address) as ops:
                    refused = raw_produce(ops, tb, [b"lost-%d" % i for i in range(50)], acks=-1, timeout_s=3.0)
                rounds = impostor.rounds
            assert refused.code != ErrorCode.NONE, (
                f"50 records acknowledged with acks=all although both followers are stopped ({rounds} impostor rounds)"
            )
            assert refused.code == ErrorCode.REQUEST_TIMED_OUT, refused
            for (cert, claim), got in impostor.got.items():
                want = grpc.StatusCode.PERMISSION_DENIED if cert == "client" else ErrorCode.REPLICA_NOT_AUTHENTICATED
                assert got == {want}, f"{cert}.pem fetching as replica {claim} got {got}"
            assert "the peer certificate names no server" in impostor.messages[("server", b)]
            assert f"names fluss://tablet-server/{c}, not" in impostor.messages[(cert_c, b)]
            with _channel(files, "server", leader.rpc_address) as ops:
                assert _offset(ops, tb, tablet_pb2.HIGH_WATERMARK) == 20, "an impostor moved the HW"
                assert _offset(ops, tb, tablet_pb2.LATEST) == 70
            assert leader_isr(zk, cluster, tb) == start

            # the coordinator: an ISR shrink in the leader's name, from follower c's certificate
            coordinator_name = cluster.coordinator_leader()
            assert coordinator_name is not None
            with _channel(files, cert_c, cluster.get(coordinator_name).rpc_address) as channel:
                bucket = coordinator_pb2.AdjustIsrBucket(
                    table_bucket=tb_pb(tb), leader_epoch=start.leader_epoch, bucket_epoch=start.bucket_epoch,
                    new_isr=[start.leader],
                )  # fmt: skip
                shrink = coordinator_pb2.AdjustIsrRequest(server_id=start.leader, buckets=[bucket])
                answer = coordinator_pb2_grpc.CoordinatorServiceStub(channel).AdjustIsr(
                    shrink, timeout=10.0, metadata=call_metadata(REPLICA_TOKEN_KEY, tokens[start.leader])
                )
            assert answer.error.code == ErrorCode.REPLICA_NOT_AUTHENTICATED, answer.error
            assert leader_isr(zk, cluster, tb) == start, "a forged AdjustIsr changed leader_isr"

            # a tablet server: a StopReplica delete=true claiming the coordinator leader, from c's certificate
            epoch = CoordinatorEpochZNode.decode(zk.get_bytes(CoordinatorEpochZNode.path(cluster.zk_root)))
            coordinator_id = int(cluster.get(coordinator_name).id or 0)
            bucket_dir = Path(leader.data_dir) / bucket_dir_name(tb)
            with _channel(files, cert_c, leader.rpc_address) as channel:
                stop = tablet_pb2.StopReplicaRequest(
                    coordinator_epoch=epoch, coordinator_id=coordinator_id,
                    buckets=[tablet_pb2.StopReplicaBucket(table_bucket=tb_pb(tb), leader_epoch=start.leader_epoch,
                                                          delete=True)],
                )  # fmt: skip
                answer = tablet_pb2_grpc.TabletServiceStub(channel).StopReplica(
                    stop, timeout=10.0, metadata=call_metadata(COORDINATOR_TOKEN_KEY, coordinator_token)
                )
            assert answer.error.code == ErrorCode.COORDINATOR_NOT_AUTHENTICATED, answer.error
            assert bucket_dir.is_dir() and any(bucket_dir.glob("*.log")), "the forged StopReplica deleted the bucket"
            assert leader_isr(zk, cluster, tb) == start
        finally:
            for s in (b, c):
                if cluster.paused(server_name(s)):
                    resume(cluster, server_name(s))

        text = cluster.log_text(leader_name)
        for cert, claim in ((cert_c, b), (cert_b, c)):
            other = cert.rsplit("-", 1)[1]
            assert re.search(
                rf"Refused FetchLog claiming replica {claim} .*names fluss://tablet-server/{other}, not "
                rf"fluss://tablet-server/{claim}", text
            ), f"no log line for {cert} as {claim}"  # fmt: skip
        assert re.search(rf"Refused StopReplica .*names fluss://tablet-server/{c}, not fluss://coordinator/", text)
        admin = cluster.security.admin_authorization()  # /metrics needs DESCRIBE_CONFIGS on the cluster
        metrics = fetch_text(leader.http_url + "/metrics", context=cluster.http_context(), headers=admin)
        assert metric_value(metrics, "fluss_tablet_peer_refusals_total", kind="replica_not_authenticated") >= 4
        assert metric_value(metrics, "fluss_tablet_peer_refusals_total", kind="coordinator_not_leader") >= 1
        coordinator_text = cluster.log_text(coordinator_name)
        assert re.search(
            rf"Refused AdjustIsr claiming tablet server {start.leader} .*names fluss://tablet-server/{c}",
            coordinator_text,
        )
        metrics = fetch_text(
            cluster.get(coordinator_name).http_url + "/metrics", context=cluster.http_context(), headers=admin
        )
        assert metric_value(metrics, "fluss_coordinator_peer_refusals_total", kind="replica_not_authenticated") >= 1

        # the real servers, with their own certificates, replicate and acknowledge as before
        wait_full_isr(zk, cluster, tb, REPLICAS, 30)
        [after] = produce(cluster, "certs", [b"after"])
        assert after >= 70
