"""The files of a secure local cluster: a CA, server and client certificates, server and client configs.

``SecureFiles.create(directory)`` (``cluster up --secure`` and the security tests) writes::

    DIR/security/ca.pem, ca-key.pem              the cluster's CA (its key never leaves this directory)
    DIR/security/<name>.pem, <name>-key.pem      one certificate per server (coordinator-1, tablet-server-2,
                                                 ...): CN=fluss-server, SANs 127.0.0.1 + localhost and the
                                                 URI naming the server (fluss://tablet-server/2)
    DIR/security/server.pem, server-key.pem      the default of server.yaml: CN=fluss-server, naming no server
                                                 (a server presenting it is refused as a follower and as a
                                                 coordinator: start each server with its own certificate)
    DIR/security/client.pem, client-key.pem      CN=fluss-client: what clients present (mutual TLS)
    DIR/security/server.yaml                     TLS + client certificates + authentication + authorizer
                                                 + the servers' ZooKeeper digest credentials (mode 0600)
    DIR/security/client.properties               TLS files + the admin's user and password, the ZooKeeper
                                                 credentials for `fluss-py user|acl` (mode 0600); every
                                                 client command of `fluss-py --dir DIR` reads it by default
    DIR/security/admin.curlrc                    the same for `curl -K` (mode 0600): the admin's Basic
                                                 credentials and the TLS files, for /metrics and the console

``bootstrap(zk)`` creates the admin user (salted keys only) and the ACL letting it do everything on the
cluster. Secrets live in 0600 files only: never on a command line (``ps`` shows those) nor in a log.

Who may call: the harness and the CLI, from one thread.
"""

from __future__ import annotations

import asyncio
import base64
import os
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import yaml

from fluss_py.security.certs import CertificateAuthority, IssuedFiles
from fluss_py.security.identity import read_properties
from fluss_py.security.scram import make_credential
from fluss_py.security.server_names import server_uri
from fluss_py.security.store import add_acls, put_user
from fluss_py.security.tls import TlsFiles
from fluss_py.security_types import Acl, Operation, PatternType, Permission, ResourceType
from fluss_py.zk.client import ZkClient

T = TypeVar("T")
SECURITY_DIR = "security"
SERVER_PRINCIPAL = "fluss-server"
CLIENT_CN = "fluss-client"
ADMIN = "admin"
ZK_USER = "fluss"
SERVER_HOSTS = ("127.0.0.1", "localhost")


