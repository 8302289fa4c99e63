"""Cross-site requests to a real HttpServer on loopback (plaintext and mutual TLS) never reach a handler.

The requests are what a page of another origin makes a browser send: a form POST (no custom header can be
added, the operator's client certificate is presented anyway; the browser adds Origin, and a current one
Sec-Fetch-Site), a fetch with a foreign Origin, a link's Referer; and what fluss_py's own clients and
``curl`` send (no Origin, no Sec-Fetch-Site: not a browser). The handler records each run.
The last test runs the runbook's ``curl -X POST <coordinator>:9124/rebalance`` as written against a real
coordinator: it starts a rebalance that moves replicas onto a new tablet server, while a browser's
cross-site form to the same URL starts nothing.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from fluss_py import config as cfg
from fluss_py.cli.admin import call_leader
from fluss_py.client import SyncAdmin
from fluss_py.common.cross_site import REQUEST_HEADER
from fluss_py.common.http import HttpServer, Request, Response, json_response
from fluss_py.security.certs import CertificateAuthority
from fluss_py.security.server_security import ServerSecurity
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from fluss_py.testing.zkview import ZkView
from fluss_py.zk.paths import RebalanceZNode, TableAssignmentZNode

pytestmark = pytest.mark.integration

FORM = {"Content-Type": "text/plain"}  # <form method=POST enctype=text/plain action=".../rebalance?dry_run=false">
FOREIGN = {"Origin": "https://evil.example", "Referer": "https://evil.example/x", "Sec-Fetch-Site": "cross-site"}
BROWSER_FORMS = [  # what browsers, old and new, send with a cross-site form or fetch
    {**FORM, "Origin": "https://evil.example"},  # any browser's POST carries Origin
    {**FORM, **FOREIGN},
    {REQUEST_HEADER: "1", **FOREIGN},  # a script of another origin (a preflight would be needed: never granted)
    {**FORM, "Sec-Fetch-Site": "cross-site"},
    {**FORM, "Origin": "null"},  # a sandboxed frame, a redirect
    {**FORM, "Referer": "https://evil.example/x"},
]


class Served:
    """A coordinator-like HTTP port (POST/DELETE/GET /rebalance) in a thread's loop; ``ran`` lists handler runs."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None, guard=None) -> None:
        self.ran: list[str] = []

        async def change(request: Request) -> Response:
            self.ran.append(f"{request.method} {request.path}?{'&'.join(f'{k}={v}' for k, v in request.query.items())}")
            return json_response({"status": "STARTED"})

        async def get(request: Request) -> Response:
            return json_response({"status": "NONE"})

        routes = {"POST /rebalance": change, "DELETE /rebalance": change, "GET /rebalance": get}
        self.server = HttpServer("127.0.0.1", 0, routes, ssl_context=ssl_context, guard=guard)


def _send(
    served: Served, method: str, path: str, headers: dict[str, str], context: ssl.SSLContext | None
) -> tuple[int, str]:
    scheme = "https" if context is not None else "http"

    async def run() -> tuple[int, str]:
        await served.server.start()
        try:
            async with aiohttp.ClientSession() as s:
                url = f"{scheme}://127.0.0.1:{served.server.port}{path}"
                async with s.request(method, url, data=b"x=", headers=headers, ssl=context or False) as r:
                    return r.status, await r.text()
        finally:
            await served.server.close()

    return asyncio.run(run())


@pytest.mark.parametrize("method", ["POST", "DELETE"])
@pytest.mark.parametrize("headers", BROWSER_FORMS)
def test_a_cross_site_request_on_a_plaintext_server_is_refused(method: str, headers: dict[str, str]) -> None:
    served = Served()
    status, text = _send(served, method, "/rebalance?dry_run=false", headers, None)
    assert (status, served.ran) == (403, [])
    assert text.startswith("AUTHORIZATION_FAILED: cross-site request refused: ")


def test_fluss_py_clients_and_reads_still_work_on_a_plaintext_server() -> None:
    served = Served()
    assert _send(served, "GET", "/rebalance", FOREIGN, None)[0] == 200  # a read changes nothing
    status, _ = _send(served, "POST", "/rebalance?dry_run=true", {REQUEST_HEADER: "1"}, None)
    assert (status, served.ran) == (200, ["POST /rebalance?dry_run=true"])
    # curl, a script: no browser header at all, no X-Fluss-Request either
    status, _ = _send(served, "DELETE", "/rebalance", {"User-Agent": "curl/8.5.0"}, None)
    assert (status, served.ran[1:]) == (200, ["DELETE /rebalance?"])


def test_the_consoles_own_page_needs_the_header() -> None:
    """A browser's request from the server's own origin without the header: the console always sends it,
    so anything else the browser sends (a link, a form on a page the server itself serves) is refused."""
    served = Served()
    own = {"Origin": "http://127.0.0.1:{port}", "Sec-Fetch-Site": "same-origin"}

    async def run() -> list[int]:
        await served.server.start()
        try:
            out = []
            async with aiohttp.ClientSession() as s:
                base = f"http://127.0.0.1:{served.server.port}"
                headers = {k: v.format(port=served.server.port) for k, v in own.items()}
                for extra in ({}, {REQUEST_HEADER: "1"}):
                    async with s.post(f"{base}/rebalance", headers={**headers, **extra}) as r:
                        out.append(r.status)
            return out
        finally:
            await served.server.close()

    assert asyncio.run(run()) == [403, 200]
    assert served.ran == ["POST /rebalance?"]


