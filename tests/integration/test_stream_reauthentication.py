"""Streams opened by a principal that is no longer proven are closed (docs/security.md §2, "Open streams").

One secure cluster (1 coordinator, 2 tablet servers, replication factor 2). A user opens a stream to a
leader, sends one message (acknowledged), then is removed (``fluss-py user remove``) or gets a new password
(``fluss-py user add``); once the leader refuses that user's unary calls, the next message on the open
stream is not handled: the stream ends with UNAUTHENTICATED and the table holds nothing of it. Streams of
users still valid go on, and a new stream with the new password works. An ACL removed under an open stream
refuses the stream's next message (AUTHORIZATION_FAILED) and the stream goes on (Kafka's behaviour). The
console's event stream (``/console/events``, HTTP) is held to the same rule: no sample taken after the
change reaches it, and it ends with a ``closed`` event naming why.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest

from fluss_py.client import ConsumerOptions, ProducerOptions, SyncAdmin, SyncConsumer, SyncProducer
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.record import RecordBatchBuilder
from fluss_py.rpc.pb import common_pb2, coordinator_pb2_grpc, tablet_pb2, tablet_pb2_grpc
from fluss_py.security.identity import PeerIdentity
from fluss_py.security.scram import make_credential
from fluss_py.security.store import add_acls, put_user, remove_acls
from fluss_py.security.tls import TlsFiles, client_ssl_context
from fluss_py.security_types import Acl, Operation, PatternType, Permission, ResourceType
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER
from fluss_py.testing.fixtures import secure_module_cluster
from fluss_py.testing.procs import wait_until
from fluss_py.testing.secure import with_zookeeper
from fluss_py.types import TableBucket

pytestmark = pytest.mark.integration

DATABASE = "reauth"
FLUSS_PY = str(Path(sys.executable).parent / "fluss-py")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper) -> Iterator[LocalCluster]:
    cluster = secure_module_cluster(tmp_path_factory.mktemp("reauth"), zookeeper.address, "/fluss-reauth")
    try:
        cluster.start(timeout=90)
        with SyncAdmin(bootstrap(cluster), security=cluster.client_identity()) as admin:
            admin.create_database(DATABASE)
        yield cluster
    finally:
        cluster.close(grace=3.0)


def bootstrap(cluster: LocalCluster) -> str:
    return ",".join(cluster.get(n).rpc_address for n in cluster.names())


def identity_as(cluster: LocalCluster, user: str, password: str) -> PeerIdentity:
    return PeerIdentity(cluster.client_identity().tls, user, password)


def fluss_py(cluster: LocalCluster, *argv: str, **env: str) -> None:
    """A ``fluss-py`` command against the cluster's directory (its client.properties names ZooKeeper)."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLUSS_")} | env
    done = subprocess.run(
        [FLUSS_PY, *argv, "--dir", str(cluster.directory)],
        capture_output=True,
        text=True,
        timeout=60,
        env=environ,
        check=False,
    )
    assert done.returncode == 0, f"fluss-py {' '.join(argv)}: {done.stdout}\n{done.stderr}"


def new_user(cluster: LocalCluster, user: str, password: str, table: str, *ops: Operation) -> list[Acl]:
    acls = [Acl(user, ResourceType.TABLE, PatternType.LITERAL, table, op, Permission.ALLOW) for op in ops]

    async def create(zk: Any, root: str) -> None:
        await put_user(zk, root, user, make_credential(password))
        await add_acls(zk, root, acls)

    assert cluster.security is not None
    with_zookeeper(cluster.security, cluster.zookeeper_address, cluster.zk_root, create)
    identity = identity_as(cluster, user, password)
    for name in cluster.names():  # every server's watch delivered the user and its ACLs (one znode per table)
        wait_until(lambda n=name: unary_status(cluster, n, identity, table) is None, 20, message=f"{user} on {name}")
    return acls


