"""``security.tls.server-name`` is checked by the CLI's HTTPS calls, against a real HTTPS server on loopback.

``fluss-py config describe`` sends ``Authorization: Basic user:password``; a server presenting a certificate
of the cluster's CA that does not carry the configured name (here a client certificate naming no host, and a
server certificate naming only the host dialled) must be refused before any request is sent, so it never sees
the password. The same command against a certificate carrying the name works.
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from fluss_py.security.certs import CertificateAuthority, IssuedFiles

pytestmark = pytest.mark.integration

FLUSS_PY = str(Path(sys.executable).parent / "fluss-py")
NAME = "coordinator.fluss.example"
PASSWORD = "https-name-secret-7"


@contextmanager
def https_server(cert: IssuedFiles) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """(address, headers of every request received) of an HTTPS server presenting ``cert``, answering
    ``{"dynamic": {}}`` to any GET."""
    received: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            received.append(dict(self.headers))
            body = json.dumps({"dynamic": {}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args: object) -> None:
            pass

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert.cert_file, cert.key_file)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def describe(address: str, ca: CertificateAuthority, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    props = tmp_path / "client.properties"
    props.write_text(
        f"security.tls.enabled=true\nsecurity.tls.ca-file={ca.cert_file}\nsecurity.tls.server-name={NAME}\n"
        f"security.user=admin\nsecurity.password={PASSWORD}\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLUSS_")}
    argv = [FLUSS_PY, "config", "describe", "--entity", "cluster", "--coordinator-http", address]
    return subprocess.run([*argv, "--command-config", str(props)], capture_output=True, text=True, timeout=60,
                          env=env, check=False)  # fmt: skip


@pytest.mark.parametrize("impostor", ["client certificate", "host dialled only"])
def test_a_server_without_the_configured_name_never_sees_the_password(tmp_path: Path, impostor: str) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca")
    hosts = ["127.0.0.1"] if impostor == "host dialled only" else []
    cert = ca.issue(tmp_path / "impostor", "fluss-client", hosts=hosts)
    with https_server(cert) as (address, received):
        done = describe(address, ca, tmp_path)
    assert received == [], f"the impostor received a request: {received}"
    assert done.returncode != 0, done.stdout
    assert PASSWORD not in done.stdout + done.stderr


def test_a_server_with_the_configured_name_answers(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca")
    cert = ca.issue(tmp_path / "server", "fluss-server", hosts=[NAME])
    with https_server(cert) as (address, received):
        done = describe(address, ca, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Dynamic configuration of cluster" in done.stdout
    assert [h.get("Authorization", "").startswith("Basic ") for h in received] == [True]