@pytest.fixture
def secure(tmp_path: Path) -> Iterator[tuple[ServerSecurity, ssl.SSLContext, CertificateAuthority]]:
    ca = CertificateAuthority.create(tmp_path / "ca")
    server = ca.issue(tmp_path / "coord", "fluss-server", hosts=["127.0.0.1"], uris=["fluss://coordinator/1"])
    operator = ca.issue(tmp_path / "op", "admin")  # the operator's browser certificate (mutual TLS)
    config = cfg.Config(cfg.COORDINATOR, {
        "security.tls.enabled": "true", "security.tls.ca-file": str(ca.cert_file),
        "security.tls.cert-file": str(server.cert_file), "security.tls.key-file": str(server.key_file),
        "security.tls.client-auth": "true", "security.authentication.enabled": "true",
        "security.authorizer.enabled": "true", "security.super-users": "admin",
    })  # fmt: skip
    context = ssl.create_default_context(cafile=str(ca.cert_file))
    context.load_cert_chain(str(operator.cert_file), str(operator.key_file))
    yield ServerSecurity(config, None), context, ca


def test_a_cross_site_post_with_the_operators_certificate_is_refused(secure) -> None:
    security, context, _ = secure
    assert security.tls is not None
    served = Served(security.tls.http_context(), security.http_guard)
    for headers in BROWSER_FORMS:
        status, text = _send(served, "POST", "/rebalance?dry_run=false", headers, context)
        assert (status, served.ran) == (403, []), headers
        assert text.startswith("AUTHORIZATION_FAILED: cross-site request refused: ")
    status, _ = _send(served, "POST", "/rebalance?dry_run=true", {REQUEST_HEADER: "1"}, context)
    assert (status, served.ran) == (200, ["POST /rebalance?dry_run=true"])  # the super user's own client


def test_the_cli_sends_the_header(secure) -> None:
    """``fluss-py admin rebalance`` / ``config alter`` go through ``call_leader``: it must pass the check."""
    served = Served()

    async def run() -> dict:
        await served.server.start()
        try:
            address = f"127.0.0.1:{served.server.port}"
            return await asyncio.to_thread(call_leader, [address], (None, {}), "POST", "?dry_run=true")
        finally:
            await served.server.close()

    assert asyncio.run(run()) == {"status": "STARTED"}
    assert served.ran == ["POST /rebalance?dry_run=true"]


# ---------------------------------------------------------------- the runbook's curl, on real processes
def _curl(*args: str) -> tuple[int, str]:
    """``curl -s <args>`` and the HTTP status it got (``-w``), the body before it."""
    done = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", *args], capture_output=True, text=True, timeout=30)
    body, _, status = done.stdout.rpartition("\n")
    return int(status or 0), body


def _servers_of(zk: ZkView, cluster: LocalCluster, table_id: int) -> set[int]:
    data = zk.get_bytes(TableAssignmentZNode.path(cluster.zk_root, table_id))
    assert data is not None
    return {s for replicas in TableAssignmentZNode.decode(data).values() for s in replicas}


def test_the_runbooks_curl_starts_a_rebalance_and_a_cross_site_form_does_not(cluster_factory) -> None:
    """``curl -X POST <coordinator>:9124/rebalance`` as the design document's runbook writes it (no header,
    no scheme) starts a rebalance of a real cluster; the same URL posted by a browser's cross-site form
    (Origin of another page) is refused and nothing is planned. Before this change the curl got 403."""
    if shutil.which("curl") is None:
        pytest.fail("curl is missing: run `make install` (deploy/apt.sh installs it)")
    cluster = cluster_factory(
        coordinators=1, tablet_servers=2, coordinator_overrides={"coordinator.rebalance.auto": "false"}
    )
    cluster.wait_for_leader(30)
    with SyncAdmin(cluster.get(f"{TABLET_SERVER}-1").rpc_address, request_timeout=15.0) as admin:
        table_id = admin.create_table("fluss.runbook", num_buckets=6, replication_factor=1)
    cluster.add_tablet_server()  # tablet-server-3: empty until a rebalance fills it
    cluster.wait_ready(timeout=30)
    address = cluster.get(cluster.wait_for_leader(15)).http_address  # host:port, as the runbook writes it
    with ZkView(cluster.zookeeper_address) as zk:
        assert _servers_of(zk, cluster, table_id) == {1, 2}
        for headers in (["-H", "Origin: https://evil.example"], ["-H", "Sec-Fetch-Site: cross-site"]):
            status, body = _curl("-X", "POST", "-H", "Content-Type: text/plain", *headers, "--data", "x=",
                                 f"{address}/rebalance")  # fmt: skip
            assert status == 403, body
            assert body.startswith("AUTHORIZATION_FAILED: cross-site request refused: ")
        assert not zk.exists(RebalanceZNode.path(cluster.zk_root))
        assert _curl(f"{address}/rebalance")[0] == 200  # nothing started

        status, body = _curl("-X", "POST", f"{address}/rebalance")  # the runbook's command, as written
        assert status == 200, body
        assert json.loads(body)["status"] in ("REBALANCING", "COMPLETED"), body

        def filled() -> bool:
            return (
                3 in _servers_of(zk, cluster, table_id)
                and json.loads(_curl(f"{address}/rebalance")[1]).get("status") == "COMPLETED"
            )

        cluster.wait_until(filled, 90, "the rebalance moved replicas onto tablet-server-3 and completed")