def new_table(cluster: LocalCluster, name: str) -> tuple[TableBucket, str]:
    """A table of one bucket (replication factor 2): the bucket and its leader's RPC address."""
    with SyncAdmin(bootstrap(cluster), security=cluster.client_identity()) as admin:
        admin.create_table(f"{DATABASE}.{name}", num_buckets=1, replication_factor=2)
        wait_until(lambda: admin.get_table_placement(f"{DATABASE}.{name}")[1][0].leader >= 0, 30, message="a leader")
        _, (bucket,) = admin.get_table_placement(f"{DATABASE}.{name}")
    return bucket.table_bucket, cluster.get(f"{TABLET_SERVER}-{bucket.leader}").rpc_address


def channel(cluster: LocalCluster, address: str) -> grpc.aio.Channel:
    """A channel with the cluster's client certificate (the principal comes from the password)."""
    tls = cluster.client_identity().tls
    assert tls is not None
    ca, cert, key = tls.read()
    return grpc.aio.secure_channel(address, grpc.ssl_channel_credentials(ca, key, cert))


def produce_message(tb: TableBucket, correlation_id: int, values: list[bytes]) -> tablet_pb2.ProduceLogRequest:
    builder = RecordBatchBuilder()
    for value in values:
        builder.append(value)
    request = tablet_pb2.ProduceLogRequest(acks=-1, timeout_ms=10_000, correlation_id=correlation_id)
    request.buckets.add(
        table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket), records=builder.build()
    )
    return request


def fetch_message(tb: TableBucket, offset: int) -> tablet_pb2.FetchLogRequest:
    request = tablet_pb2.FetchLogRequest(replica_id=-1, max_wait_ms=0, max_bytes=1 << 20)
    request.buckets.add(
        table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket),
        fetch_offset=offset,
        max_bytes=1 << 20,
        current_leader_epoch=-1,
    )
    return request


def unary_status(cluster: LocalCluster, name: str, identity: PeerIdentity, table: str) -> grpc.StatusCode | None:
    """How server ``name`` answers a unary GetMetadata of ``table`` by ``identity`` (None: it answers)."""
    database, table_name = table.split(".")
    request = common_pb2.MetadataRequest(tables=[common_pb2.TablePath(database=database, table=table_name)])

    async def call() -> grpc.StatusCode | None:
        async with channel(cluster, cluster.get(name).rpc_address) as ch:
            stub = (coordinator_pb2_grpc.CoordinatorServiceStub if name in cluster.names(COORDINATOR)
                    else tablet_pb2_grpc.TabletServiceStub)(ch)  # fmt: skip
            try:
                await stub.GetMetadata(request, metadata=identity.metadata(), timeout=5)
            except grpc.aio.AioRpcError as e:
                return e.code()
        return None

    return asyncio.run(call())


def wait_refused(cluster: LocalCluster, address: str, identity: PeerIdentity, table: str) -> None:
    """Wait until the server at ``address`` refuses ``identity``'s unary calls (its watch delivered the change)."""
    name = next(n for n in cluster.names() if cluster.get(n).rpc_address == address)
    wait_until(
        lambda: unary_status(cluster, name, identity, table) is grpc.StatusCode.UNAUTHENTICATED,
        20,
        message=f"{name} refuses {identity.user}",
    )


def produce_as_admin(cluster: LocalCluster, table: str, value: bytes) -> None:
    with SyncProducer(bootstrap(cluster), ProducerOptions(acks="all"), security=cluster.client_identity()) as p:
        p.send(table, value).result(timeout=30)


