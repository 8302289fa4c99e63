"""The gRPC server interceptor that authenticates and authorizes every request before its handler runs.

For each call: the principal (``Authenticator``: password metadata or TLS client certificate), then what
the method needs (``operations.required``), then the authorizer. A refusal ends the call with a gRPC status
the client maps to an error code (``client/transport.py``)::

    UNAUTHENTICATED      AUTHENTICATION_FAILED
    PERMISSION_DENIED    AUTHORIZATION_FAILED "<principal> may not <OPERATION> <resource type> <name>"
    NOT_FOUND            UNKNOWN_TABLE_OR_BUCKET (a table id this server does not know yet; retriable)

The handler then runs with ``current_principal()`` naming the caller (handlers may ask "who is the peer",
e.g. to check a follower's identity). No handler contains security code.

Who may call: gRPC, on the server's loop (``intercept_service`` per call).
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from fluss_py.errors import AuthenticationFailedError, UnknownTableOrBucketError
from fluss_py.security import call_context, operations
from fluss_py.security.authn import ANONYMOUS, Authenticator
from fluss_py.security.authz import Authorizer
from fluss_py.security.identity import USER_HEADER

_PRINCIPAL: contextvars.ContextVar[str] = contextvars.ContextVar("fluss_principal", default=ANONYMOUS)
# the call's metadata as gRPC already decoded it for the interceptor (``context.invocation_metadata()`` would
# decode it again); gRPC runs the interceptor and the handler in the same task, where ``_check`` binds it
# to the call's context for the handler's readers (``call_context``)
_METADATA: contextvars.ContextVar[Any] = contextvars.ContextVar("fluss_intercepted_metadata", default=())


def current_principal() -> str:
    """The authenticated principal of the request being handled (ANONYMOUS without authentication)."""
    return _PRINCIPAL.get()


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
        try:
            need = operations.required(method, request, self._table_name)
        except UnknownTableOrBucketError as e:
            await context.abort(grpc.StatusCode.NOT_FOUND, e.message)
            raise
        if need is None:
            self._authz.denied(principal, "CALL", method)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, f"{method} is not a known method")
        elif need == operations.INTERNAL:
            if self._authn.enabled and not self._authz.is_internal(principal):
                self._authz.denied(principal, "INTERNAL", method)
                await context.abort(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"{principal} may not call {method.rsplit('/', 1)[-1]}: only this cluster's servers may",
                )
        elif need != operations.PUBLIC:
            for operation, resource in need:
                if not self._authz.allowed(principal, operation, resource):
                    await context.abort(
                        grpc.StatusCode.PERMISSION_DENIED, f"{principal} may not {operation.value} {resource}"
                    )
        return _PRINCIPAL.set(principal)


def _refuse(text: str) -> grpc.RpcMethodHandler:
    async def refuse(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, text)

    return grpc.unary_unary_rpc_method_handler(refuse)
