"""HTTPS clients check the server's name (security/tls.client_ssl_context): the host dialled, or
``security.tls.server-name`` when set. A certificate of the cluster's CA that names neither (a client's
certificate, another service's) is refused, so it cannot collect the Basic credentials the CLI sends next.

The handshakes run in memory (``ssl.MemoryBIO``, the path asyncio takes); the integration test
``test_https_server_name`` runs the CLI against a real server on loopback (the urllib path)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from fluss_py.security.certs import CertificateAuthority
from fluss_py.security.tls import TlsFiles, client_ssl_context

pytestmark = pytest.mark.unit

NAME = "coordinator.fluss.example"


def handshake(client: ssl.SSLContext, cert: Path, key: Path, dialled: str) -> None:
    """One TLS handshake between ``client`` (dialling ``dialled``) and a server presenting ``cert``, in
    memory; raises what the client's handshake raises."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert, key)
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_hostname=dialled)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    client_done = server_done = False
    for _ in range(20):
        if not client_done:
            try:
                c.do_handshake()
                client_done = True
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        if not server_done:
            try:
                s.do_handshake()
                server_done = True
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError:
                pass  # the client gave up (its alert): the client's own error is what the test looks at
        c_in.write(s_out.read())
        if client_done and server_done:
            return
    raise AssertionError("the in-memory handshake did not finish")


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path / "ca")


def test_a_certificate_without_the_server_name_is_refused(ca: CertificateAuthority, tmp_path: Path) -> None:
    impostor = ca.issue(tmp_path / "client", "fluss-client")  # CA-signed, naming no host at all
    loopback = ca.issue(tmp_path / "loopback", "fluss-server", hosts=["127.0.0.1"])  # the host dialled only
    context = client_ssl_context(TlsFiles(str(ca.cert_file), server_name=NAME))
    for cert in (impostor, loopback):
        with pytest.raises(ssl.SSLCertVerificationError, match=NAME):
            handshake(context, cert.cert_file, cert.key_file, "127.0.0.1")


def test_a_certificate_with_the_server_name_is_accepted(ca: CertificateAuthority, tmp_path: Path) -> None:
    server = ca.issue(tmp_path / "server", "fluss-server", hosts=[NAME])
    handshake(client_ssl_context(TlsFiles(str(ca.cert_file), server_name=NAME)), server.cert_file, server.key_file,
              "127.0.0.1")  # fmt: skip


def test_without_a_server_name_the_host_dialled_is_checked(ca: CertificateAuthority, tmp_path: Path) -> None:
    server = ca.issue(tmp_path / "server", "fluss-server", hosts=["127.0.0.1", "localhost"])
    impostor = ca.issue(tmp_path / "client", "fluss-client")
    context = client_ssl_context(TlsFiles(str(ca.cert_file)))
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    handshake(context, server.cert_file, server.key_file, "localhost")
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(context, impostor.cert_file, impostor.key_file, "127.0.0.1")