def table_values(cluster: LocalCluster, table: str) -> list[bytes]:
    """Every value of the table's bucket 0, read by the admin from the beginning up to its end offset."""
    with SyncAdmin(bootstrap(cluster), security=cluster.client_identity()) as admin:
        ends = {b: o.log_end_offset for b, o in admin.list_offsets(table).items()}
    values: list[bytes] = []
    options = ConsumerOptions(fetch_max_wait=0.1, request_timeout=5)
    with SyncConsumer(bootstrap(cluster), options, security=cluster.client_identity()) as consumer:
        consumer.assign(table)
        wait_until(
            lambda: values.extend(r.value or b"" for r in consumer.poll(0.5)) or len(values) >= sum(ends.values()),
            30,
            message=f"{table} read to its end",
        )
    return values


def closed_lines(cluster: LocalCluster, stream: str, principal: str) -> str:
    text = "".join(cluster.log_text(n) for n in cluster.names(TABLET_SERVER))
    return "\n".join(line for line in text.splitlines() if f"CLOSED stream={stream} principal={principal}" in line)


# ---------------------------------------------------------------- produce streams
@pytest.mark.parametrize("change", ["removed", "new password"])
def test_the_produce_stream_of_a_removed_or_changed_user_is_closed(cluster: LocalCluster, change: str) -> None:
    """Fails before streams were re-checked: the second message was acknowledged and appended."""
    user, password = f"writer-{change.replace(' ', '-')}", "writer-secret-1"
    other, other_password = f"other-{change.replace(' ', '-')}", "other-secret-1"
    table_name = f"produced_{change.replace(' ', '_')}"
    table = f"{DATABASE}.{table_name}"
    tb, leader = new_table(cluster, table_name)
    new_user(cluster, user, password, table, Operation.WRITE, Operation.DESCRIBE)
    new_user(cluster, other, other_password, table, Operation.WRITE, Operation.DESCRIBE)
    identity = identity_as(cluster, user, password)

    async def scenario() -> tuple[grpc.StatusCode, str, tablet_pb2.ProduceLogResponse]:
        async with channel(cluster, leader) as ch, channel(cluster, leader) as other_ch:
            stream = tablet_pb2_grpc.TabletServiceStub(ch).ProduceLogStream(metadata=identity.metadata())
            survivor = tablet_pb2_grpc.TabletServiceStub(other_ch).ProduceLogStream(
                metadata=identity_as(cluster, other, other_password).metadata()
            )
            await stream.write(produce_message(tb, 1, [b"before-0", b"before-1"]))
            first = await stream.read()
            assert first.error.code == 0 and first.buckets[0].error.code == 0, first
            await survivor.write(produce_message(tb, 1, [b"other-before"]))
            assert (await survivor.read()).buckets[0].error.code == 0

            if change == "removed":
                await asyncio.to_thread(fluss_py, cluster, "user", "remove", user)
            else:
                await asyncio.to_thread(fluss_py, cluster, "user", "add", user, FLUSS_NEW_PASSWORD="writer-secret-2")
            await asyncio.to_thread(wait_refused, cluster, leader, identity, table)

            await stream.write(produce_message(tb, 2, [b"after-0", b"after-1"]))
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                answer = await stream.read()
                raise AssertionError(f"the message after the change was answered: {answer}")
            # the other user's stream, opened before, goes on
            await survivor.write(produce_message(tb, 2, [b"other-after"]))
            survived = await survivor.read()
            await survivor.done_writing()
            return ended.value.code(), ended.value.details() or "", survived

    code, details, survived = asyncio.run(scenario())
    assert code is grpc.StatusCode.UNAUTHENTICATED
    assert "was removed or its password changed" in details
    assert survived.error.code == 0 and survived.buckets[0].error.code == 0
    assert closed_lines(cluster, "ProduceLogStream", user)  # audited on the leader

    if change == "new password":  # a new stream with the new password works
        options = ProducerOptions(acks="all", request_timeout=10)
        with SyncProducer(bootstrap(cluster), options, security=identity_as(cluster, user, "writer-secret-2")) as p:
            p.send(table, b"new-password").result(timeout=30)
    values = table_values(cluster, table)
    assert b"after-0" not in values and b"after-1" not in values  # nothing of the refused message
    expected = [b"before-0", b"before-1", b"other-before", b"other-after"]
    assert sorted(values) == sorted(expected + ([b"new-password"] if change == "new password" else []))


