"""The HTTP port of every server, on aiohttp in the process's asyncio loop: ``GET /health``, ``GET /metrics``.

Routes map a path to ``async handler() -> (status, content_type, body)`` (GET and HEAD), or a
``"METHOD /path"`` key to ``async handler(request) -> ...`` where ``request`` carries the method, path and
query parameters (e.g. ``"POST /rebalance"`` with ``?dry_run=true``). aiohttp does HTTP/1.1 itself
(keep-alive, chunked bodies, TLS with the server's context); the coordinator's console adds its own aiohttp
routes through ``setup`` (fluss_py/console).
``metrics_route(registry, *extra)`` renders a prometheus-client registry in the text exposition format,
then the texts of ``extra``.

Who may call: the owning server, from its loop (``start``/``close``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from fluss_py.common import cross_site
from fluss_py.common.http_input import HANDLER_ARGS, MAX_BODY, bounded
from fluss_py.errors import ErrorCode, FlussError

log = logging.getLogger(__name__)

# (status, content type, body) or, with headers of its own (a 401's WWW-Authenticate), a fourth element
Response = tuple[int, str, bytes] | tuple[int, str, bytes, dict[str, str]]
LOG_EVERY_S = 60.0
Handler = Callable[[], Awaitable[Response]]


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    query: dict[str, str] = field(default_factory=dict)  # last value of each parameter ("" for a bare ``?x``)
    query_all: dict[str, list[str]] = field(default_factory=dict)  # every value, for handlers that refuse repeats
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # lower-case names
    certificate_cn: str | None = None  # the CN of the peer's verified TLS client certificate


RequestHandler = Callable[[Request], Awaitable[Response]]
# asked before every method route ("POST /rebalance"): None lets it run, a Response refuses it
Guard = Callable[[Request], Awaitable[Response | None]]


def json_response(body: Mapping[str, Any], status: int = 200) -> Response:
    return status, "application/json", json.dumps(body, sort_keys=True).encode("utf-8")


def metrics_route(registry: CollectorRegistry, *extra: Callable[[], bytes]) -> Handler:
    """``registry`` rendered by prometheus-client, followed by each ``extra()`` text (families a server
    renders itself in the exposition format because there are thousands of samples, e.g. per bucket)."""

    async def handler(_request: Request | None = None) -> Response:  # a plain or a method route
        return 200, CONTENT_TYPE_LATEST, b"".join([generate_latest(registry), *(text() for text in extra)])

    return handler


class HttpBindError(FlussError):
    """The HTTP port could not be bound."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class HttpServer:
    """Owns one listening aiohttp site and its connections. ``port`` is the bound port after ``start``.

    ``routes`` are dispatched by one catch-all handler exactly as before the move to aiohttp (404 for an
    unknown path, 405 for a known path with another method, the guard before every method route, 500 with
    the exception's name when a handler raises). Before the guard, a state-changing request a browser sent
    from another origin (or without the ``X-Fluss-Request`` header) is refused 403 (common/cross_site.py).
    ``setup(app)`` may add aiohttp routes of its own (the console's page, its event stream); they are
    matched before the catch-all, are not guarded and must only read: a state-changing console action goes
    through a guarded method route.
    """

    def __init__(
        self,
        host: str,
        port: int,
        routes: Mapping[str, Handler | RequestHandler],
        *,
        ssl_context: ssl.SSLContext | None = None,
        guard: Guard | None = None,
        setup: Callable[[web.Application], None] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._routes = dict(routes)
        self._ssl = ssl_context
        self._guard = guard
        self._setup = setup
        self._runner: web.AppRunner | None = None
        self._listener: asyncio.Server | None = None
        self._cross_site_logged: dict[str, float] = {}  # route -> when a refusal of it was last logged

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY, handler_args=HANDLER_ARGS)  # common/http_input.py
        if self._setup is not None:
            self._setup(app)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        assert runner.server is not None
        try:  # aiohttp's protocols behind BoundedInput: a refused head keeps nothing (common/http_input.py)
            listener = await asyncio.get_running_loop().create_server(
                bounded(runner.server), self.host, self.port, ssl=self._ssl, reuse_address=True
            )
        except OSError as e:
            await runner.cleanup()
            raise HttpBindError(f"cannot bind HTTP port {self.host}:{self.port} (http.port): {e}") from None
        self._runner, self._listener = runner, listener
        self.port = int(listener.sockets[0].getsockname()[1])
        log.info("HTTP server listening on %s:%d (%s)", self.host, self.port, ", ".join(sorted(self._routes)))

    async def close(self) -> None:
        if self._listener is not None:
            listener, self._listener = self._listener, None
            listener.close()  # no new connections; the runner then closes the open ones
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def _cross_site(self, request: Request) -> Response | None:
        """403 for a state change a page of another origin may have sent (common/cross_site.py), before
        the guard and the handler: on every server, plaintext or not."""
        why = cross_site.refusal(request.method, request.headers, "https" if self._ssl is not None else "http")
        if why is None:
            return None
        route, now = f"{request.method} {request.path}", time.monotonic()
        if now - self._cross_site_logged.get(route, -LOG_EVERY_S) >= LOG_EVERY_S:  # a page may send many
            self._cross_site_logged[route] = now
            log.warning("Refused %s (logged at most once a minute per route): %s", route, why)
        return 403, "text/plain", f"AUTHORIZATION_FAILED: cross-site request refused: {why}\n".encode()

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        method, path = request.method, request.path
        if (request.content_length or 0) > MAX_BODY:  # refused before a byte of it is read
            return web.Response(status=413, text=f"request body over {MAX_BODY} bytes\n")
        handler = self._routes.get(path)
        method_handler = self._routes.get(f"{method} {path}")
        if method_handler is None and method == "HEAD":  # a GET method route answers HEAD (no body sent)
            method_handler = self._routes.get(f"GET {path}")
        response: Response
        if method_handler is not None:
            req = request_of(request)
            try:
                refused = self._cross_site(req) or (await self._guard(req) if self._guard is not None else None)
                response = refused or await method_handler(req)  # type: ignore[call-arg]
            except Exception as e:
                log.exception("HTTP handler for %s %s failed", method, path)
                response = 500, "text/plain", f"{type(e).__name__}: {e}\n".encode()
        elif handler is None and any(k.endswith(f" {path}") for k in self._routes):
            response = 405, "text/plain", f"method {method} not allowed on {path}\n".encode()
        elif handler is None:
            response = 404, "text/plain", f"no route {path}\n".encode()
        elif method not in ("GET", "HEAD"):
            response = 405, "text/plain", b"only GET\n"
        else:
            try:
                response = await handler()  # type: ignore[call-arg]
            except Exception as e:
                log.exception("HTTP handler for %s failed", path)
                response = 500, "text/plain", f"{type(e).__name__}: {e}\n".encode()
        return web_response(response)


def web_response(response: Response) -> web.Response:
    status, ctype, body, *extra = response
    return web.Response(status=status, body=body, headers={"Content-Type": ctype, **(extra[0] if extra else {})})


def request_of(request: web.Request) -> Request:
    """The route's view of an aiohttp request: method, path, query, lower-case headers, the certificate's CN."""
    params = parse_qs(request.query_string, keep_blank_values=True)
    return Request(
        request.method,
        request.path,
        {k: v[-1] for k, v in params.items()},
        params,
        {k.lower(): v for k, v in request.headers.items()},
        _peer_cn(request.transport),
    )


def peer_certificate_pem(request: web.Request) -> bytes | None:
    """The peer's verified TLS client certificate as PEM (None: plaintext, or no certificate presented)."""
    transport = request.transport
    ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    return ssl.DER_cert_to_PEM_cert(der).encode("ascii") if der else None


def _peer_cn(transport: asyncio.BaseTransport | None) -> str | None:
    cert = transport.get_extra_info("peercert") if transport is not None else None
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
