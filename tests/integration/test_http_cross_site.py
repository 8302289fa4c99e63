"""Cross-site requests to a real HttpServer on loopback (plaintext and mutual TLS) never reach a handler.

The requests are what a page of another origin makes a browser send: a form POST (no custom header can be
added, the operator's client certificate is presented anyway), a form DELETE-like fetch with a foreign
Origin; and what fluss_py's own clients send (the header, no Origin). The handler records each run.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from fluss_py import config as cfg
from fluss_py.cli.admin import call_leader
from fluss_py.common.cross_site import REQUEST_HEADER
from fluss_py.common.http import HttpServer, Request, Response, json_response
from fluss_py.security.certs import CertificateAuthority
from fluss_py.security.server_security import ServerSecurity

pytestmark = pytest.mark.integration

FORM = {"Content-Type": "text/plain"}  # <form method=POST enctype=text/plain action=".../rebalance?dry_run=false">
FOREIGN = {"Origin": "https://evil.example", "Referer": "https://evil.example/x", "Sec-Fetch-Site": "cross-site"}


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
@pytest.mark.parametrize("headers", [FORM, {**FORM, **FOREIGN}, {REQUEST_HEADER: "1", **FOREIGN}])
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
    status, text = _send(served, "POST", "/rebalance?dry_run=false", {**FORM, **FOREIGN}, context)
    assert (status, served.ran) == (403, [])
    assert REQUEST_HEADER in text
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
