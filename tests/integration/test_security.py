"""A secure cluster (TLS with client certificates, passwords, ACLs, ZooKeeper ACLs) against bad input.

One secure cluster (1 coordinator, 2 tablet servers, replication factor 2) for the module; every test
feeds it one kind of bad input and checks the refusal's error code *and* that nothing was written: the log
end offsets of the table, the znodes, and the servers' logs (audit lines, handshake failures).
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError

from fluss_py.client import Admin, ConsumerOptions, ProducerOptions, SyncAdmin, SyncConsumer, SyncProducer
from fluss_py.client.groups import commit_offsets, fetch_offsets, raise_refused
from fluss_py.client.transport import CONSUMER_HEARTBEAT
from fluss_py.common.cross_site import REQUEST_HEADER
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.partitioning import TimeUnit, partition_name, slot_start
from fluss_py.record import RecordBatchBuilder
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, tablet_pb2, tablet_pb2_grpc
from fluss_py.security.certs import CertificateAuthority
from fluss_py.security.identity import PeerIdentity
from fluss_py.security.scram import make_credential
from fluss_py.security.store import add_acls, put_user
from fluss_py.security.tls import TlsFiles, client_ssl_context
from fluss_py.security_types import Acl, Operation, PatternType, Permission, ResourceType
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER
from fluss_py.testing.fixtures import secure_module_cluster
from fluss_py.testing.health import fetch_health
from fluss_py.testing.procs import wait_until
from fluss_py.testing.secure import with_zookeeper
from fluss_py.types import TableBucket
from fluss_py.zk.paths import CoordinatorLeaderZNode, DatabaseZNode, LeaderIsrZNode, RebalanceZNode, TabletServerZNode

pytestmark = pytest.mark.integration

TABLE = "sec.events"
OPEN_TABLE = "sec.open"  # READER may write here (granted by the produce stream test)
READER, READER_PASSWORD = "reader", "reader-secret-1"
NOBODY, NOBODY_PASSWORD = "nobody", "nobody-secret-1"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper) -> Iterator[LocalCluster]:
    cluster = secure_module_cluster(tmp_path_factory.mktemp("secure"), zookeeper.address, "/fluss-security")
    try:
        cluster.start(timeout=90)
        assert cluster.security is not None
        reader_acls = [
            Acl(READER, ResourceType.TABLE, PatternType.LITERAL, TABLE, op, Permission.ALLOW)
            for op in (Operation.READ, Operation.DESCRIBE)
        ]

        async def users(zk, root) -> None:
            await put_user(zk, root, READER, make_credential(READER_PASSWORD))
            await put_user(zk, root, NOBODY, make_credential(NOBODY_PASSWORD))
            await add_acls(zk, root, reader_acls)

        with_zookeeper(cluster.security, cluster.zookeeper_address, cluster.zk_root, users)
        with SyncAdmin(bootstrap(cluster), security=admin_identity(cluster)) as admin:
            admin.create_database("sec")
            admin.create_table(TABLE, num_buckets=2, replication_factor=2)
        yield cluster
    finally:
        cluster.close(grace=3.0)


def bootstrap(cluster: LocalCluster) -> str:
    return ",".join(cluster.get(n).rpc_address for n in cluster.names())


def admin_identity(cluster: LocalCluster) -> PeerIdentity:
    return PeerIdentity.from_settings(cluster.client_config())


def identity_as(cluster: LocalCluster, user: str, password: str) -> PeerIdentity:
    return PeerIdentity(admin_identity(cluster).tls, user, password)


def end_offsets(cluster: LocalCluster) -> dict[int, int]:
    with SyncAdmin(bootstrap(cluster), security=admin_identity(cluster)) as admin:
        return {b: o.log_end_offset for b, o in admin.list_offsets(TABLE).items()}


def replica_state(cluster: LocalCluster) -> tuple[list[tuple[int | None, list[int]]], dict[int, int]]:
    """Each bucket's leader and ISR, and the log end offsets: what a refused server request must not move."""
    with SyncAdmin(bootstrap(cluster), security=admin_identity(cluster)) as admin:
        _, buckets = admin.get_table_placement(TABLE)
    return [(b.leader, sorted(b.isr)) for b in buckets], end_offsets(cluster)


def table_buckets(cluster: LocalCluster) -> list[common_pb2.TableBucket]:
    with SyncAdmin(bootstrap(cluster), security=admin_identity(cluster)) as admin:
        _, buckets = admin.get_table_placement(TABLE)
    return [common_pb2.TableBucket(table_id=b.table_bucket.table_id, bucket=b.table_bucket.bucket) for b in buckets]


def server_logs(cluster: LocalCluster) -> str:
    return "".join(cluster.log_text(n) for n in cluster.names(COORDINATOR) + cluster.names(TABLET_SERVER))


def stdout_logs(cluster: LocalCluster) -> str:
    return "".join(Path(cluster.get(n).stdout_file).read_text() for n in cluster.names(TABLET_SERVER))


def zk_exists(cluster: LocalCluster, path: str) -> bool:
    zk = KazooClient(hosts=cluster.zookeeper_address)
    zk.start(timeout=10)
    try:
        return zk.exists(path) is not None
    finally:
        zk.stop()
        zk.close()


