"""A server refusing the client's TLS credentials is AUTHENTICATION_FAILED at once, with the reason
(docs/security.md §1); a server that only went away stays a retriable network error.

One secure cluster (mutual TLS, 1 coordinator, 1 tablet server). The gRPC server refusing a client
certificate sends no alert, it closes the connection: the client probes once more and names what it
presents (``security/tls_refusal.py``). Before this, the CLI retried until its connect timeout and said
"cannot reach the cluster".
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from fluss_py.client import Admin
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.security.certs import CertificateAuthority
from fluss_py.security.identity import PeerIdentity
from fluss_py.security.tls import TlsFiles
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.fixtures import secure_module_cluster
from fluss_py.testing.procs import wait_until
from fluss_py.zk.paths import DatabaseZNode

pytestmark = pytest.mark.integration

FLUSS_PY = str(Path(sys.executable).parent / "fluss-py")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zookeeper) -> Iterator[LocalCluster]:
    cluster = secure_module_cluster(tmp_path_factory.mktemp("tls-refusal"), zookeeper.address, "/fluss-tls-refusal", 1)
    try:
        cluster.start(timeout=90)
        yield cluster
    finally:
        cluster.close(grace=3.0)


def bootstrap(cluster: LocalCluster) -> str:
    return ",".join(cluster.get(n).rpc_address for n in cluster.names())


def admin_password(cluster: LocalCluster) -> str:
    return cluster.client_config()["security.password"]


def create_database(identity: PeerIdentity, servers: str, name: str) -> FlussError:
    async def run() -> FlussError:
        async with Admin(servers, security=identity, request_timeout=5.0) as admin:
            try:
                await admin.create_database(name)
            except FlussError as e:
                return e
        raise AssertionError("the call succeeded")

    return asyncio.run(run())


def test_a_client_certificate_of_another_ca_is_authentication_failed_at_once(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    """The issue's case, through the CLI: before, "cannot reach the cluster: no server ... answered within
    30 s" after retrying for the whole connect timeout."""
    assert cluster.security is not None
    rogue = CertificateAuthority.create(tmp_path / "rogue-ca")
    cert = rogue.issue(tmp_path / "rogue-client", "fluss-client")
    properties = tmp_path / "rogue.properties"
    properties.write_text(
        "security.tls.enabled=true\n"
        f"security.tls.ca-file={cluster.security.ca.cert_file}\n"
        f"security.tls.cert-file={cert.cert_file}\nsecurity.tls.key-file={cert.key_file}\n"
        f"security.user=admin\nsecurity.password={admin_password(cluster)}\n"
    )
    os.chmod(properties, 0o600)
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLUSS_")}
    argv = ["table", "list", "--bootstrap-servers", bootstrap(cluster), "--command-config", str(properties)]
    started = time.monotonic()
    done = subprocess.run(
        [FLUSS_PY, *argv, "--connect-timeout", "30"],
        capture_output=True,
        text=True,
        timeout=90,
        env=environ,
        check=False,
    )
    took = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr
    assert "AUTHENTICATION_FAILED" in done.stderr and "cannot reach the cluster" not in done.stderr
    assert f"{cert.cert_file} (CN=fluss-client) is issued by CN=fluss-py local CA, which is not a CA of" in done.stderr
    assert took < 20, f"{took:.1f} s: the command retried instead of failing at once"
    logs = "".join(Path(cluster.get(n).stdout_file).read_text() for n in cluster.names())
    assert "Handshake failed" in logs  # the server's gRPC names its reason in its own log


def test_a_client_without_a_certificate_is_told_the_server_requires_one(cluster: LocalCluster) -> None:
    assert cluster.security is not None
    identity = PeerIdentity(TlsFiles(str(cluster.security.ca.cert_file)), "admin", admin_password(cluster))
    error = create_database(identity, bootstrap(cluster), "uncertified_db")
    assert error.code is ErrorCode.AUTHENTICATION_FAILED
    assert "this client presents no certificate and the server requires one" in error.message
    assert not zk_exists(cluster, DatabaseZNode.path(cluster.zk_root, "uncertified_db"))


def test_a_server_closing_connections_without_a_verdict_stays_a_network_error(cluster: LocalCluster) -> None:
    """A listener that accepts and closes at once (a server dying mid-handshake looks like this): gRPC says
    the socket closed, the probe's handshake is cut short too, so no refusal is claimed: the client keeps
    trying until its timeout (REQUEST_TIMED_OUT / NETWORK_EXCEPTION), as it would for any unreachable server."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    accepted: list[int] = []
    stop = threading.Event()

    def close_everything() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            accepted.append(1)
            conn.close()

    closer = threading.Thread(target=close_everything, daemon=True)
    closer.start()
    try:
        address = f"127.0.0.1:{listener.getsockname()[1]}"
        error = create_database(cluster.client_identity(), address, "never_db")
    finally:
        stop.set()
        closer.join(5)
        listener.close()
    assert error.code is not ErrorCode.AUTHENTICATION_FAILED, error
    assert error.code in (ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert len(accepted) >= 2  # it was reached (and probed), again and again


def zk_exists(cluster: LocalCluster, path: str) -> bool:
    zk = KazooClient(hosts=cluster.zookeeper_address)
    zk.start(timeout=10)
    try:
        return zk.exists(path) is not None
    finally:
        zk.stop()
        zk.close()


def test_the_cluster_still_serves_its_own_clients(cluster: LocalCluster) -> None:
    """The probes above left nothing behind: the cluster's client creates a database."""

    async def run() -> None:
        async with Admin(bootstrap(cluster), security=cluster.client_identity()) as admin:
            await admin.create_database("served_db")

    asyncio.run(run())
    wait_until(lambda: zk_exists(cluster, DatabaseZNode.path(cluster.zk_root, "served_db")), 10, message="created")
