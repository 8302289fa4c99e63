"""Which server a certificate names (security/server_names.py); a real certificate read back through SANs."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography import x509

from fluss_py.security.certs import CertificateAuthority
from fluss_py.security.server_names import (
    COORDINATOR,
    TABLET_SERVER,
    ServerName,
    certificate_refusal,
    named_server,
    parse_server_uri,
    server_uri,
)


class Context:
    def __init__(self, *uris: str) -> None:
        self._auth = {"peer_uri": [u.encode() for u in uris]} if uris else {}

    def auth_context(self):
        return self._auth


def test_uri_round_trip():
    assert server_uri(TABLET_SERVER, 2) == "fluss://tablet-server/2"
    assert parse_server_uri("fluss://coordinator/10") == ServerName(COORDINATOR, 10)
    with pytest.raises(ValueError):
        server_uri("client", 1)
    with pytest.raises(ValueError):
        server_uri(TABLET_SERVER, -1)


@pytest.mark.parametrize(
    "text",
    ["https://tablet-server/2", "fluss://tablet-server/", "fluss://tablet-server/-1", "fluss://tablet-server/02",
     "fluss://tablet-server/2/x", "fluss://broker/2", "fluss://tablet-server/\u0661", "fluss://tablet-server/99999999999"],
)  # fmt: skip
def test_anything_else_names_no_server(text):
    assert parse_server_uri(text) is None


def test_a_certificate_names_one_server_or_none():
    assert named_server(["https://x", "fluss://tablet-server/3"]) == ServerName(TABLET_SERVER, 3)
    assert named_server(["fluss://tablet-server/3", "fluss://tablet-server/3"]) == ServerName(TABLET_SERVER, 3)
    assert named_server(["fluss://tablet-server/3", "fluss://tablet-server/4"]) is None  # could be either
    assert named_server([]) is None


def test_certificate_refusal_says_why():
    assert certificate_refusal(Context("fluss://coordinator/1"), COORDINATOR, 1) is None
    assert certificate_refusal(Context("fluss://tablet-server/1"), COORDINATOR, 1) == (
        "the peer certificate names fluss://tablet-server/1, not fluss://coordinator/1"
    )
    assert certificate_refusal(Context(), TABLET_SERVER, 1) == (
        "the peer certificate names no server (expected fluss://tablet-server/1)"
    )
    assert certificate_refusal(None, TABLET_SERVER, 1) is not None


def test_issued_server_certificate_carries_the_uri(tmp_path: Path):
    ca = CertificateAuthority.create(tmp_path / "ca")
    files = ca.issue(tmp_path / "ts", "fluss-server", hosts=["127.0.0.1"], uris=[server_uri(TABLET_SERVER, 7)])
    cert = x509.load_pem_x509_certificate(files.cert_file.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.UniformResourceIdentifier) == ["fluss://tablet-server/7"]
    assert cert.subject.get_attributes_for_oid(x509.oid.NameOID.COMMON_NAME)[0].value == "fluss-server"