def fails_with(identity: PeerIdentity, cluster: LocalCluster, coro_factory, timeout: float = 5.0) -> FlussError:
    async def run() -> FlussError:
        async with Admin(bootstrap(cluster), security=identity, request_timeout=timeout) as admin:
            try:
                await coro_factory(admin)
            except FlussError as e:
                return e
        raise AssertionError("the call succeeded")

    return asyncio.run(run())


# ---------------------------------------------------------------- the happy path
def test_admin_round_trip_over_tls_with_replication(cluster: LocalCluster) -> None:
    before = end_offsets(cluster)
    options = ProducerOptions(acks="all", idempotence=True, request_timeout=10)
    with SyncProducer(bootstrap(cluster), options, security=admin_identity(cluster)) as producer:
        futures = [producer.send(TABLE, f"v{i}".encode(), key=f"k{i}".encode()) for i in range(100)]
        for f in futures:
            f.result(timeout=30)
    after = end_offsets(cluster)
    assert sum(after.values()) - sum(before.values()) == 100
    with SyncAdmin(bootstrap(cluster), security=admin_identity(cluster)) as admin:
        _, buckets = admin.get_table_placement(TABLE)
    assert all(len(b.isr) == 2 for b in buckets)  # followers fetch over mutual TLS as fluss-server


