"""A tiny HTTP/1.1 server on the process's asyncio loop for ``GET /health`` and ``GET /metrics``.

Routes map a path to ``async handler() -> (status, content_type, body)`` (GET and HEAD), or a
``"METHOD /path"`` key to ``async handler(request) -> ...`` where ``request`` carries the method, path and
query parameters (e.g. ``"POST /rebalance"`` with ``?dry_run=true``). One request per connection
(``Connection: close``); no keep-alive, no chunking, no request bodies — it serves probes, Prometheus and
small admin actions.
``metrics_route(registry, *extra)`` renders a prometheus-client registry in the text exposition format,
then the texts of ``extra``.

Who may call: the owning server, from its loop (``start``/``close``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from fluss_py.errors import ErrorCode, FlussError

log = logging.getLogger("fluss_py.common.HttpServer")

Response = tuple[int, str, bytes]
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

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def json_response(body: Mapping[str, Any], status: int = 200) -> Response:
    return status, "application/json", json.dumps(body, sort_keys=True).encode("utf-8")


def metrics_route(registry: CollectorRegistry, *extra: Callable[[], bytes]) -> Handler:
    """``registry`` rendered by prometheus-client, followed by each ``extra()`` text (families a server
    renders itself in the exposition format because there are thousands of samples, e.g. per bucket)."""

    async def handler() -> Response:
        return 200, CONTENT_TYPE_LATEST, b"".join([generate_latest(registry), *(text() for text in extra)])

    return handler


class HttpBindError(FlussError):
    """The HTTP port could not be bound."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class HttpServer:
    """Owns one listening socket and its connections. ``port`` is the bound port after ``start``."""

    def __init__(
        self,
        host: str,
        port: int,
        routes: Mapping[str, Handler | RequestHandler],
        *,
        ssl_context: ssl.SSLContext | None = None,
        guard: Guard | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._routes = dict(routes)
        self._ssl = ssl_context
        self._guard = guard
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        try:
            tls: dict[str, Any] = {"ssl": self._ssl, "ssl_handshake_timeout": 5.0} if self._ssl else {}
            self._server = await asyncio.start_server(self._serve, self.host, self.port, reuse_address=True, **tls)
        except OSError as e:
            raise HttpBindError(f"cannot bind HTTP port {self.host}:{self.port} (http.port): {e}") from None
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("HTTP server listening on %s:%d (%s)", self.host, self.port, ", ".join(sorted(self._routes)))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=5.0)
            first, _, rest = head.decode("latin-1").partition("\r\n")
            method, target, *_ = first.split(" ")
            path, _, query = target.partition("?")
            handler = self._routes.get(path)
            method_handler = self._routes.get(f"{method} {path}")
            if method_handler is not None:
                params = parse_qs(query, keep_blank_values=True)
                request = Request(
                    method, path, {k: v[-1] for k, v in params.items()}, params, _headers(rest), _peer_cn(writer)
                )
                try:
                    refused = await self._guard(request) if self._guard is not None else None
                    status, ctype, body = refused or await method_handler(request)  # type: ignore[call-arg]
                except Exception as e:
                    log.exception("HTTP handler for %s %s failed", method, path)
                    status, ctype, body = 500, "text/plain", f"{type(e).__name__}: {e}\n".encode()
            elif handler is None and any(k.endswith(f" {path}") for k in self._routes):
                status, ctype, body = 405, "text/plain", f"method {method} not allowed on {path}\n".encode()
            elif handler is None:
                status, ctype, body = 404, "text/plain", f"no route {path}\n".encode()
            elif method not in ("GET", "HEAD"):
                status, ctype, body = 405, "text/plain", b"only GET\n"
            else:
                try:
                    status, ctype, body = await handler()  # type: ignore[call-arg]
                except Exception as e:
                    log.exception("HTTP handler for %s failed", path)
                    status, ctype, body = 500, "text/plain", f"{type(e).__name__}: {e}\n".encode()
            header = (
                f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            ).encode("latin-1")
            writer.write(header if method == "HEAD" else header + body)
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError, ValueError):
            pass
        finally:
            writer.close()
            try:
                await writer.wait_closed()
            except ConnectionError:
                pass


def _headers(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.split("\r\n"):
        name, sep, value = line.partition(":")
        if sep:
            out[name.strip().lower()] = value.strip()
    return out


def _peer_cn(writer: asyncio.StreamWriter) -> str | None:
    cert = writer.get_extra_info("peercert")
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return str(value)
    return None