def test_a_producer_of_a_removed_user_fails_and_every_acknowledged_record_is_all_there_is(
    cluster: LocalCluster,
) -> None:
    """The issue's scenario with the client's Producer (its sends travel on a ProduceLogStream): sends
    acknowledged until the leader learns of the removal, then AUTHENTICATION_FAILED; what the table holds is
    exactly what was acknowledged. Fails before streams were re-checked: every send was acknowledged."""
    user, password = "steady-writer", "steady-secret-1"
    _, leader = new_table(cluster, "steady")
    table = f"{DATABASE}.steady"
    new_user(cluster, user, password, table, Operation.WRITE, Operation.DESCRIBE)
    identity = identity_as(cluster, user, password)
    acknowledged: list[bytes] = []
    options = ProducerOptions(acks="all", request_timeout=10, delivery_timeout=20)
    with SyncProducer(bootstrap(cluster), options, security=identity) as producer:
        for i in range(20):
            value = f"v{i}".encode()
            producer.send(table, value).result(timeout=30)
            acknowledged.append(value)
        fluss_py(cluster, "user", "remove", user)
        wait_refused(cluster, leader, identity, table)
        with pytest.raises(FlussError) as failed:
            for i in range(20, 1000):  # the first send after the leader saw it fails
                value = f"v{i}".encode()
                producer.send(table, value).result(timeout=30)
                acknowledged.append(value)
    assert failed.value.code is ErrorCode.AUTHENTICATION_FAILED
    assert len(acknowledged) == 20  # nothing sent after the leader saw the removal was acknowledged
    assert table_values(cluster, table) == acknowledged  # ... nor written
    assert closed_lines(cluster, "ProduceLogStream", user)


def test_an_acl_removed_under_a_produce_stream_refuses_its_next_message_and_the_stream_goes_on(
    cluster: LocalCluster,
) -> None:
    """Kafka's answer to a produce whose ACL went away: the request fails (AUTHORIZATION_FAILED), the
    connection stays; once the ACL is back the same stream writes again."""
    user, password = "acl-writer", "acl-secret-1"
    tb, leader = new_table(cluster, "acl_removed")
    table = f"{DATABASE}.acl_removed"
    acls = new_user(cluster, user, password, table, Operation.WRITE, Operation.DESCRIBE)
    write = [a for a in acls if a.operation is Operation.WRITE]
    assert cluster.security is not None
    security = cluster.security

    async def answer(stream: Any, correlation_id: int, value: bytes) -> tablet_pb2.ProduceLogResponse:
        await stream.write(produce_message(tb, correlation_id, [value]))
        return await stream.read()

    async def scenario() -> list[tablet_pb2.ProduceLogResponse]:
        async with channel(cluster, leader) as ch:
            stream = tablet_pb2_grpc.TabletServiceStub(ch).ProduceLogStream(
                metadata=identity_as(cluster, user, password).metadata()
            )
            answers = [await answer(stream, 1, b"allowed")]
            await asyncio.to_thread(
                with_zookeeper, security, cluster.zookeeper_address, cluster.zk_root,
                lambda zk, root: remove_acls(zk, root, write),
            )  # fmt: skip
            n = 2
            while (refused := await answer(stream, n, b"refused")).error.code == 0:  # the watch's round trip
                answers.append(refused)
                n += 1
                await asyncio.sleep(0.05)
            answers.append(refused)
            await asyncio.to_thread(
                with_zookeeper, security, cluster.zookeeper_address, cluster.zk_root,
                lambda zk, root: add_acls(zk, root, write),
            )  # fmt: skip
            while (again := await answer(stream, n + 1, b"allowed-again")).error.code != 0:
                n += 1
                await asyncio.sleep(0.05)
            answers.append(again)
            await stream.done_writing()
            return answers

    answers = asyncio.run(scenario())
    refused = [a for a in answers if a.error.code != 0]
    assert len(refused) == 1 and refused[0].error.code == ErrorCode.AUTHORIZATION_FAILED
    assert f"{user} may not WRITE table {table}" in refused[0].error.message
    assert answers[-1].error.code == 0  # the same stream, written again
    values = table_values(cluster, table)
    assert b"allowed" in values and b"allowed-again" in values
    assert values.count(b"refused") == len(answers) - 3  # only those acknowledged before the watch fired
    assert not closed_lines(cluster, "ProduceLogStream", user)