# ---------------------------------------------------------------- TLS
def test_plaintext_client_to_tls_port_is_refused(cluster: LocalCluster) -> None:
    error = fails_with(PeerIdentity(), cluster, lambda a: a.create_database("plain_db"), timeout=2.0)
    assert error.code in (ErrorCode.NETWORK_EXCEPTION, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert not zk_exists(cluster, DatabaseZNode.path(cluster.zk_root, "plain_db"))
    coordinator = cluster.get(cluster.names(COORDINATOR)[0])
    assert "WRONG_VERSION_NUMBER" in Path(coordinator.stdout_file).read_text()  # the server saw plaintext


def test_wrong_ca_is_a_handshake_failure(cluster: LocalCluster, tmp_path: Path) -> None:
    rogue = CertificateAuthority.create(tmp_path / "rogue-ca")
    cert = rogue.issue(tmp_path / "rogue", "fluss-client")
    identity = PeerIdentity(TlsFiles(str(rogue.cert_file), str(cert.cert_file), str(cert.key_file)))
    error = fails_with(identity, cluster, lambda a: a.create_database("rogue_db"), timeout=2.0)
    assert error.code is ErrorCode.AUTHENTICATION_FAILED
    assert "TLS handshake" in error.message
    assert not zk_exists(cluster, DatabaseZNode.path(cluster.zk_root, "rogue_db"))


@pytest.mark.parametrize("when", ["expired", "not-yet-valid"])
def test_client_certificate_outside_its_validity_is_refused(cluster: LocalCluster, tmp_path: Path, when: str) -> None:
    assert cluster.security is not None
    now = dt.datetime.now(dt.UTC)
    window = (
        (now - dt.timedelta(days=10), now - dt.timedelta(days=1))
        if when == "expired"
        else (now + dt.timedelta(days=1), now + dt.timedelta(days=10))
    )
    cert = cluster.security.ca.issue(tmp_path / when, "fluss-client", not_before=window[0], not_after=window[1])
    tls = TlsFiles(str(cluster.security.ca.cert_file), str(cert.cert_file), str(cert.key_file))
    identity = PeerIdentity(tls, "admin", cluster.client_config()["security.password"])
    error = fails_with(identity, cluster, lambda a: a.create_database(f"db_{when.replace('-', '_')}"), timeout=2.0)
    # the server only closes the connection; the client names its own certificate's problem
    assert error.code is ErrorCode.AUTHENTICATION_FAILED
    assert ("expired at" if when == "expired" else "is not valid before") in error.message
    assert not zk_exists(cluster, DatabaseZNode.path(cluster.zk_root, f"db_{when.replace('-', '_')}"))
    logs = "".join(Path(cluster.get(n).stdout_file).read_text() for n in cluster.names(COORDINATOR))
    reason = "CERTIFICATE_HAS_EXPIRED" if when == "expired" else "CERTIFICATE_IS_NOT_YET_VALID"
    assert reason in logs.upper().replace(" ", "_")


# ---------------------------------------------------------------- authentication
@pytest.mark.parametrize("user", ["admin", "ghost"])
def test_wrong_password_or_unknown_user_is_authentication_failed(cluster: LocalCluster, user: str) -> None:
    identity = identity_as(cluster, user, "not-the-password")
    error = fails_with(identity, cluster, lambda a: a.create_database(f"db_{user}"))
    assert error.code is ErrorCode.AUTHENTICATION_FAILED
    assert "not-the-password" not in error.message
    assert not zk_exists(cluster, DatabaseZNode.path(cluster.zk_root, f"db_{user}"))
    assert "not-the-password" not in server_logs(cluster)


def test_a_client_claiming_the_server_identity_is_refused(cluster: LocalCluster) -> None:
    error = fails_with(identity_as(cluster, "fluss-server", "guess"), cluster, lambda a: a.list_databases())
    assert error.code is ErrorCode.AUTHENTICATION_FAILED
    # with a valid client certificate, the internal RPCs stay closed: NotifyLeaderAndIsr / follower fetch
    tls = admin_identity(cluster).tls
    assert tls is not None
    ca, cert, key = tls.read()
    creds = grpc.ssl_channel_credentials(ca, key, cert)
    before = replica_state(cluster)
    stop = [
        tablet_pb2.StopReplicaBucket(table_bucket=b, leader_epoch=1_000_000, delete=True)
        for b in table_buckets(cluster)
    ]
    for name in cluster.names(TABLET_SERVER):  # every replica of the table, deleted, at a huge epoch
        with grpc.secure_channel(cluster.get(name).rpc_address, creds) as channel:
            stub = tablet_pb2_grpc.TabletServiceStub(channel)
            with pytest.raises(grpc.RpcError) as info:
                stub.StopReplica(tablet_pb2.StopReplicaRequest(coordinator_epoch=1_000_000, buckets=stop), timeout=5)
        assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED
        assert "only this cluster's servers" in info.value.details()
        assert "DENIED principal=fluss-client operation=INTERNAL" in cluster.log_text(name)
    assert replica_state(cluster) == before  # every replica still there and serving


def _follower_fetch() -> tablet_pb2.FetchLogRequest:
    bucket = tablet_pb2.FetchBucket(table_bucket=common_pb2.TableBucket(table_id=1, bucket=0), max_bytes=1 << 20)
    return tablet_pb2.FetchLogRequest(replica_id=2, max_wait_ms=0, max_bytes=1 << 20, buckets=[bucket])


def _as_a_client(cluster: LocalCluster, address: str, call) -> object:
    """``call(stub)`` on a channel to ``address`` with the client certificate (not a server's)."""
    tls = admin_identity(cluster).tls
    assert tls is not None
    ca, cert, key = tls.read()
    with grpc.secure_channel(address, grpc.ssl_channel_credentials(ca, key, cert)) as channel:
        return call(tablet_pb2_grpc.TabletServiceStub(channel))


def test_rogue_follower_fetch_is_refused(cluster: LocalCluster) -> None:
    """A process with a client certificate (not a server's) asking for a follower's fetch."""
    leader = cluster.get(cluster.names(TABLET_SERVER)[0])
    with pytest.raises(grpc.RpcError) as info:
        _as_a_client(cluster, leader.rpc_address, lambda stub: stub.FetchLog(_follower_fetch(), timeout=5))
    assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "DENIED principal=fluss-client operation=INTERNAL" in cluster.log_text(leader.name)


def test_rogue_follower_fetch_stream_is_refused(cluster: LocalCluster) -> None:
    """The same on the follower's FetchLogStream: the interceptor checks the stream before its first
    message, and the servers' own followers (internal principals) fetch on streams."""
    leader = cluster.get(cluster.names(TABLET_SERVER)[0])
    request = _follower_fetch()
    request.session.SetInParent()  # a stream carries a session
    with pytest.raises(grpc.RpcError) as info:
        _as_a_client(cluster, leader.rpc_address, lambda stub: list(stub.FetchLogStream(iter([request]), timeout=5)))
    assert info.value.code() is grpc.StatusCode.PERMISSION_DENIED
    assert "may not call FetchLogStream" in info.value.details()
    assert "has no FetchLogStream" not in server_logs(cluster)  # no follower fell back to unary calls


def test_rogue_server_with_a_certificate_of_another_ca_cannot_fetch(cluster: LocalCluster, tmp_path: Path) -> None:
    """A process posing as tablet server 2 with a server-like certificate (CN fluss-server, the URI of
    server 2) that the cluster's CA did not sign: the leader refuses the handshake; no replica moves."""
    assert cluster.security is not None
    rogue = CertificateAuthority.create(tmp_path / "rogue-ca")
    cert = rogue.issue(tmp_path / "rogue-server", "fluss-server", uris=["fluss://tablet-server/2"])
    creds = grpc.ssl_channel_credentials(
        cluster.security.ca.cert_file.read_bytes(), cert.key_file.read_bytes(), cert.cert_file.read_bytes()
    )
    before = replica_state(cluster)
    leader = cluster.get(cluster.names(TABLET_SERVER)[0])
    buckets = [  # as if it held everything: would move the high watermark
        tablet_pb2.FetchBucket(table_bucket=b, fetch_offset=1_000_000, max_bytes=1 << 20)
        for b in table_buckets(cluster)
    ]
    with grpc.secure_channel(leader.rpc_address, creds) as channel:
        stub = tablet_pb2_grpc.TabletServiceStub(channel)
        request = tablet_pb2.FetchLogRequest(replica_id=2, max_wait_ms=0, max_bytes=1 << 20, buckets=buckets)
        with pytest.raises(grpc.RpcError) as raised:
            stub.FetchLog(request, timeout=5)
    assert raised.value.code() is grpc.StatusCode.UNAVAILABLE
    assert "Handshake failed" in Path(leader.stdout_file).read_text()  # gRPC's line names the reason
    assert replica_state(cluster) == before


# ---------------------------------------------------------------- authorization
def test_principal_without_write_cannot_produce(cluster: LocalCluster) -> None:
    before = end_offsets(cluster)
    options = ProducerOptions(acks="all", idempotence=True, request_timeout=5, delivery_timeout=10)
    with SyncProducer(bootstrap(cluster), options, security=identity_as(cluster, READER, READER_PASSWORD)) as p:
        future = p.send(TABLE, b"forbidden", key=b"k")
        with pytest.raises(FlussError) as info:
            future.result(timeout=30)
    assert info.value.code is ErrorCode.AUTHORIZATION_FAILED
    assert f"{READER} may not WRITE table {TABLE}" in info.value.message
    assert end_offsets(cluster) == before  # nothing appended on any leader (followers copy only those)
    assert f"DENIED principal={READER} operation=WRITE resource=table {TABLE}" in server_logs(cluster)


def test_produce_stream_authorizes_each_message(cluster: LocalCluster) -> None:
    """One ProduceLogStream opened as READER (READ on TABLE, WRITE on OPEN_TABLE only): each message is
    authorized as a ProduceLog, so the writes to TABLE are answered AUTHORIZATION_FAILED (nothing appended,
    audited) while the write to OPEN_TABLE between them on the same stream is appended."""
    admin = admin_identity(cluster)
    with SyncAdmin(bootstrap(cluster), security=admin) as a:
        a.create_table(OPEN_TABLE, num_buckets=1, replication_factor=2)
        _, (open_bucket,) = a.get_table_placement(OPEN_TABLE)
    grant = Acl(READER, ResourceType.TABLE, PatternType.LITERAL, OPEN_TABLE, Operation.WRITE, Permission.ALLOW)
    with_zookeeper(
        cluster.security, cluster.zookeeper_address, cluster.zk_root, lambda zk, root: add_acls(zk, root, [grant])
    )
    leader = cluster.get(f"tablet-server-{open_bucket.leader}").rpc_address
    denied_bucket = table_buckets(cluster)[0]
    before = end_offsets(cluster)

    def message(correlation_id: int, tb: common_pb2.TableBucket) -> tablet_pb2.ProduceLogRequest:
        builder = RecordBatchBuilder()
        builder.append(b"via the stream")
        request = tablet_pb2.ProduceLogRequest(acks=1, timeout_ms=5000, correlation_id=correlation_id)
        request.buckets.add(table_bucket=tb, records=builder.build())
        return request

    open_tb = common_pb2.TableBucket(table_id=open_bucket.table_bucket.table_id, bucket=0)
    tls = admin.tls
    assert tls is not None
    ca, cert, key = tls.read()
    metadata = identity_as(cluster, READER, READER_PASSWORD).metadata()

    def exchange() -> dict[int, tablet_pb2.ProduceLogResponse]:
        with grpc.secure_channel(leader, grpc.ssl_channel_credentials(ca, key, cert)) as channel:
            stream = tablet_pb2_grpc.TabletServiceStub(channel).ProduceLogStream(
                iter([message(1, denied_bucket), message(2, open_tb), message(3, denied_bucket)]),
                metadata=metadata,
                timeout=10,
            )
            return {a.correlation_id: a for a in stream}

    def allowed_write_appended() -> bool:  # the grant reaches the leader through its ACL watch
        return exchange()[2].buckets[0].error.code == ErrorCode.NONE

    wait_until(allowed_write_appended, 20, message="READER's WRITE on the open table is in force")
    answers = exchange()
    assert sorted(answers) == [1, 2, 3]
    for refused in (answers[1], answers[3]):
        assert refused.error.code == ErrorCode.AUTHORIZATION_FAILED
        assert f"{READER} may not WRITE table {TABLE}" in refused.error.message
        assert not refused.buckets  # refused as a whole: not handled at all
    assert answers[2].error.code == ErrorCode.NONE and answers[2].buckets[0].error.code == ErrorCode.NONE
    assert end_offsets(cluster) == before  # nothing of the refused messages was appended
    assert f"DENIED principal={READER} operation=WRITE resource=table {TABLE}" in server_logs(cluster)


def test_consumer_fetch_stream_authorizes_each_message(cluster: LocalCluster) -> None:
    """One ConsumerFetchStream opened as READER (READ on TABLE only): each message is authorized as a
    FetchLog, so the fetch of CLOSED_TABLE between two fetches of TABLE on the same stream is answered
    AUTHORIZATION_FAILED (not read, audited) and the stream goes on; NOBODY's consumer, whose fetches go on
    such streams, gets AUTHORIZATION_FAILED from poll (it may DESCRIBE the table, not READ it)."""
    closed = "sec.closed_to_reader"
    admin = admin_identity(cluster)
    with SyncAdmin(bootstrap(cluster), security=admin) as a:
        a.create_table(closed, num_buckets=1, replication_factor=2)
        wait_until(lambda: a.get_table_placement(closed)[1][0].leader >= 0, 30, message="the new table has a leader")
        _, (closed_bucket,) = a.get_table_placement(closed)
        _, buckets = a.get_table_placement(TABLE)
    # TABLE's bucket led by the same server if there is one (else its answer is NOT_LEADER for that bucket)
    on_leader = next((b for b in buckets if b.leader == closed_bucket.leader), buckets[0])
    leader = cluster.get(f"tablet-server-{closed_bucket.leader}").rpc_address

    def fetch(tb: Any) -> tablet_pb2.FetchLogRequest:
        request = tablet_pb2.FetchLogRequest(replica_id=-1, max_wait_ms=0, max_bytes=1 << 20)
        request.buckets.add(
            table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket),
            max_bytes=1 << 20,
            current_leader_epoch=-1,
        )
        return request

    tls = admin.tls
    assert tls is not None
    ca, cert, key = tls.read()
    metadata = identity_as(cluster, READER, READER_PASSWORD).metadata()

    def exchange() -> list[tablet_pb2.FetchLogResponse]:
        with grpc.secure_channel(leader, grpc.ssl_channel_credentials(ca, key, cert)) as channel:
            stream = tablet_pb2_grpc.TabletServiceStub(channel).ConsumerFetchStream(
                iter([fetch(on_leader.table_bucket), fetch(closed_bucket.table_bucket), fetch(on_leader.table_bucket)]),
                metadata=metadata,
                timeout=10,
            )
            return list(stream)

    def known() -> bool:  # the new table reaches the leader's metadata through UpdateMetadata
        return exchange()[1].error.code != ErrorCode.UNKNOWN_TABLE_OR_BUCKET

    wait_until(known, 20, message="the leader knows the new table")
    answers = exchange()
    assert len(answers) == 3
    refused = answers[1]
    assert refused.error.code == ErrorCode.AUTHORIZATION_FAILED
    assert f"{READER} may not READ table {closed}" in refused.error.message
    assert not refused.buckets  # refused as a whole: not read at all
    for allowed in (answers[0], answers[2]):
        assert allowed.error.code == ErrorCode.NONE and len(allowed.buckets) == 1  # handled as a FetchLog
    assert f"DENIED principal={READER} operation=READ resource=table {closed}" in server_logs(cluster)

    describe = Acl(NOBODY, ResourceType.TABLE, PatternType.LITERAL, closed, Operation.DESCRIBE, Permission.ALLOW)
    with_zookeeper(
        cluster.security, cluster.zookeeper_address, cluster.zk_root, lambda zk, root: add_acls(zk, root, [describe])
    )
    options = ConsumerOptions(fetch_max_wait=0.1, request_timeout=5)
    with SyncConsumer(bootstrap(cluster), options, security=identity_as(cluster, NOBODY, NOBODY_PASSWORD)) as c:

        def assigned() -> bool:  # NOBODY may see the table once its DESCRIBE grant is in force
            try:
                c.assign(closed)
            except FlussError as e:
                if e.code is not ErrorCode.TABLE_NOT_EXIST:
                    raise
                return False
            return True

        wait_until(assigned, 20, message="NOBODY's DESCRIBE grant is in force")
        with pytest.raises(FlussError) as info:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                c.poll(0.5)
        assert c._client._transport.consumer_fetch_streams  # its fetches went on a ConsumerFetchStream
    assert info.value.code is ErrorCode.AUTHORIZATION_FAILED
    assert f"{NOBODY} may not READ table {closed}" in info.value.message


