"""`fluss-py cluster up --secure` and the security commands as subprocesses (the README tour's path).

The cluster's client.properties is picked up by every command run with ``--dir``; ``user``/``acl`` change
ZooKeeper; ``FLUSS_USER``/``FLUSS_PASSWORD`` and ``--command-config`` pick another principal; passwords
never appear in any output or log.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fluss_py.testing.cluster import LocalCluster

pytestmark = pytest.mark.integration

FLUSS_PY = str(Path(sys.executable).parent / "fluss-py")
BOB_PASSWORD = "bob-very-secret-9"


def run(*argv: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("FLUSS_")} | env
    return subprocess.run(
        [FLUSS_PY, *argv], input=stdin, capture_output=True, text=True, timeout=90, env=environ, check=False
    )


def ok(*argv: str, stdin: str | None = None, **env: str) -> str:
    done = run(*argv, stdin=stdin, **env)
    assert done.returncode == 0, f"fluss-py {' '.join(argv)} -> {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_secure_cluster_cli_users_acls_and_principals(tmp_path: Path) -> None:
    d = str(tmp_path / "c")
    try:
        up = ok("cluster", "up", "--secure", "--dir", d, "--coordinators", "1", "--tablet-servers", "2")
        assert "client.properties" in up and "https://" in up
        props = (tmp_path / "c" / "security" / "client.properties").read_text()
        admin_password = next(
            line.split("=", 1)[1] for line in props.splitlines() if line.startswith("security.password")
        )
        assert oct((tmp_path / "c" / "security" / "client.properties").stat().st_mode)[-3:] == "600"

        # the tour's first steps, as admin (picked up from DIR/security/client.properties)
        ok("table", "create", "events", "--buckets", "2", "--replication-factor", "2", "--dir", d)
        ok("produce", "events", "--dir", d, stdin="a\nb\nc\n")
        assert ok("consume", "events", "--from-beginning", "--max-records", "3", "--dir", d).split() == ["a", "b", "c"]

        # a reader
        ok("user", "add", "bob", "--dir", d, FLUSS_NEW_PASSWORD=BOB_PASSWORD)
        assert "bob" in ok("user", "list", "--dir", d)
        ok("acl", "add", "--principal", "bob", "--operation", "READ,DESCRIBE", "--table", "fluss.events", "--dir", d)
        assert "fluss.events" in ok("acl", "list", "--principal", "bob", "--dir", d)
        bob = {"FLUSS_USER": "bob", "FLUSS_PASSWORD": BOB_PASSWORD}
        assert ok("consume", "events", "--from-beginning", "--max-records", "3", "--dir", d, **bob).split() == [
            "a",
            "b",
            "c",
        ]
        denied = run("produce", "events", "--dir", d, stdin="x\n", **bob)
        assert (
            denied.returncode == 1
            and "AUTHORIZATION_FAILED: bob may not WRITE table fluss.events" in denied.stdout + denied.stderr
        )
        wrong = run("table", "list", "--dir", d, FLUSS_USER="bob", FLUSS_PASSWORD="wrong")
        assert wrong.returncode == 1 and "AUTHENTICATION_FAILED" in wrong.stderr

        # --command-config wins over the cluster's file
        conf = tmp_path / "bob.properties"
        conf.write_text(props.replace("security.user=admin", "security.user=bob").replace(admin_password, BOB_PASSWORD))
        denied = run("table", "create", "other", "--dir", d, "--command-config", str(conf))
        assert denied.returncode == 1 and "AUTHORIZATION_FAILED: bob may not CREATE table fluss.other" in denied.stderr

        # revoking takes effect without a restart
        ok("acl", "remove", "--principal", "bob", "--operation", "READ,DESCRIBE", "--table", "fluss.events", "--dir", d)
        ok("user", "remove", "bob", "--dir", d)
        gone = run("consume", "events", "--from-beginning", "--max-records", "1", "--timeout", "3", "--dir", d, **bob)
        assert gone.returncode != 0 and "AUTHENTICATION_FAILED" in gone.stderr

        logs = "".join(p.read_text() for p in (tmp_path / "c").glob("*/logs/*.log"))
        for secret in (admin_password, BOB_PASSWORD):
            assert secret not in logs
            assert secret not in up
    finally:
        if LocalCluster.exists(d):
            LocalCluster.open(d).close(grace=1)
