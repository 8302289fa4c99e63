"""The gRPC server interceptor that authenticates and authorizes every request before its handler runs.

For each call: the principal (``Authenticator``: password metadata or TLS client certificate), then what
the method needs (``operations.required``), then the authorizer. A refusal ends the call with a gRPC status
the client maps to an error code (``client/transport.py``)::

    UNAUTHENTICATED      AUTHENTICATION_FAILED
    PERMISSION_DENIED    AUTHORIZATION_FAILED "<principal> may not <OPERATION> <resource type> <name>"
    NOT_FOUND            UNKNOWN_TABLE_OR_BUCKET (a table id this server does not know yet; retriable)

The handler then runs with ``current_principal()`` naming the caller (handlers may ask "who is the peer",
e.g. to check a follower's identity). No handler contains security code.

A stream of requests is checked once, at open, by its own rule; a stream listed in ``operations.MESSAGE_RULES``
(``ProduceLogStream``, ``ConsumerFetchStream``) is in addition authorized **per message** against the rule
of the unary method it stands for, with the principal proven at open and the ACLs current then: its
handler asks ``message_refusal(request)`` before handling each message and answers a refusal (an
``ApiError``: AUTHORIZATION_FAILED, or UNKNOWN_TABLE_OR_BUCKET) for that message instead of handling it.
Without the interceptor (security off) every message may go on, as every unary call may.

Who may call: gRPC, on the server's loop (``intercept_service`` per call).
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from fluss_py.errors import ApiError, AuthenticationFailedError, AuthorizationFailedError, UnknownTableOrBucketError
from fluss_py.security import call_context, operations
from fluss_py.security.authn import ANONYMOUS, Authenticator
from fluss_py.security.authz import Authorizer
from fluss_py.security.identity import USER_HEADER

_PRINCIPAL: contextvars.ContextVar[str] = contextvars.ContextVar("fluss_principal", default=ANONYMOUS)
# the call's metadata as gRPC already decoded it for the interceptor (``context.invocation_metadata()`` would
# decode it again); gRPC runs the interceptor and the handler in the same task, where ``_check`` binds it
# to the call's context for the handler's readers (``call_context``)
_METADATA: contextvars.ContextVar[Any] = contextvars.ContextVar("fluss_intercepted_metadata", default=())
# the per-message check of the stream being handled (MESSAGE_RULES); None: no interceptor, nothing to check
_MESSAGE_GATE: contextvars.ContextVar[Callable[[Any], ApiError | None] | None] = contextvars.ContextVar(
    "fluss_message_gate", default=None
)


def current_principal() -> str:
    """The authenticated principal of the request being handled (ANONYMOUS without authentication)."""
    return _PRINCIPAL.get()


def message_refusal(request: Any) -> ApiError | None:
    """Why the stream being handled may not have ``request`` handled (None: it may). Called by the handler
    of a stream in ``operations.MESSAGE_RULES``, in its task, before it handles each message."""
    gate = _MESSAGE_GATE.get()
    return None if gate is None else gate(request)


class SecurityInterceptor(grpc.aio.ServerInterceptor):
    """Owns nothing but references: the authenticator, the authorizer and the table-name lookup."""

    def __init__(self, authenticator: Authenticator, authorizer: Authorizer, table_name: operations.TableName) -> None:
        self._authn = authenticator
        self._authz = authorizer
        self._table_name = table_name
        self._wrapped: dict[str, tuple[grpc.RpcMethodHandler, grpc.RpcMethodHandler]] = {}

    async def intercept_service(self, continuation: Callable[..., Any], details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None:
            return None
        _METADATA.set(details.invocation_metadata or ())
        wrapped = self._wrapped.get(details.method)
        if wrapped is None or wrapped[0] is not handler:
            wrapped = self._wrapped[details.method] = (handler, self._wrap(details.method, handler))
        return wrapped[1]

    def _wrap(self, method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        """The handler with the checks in front (made once per method: nothing is built per call)."""
        check = self._check
        authz = self._authz
        filtered = method in operations.FILTERED

        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                token = await check(method, request, context)
                try:
                    response = await inner(request, context)
                    principal = token.var.get()
                    if filtered and not authz.allows_all(principal):
                        operations.filter_metadata(response, lambda r: authz.visible(principal, r))
                    return response
                finally:
                    _PRINCIPAL.reset(token)

            return grpc.unary_unary_rpc_method_handler(unary, handler.request_deserializer, handler.response_serializer)
        per_message = operations.MESSAGE_RULES.get(method)
        if handler.stream_stream is not None and not inspect.isasyncgenfunction(handler.stream_stream):
            # a stream handler writing its answers itself (context.write): checked at open, and per message
            # when the method has a message rule
            responder = handler.stream_stream

            async def respond(requests: Any, context: grpc.aio.ServicerContext) -> Any:
                token = await check(method, None, context)
                gate = None if per_message is None else self._gate(per_message, token.var.get())
                gate_token = _MESSAGE_GATE.set(gate)
                try:
                    return await responder(requests, context)
                finally:
                    _MESSAGE_GATE.reset(gate_token)
                    _PRINCIPAL.reset(token)

            return grpc.stream_stream_rpc_method_handler(
                respond, handler.request_deserializer, handler.response_serializer
            )
        streaming = handler.unary_stream or handler.stream_stream
        if streaming is not None and inspect.isasyncgenfunction(streaming):
            # a stream of requests is checked once, before its first message: its rule may not depend on them
            one_request = handler.unary_stream is not None

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
                token = await check(method, request if one_request else None, context)
                try:
                    async for item in streaming(request, context):
                        yield item
                finally:
                    _PRINCIPAL.reset(token)

            make = grpc.unary_stream_rpc_method_handler if one_request else grpc.stream_stream_rpc_method_handler
            return make(stream, handler.request_deserializer, handler.response_serializer)
        return _refuse(f"{method}: call type not supported by the security interceptor")

    async def _check(self, method: str, request: Any, context: grpc.aio.ServicerContext) -> contextvars.Token:
        """The principal, set as current; aborts the call (raises) when it may not go on."""
        intercepted = _METADATA.get()
        call_context.bind_metadata(context, intercepted)
        metadata = {k: v for k, v in intercepted if isinstance(v, str)}
        try:
            # a password names the principal; else the certificate does
            cn = None if USER_HEADER in metadata else call_context.certificate_cn(context)
            principal = await self._authn.principal(metadata, cn)
        except AuthenticationFailedError as e:
            self._authz.authentication_failures.inc()
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, e.message)
            raise  # abort raises; this is never reached
        refusal = self._refusal(method, request, principal)
        if refusal is not None:
            await context.abort(*refusal)
        return _PRINCIPAL.set(principal)

    def _refusal(self, method: str, request: Any, principal: str) -> tuple[grpc.StatusCode, str] | None:
        """Why ``principal`` may not call ``method`` with ``request`` (a gRPC status and its text), or None."""
        try:
            need = operations.required(method, request, self._table_name)
        except UnknownTableOrBucketError as e:
            return grpc.StatusCode.NOT_FOUND, e.message
        if need is None:
            self._authz.denied(principal, "CALL", method)
            return grpc.StatusCode.PERMISSION_DENIED, f"{method} is not a known method"
        if need == operations.INTERNAL:
            if self._authn.enabled and not self._authz.is_internal(principal):
                self._authz.denied(principal, "INTERNAL", method)
                name = method.rsplit("/", 1)[-1]
                return (
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"{principal} may not call {name}: only this cluster's servers may",
                )
        elif need != operations.PUBLIC:
            for operation, resource in need:
                if not self._authz.allowed(principal, operation, resource):
                    return grpc.StatusCode.PERMISSION_DENIED, f"{principal} may not {operation.value} {resource}"
        return None

    def _gate(self, method: str, principal: str) -> Callable[[Any], ApiError | None]:
        """The per-message check of a stream opened by ``principal``: each message as a call of ``method``."""

        def refusal(request: Any) -> ApiError | None:
            refused = self._refusal(method, request, principal)
            if refused is None:
                return None
            status, text = refused
            return (
                UnknownTableOrBucketError(text)
                if status is grpc.StatusCode.NOT_FOUND
                else AuthorizationFailedError(text)
            )

        return refusal


def _refuse(text: str) -> grpc.RpcMethodHandler:
    async def refuse(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, text)

    return grpc.unary_unary_rpc_method_handler(refuse)
