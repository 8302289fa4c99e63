"""Write deploy/secure/: the compose cluster's CA, certificates, security config and client config.

    .venv/bin/python deploy/make-secure.py          (then: docker compose -f deploy/docker-compose.secure.yml up)

Files (private keys and passwords: mode 0600, readable by the containers' uid 10001 after `chown`;
deploy/secure/ is git-ignored, never commit it):

    ca.pem ca-key.pem              the CA (keep ca-key.pem elsewhere in a real deployment)
    <service>.pem <service>-key.pem  one per server (coordinator-1 ... tablet-server-3): CN=fluss-server, SANs:
                                   its service name, localhost, 127.0.0.1 and the URI naming which server it
                                   is (fluss://coordinator/1, fluss://tablet-server/2; docs/peer-trust.md)
    client.pem client-key.pem      CN=fluss-client (clients and healthchecks: mutual TLS)
    security.yaml                  every server's second --config: TLS, authentication, ACLs, ZooKeeper digest
                                   (the compose file names each server's certificate with -D)
    admin.properties               the admin's client config, with the ZooKeeper credentials for user/acl
    admin-password                 read by the security-init service (`fluss-py user add --password-file`)
    prometheus-password            the scraper's (user `prometheus`, DESCRIBE_CONFIGS on the cluster: /metrics),
                                   read by security-init and by Prometheus (prometheus/prometheus-secure.yml)

See docs/security.md §7 (set-up by hand) for what each step does.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import yaml

from fluss_py.security.certs import CertificateAuthority
from fluss_py.security.server_names import server_uri

SERVERS = [("coordinator", i) for i in (1, 2, 3)] + [("tablet-server", i) for i in (1, 2, 3)]  # the compose services
MOUNT = "/etc/fluss/secure"
OUT = Path(__file__).resolve().parent / "secure"


def secret(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def main(out: Path = OUT) -> int:
    if out.exists() and any(out.iterdir()):
        print(f"{out} exists: remove it first to make new keys", file=sys.stderr)
        return 1
    out.mkdir(exist_ok=True)
    ca = CertificateAuthority.create(out / "ca")
    for role, server_id in SERVERS:
        service = f"{role}-{server_id}"
        ca.issue(
            out / service, "fluss-server", hosts=[service, "localhost", "127.0.0.1"], uris=[server_uri(role, server_id)]
        )
    ca.issue(out / "client", "fluss-client")
    zk_password, admin_password, scraper = (secrets.token_urlsafe(18) for _ in range(3))
    security = {
        "security.tls.enabled": True,
        "security.tls.ca-file": f"{MOUNT}/ca.pem",
        "security.tls.client-auth": True,
        "security.authentication.enabled": True,
        "security.authorizer.enabled": True,
        "security.internal.principals": "fluss-server",
        "zookeeper.auth.user": "fluss",
        "zookeeper.auth.password": zk_password,
    }
    secret(out / "security.yaml", yaml.safe_dump(security, sort_keys=True))
    secret(
        out / "admin.properties",
        "\n".join(
            [
                "security.tls.enabled=true",
                f"security.tls.ca-file={MOUNT}/ca.pem",
                f"security.tls.cert-file={MOUNT}/client.pem",
                f"security.tls.key-file={MOUNT}/client-key.pem",
                "security.user=admin",
                f"security.password={admin_password}",
                "zookeeper.address=zookeeper-1:2181,zookeeper-2:2181,zookeeper-3:2181",
                "zookeeper.root=/fluss",
                "zookeeper.auth.user=fluss",
                f"zookeeper.auth.password={zk_password}",
            ]
        )
        + "\n",
    )
    secret(out / "admin-password", admin_password + "\n")
    secret(out / "prometheus-password", scraper)  # Prometheus reads the file whole: no newline
    print(f"wrote {out}")
    print(f"the containers run as uid 10001: `sudo chown -R 10001 {out}` lets them read the 0600 files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