# ---------------------------------------------------------------- consumer fetch streams
def test_the_fetch_stream_of_a_removed_consumer_is_closed(cluster: LocalCluster) -> None:
    """A consumer's ConsumerFetchStream: records written after its user was removed are never returned on
    it. Fails before streams were re-checked: the second fetch returned them."""
    user, password = "removed-reader", "reader-secret-1"
    tb, leader = new_table(cluster, "fetched")
    table = f"{DATABASE}.fetched"
    new_user(cluster, user, password, table, Operation.READ, Operation.DESCRIBE)
    identity = identity_as(cluster, user, password)
    produce_as_admin(cluster, table, b"before")

    async def scenario() -> tuple[tablet_pb2.FetchLogResponse, grpc.aio.AioRpcError]:
        async with channel(cluster, leader) as ch:
            stream = tablet_pb2_grpc.TabletServiceStub(ch).ConsumerFetchStream(metadata=identity.metadata())
            await stream.write(fetch_message(tb, 0))
            first = await stream.read()
            await asyncio.to_thread(fluss_py, cluster, "user", "remove", user)
            await asyncio.to_thread(wait_refused, cluster, leader, identity, table)
            await asyncio.to_thread(produce_as_admin, cluster, table, b"after")
            await stream.write(fetch_message(tb, 0))
            with pytest.raises(grpc.aio.AioRpcError) as ended:
                answer = await stream.read()
                raise AssertionError(f"the fetch after the removal was answered: {answer}")
            return first, ended.value

    first, ended = asyncio.run(scenario())
    assert first.error.code == 0 and first.buckets[0].error.code == 0 and first.buckets[0].records
    assert ended.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "was removed or its password changed" in (ended.details() or "")
    assert table_values(cluster, table) == [b"before", b"after"]  # "after" was there to be read
    assert closed_lines(cluster, "ConsumerFetchStream", user)


# ---------------------------------------------------------------- certificates that stop being valid
def test_the_liveness_stream_of_an_expired_certificate_is_closed(cluster: LocalCluster, tmp_path: Path) -> None:
    """A WatchLiveness stream opened with a server certificate (CN fluss-server, naming coordinator 1) that
    expires a few seconds later: heartbeats until then, then the stream is closed naming the expiry, though
    the connection was verified while the certificate was valid. Fails before streams were re-checked: the
    heartbeats went on."""
    assert cluster.security is not None
    not_after = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=4)
    cert = cluster.security.ca.issue(
        tmp_path / "short", "fluss-server", uris=["fluss://coordinator/1"], not_after=not_after
    )
    creds = grpc.ssl_channel_credentials(
        cluster.security.ca.cert_file.read_bytes(), cert.key_file.read_bytes(), cert.cert_file.read_bytes()
    )
    server = cluster.names(TABLET_SERVER)[0]
    request = tablet_pb2.WatchLivenessRequest(coordinator_id=1, coordinator_epoch=1, interval_ms=100)

    async def watch() -> tuple[list[float], grpc.aio.AioRpcError | None]:
        beats: list[float] = []
        async with grpc.aio.secure_channel(cluster.get(server).rpc_address, creds) as ch:
            call = tablet_pb2_grpc.TabletServiceStub(ch).WatchLiveness(request)
            try:
                async with asyncio.timeout((not_after - dt.datetime.now(dt.UTC)).total_seconds() + 10):
                    async for _ in call:
                        beats.append(time.time())
            except grpc.aio.AioRpcError as e:
                return beats, e
            except TimeoutError:
                call.cancel()
        return beats, None

    beats, ended = asyncio.run(watch())
    expiry = not_after.timestamp()
    assert ended is not None, f"{len(beats)} heartbeats, the last {beats[-1] - expiry:.1f} s after the expiry"
    assert ended.code() is grpc.StatusCode.UNAUTHENTICATED
    assert "expired at" in (ended.details() or "")
    assert beats and beats[0] < expiry  # it heartbeat while the certificate was valid ...
    assert beats[-1] < expiry + 1.0  # ... and not after (one heartbeat interval of slack)
    assert "CLOSED stream=WatchLiveness principal=fluss-server" in cluster.log_text(server)


