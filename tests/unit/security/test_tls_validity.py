"""A process's own certificate outside its validity window is named (security/tls.validity_problem): a
server that refuses it only closes the connection, so the client looks at its own certificate."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from fluss_py.security.certs import CertificateAuthority
from fluss_py.security.tls import TlsFiles, validity_problem

pytestmark = pytest.mark.unit

NOW = dt.datetime(2030, 6, 1, tzinfo=dt.UTC)


def issued(tmp_path: Path, name: str, not_before: dt.datetime, not_after: dt.datetime) -> TlsFiles:
    ca = CertificateAuthority.create(tmp_path / "ca")
    cert = ca.issue(tmp_path / name, "fluss-client", not_before=not_before, not_after=not_after)
    return TlsFiles(str(ca.cert_file), str(cert.cert_file), str(cert.key_file))


def test_expired_not_yet_valid_and_valid(tmp_path: Path) -> None:
    day = dt.timedelta(days=1)
    files = issued(tmp_path, "client", NOW - 10 * day, NOW + 10 * day)
    assert validity_problem(files, NOW) is None
    expired = validity_problem(files, NOW + 11 * day)
    assert expired is not None and "expired at 2030-06-11" in expired and files.cert_file in expired
    early = validity_problem(files, NOW - 11 * day)
    assert early is not None and "not valid before 2030-05-22" in early


def test_no_certificate_or_an_unreadable_one_is_not_a_validity_problem(tmp_path: Path) -> None:
    assert validity_problem(TlsFiles(str(tmp_path / "ca.pem")), NOW) is None
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate")
    assert validity_problem(TlsFiles(str(tmp_path / "ca.pem"), str(garbage), str(garbage)), NOW) is None
