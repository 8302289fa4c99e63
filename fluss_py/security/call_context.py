"""What one gRPC call's peer sent and proved, read from gRPC once per call and shared by all who ask.

The security interceptor and the handlers' peer checks ask the same questions of a call: its metadata
(user, password, replica and coordinator tokens) and the properties of the peer's verified TLS certificate
(its CN, its ``fluss://`` URI). ``context.auth_context()`` copies every certificate property on each call
(the PEM included; ~9 µs) and ``context.invocation_metadata()`` decodes the metadata again, so the first
reader of a call keeps the answer in a context variable tagged with the call's context object, and later
readers of the same call get it back::

    interceptor   bind_metadata(context, what gRPC decoded for it)   certificate_cn(context)
    handlers      metadata(context)  (rpc/peer.presented)             auth_properties(context) (server_names)

An answer tagged with another context is never returned, so nothing carries over from one call to the
next (each call runs in its own task as well). Nothing is cached per connection: gRPC Python shows a
handler no connection identity, and the peer address can be taken by another client once a connection
closes (docs/security.md §2).

Who may call: the interceptor and the handlers, on the server's loop, inside one call's task.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping, Sequence
from typing import Any

Metadata = Sequence[tuple[str, Any]]
AuthProperties = Mapping[str, Sequence[bytes]]

_METADATA: contextvars.ContextVar[tuple[Any, Metadata] | None] = contextvars.ContextVar(
    "fluss_call_metadata", default=None
)
_AUTH: contextvars.ContextVar[tuple[Any, AuthProperties] | None] = contextvars.ContextVar(
    "fluss_call_auth", default=None
)


def bind_metadata(context: Any, metadata: Metadata) -> None:
    """Remember ``metadata`` (already decoded by gRPC) as the metadata of the call of ``context``."""
    _METADATA.set((context, metadata))


def metadata(context: Any) -> Metadata:
    """The call's metadata: as bound for this very context, else read from gRPC."""
    bound = _METADATA.get()
    if bound is not None and bound[0] is context:
        return bound[1]
    return context.invocation_metadata() or ()


def auth_properties(context: Any) -> AuthProperties:
    """The properties gRPC verified in the peer's certificate (empty without one), read once per call."""
    cached = _AUTH.get()
    if cached is not None and cached[0] is context:
        return cached[1]
    properties = context.auth_context()
    _AUTH.set((context, properties))
    return properties


def certificate_cn(context: Any) -> str | None:
    """The common name of the peer's verified TLS client certificate, if it presented one."""
    names = auth_properties(context).get("x509_common_name")
    return names[0].decode("utf-8", "replace") if names else None