# ---------------------------------------------------------------- consumer groups
def _read_at_least(consumer: SyncConsumer, count: int, who: str) -> None:
    seen: list[Any] = []
    wait_until(lambda: seen.extend(consumer.poll(0.5)) or len(seen) >= count, 60, message=f"{who} read {count}")


def _read_at_least(consumer: SyncConsumer, count: int, who: str) -> None:
    seen: list[Any] = []
    wait_until(lambda: seen.extend(consumer.poll(0.5)) or len(seen) >= count, 60, message=f"{who} read {count}")


def test_a_group_member_reads_what_was_produced_and_describe_is_checked(cluster: LocalCluster) -> None:
    """Members join through the coordinator leader's ConsumerHeartbeat, authorized against the table ids it
    names (the coordinator resolves them from its view): the super user and READER (READ on the group,
    READ + DESCRIBE on the table) read every record; NOBODY, with READ on the group but no DESCRIBE on the
    table, is refused naming the table."""
    before = sum(end_offsets(cluster).values())
    with SyncProducer(bootstrap(cluster), ProducerOptions(acks="all"), security=admin_identity(cluster)) as p:
        for f in [p.send(TABLE, f"g{i}".encode(), key=f"k{i}".encode()) for i in range(20)]:
            f.result(timeout=30)
    grants = [Acl(who, ResourceType.GROUP, PatternType.LITERAL, "readers", Operation.READ, Permission.ALLOW)
              for who in (READER, NOBODY)]  # fmt: skip
    with_zookeeper(cluster.security, cluster.zookeeper_address, cluster.zk_root, lambda zk, r: add_acls(zk, r, grants))
    options = ConsumerOptions(fetch_max_wait=0.1, request_timeout=10, auto_offset_reset="earliest")
    for group, identity in (
        ("admins", admin_identity(cluster)),
        ("readers", identity_as(cluster, READER, READER_PASSWORD)),
    ):
        with SyncConsumer(bootstrap(cluster), options, security=identity, group=group, subscribe=[TABLE]) as c:
            _read_at_least(c, before + 20, f"group {group}")
    [table_id] = {tb.table_id for tb in table_buckets(cluster)}

    async def join_as_nobody(admin: Admin) -> None:
        request = coordinator_pb2.ConsumerHeartbeatRequest(
            group="readers", member_epoch=0, session_timeout_ms=10_000, subscribed_table_ids=[table_id]
        )
        await admin._gateway.call(CONSUMER_HEARTBEAT, request)

    error = fails_with(identity_as(cluster, NOBODY, NOBODY_PASSWORD), cluster, join_as_nobody)
    assert error.code is ErrorCode.AUTHORIZATION_FAILED
    assert f"{NOBODY} may not DESCRIBE table {TABLE}" in error.message
    assert f"DENIED principal={NOBODY} operation=DESCRIBE resource=table {TABLE}" in server_logs(cluster)


