"""One server's security, wired from config: TLS on its ports, who it is to its peers, who its callers are.

    tls          ServerTls of the RPC and HTTP ports (None: plaintext), reloaded on change and on SIGHUP
    identity     what this server presents to other servers (its certificate, or security.user/password)
    cache        users and ACLs from ZooKeeper (only when authentication or the authorizer is on)
    grants       the grants of open streams (stream_grant.py), one factory for gRPC's and the HTTP port's
    interceptors the security interceptor for the gRPC server (none when both are off: no per-call cost)
    http         the same decisions on the HTTP port (Basic auth or the client certificate): the guard of its
                 routes, the console's viewer and event stream, /health's details (security/http_access.py)

Config rules checked at start (ConfigError naming the key): authentication needs TLS (passwords travel
only inside it); the authorizer needs authentication (else every caller would be ANONYMOUS).

Who may call: the server wiring (``CoordinatorServer``, ``TabletServer``) on its loop.
"""

from __future__ import annotations

import logging

import grpc.aio
from prometheus_client import CollectorRegistry

from fluss_py import config as cfg
from fluss_py.common.http import Request, Response
from fluss_py.errors import ConfigError
from fluss_py.security import operations
from fluss_py.security.authn import Authenticator
from fluss_py.security.authz import Authorizer
from fluss_py.security.http_access import HttpAccess
from fluss_py.security.identity import PeerIdentity
from fluss_py.security.interceptor import SecurityInterceptor
from fluss_py.security.store import SecurityCache
from fluss_py.security.stream_grant import NO_TLS, GrantFactory
from fluss_py.security.tls import ServerTls, TlsFiles
from fluss_py.security_types import ScramCredential
from fluss_py.zk.client import ZkClient

log = logging.getLogger(__name__)


class ServerSecurity:
    """Owns the server's ServerTls, SecurityCache, Authenticator and Authorizer."""

    def __init__(self, config: cfg.Config, registry: CollectorRegistry | None) -> None:
        files = TlsFiles.from_config(config)
        self.tls = ServerTls(files, require_client_cert=config[cfg.TLS_CLIENT_AUTH]) if files else None
        self.identity = PeerIdentity.from_config(config)
        auth_on, authz_on = config[cfg.AUTH_ENABLED], config[cfg.AUTHORIZER_ENABLED]
        if auth_on and self.tls is None:
            raise ConfigError(cfg.AUTH_ENABLED.key, "authentication needs security.tls.enabled")
        if authz_on and not auth_on:
            raise ConfigError(cfg.AUTHORIZER_ENABLED.key, "the authorizer needs security.authentication.enabled")
        self.enabled = auth_on
        self.cache: SecurityCache | None = None
        self.authenticator = Authenticator(self, enabled=auth_on)
        self.authorizer = Authorizer(
            lambda: self.cache.acls() if self.cache is not None else (),
            enabled=authz_on,
            super_users=config[cfg.SUPER_USERS],
            internal_principals=config[cfg.INTERNAL_PRINCIPALS],
            registry=registry,
        )
        self.grants = GrantFactory(self, self.tls if self.tls is not None else NO_TLS)  # streams re-checked
        # the HTTP port's reads too, its event streams re-checked as gRPC's streams are
        self.http = HttpAccess(self.authenticator, self.authorizer, enabled=auth_on, grants=self.grants)

    @property
    def peer_certificates(self) -> bool:
        """Mutual TLS: every peer presents a CA-signed certificate, so a server's certificate names which
        server it is (``fluss://<role>/<id>``) and peers are checked against it (docs/peer-trust.md)."""
        return self.tls is not None and self.tls.require_client_cert

    async def start(self, zk: ZkClient, root: str) -> None:
        """Load users and ACLs and keep them watched (after the ZooKeeper session is up)."""
        if not self.enabled:
            return
        self.cache = SecurityCache(zk, root)
        await self.cache.start()
        log.info(
            "authentication on (%d users), authorizer %s (%d ACLs), TLS client certificates %s",
            self.cache.user_count(), "on" if self.authorizer.enabled else "off", len(self.cache.acls()),
            "required" if self.tls and self.tls.require_client_cert else "not requested",
        )  # fmt: skip

    def stop(self) -> None:
        if self.cache is not None:
            self.cache.stop()

    def interceptors(self, table_name: operations.TableName) -> list[grpc.aio.ServerInterceptor]:
        if not self.enabled:
            return []
        return [SecurityInterceptor(self.authenticator, self.authorizer, table_name, self.grants)]

    # UserSource of the authenticator: the cache once started (no users before)
    @property
    def generation(self) -> int:
        return self.cache.generation if self.cache is not None else 0

    def credential(self, user: str) -> ScramCredential | None:
        return self.cache.credential(user) if self.cache is not None else None

    def reload_certificates(self) -> None:
        """SIGHUP: re-read the TLS files before the next handshake."""
        if self.tls is not None:
            self.tls.request_reload()
            self.tls.generation()  # load now, so a bad file is reported at once

    async def http_guard(self, request: Request) -> Response | None:
        """The HTTP port's guard (security/http_access.py): HTTP_RULES, the same principals and ACLs."""
        return await self.http.guard(request)
