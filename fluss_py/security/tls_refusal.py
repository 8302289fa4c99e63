"""Did the server refuse this client's TLS credentials? Asked by the client after a connection failed.

A gRPC server that does not accept a client's certificate (from another CA, expired, none at all when
client certificates are required) sends no alert: with TLS 1.3 the client's side of the handshake is
already complete, and the server just closes the connection. gRPC tells the client "Socket closed", as it
does for a server that died. ``handshake_refusal`` tells the two apart with one more connection, made with
the same TLS files and checked as gRPC checks it::

    own certificate outside its validity dates                  -> refused: its dates (no connection made)
    connect refused / reset / timed out, EOF inside the handshake -> None: not a verdict (down, unreachable)
    our side refuses the server's certificate                    -> refused: the verification error
    the server sends a TLS alert (unknown CA, bad certificate)   -> refused: the alert, as the handshake names it
    handshake done, HTTP/2 preface sent, then:
        the server answers (its SETTINGS frame)                  -> None: it accepts these credentials
        the server closes the connection (or alerts)             -> refused: what this client presents and why
                                                                    the server may not accept it

The last reason is worked out locally: no client certificate, or one no CA of the client's own CA file
issued (the usual setup has one CA for clients and servers), or else the certificate's subject and issuer.

Who may call: the client transport (``client/transport.py``), on its event loop, after a failed call.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from fluss_py.security.tls import TlsFiles, ca_certificates, client_ssl_context, validity_problem

PROBE_TIMEOUT_S = 3.0
_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"  # + an empty SETTINGS


async def handshake_refusal(address: str, files: TlsFiles, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """Why the server at ``address`` (host:port) refuses this client's TLS credentials, or None when it does
    not (it accepts them) or this cannot tell (the server is unreachable, or went away mid-handshake)."""
    problem = validity_problem(files)
    if problem is not None:
        return problem
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        context = client_ssl_context(files)
    except (OSError, ssl.SSLError) as e:
        return f"the client's TLS files cannot be loaded: {e}"
    context.set_alpn_protocols(["h2"])
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(
                host, int(port), ssl=context, server_hostname=files.server_name or host
            )
    except ssl.SSLCertVerificationError as e:
        return f"the server's certificate was refused: {e.verify_message}"
    except ssl.SSLError as e:  # an alert names the refusal; an EOF inside the handshake is no verdict
        return _alert(e) or None
    except (OSError, TimeoutError, ValueError):
        return None
    try:  # the handshake is done: the server answers the HTTP/2 preface unless it refuses the certificate
        async with asyncio.timeout(timeout):
            writer.write(_PREFACE)
            await writer.drain()
            answered = bool(await reader.read(1))
    except TimeoutError:
        return None
    except ssl.SSLError as e:
        return _alert(e) or _why_closed(files)
    except OSError:  # reset: closed with our preface unread
        answered = False
    finally:
        writer.close()
    return None if answered else _why_closed(files)


def _alert(e: ssl.SSLError) -> str:
    """The name of the TLS alert the server sent (``TLSV1_ALERT_UNKNOWN_CA``), or ""."""
    reason = e.reason or ""
    return f"the server refused the handshake: {reason}" if "ALERT" in reason else ""


def _why_closed(files: TlsFiles) -> str:
    closed = "the server closed the connection after the TLS handshake without an answer"
    if not files.cert_file:
        return f"{closed}: this client presents no certificate and the server requires one (security.tls.cert-file)"
    try:
        cert = x509.load_pem_x509_certificate(Path(files.cert_file).read_bytes())
        cas = ca_certificates(files.ca_file)
    except (OSError, ValueError):
        return f"{closed}: it does not accept the certificate {files.cert_file}"
    subject, issuer = cert.subject.rfc4514_string(), cert.issuer.rfc4514_string()
    if not any(_issued_by(cert, ca) for ca in cas.values()):
        return (
            f"{closed}: the certificate {files.cert_file} ({subject}) is issued by {issuer}, which is not a CA of "
            f"{files.ca_file}: the cluster's servers trust their CA, not this one"
        )
    return f"{closed}: it does not accept the certificate {files.cert_file} ({subject}, issued by {issuer})"


def _issued_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