# ---------------------------------------------------------------- the console's event stream (HTTP)
def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


class EventReader:
    """``/console/events`` of the coordinator, read in a thread: every event as (name, data) in arrival
    order, until the server ends the stream or ``stop``. ``headers``: Basic credentials; ``context``: the TLS
    client (default: the cluster's client certificate)."""

    def __init__(self, cluster: LocalCluster, headers: dict[str, str], context: Any = None) -> None:
        url = cluster.get(cluster.names(COORDINATOR)[0]).http_url + "/console/events"
        request = urllib.request.Request(url, headers=headers)
        self._response = urllib.request.urlopen(request, timeout=30, context=context or cluster.http_context())
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.ended = threading.Event()  # the server ended the stream
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        name = ""
        try:
            for raw in self._response:  # a sample a second: ``stop`` is seen within about one
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line.removeprefix("event: ")
                elif line.startswith("data: "):
                    self.events.append((name, json.loads(line.removeprefix("data: "))))
                if self._stop.is_set():
                    return
            self.ended.set()
        except Exception as e:  # reported by the test
            self.error = e
        finally:
            self._response.close()

    def samples(self) -> list[dict[str, Any]]:
        """The ``snapshot`` events of samples (not the empty document of a coordinator that took none yet)."""
        return [data for name, data in list(self.events) if name == "snapshot" and "ts" in data]

    def shows(self, table: str, after: float = 0.0) -> bool:
        """A sample taken after ``after`` (the coordinator's clock, this host's) names ``table``."""
        return any(s["ts"] > after and table in {t["name"] for t in s.get("tables", [])} for s in self.samples())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def __enter__(self) -> EventReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def events_status(cluster: LocalCluster, headers: dict[str, str]) -> int:
    """The status a new ``/console/events`` request as ``headers`` is answered with."""
    try:
        reader = EventReader(cluster, headers)
    except urllib.error.HTTPError as e:
        return e.code
    reader.stop()
    return 200


def coordinator_log(cluster: LocalCluster) -> str:
    return "".join(cluster.log_text(n) for n in cluster.names(COORDINATOR))