def _committed_in_zookeeper(cluster: LocalCluster, group: str, table_id: int) -> dict[int, int]:
    """The offsets the documented znodes hold: <root>/consumers/<group>/offsets/<table_id>/<bucket>."""

    async def read(zk, root) -> dict[int, int]:
        base = f"{root}/consumers/{group}/offsets/{table_id}"
        out = {}
        for bucket in await zk.get_children(base):
            data, _ = await zk.get(f"{base}/{bucket}")
            out[int(bucket)] = json.loads(data)["offset"]
        return out

    return with_zookeeper(cluster.security, cluster.zookeeper_address, cluster.zk_root, read)


def test_group_offsets_are_authorized_on_every_table_they_name(cluster: LocalCluster) -> None:
    """READ on a group is not READ on its tables (Kafka checks both): NOBODY, with READ on group "ledger" and
    nothing on table sec.ledger, can neither see nor rewind its committed offsets; READER, who may READ
    sec.events only, commits for both tables and only sec.events' offsets are written. A group whose member
    subscribes to a table the principal may not DESCRIBE is not described to it. Before, CommitOffsets and
    FetchOffsets checked the group only: NOBODY read and rewound the offsets of sec.ledger."""
    secret = "sec.ledger"
    with SyncAdmin(bootstrap(cluster), security=admin_identity(cluster)) as admin:
        admin.create_table(secret, num_buckets=2, replication_factor=2)
        events_id = admin.get_table_info(TABLE).table_id
        secret_id = admin.get_table_info(secret).table_id
        committed = {TableBucket(t, b): first + b for t, first in ((events_id, 5), (secret_id, 7)) for b in (0, 1)}
        asyncio.run(_commit_as(cluster, admin_identity(cluster), "ledger", committed))
    grants = [Acl(who, ResourceType.GROUP, PatternType.LITERAL, name, Operation.READ, Permission.ALLOW)
              for who in (READER, NOBODY) for name in ("ledger", "ledger-live")]  # fmt: skip
    with_zookeeper(cluster.security, cluster.zookeeper_address, cluster.zk_root, lambda zk, r: add_acls(zk, r, grants))
    before = _committed_in_zookeeper(cluster, "ledger", secret_id)
    assert before == {0: 7, 1: 8}
    nobody = identity_as(cluster, NOBODY, NOBODY_PASSWORD)

    def refusal() -> FlussError | None:
        e = fails_with(nobody, cluster, lambda a: fetch_offsets(a._gateway, "ledger", secret_id))
        return None if "group ledger" in e.message else e  # the grant on the group is on its way (a watch)

    error = wait_until(refusal, 20, message="NOBODY's grant on group ledger in force")
    assert error.code is ErrorCode.AUTHORIZATION_FAILED
    assert error.message == f"{NOBODY} may not DESCRIBE table id {secret_id}"  # no name it may not know
    assert asyncio.run(_fetch_as(cluster, nobody, "ledger")) == {}  # every table: the hidden ones left out
    # the rewind of the issue: refused for the table, nothing written
    with pytest.raises(FlussError) as info:
        asyncio.run(_commit_as(cluster, nobody, "ledger", {tb: 0 for tb in committed if tb.table_id == secret_id}))
    assert info.value.code is ErrorCode.AUTHORIZATION_FAILED and f"table id {secret_id}" in info.value.message
    assert _committed_in_zookeeper(cluster, "ledger", secret_id) == before

    reader = identity_as(cluster, READER, READER_PASSWORD)
    with pytest.raises(FlussError) as info:  # both tables named: the readable one is written, the other not
        asyncio.run(_commit_as(cluster, reader, "ledger", {tb: 1 for tb in committed}))
    assert info.value.code is ErrorCode.AUTHORIZATION_FAILED and f"table id {secret_id}" in info.value.message
    assert _committed_in_zookeeper(cluster, "ledger", events_id) == {0: 1, 1: 1}
    assert _committed_in_zookeeper(cluster, "ledger", secret_id) == before
    assert asyncio.run(_fetch_as(cluster, reader, "ledger")) == {TableBucket(events_id, b): 1 for b in (0, 1)}
    assert f"DENIED principal={READER} operation=READ resource=table {secret}" in server_logs(cluster)

    # a live member subscribed to the hidden table: its group is not described to READER, the admin sees it
    options = ConsumerOptions(fetch_max_wait=0.1, request_timeout=10)
    with SyncConsumer(bootstrap(cluster), options, security=admin_identity(cluster), group="ledger-live",
                      subscribe=[secret]) as member:  # fmt: skip
        member.poll(0.5)
        with SyncAdmin(bootstrap(cluster), security=admin_identity(cluster)) as admin:
            wait_until(lambda: admin.describe_group_members("ledger-live").members, 30, message="the member joined")
            assert admin.describe_group_members("ledger-live").members[0].subscribed == (secret_id,)
        error = fails_with(reader, cluster, lambda a: a.describe_group_members("ledger-live"))
        assert error.code is ErrorCode.AUTHORIZATION_FAILED
        assert "may not DESCRIBE 1 table(s) that group ledger-live uses" in error.message


