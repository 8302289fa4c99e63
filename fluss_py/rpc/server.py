"""Server bootstrap: one ``grpc.aio`` server per process on ``bind.host:rpc.port`` with its servicers.

``start_rpc_server(host, port, [register, ...], tls=..., interceptors=...)`` binds (port 0: any free port),
starts and returns ``(server, bound_port)``; a port that cannot be bound raises ``RpcBindError`` naming it.
With ``tls`` (a ``ServerTls``) the port speaks only TLS, with certificates reloaded as they change; the
interceptors (the security interceptor) see every call before its handler. ``keepalive`` (default: the
process's, ``channels.set_server_keepalive``) sets its pings and the pings it permits (``rpc/keepalive.py``).

Who may call: the server's lifecycle code, on its loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

import grpc.aio

from fluss_py.errors import ErrorCode, FlussError
from fluss_py.rpc.channels import MAX_MESSAGE_BYTES, server_keepalive
from fluss_py.rpc.keepalive import Keepalive
from fluss_py.security.tls import ServerTls

log = logging.getLogger(__name__)


def server_options(keepalive: Keepalive) -> list[tuple[str, Any]]:
    """The server's message limits, no SO_REUSEPORT, and its keepalive (its pings and the pings it permits)."""
    return [
        ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
        ("grpc.so_reuseport", 0),
        *keepalive.server_args(),
    ]


class RpcBindError(FlussError):
    """The RPC port could not be bound."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


async def start_rpc_server(
    host: str,
    port: int,
    registrations: Sequence[Callable[[grpc.aio.Server], None]],
    *,
    tls: ServerTls | None = None,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    keepalive: Keepalive | None = None,
) -> tuple[grpc.aio.Server, int]:
    options = server_options(keepalive or server_keepalive())
    server = grpc.aio.server(options=options, interceptors=list(interceptors) or None)
    for register in registrations:
        register(server)
    try:
        if tls is None:
            bound = server.add_insecure_port(f"{host}:{port}")
        else:
            bound = server.add_secure_port(f"{host}:{port}", tls.grpc_credentials())
    except RuntimeError as e:
        raise RpcBindError(f"cannot bind RPC port {host}:{port} (rpc.port): {e}") from None
    if bound == 0:
        raise RpcBindError(f"cannot bind RPC port {host}:{port} (rpc.port): address in use?")
    await server.start()
    log.info("RPC server listening on %s:%d (%s)", host, bound, "TLS" if tls else "plaintext")
    return server, bound
