"""A small certificate authority for local secure clusters and tests (the ``cryptography`` package).

    ca = CertificateAuthority.create(directory / "ca")                 ca.pem + ca-key.pem
    ca.issue(directory / "ts-1", "fluss-server", hosts=["127.0.0.1", "localhost"],
             uris=["fluss://tablet-server/1"])                       ts-1.pem + ts-1-key.pem

EC P-256 keys, SHA-256 signatures; a server certificate names its hosts as subject alternative names (IP
addresses as IP SANs) and, for a server of the cluster, the URI naming which server it is
(``security/server_names.py``). ``not_before`` / ``not_after`` may be set to make expired or not-yet-valid
certificates for tests. Private keys are written with mode 0600. Not for production PKI: a real
deployment brings its own CA (docs/security.md).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DAY = dt.timedelta(days=1)


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _san(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


@dataclass(frozen=True, slots=True)
class IssuedFiles:
    cert_file: Path
    key_file: Path


@dataclass
class CertificateAuthority:
    """Owns a CA key and certificate on disk; ``issue`` signs leaf certificates with them."""

    cert_file: Path
    key_file: Path

    @classmethod
    def create(cls, prefix: Path, name: str = "fluss-py local CA", days: int = 3650) -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = dt.datetime.now(dt.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - DAY)
            .not_valid_after(now + days * DAY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .sign(key, hashes.SHA256())
        )
        prefix.parent.mkdir(parents=True, exist_ok=True)
        ca = cls(prefix.with_name(prefix.name + ".pem"), prefix.with_name(prefix.name + "-key.pem"))
        ca.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        _write_key(ca.key_file, key)
        return ca

    def issue(
        self,
        prefix: Path,
        common_name: str,
        *,
        hosts: Sequence[str] = (),
        uris: Sequence[str] = (),
        not_before: dt.datetime | None = None,
        not_after: dt.datetime | None = None,
    ) -> IssuedFiles:
        """Sign a certificate for ``common_name`` (client and server use) valid for ``hosts``, naming ``uris``
        (URI SANs: ``fluss://tablet-server/<id>`` for a server of the cluster)."""
        ca_key = serialization.load_pem_private_key(self.key_file.read_bytes(), None)
        ca_cert = x509.load_pem_x509_certificate(self.cert_file.read_bytes())
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - DAY)
            .not_valid_after(not_after or now + 825 * DAY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        names = [_san(h) for h in hosts] + [x509.UniformResourceIdentifier(u) for u in uris]
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())  # type: ignore[arg-type]
        prefix.parent.mkdir(parents=True, exist_ok=True)
        files = IssuedFiles(prefix.with_name(prefix.name + ".pem"), prefix.with_name(prefix.name + "-key.pem"))
        _write_key(files.key_file, key)
        files.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return files