async def _commit_as(cluster: LocalCluster, identity: PeerIdentity, group: str, offsets: dict) -> None:
    async with Admin(bootstrap(cluster), security=identity, request_timeout=10) as admin:
        raise_refused(group, await commit_offsets(admin._gateway, group, offsets))


async def _fetch_as(cluster: LocalCluster, identity: PeerIdentity, group: str) -> dict:
    async with Admin(bootstrap(cluster), security=identity, request_timeout=10) as admin:
        return await fetch_offsets(admin._gateway, group)


# ---------------------------------------------------------------- partitioned tables
def test_a_deny_on_a_partitioned_table_covers_its_partitions(cluster: LocalCluster) -> None:
    """ALICE may READ the whole database but not table sec.payroll: its partition sec.payroll$<day> (a table
    of its own, where the records are) is refused too, read or written; her grant on the database still
    lets her read another table."""
    alice, password = "alice", "alice-secret-1"
    payroll = f"sec.payroll${partition_name(slot_start(dt.datetime.now(dt.UTC), TimeUnit.DAY), TimeUnit.DAY)}"
    props = {"table.partition.key": "dt", "table.auto-partition.time-unit": "day"}
    with SyncAdmin(bootstrap(cluster), security=admin_identity(cluster)) as admin:
        admin.create_table("sec.payroll", num_buckets=1, replication_factor=2, properties=props)
        admin.create_table(payroll, num_buckets=1, replication_factor=2)
    with SyncProducer(bootstrap(cluster), ProducerOptions(acks="all"), security=admin_identity(cluster)) as p:
        p.send(payroll, b"salary", key=b"k").result(timeout=30)
        p.send(TABLE, b"event", key=b"k").result(timeout=30)
    acls = [
        Acl(alice, ResourceType.DATABASE, PatternType.LITERAL, "sec", Operation.READ, Permission.ALLOW),
        Acl(alice, ResourceType.TABLE, PatternType.LITERAL, "sec.payroll", Operation.READ, Permission.DENY),
    ]

    async def grant(zk, root) -> None:
        await put_user(zk, root, alice, make_credential(password))
        await add_acls(zk, root, acls)

    with_zookeeper(cluster.security, cluster.zookeeper_address, cluster.zk_root, grant)
    options = ConsumerOptions(fetch_max_wait=0.1, request_timeout=5)
    with SyncConsumer(bootstrap(cluster), options, security=identity_as(cluster, alice, password)) as c:
        # once her grants are in force (a watch away) the database grant lets alice read another table
        wait_until(lambda: c.assign(TABLE) or True, 20, message="alice's grants are in force")
        _read_at_least(c, 1, "alice on another table")
    with SyncConsumer(bootstrap(cluster), options, security=identity_as(cluster, alice, password)) as c:
        c.assign(payroll)
        with pytest.raises(FlussError) as info:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                assert not c.poll(0.5), "alice read a partition of a table she is denied"
    assert info.value.code is ErrorCode.AUTHORIZATION_FAILED
    assert f"{alice} may not READ table {payroll}" in info.value.message


