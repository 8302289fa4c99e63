"""TLS material from PEM files: gRPC server and channel credentials, and ``ssl`` contexts for HTTP.

``TlsFiles`` names the three PEM files of one process (``security.tls.ca-file``, ``cert-file``,
``key-file``). A server's certificate can be replaced on disk while it runs:

    ServerTls.grpc_credentials()   grpc dynamic server credentials; gRPC asks ``_fetch`` before every new
                                   handshake, which re-reads the files when their mtimes changed (or after
                                   ``request_reload()``, wired to SIGHUP) and otherwise answers "no change"
    ServerTls.http_context()       an ``ssl.SSLContext`` whose SNI hook swaps in a fresh context, same rule

Connections already open keep the certificate they were set up with and drain as they close; a replaced
file that does not parse (or a key that does not match its certificate) is logged and the previous
certificate stays in use. Outgoing channels (``channel_credentials``) read the files when a channel is made.

A server that refuses a client's certificate (expired, not yet valid) only closes the connection: gRPC tells
the client "Socket closed", like a server that died. ``validity_problem`` lets the client say why instead:
whether its own certificate is outside its validity window (asked after a failed connection, by
``tls_refusal.handshake_refusal`` and the client transport; nothing is checked on the request path).
``ServerTls.trusted_cas`` (and ``ever_trusted_cas``) are the CAs of the file now in force (and of every
version loaded since start): open streams are re-checked against them (``stream_grant.py``).

Who may call: the server wiring at start; gRPC's threads call ``_fetch`` (guarded by a lock).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import ssl
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import grpc
from cryptography import x509
from cryptography.hazmat.primitives import hashes

from fluss_py import config as cfg
from fluss_py.errors import ConfigError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TlsFiles:
    """The PEM files of one process: trusted CA(s), its certificate chain and private key (may be empty)."""

    ca_file: str
    cert_file: str = ""
    key_file: str = ""
    server_name: str = ""  # the name checked in a server's certificate instead of the host dialled

    @classmethod
    def from_config(cls, config: cfg.Config) -> TlsFiles | None:
        """None when ``security.tls.enabled`` is off; ConfigError naming the key when a file is missing."""
        if not config[cfg.TLS_ENABLED]:
            return None
        files = cls(
            config[cfg.TLS_CA_FILE], config[cfg.TLS_CERT_FILE], config[cfg.TLS_KEY_FILE], config[cfg.TLS_SERVER_NAME]
        )
        if not files.ca_file:
            raise ConfigError(cfg.TLS_CA_FILE.key, "required when security.tls.enabled is true")
        if bool(files.cert_file) != bool(files.key_file):
            raise ConfigError(cfg.TLS_KEY_FILE.key, "security.tls.cert-file and key-file go together")
        for key, path in ((cfg.TLS_CA_FILE, files.ca_file), (cfg.TLS_CERT_FILE, files.cert_file)):
            if path and not Path(path).is_file():
                raise ConfigError(key.key, f"no such file: {path}")
        return files

    def read(self) -> tuple[bytes, bytes | None, bytes | None]:
        """(ca, cert chain, key) bytes; OSError when a file cannot be read."""
        ca = Path(self.ca_file).read_bytes()
        if not self.cert_file:
            return ca, None, None
        return ca, Path(self.cert_file).read_bytes(), Path(self.key_file).read_bytes()

    def mtimes(self) -> tuple[int, ...]:
        out = []
        for path in (self.ca_file, self.cert_file, self.key_file):
            try:
                out.append(os.stat(path).st_mtime_ns if path else 0)
            except OSError:
                out.append(-1)
        return tuple(out)


def channel_credentials(files: TlsFiles) -> grpc.ChannelCredentials:
    """Credentials for a new outgoing channel: trust ``ca_file``, present the certificate if there is one."""
    ca, cert, key = files.read()
    return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)


def validity_problem(files: TlsFiles, now: dt.datetime | None = None) -> str | None:
    """Why this process's own certificate cannot be accepted now (expired, not yet valid), or None (valid,
    none, or unreadable: that is reported where the file is loaded)."""
    if not files.cert_file:
        return None
    try:
        cert = x509.load_pem_x509_certificate(Path(files.cert_file).read_bytes())
    except (OSError, ValueError):
        return None
    now = now or dt.datetime.now(dt.UTC)
    if now > cert.not_valid_after_utc:
        return f"the certificate {files.cert_file} expired at {cert.not_valid_after_utc:%Y-%m-%d %H:%M:%S} UTC"
    if now < cert.not_valid_before_utc:
        since = f"{cert.not_valid_before_utc:%Y-%m-%d %H:%M:%S} UTC"
        return f"the certificate {files.cert_file} is not valid before {since}"
    return None


def ca_certificates(ca_file: str) -> Mapping[bytes, x509.Certificate]:
    """The certificates of a CA file by SHA-256 fingerprint (ValueError when one does not parse)."""
    return MappingProxyType(
        {c.fingerprint(hashes.SHA256()): c for c in x509.load_pem_x509_certificates(Path(ca_file).read_bytes())}
    )


class _ClientContext(ssl.SSLContext):
    """A client ``ssl`` context that checks ``server_name`` in the server's certificate instead of the host
    dialled when it is set (what ``grpc.ssl_target_name_override`` does for gRPC channels); the name is also
    the one sent as SNI. Both ``wrap_socket`` (urllib, http.client) and ``wrap_bio`` (asyncio) apply it."""

    server_name: str = ""

    def wrap_socket(
        self,
        sock: socket.socket,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        name = self.server_name or server_hostname
        return super().wrap_socket(sock, server_side, do_handshake_on_connect, suppress_ragged_eofs, name, session)

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        return super().wrap_bio(incoming, outgoing, server_side, self.server_name or server_hostname, session)


def client_ssl_context(files: TlsFiles) -> ssl.SSLContext:
    """An ``ssl`` context for HTTP clients (the CLI's rebalance and config calls, the test harness's /health):
    trusts ``ca_file``, presents the certificate if there is one, and checks the server's name: the host
    dialled, or ``server_name`` when set. The name is never left unchecked: any holder of a certificate of
    the same CA (a client's, say) could otherwise pose as a server and receive the caller's password."""
    context = _ClientContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname, as create_default_context
    context.load_verify_locations(cafile=files.ca_file)
    if files.cert_file:
        context.load_cert_chain(files.cert_file, files.key_file)
    context.server_name = files.server_name
    return context


class ServerTls:
    """Owns the current certificate of one server's gRPC and HTTP ports and reloads it when it changes."""

    def __init__(self, files: TlsFiles, *, require_client_cert: bool) -> None:
        if not files.cert_file:
            raise ConfigError(cfg.TLS_CERT_FILE.key, "a server needs a certificate and key when TLS is on")
        self.files = files
        self.require_client_cert = require_client_cert
        self._lock = threading.Lock()
        self._mtimes = files.mtimes()
        self._forced = False
        self.reloads = 0
        self._grpc_generation = 0
        self._check_loadable()  # fail at start, naming the file, rather than at the first handshake
        # the CAs trusted now, and every CA trusted since start, by SHA-256 fingerprint: open streams are
        # re-checked against them when ``reloads`` grows (``stream_grant.py``); replaced, never changed in place
        self.trusted_cas: Mapping[bytes, x509.Certificate] = ca_certificates(files.ca_file)
        self.ever_trusted_cas: Mapping[bytes, x509.Certificate] = self.trusted_cas

    def request_reload(self) -> None:
        """Re-read the files before the next handshake even if their mtimes did not change (SIGHUP)."""
        with self._lock:
            self._forced = True
        log.info("TLS certificate reload requested")

    def generation(self) -> int:
        """The number of the certificate now in force: re-reads the files first when their mtimes changed
        or a reload was requested and they still load (otherwise the old one stays). Thread-safe."""
        with self._lock:
            mtimes = self.files.mtimes()
            if mtimes == self._mtimes and not self._forced:
                return self.reloads
            self._forced = False
            self._mtimes = mtimes  # a bad file is not retried on every handshake; the next change or SIGHUP is
            try:
                self._check_loadable()
                trusted = ca_certificates(self.files.ca_file)
            except (OSError, ValueError, ssl.SSLError, ConfigError) as e:
                log.error("new TLS files not loaded, the previous certificate stays in use: %s", e)
                return self.reloads
            # before ``reloads`` grows: a reader seeing the new count sees these
            self.ever_trusted_cas = MappingProxyType({**self.ever_trusted_cas, **trusted})
            self.trusted_cas = trusted
            self.reloads += 1
        log.info("TLS certificate reloaded from %s (reload %d)", self.files.cert_file, self.reloads)
        return self.reloads

    def _check_loadable(self) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.files.cert_file, self.files.key_file)
        context.load_verify_locations(self.files.ca_file)

    def _grpc_config(self) -> grpc.ServerCertificateConfiguration:
        ca, cert, key = self.files.read()
        return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=ca)

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:  # gRPC thread, before each handshake
        generation = self.generation()
        if generation == self._grpc_generation:
            return None
        try:
            config = self._grpc_config()
            self._grpc_generation = generation
            return config
        except OSError as e:
            log.error("TLS files unreadable, the previous certificate stays in use: %s", e)
            return None

    def grpc_credentials(self) -> grpc.ServerCredentials:
        return grpc.dynamic_ssl_server_credentials(
            self._grpc_config(), self._fetch, require_client_authentication=self.require_client_cert
        )

    def _new_http_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.files.cert_file, self.files.key_file)
        context.load_verify_locations(self.files.ca_file)
        # with client-auth, as on the gRPC port: no CA-signed certificate, no connection (/health and /metrics
        # included; docs/security.md). Without it a certificate is asked for (it names the principal), not needed
        context.verify_mode = ssl.CERT_REQUIRED if self.require_client_cert else ssl.CERT_OPTIONAL
        return context

    def http_context(self) -> ssl.SSLContext:
        """A context for ``asyncio.start_server``; each handshake picks up a replaced certificate."""
        outer = self._new_http_context()
        current: dict[str, object] = {"generation": self.reloads, "context": outer}

        def on_hello(sock: ssl.SSLObject, _name: str | None, _ctx: ssl.SSLContext) -> None:
            generation = self.generation()
            if generation != current["generation"]:
                fresh = self._new_http_context()
                fresh.sni_callback = on_hello
                current.update(generation=generation, context=fresh)
            if sock.context is not current["context"]:
                sock.context = current["context"]  # type: ignore[assignment]

        outer.sni_callback = on_hello
        return outer