@pytest.mark.parametrize("change", ["removed", "new password"])
def test_the_console_event_stream_of_a_removed_or_changed_user_ends_with_the_reason(
    cluster: LocalCluster, change: str
) -> None:
    """Two users with DESCRIBE on a table watch the console; one is removed or gets a new password. Once the
    coordinator refuses that user's unary calls, no sample reaches its stream: the stream ends with a
    ``closed`` event naming why, while the other user's stream goes on showing the table. Fails before
    event streams were re-checked: samples went on arriving for as long as the stream stayed open."""
    suffix = change.replace(" ", "_")
    user, password = f"viewer_{suffix}", "viewer-secret-1"
    other, other_password = f"watcher_{suffix}", "watcher-secret-1"
    table = f"{DATABASE}.watched_{suffix}"
    new_table(cluster, f"watched_{suffix}")
    new_user(cluster, user, password, table, Operation.DESCRIBE)
    new_user(cluster, other, other_password, table, Operation.DESCRIBE)
    identity = identity_as(cluster, user, password)
    coordinator = cluster.get(cluster.names(COORDINATOR)[0]).rpc_address

    with (
        EventReader(cluster, basic(user, password)) as mine,
        EventReader(cluster, basic(other, other_password)) as theirs,
    ):
        wait_until(lambda: mine.shows(table) and theirs.shows(table), 30, message="both streams show the table")
        if change == "removed":
            fluss_py(cluster, "user", "remove", user)
        else:
            fluss_py(cluster, "user", "add", user, FLUSS_NEW_PASSWORD="viewer-secret-2")
        wait_refused(cluster, coordinator, identity, table)
        effective = time.time()  # the coordinator's watch delivered the change before this
        ended = mine.ended.wait(20)
        late = [s["ts"] - effective for s in mine.samples() if s["ts"] > effective]
        assert ended, f"{change}: the stream goes on, {len(late)} samples taken after the change arrived: {late}"
        wait_until(lambda: theirs.shows(table, after=effective), 20, message="the other user's stream goes on")

    assert mine.error is None and theirs.error is None, (mine.error, theirs.error)
    assert not late  # no sample taken once the change was effective reached the stream
    name, data = mine.events[-1]
    assert name == "closed" and f"user '{user}' was removed or its password changed" in data["reason"], data
    assert sum(n == "closed" for n, _ in mine.events) == 1 and not theirs.ended.is_set()
    assert f"CLOSED stream=/console/events principal={user}:" in coordinator_log(cluster)
    assert events_status(cluster, basic(user, password)) == 401  # the old credentials open nothing
    if change == "new password":
        with EventReader(cluster, basic(user, "viewer-secret-2")) as again:
            wait_until(lambda: again.shows(table), 30, message="a new stream with the new password")


def test_the_console_event_stream_of_an_expired_client_certificate_ends_at_its_expiry(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """A console opened with a client certificate only (its CN the principal, allowed DESCRIBE on a table)
    that expires a few seconds later: samples showing the table until then, then a ``closed`` event naming
    the expiry, though the connection was verified while the certificate was valid. Fails before event
    streams were re-checked: samples went on."""
    assert cluster.security is not None
    ca, principal, table = cluster.security.ca, "short-lived-viewer", f"{DATABASE}.watched_cert"
    new_table(cluster, "watched_cert")
    acl = Acl(principal, ResourceType.TABLE, PatternType.LITERAL, table, Operation.DESCRIBE, Permission.ALLOW)
    with_zookeeper(cluster.security, cluster.zookeeper_address, cluster.zk_root, lambda zk, r: add_acls(zk, r, [acl]))

    def context(cert: Any) -> Any:
        return client_ssl_context(TlsFiles(str(ca.cert_file), str(cert.cert_file), str(cert.key_file)))

    with EventReader(cluster, {}, context(ca.issue(tmp_path / "lasting", principal))) as lasting:
        wait_until(lambda: lasting.shows(table), 30, message="the ACL reached the coordinator")
    not_after = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=6)
    expiry = not_after.timestamp()
    with EventReader(cluster, {}, context(ca.issue(tmp_path / "short", principal, not_after=not_after))) as reader:
        assert reader.ended.wait(expiry - time.time() + 20), f"{len(reader.samples())} samples and no end"
    assert reader.error is None, reader.error
    samples = reader.samples()
    assert reader.shows(table)  # it watched while the certificate was valid
    assert max(s["ts"] for s in samples) < expiry + 1.0  # ... and not after (one sample interval of slack)
    name, data = reader.events[-1]
    assert name == "closed" and f"(CN={principal}) expired at" in data["reason"], data
    assert f"CLOSED stream=/console/events principal={principal}:" in coordinator_log(cluster)