def test_principal_without_describe_cannot_list(cluster: LocalCluster) -> None:
    identity = identity_as(cluster, NOBODY, NOBODY_PASSWORD)
    error = fails_with(identity, cluster, lambda a: a.list_tables("sec"))
    assert error.code is ErrorCode.AUTHORIZATION_FAILED
    assert "may not DESCRIBE database sec" in error.message
    error = fails_with(identity, cluster, lambda a: a.create_database("nobody_db"))
    assert error.code is ErrorCode.AUTHORIZATION_FAILED
    assert not zk_exists(cluster, DatabaseZNode.path(cluster.zk_root, "nobody_db"))
    # the reader may describe its table, but not the rest of the cluster
    reader = identity_as(cluster, READER, READER_PASSWORD)
    assert fails_with(reader, cluster, lambda a: a.list_databases()).code is ErrorCode.AUTHORIZATION_FAILED


def test_principal_without_alter_cannot_rebalance(cluster: LocalCluster) -> None:
    coordinator = cluster.get(cluster.coordinator_leader() or cluster.names(COORDINATOR)[0])
    token = base64.b64encode(f"{READER}:{READER_PASSWORD}".encode()).decode()
    headers = {"Authorization": f"Basic {token}", REQUEST_HEADER: "1"}  # not cross-site: the ACLs decide
    # POST (start) and the console's Cancel… button (DELETE) are both state changes
    for method, path in (("POST", "/rebalance?dry_run=false"), ("DELETE", "/rebalance")):
        request = urllib.request.Request(f"{coordinator.http_url}{path}", method=method, headers=headers)
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=5, context=cluster.http_context())
        assert info.value.code == 403, method
        assert b"AUTHORIZATION_FAILED: reader may not ALTER cluster cluster" in info.value.read()
        assert not zk_exists(cluster, RebalanceZNode.path(cluster.zk_root))
    # no credentials at all: 401
    anonymous = urllib.request.Request(
        f"{coordinator.http_url}/rebalance", method="POST", headers={REQUEST_HEADER: "1"}
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(anonymous, timeout=5, context=cluster.http_context())
    assert info.value.code in (401, 403)  # the harness's client certificate names fluss-client, without ACLs
    assert cluster.security is not None  # /metrics needs DESCRIBE_CONFIGS: the admin's
    metrics = urllib.request.urlopen(
        urllib.request.Request(f"{coordinator.http_url}/metrics", headers=cluster.security.admin_authorization()),
        timeout=5,
        context=cluster.http_context(),
    )
    assert b'fluss_authorization_denials_total{operation="ALTER",resource_type="cluster"}' in metrics.read()


def test_the_http_port_refuses_a_client_without_a_certificate(cluster: LocalCluster) -> None:
    """security.tls.client-auth covers the HTTP port too: /health, /metrics and the console included."""
    no_certificate = client_ssl_context(TlsFiles(str(cluster.security.ca.cert_file)))
    coordinator = cluster.coordinator_leader() or cluster.names(COORDINATOR)[0]
    probes = {
        coordinator: ("/health", "/metrics", "/console/snapshot"),
        cluster.names(TABLET_SERVER)[0]: ("/health", "/metrics"),
    }
    for name, paths in probes.items():
        url = cluster.get(name).http_url
        for path in paths:
            with pytest.raises((urllib.error.URLError, OSError)):
                urllib.request.urlopen(f"{url}{path}", timeout=5, context=no_certificate).read()
        assert fetch_health(url, 5.0, cluster.http_context()) is not None  # the harness presents its certificate


# ---------------------------------------------------------------- ZooKeeper
def test_zookeeper_client_without_credentials_cannot_write(cluster: LocalCluster) -> None:
    zk = KazooClient(hosts=cluster.zookeeper_address)
    zk.start(timeout=10)
    try:
        with pytest.raises(NoAuthError):
            zk.create(TabletServerZNode.path(cluster.zk_root, 99), b"{}", ephemeral=True)
        with pytest.raises(NoAuthError):
            zk.create(DatabaseZNode.path(cluster.zk_root, "zk_db"), b"{}")
        with pytest.raises(NoAuthError):
            zk.get(f"{cluster.zk_root}/security/users/admin")  # salted keys are not even readable
        with pytest.raises(NoAuthError):
            zk.get(TabletServerZNode.path(cluster.zk_root, 1))  # nor a registration's replica token
        with pytest.raises(NoAuthError):
            zk.get(CoordinatorLeaderZNode.path(cluster.zk_root))  # nor the coordinator leader's token
        zk.get(LeaderIsrZNode.path(cluster.zk_root, 1, 0))  # the rest of the cluster's state stays readable
        assert zk.exists(TabletServerZNode.path(cluster.zk_root, 99)) is None
        assert zk.exists(DatabaseZNode.path(cluster.zk_root, "zk_db")) is None
    finally:
        zk.stop()
        zk.close()


def test_rogue_tablet_server_cannot_register(cluster: LocalCluster) -> None:
    """A tablet server without the cluster's ZooKeeper credentials (nor its certificate) cannot join."""
    name = cluster.add_tablet_server(9, start=False)
    record = cluster.get(name)
    secure = record.argv.index(str(cluster.security.server_config)) if cluster.security else -1
    assert secure > 0
    del record.argv[secure - 1 : secure + 1]  # no security settings at all: no certificate, no ZK credentials
    cluster.start_process(name)
    wait_until(lambda: not cluster.alive(name), 30, message="the rogue server should fail to start")
    assert "not authorized" in cluster.log_text(name)
    assert not zk_exists(cluster, TabletServerZNode.path(cluster.zk_root, 9))


# ---------------------------------------------------------------- servers proving themselves by password
def test_without_client_certificates_servers_authenticate_by_password(cluster_factory) -> None:
    """TLS without mutual TLS: followers and the coordinator prove the internal principal with the internal
    user's password; a client with only the CA is anonymous and refused; one claiming the internal user
    with a guessed password too."""
    overrides = {"tablet-server.min.insync.replicas": "2"}
    cluster = cluster_factory(1, 2, secure=True, client_certificates=False, tablet_overrides=overrides)
    identity = cluster.client_identity()
    assert identity.tls is not None and not identity.tls.cert_file
    with SyncAdmin(bootstrap(cluster), security=identity) as admin:
        admin.create_table("fluss.by_password", num_buckets=1, replication_factor=2)
        with SyncProducer(bootstrap(cluster), ProducerOptions(acks="all", request_timeout=10), security=identity) as p:
            p.send("fluss.by_password", b"v", key=b"k").result(timeout=30)  # needs the follower in the ISR
        _, buckets = admin.get_table_placement("fluss.by_password")
    assert len(buckets[0].isr) == 2
    anonymous = PeerIdentity(identity.tls)
    assert fails_with(anonymous, cluster, lambda a: a.list_databases()).code is ErrorCode.AUTHENTICATION_FAILED
    spoof = PeerIdentity(identity.tls, "fluss-server", "guess")
    assert fails_with(spoof, cluster, lambda a: a.list_databases()).code is ErrorCode.AUTHENTICATION_FAILED
