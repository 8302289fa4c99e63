"""What the client says when a server closed its connection after the TLS handshake (``tls_refusal``), and
which gRPC failures are worth asking about at all (``transport._closed_by_peer``). Files only; no sockets."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.client.transport import _closed_by_peer
from fluss_py.security.certs import CertificateAuthority
from fluss_py.security.tls import TlsFiles
from fluss_py.security.tls_refusal import _why_closed

pytestmark = pytest.mark.unit


def test_the_reason_names_what_the_client_presents(tmp_path: Path) -> None:
    ours = CertificateAuthority.create(tmp_path / "ca", name="cluster CA")
    other = CertificateAuthority.create(tmp_path / "other", name="other CA")
    good = ours.issue(tmp_path / "good", "fluss-client")
    foreign = other.issue(tmp_path / "foreign", "fluss-client")
    ca = str(ours.cert_file)

    none = _why_closed(TlsFiles(ca))
    assert "this client presents no certificate and the server requires one" in none
    alien = _why_closed(TlsFiles(ca, str(foreign.cert_file), str(foreign.key_file)))
    assert f"{foreign.cert_file} (CN=fluss-client) is issued by CN=other CA, which is not a CA of {ca}" in alien
    refused = _why_closed(TlsFiles(ca, str(good.cert_file), str(good.key_file)))
    assert f"does not accept the certificate {good.cert_file} (CN=fluss-client, issued by CN=cluster CA)" in refused


@pytest.mark.parametrize(
    ("details", "closed"),
    [
        ("failed to connect to all addresses; last error: UNAVAILABLE: ipv4:127.0.0.1:1: Socket closed", True),
        ("UNAVAILABLE: ipv4:127.0.0.1:1: Secure read failed (Socket closed)", True),
        ("Connection reset by peer", True),
        ("Handshake read failed", True),
        (
            "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:1: connect: Connection refused",
            False,
        ),
        ("Deadline Exceeded", False),
        ("DNS resolution failed for nowhere:1", False),
        (None, False),
    ],
)
def test_only_a_connection_the_server_closed_is_probed(details: str | None, closed: bool) -> None:
    assert _closed_by_peer(details) is closed
