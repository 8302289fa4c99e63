"""HTTPS in memory (``ssl.MemoryBIO``, the path asyncio takes): both ends of a handshake are checked.

Clients check the server's name (security/tls.client_ssl_context): the host dialled, or
``security.tls.server-name`` when set. A certificate of the cluster's CA that names neither (a client's
certificate, another service's) is refused, so it cannot collect the Basic credentials the CLI sends next;
``tests/integration/test_https_server_name.py`` runs the CLI against a real server on loopback (urllib).

Servers (``ServerTls.http_context``) with ``security.tls.client-auth`` on refuse an HTTPS client without a
CA-signed certificate, as their gRPC port does; with it off they ask for one but need none."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from fluss_py.security.certs import CertificateAuthority, IssuedFiles
from fluss_py.security.tls import ServerTls, TlsFiles, client_ssl_context

pytestmark = pytest.mark.unit

NAME = "coordinator.fluss.example"


def handshake(client: ssl.SSLContext, server: ssl.SSLContext, dialled: str) -> ssl.SSLError | None:
    """One TLS handshake between ``client`` (dialling ``dialled``) and ``server``, in memory. Raises what the
    client's side raises; returns what the server's side raised (None: both ends accepted)."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_hostname=dialled)
    s = server.wrap_bio(s_in, s_out, server_side=True)
    client_done, server_done, server_error = False, False, None
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
            except ssl.SSLError as e:  # refused the client (or the client's alert): the end of the exchange
                server_done, server_error = True, e
        c_in.write(s_out.read())
        if client_done and server_done:
            return server_error
    raise AssertionError("the in-memory handshake did not finish")


def server_context(cert: IssuedFiles) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert.cert_file, cert.key_file)
    return context


@pytest.fixture
def ca(tmp_path: Path) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path / "ca")


def test_a_certificate_without_the_server_name_is_refused(ca: CertificateAuthority, tmp_path: Path) -> None:
    impostor = ca.issue(tmp_path / "client", "fluss-client")  # CA-signed, naming no host at all
    loopback = ca.issue(tmp_path / "loopback", "fluss-server", hosts=["127.0.0.1"])  # the host dialled only
    context = client_ssl_context(TlsFiles(str(ca.cert_file), server_name=NAME))
    for cert in (impostor, loopback):
        with pytest.raises(ssl.SSLCertVerificationError, match=NAME):
            handshake(context, server_context(cert), "127.0.0.1")


def test_a_certificate_with_the_server_name_is_accepted(ca: CertificateAuthority, tmp_path: Path) -> None:
    server = ca.issue(tmp_path / "server", "fluss-server", hosts=[NAME])
    assert handshake(client_ssl_context(TlsFiles(str(ca.cert_file), server_name=NAME)), server_context(server),
                     "127.0.0.1") is None  # fmt: skip


def test_without_a_server_name_the_host_dialled_is_checked(ca: CertificateAuthority, tmp_path: Path) -> None:
    server = ca.issue(tmp_path / "server", "fluss-server", hosts=["127.0.0.1", "localhost"])
    impostor = ca.issue(tmp_path / "client", "fluss-client")
    context = client_ssl_context(TlsFiles(str(ca.cert_file)))
    assert context.check_hostname and context.verify_mode == ssl.CERT_REQUIRED
    assert handshake(context, server_context(server), "localhost") is None
    with pytest.raises(ssl.SSLCertVerificationError):
        handshake(context, server_context(impostor), "127.0.0.1")


def _server_tls(ca: CertificateAuthority, tmp_path: Path, *, require_client_cert: bool) -> ServerTls:
    cert = ca.issue(tmp_path / "coordinator", "fluss-server", hosts=["localhost"])
    return ServerTls(TlsFiles(str(ca.cert_file), str(cert.cert_file), str(cert.key_file)),
                     require_client_cert=require_client_cert)  # fmt: skip


def test_with_client_auth_the_http_port_refuses_a_client_without_a_certificate(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    server = _server_tls(ca, tmp_path, require_client_cert=True)
    anonymous = client_ssl_context(TlsFiles(str(ca.cert_file)))
    refused = handshake(anonymous, server.http_context(), "localhost")
    assert refused is not None and "CERTIFICATE" in str(refused).upper(), refused
    client = ca.issue(tmp_path / "client", "fluss-client")
    with_cert = client_ssl_context(TlsFiles(str(ca.cert_file), str(client.cert_file), str(client.key_file)))
    assert handshake(with_cert, server.http_context(), "localhost") is None
    other_ca = CertificateAuthority.create(tmp_path / "other-ca")
    stranger = other_ca.issue(tmp_path / "stranger", "fluss-client")
    foreign = client_ssl_context(TlsFiles(str(ca.cert_file), str(stranger.cert_file), str(stranger.key_file)))
    assert handshake(foreign, server.http_context(), "localhost") is not None


def test_a_reloaded_http_certificate_still_requires_a_client_certificate(
    ca: CertificateAuthority, tmp_path: Path
) -> None:
    server = _server_tls(ca, tmp_path, require_client_cert=True)
    context = server.http_context()
    server.request_reload()  # the next handshake swaps in a fresh context (the SNI hook)
    anonymous = client_ssl_context(TlsFiles(str(ca.cert_file)))
    assert handshake(anonymous, context, "localhost") is not None
    assert server.reloads == 1


def test_without_client_auth_the_http_port_needs_no_certificate(ca: CertificateAuthority, tmp_path: Path) -> None:
    server = _server_tls(ca, tmp_path, require_client_cert=False)
    assert handshake(client_ssl_context(TlsFiles(str(ca.cert_file))), server.http_context(), "localhost") is None