def _write_secret(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


@dataclass(frozen=True)
class SecureFiles:
    """Paths of a secure cluster's security files (see the module docstring)."""

    directory: Path

    @property
    def ca(self) -> CertificateAuthority:
        return CertificateAuthority(self.directory / "ca.pem", self.directory / "ca-key.pem")

    @property
    def server_config(self) -> Path:
        return self.directory / "server.yaml"

    @property
    def client_config(self) -> Path:
        return self.directory / "client.properties"

    def client_tls(self) -> TlsFiles:
        """The CA, and the client certificate when the cluster uses mutual TLS."""
        settings = self.client_settings()
        cert, key = settings.get("security.tls.cert-file", ""), settings.get("security.tls.key-file", "")
        return TlsFiles(str(self.ca.cert_file), cert, key)

    def client_settings(self) -> dict[str, str]:
        return read_properties(self.client_config)

    @property
    def curl_config(self) -> Path:
        return self.directory / "admin.curlrc"

    def admin_authorization(self) -> dict[str, str]:
        """The admin's ``Authorization: Basic`` header: reads of the HTTP port that need a principal allowed
        more than the client certificate's CN (/metrics: DESCRIBE_CONFIGS; the console: every table)."""
        settings = self.client_settings()
        token = base64.b64encode(f"{settings['security.user']}:{settings['security.password']}".encode()).decode()
        return {"Authorization": f"Basic {token}"}

    def server_settings(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in (yaml.safe_load(self.server_config.read_text()) or {}).items()}

    def issue_server(self, role: str | None, server_id: int = 0, *, name: str = "") -> IssuedFiles:
        """A certificate of its own for ``role`` ``server_id`` (CN fluss-server, the internal principal; SANs
        the loopback names and ``fluss://<role>/<id>``, which server it is): ``DIR/security/<name>.pem`` and
        ``<name>-key.pem``, ``name`` defaulting to ``<role>-<id>``. ``role`` None: a certificate naming no
        server (the default ``server.pem``)."""
        uris = [server_uri(role, server_id)] if role is not None else []
        prefix = self.directory / (name or f"{role}-{server_id}")
        return self.ca.issue(prefix, SERVER_PRINCIPAL, hosts=SERVER_HOSTS, uris=uris)

    def server_tls_overrides(self, role: str, server_id: int) -> dict[str, str]:
        """The per-server settings naming its own certificate (issued on first use); paths, no secrets."""
        name = f"{role}-{server_id}"
        cert, key = self.directory / f"{name}.pem", self.directory / f"{name}-key.pem"
        if not cert.exists():
            self.issue_server(role, server_id)
        return {"security.tls.cert-file": str(cert), "security.tls.key-file": str(key)}

    @classmethod
    def at(cls, cluster_dir: Path) -> SecureFiles:
        return cls(Path(cluster_dir).absolute() / SECURITY_DIR)

    @classmethod
    def create(cls, cluster_dir: Path, *, client_certificates: bool = True) -> SecureFiles:
        """``client_certificates=False``: TLS without mutual TLS; the servers then prove themselves to each
        other with the password of the internal user ``fluss-server`` (created by ``bootstrap``)."""
        files = cls.at(cluster_dir)
        files.directory.mkdir(parents=True, exist_ok=True)
        ca = CertificateAuthority.create(files.directory / "ca")
        server = files.issue_server(None, name="server")  # the default; each server of the cluster gets its own
        client = ca.issue(files.directory / "client", CLIENT_CN)
        zk_password = secrets.token_urlsafe(18)
        server_yaml = {
            "security.tls.enabled": True,
            "security.tls.ca-file": str(ca.cert_file),
            "security.tls.cert-file": str(server.cert_file),
            "security.tls.key-file": str(server.key_file),
            "security.tls.client-auth": client_certificates,
            "security.authentication.enabled": True,
            "security.authorizer.enabled": True,
            "security.internal.principals": SERVER_PRINCIPAL,
            "zookeeper.auth.user": ZK_USER,
            "zookeeper.auth.password": zk_password,
        }
        if not client_certificates:
            server_yaml["security.user"] = SERVER_PRINCIPAL
            server_yaml["security.password"] = secrets.token_urlsafe(18)
        _write_secret(files.server_config, yaml.safe_dump(server_yaml, sort_keys=True))
        client_props = [
            "# fluss-py client settings of this local secure cluster (Kafka-style properties)",
            "security.tls.enabled=true",
            f"security.tls.ca-file={ca.cert_file}",
            *(
                [f"security.tls.cert-file={client.cert_file}", f"security.tls.key-file={client.key_file}"]
                if client_certificates
                else []
            ),
            f"security.user={ADMIN}",
            f"security.password={secrets.token_urlsafe(18)}",
            "# the servers' ZooKeeper credentials: `fluss-py user|acl` change users and ACLs in ZooKeeper",
            f"zookeeper.auth.user={ZK_USER}",
            f"zookeeper.auth.password={zk_password}",
        ]
        _write_secret(files.client_config, "\n".join(client_props) + "\n")
        settings = files.client_settings()
        curlrc = [f'user = "{ADMIN}:{settings["security.password"]}"', f'cacert = "{ca.cert_file}"']
        if client_certificates:
            curlrc += [f'cert = "{client.cert_file}"', f'key = "{client.key_file}"']
        _write_secret(files.curl_config, "\n".join(curlrc) + "\n")
        return files

    async def bootstrap(self, zk: ZkClient, root: str) -> None:
        """The admin user and its ACL: everything on the cluster; the servers' internal user when they
        authenticate by password (idempotent)."""
        await put_user(zk, root, ADMIN, make_credential(self.client_settings()["security.password"]))
        server = self.server_settings()
        if server.get("security.user"):
            await put_user(zk, root, server["security.user"], make_credential(server["security.password"]))
        await add_acls(
            zk,
            root,
            [
                Acl(ADMIN, ResourceType.CLUSTER, PatternType.LITERAL, "cluster", op, Permission.ALLOW)
                for op in Operation
            ],
        )


def bootstrap_security(files: SecureFiles, zookeeper: str, root: str) -> None:
    """``files.bootstrap`` on a fresh event loop, with the servers' ZooKeeper credentials."""
    with_zookeeper(files, zookeeper, root, files.bootstrap)


def with_zookeeper(files: SecureFiles, zookeeper: str, root: str, action: Callable[[ZkClient, str], Awaitable[T]]) -> T:
    """Run ``action(zk, root)`` in a session with the servers' ZooKeeper credentials (a fresh event loop)."""

    async def run() -> T:
        zk = ZkClient(zookeeper, root, session_timeout=10.0, connection_timeout=10.0, auth=zk_auth(files))
        await zk.start()
        try:
            return await action(zk, zk.root)
        finally:
            await zk.close()

    return asyncio.run(run())


def zk_auth(files: SecureFiles) -> tuple[str, str] | None:
    settings = files.server_settings()
    user = settings.get("zookeeper.auth.user", "")
    return (user, settings["zookeeper.auth.password"]) if user else None
