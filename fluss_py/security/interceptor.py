"""The gRPC server interceptor that authenticates and authorizes every request before its handler runs.

For each call: the principal (``Authenticator``: password metadata or TLS client certificate), then what
the method needs (``operations.required``), then the authorizer. A refusal ends the call with a gRPC status
the client maps to an error code (``client/transport.py``)::

    UNAUTHENTICATED      AUTHENTICATION_FAILED
    PERMISSION_DENIED    AUTHORIZATION_FAILED "<principal> may not <OPERATION> <resource type> <name>"
    NOT_FOUND            UNKNOWN_TABLE_OR_BUCKET (a table id this server does not know yet; retriable)

The handler then runs with ``current_principal()`` naming the caller (handlers may ask "who is the peer",
e.g. to check a follower's identity). No handler contains security code.

The group-offset methods are in addition authorized per table named (``per_table``: Kafka's per-topic
checks of offset commits, fetches and group descriptions): the request is narrowed to the tables the
principal may use before the handler runs, and the refused tables are answered beside the handler's answer.

A stream is checked when it opens by its own rule, and its principal stays proven only while what proved
it holds (``stream_grant.py``): before each message the stream's ``StreamGrant`` is asked, and a stream whose
user was removed or changed its password, or whose TLS certificate expired or lost its CA, is ended with
UNAUTHENTICATED. A stream listed in ``operations.MESSAGE_RULES`` (``ProduceLogStream``,
``ConsumerFetchStream``) is in addition authorized **per message** against the rule of the unary method it
stands for, with the current ACLs: its handler asks ``message_refusal(request)`` before handling each
message and answers a refusal (an ``ApiError``: AUTHORIZATION_FAILED, or UNKNOWN_TABLE_OR_BUCKET) for that
message instead of handling it; ``message_refusal`` raises ``StreamRevoked`` when the stream must end (the
handler answers what it read before, then lets it pass). The other streams' messages are checked by the
interceptor itself, as they are read and as answers are yielded. Without the interceptor (security off)
every message may go on, as every unary call may.

Who may call: gRPC, on the server's loop (``intercept_service`` per call).
"""

from __future__ import annotations

import contextvars
import inspect
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc
import grpc.aio

from fluss_py.errors import ApiError, AuthenticationFailedError, AuthorizationFailedError, UnknownTableOrBucketError
from fluss_py.security import call_context, operations, per_table
from fluss_py.security.authn import ANONYMOUS, Authenticated, Authenticator
from fluss_py.security.authz import Authorizer
from fluss_py.security.identity import USER_HEADER
from fluss_py.security.stream_grant import NO_TLS, GrantFactory, StreamGrant, StreamRevoked

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
    """Why the stream being handled may not have ``request`` handled (None: it may); raises
    ``StreamRevoked`` when the stream's principal is no longer proven (the stream must end). Called by the
    handler of a stream in ``operations.MESSAGE_RULES``, in its task, before it handles each message."""
    gate = _MESSAGE_GATE.get()
    return None if gate is None else gate(request)


class SecurityInterceptor(grpc.aio.ServerInterceptor):
    """Owns nothing but references: the authenticator, the authorizer, the table-name lookup and the
    factory of stream grants (default: streams re-checked against the authenticator's users, no TLS)."""

    def __init__(
        self,
        authenticator: Authenticator,
        authorizer: Authorizer,
        table_name: operations.TableName,
        grants: GrantFactory | None = None,
    ) -> None:
        self._authn = authenticator
        self._authz = authorizer
        self._table_name = table_name
        self._grants = grants if grants is not None else GrantFactory(authenticator.users, NO_TLS)
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
        narrowed = method in per_table.RULES

        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                token, _ = await check(method, request, context)
                try:
                    principal = token.var.get()
                    scope = None
                    if narrowed and not authz.allows_all(principal):
                        scope = per_table.narrow(method, request, self._access(principal))
                        if scope is not None and scope.answer is not None:
                            return scope.answer
                    response = await inner(request, context)
                    if scope is not None:
                        response = scope.finish(response)
                    if filtered and not authz.allows_all(principal):
                        operations.filter_metadata(response, lambda r: authz.visible(principal, r))
                    return response
                finally:
                    _PRINCIPAL.reset(token)

            return grpc.unary_unary_rpc_method_handler(unary, handler.request_deserializer, handler.response_serializer)
        per_message = operations.MESSAGE_RULES.get(method)
        open_stream, end = self._open_stream, self._end
        if handler.stream_stream is not None and not inspect.isasyncgenfunction(handler.stream_stream):
            # a stream handler writing its answers itself (context.write): its grant is asked per message,
            # by the handler through ``message_refusal`` when the method has a message rule, else as read
            responder = handler.stream_stream

            async def respond(requests: Any, context: grpc.aio.ServicerContext) -> Any:
                token, grant = await open_stream(method, None, context)
                gate = None if per_message is None else self._gate(per_message, grant)
                gate_token = _MESSAGE_GATE.set(gate)
                try:
                    return await responder(requests if gate is not None else _guarded(requests, grant), context)
                except StreamRevoked as e:
                    await end(context, method, grant.principal, e)
                finally:
                    grant.close()
                    _MESSAGE_GATE.reset(gate_token)
                    _PRINCIPAL.reset(token)

            return grpc.stream_stream_rpc_method_handler(
                respond, handler.request_deserializer, handler.response_serializer
            )
        streaming = handler.unary_stream or handler.stream_stream
        if streaming is not None and inspect.isasyncgenfunction(streaming):
            # a stream of requests is checked once, before its first message: its rule may not depend on them;
            # its grant is asked as each request is read and before each answer goes out
            one_request = handler.unary_stream is not None

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
                token, grant = await open_stream(method, request if one_request else None, context)
                try:
                    async for item in streaming(request if one_request else _guarded(request, grant), context):
                        grant.check()
                        yield item
                except StreamRevoked as e:
                    await end(context, method, grant.principal, e)
                finally:
                    grant.close()
                    _PRINCIPAL.reset(token)

            make = grpc.unary_stream_rpc_method_handler if one_request else grpc.stream_stream_rpc_method_handler
            return make(stream, handler.request_deserializer, handler.response_serializer)
        return _refuse(f"{method}: call type not supported by the security interceptor")

    async def _check(
        self, method: str, request: Any, context: grpc.aio.ServicerContext
    ) -> tuple[contextvars.Token, Authenticated]:
        """The principal, set as current, and what proved it; aborts the call (raises) when it may not go on."""
        intercepted = _METADATA.get()
        call_context.bind_metadata(context, intercepted)
        metadata = {k: v for k, v in intercepted if isinstance(v, str)}
        try:
            # a password names the principal; else the certificate does
            cn = None if USER_HEADER in metadata else call_context.certificate_cn(context)
            who = await self._authn.authenticate(metadata, cn)
        except AuthenticationFailedError as e:
            self._authz.authentication_failures.inc()
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, e.message)
            raise  # abort raises; this is never reached
        refusal = self._refusal(method, request, who.principal)
        if refusal is not None:
            await context.abort(*refusal)
        return _PRINCIPAL.set(who.principal), who

    async def _open_stream(
        self, method: str, request: Any, context: grpc.aio.ServicerContext
    ) -> tuple[contextvars.Token, StreamGrant]:
        """``_check`` for a stream, and the grant its messages are checked against (the connection's
        certificate is read whoever the principal is: its expiry ends the stream too)."""
        token, who = await self._check(method, request, context)
        pem = call_context.auth_properties(context).get("x509_pem_cert")
        try:
            return token, self._grants.open(who.principal, who.user, who.credential, pem[0] if pem else None)
        except StreamRevoked as e:
            _PRINCIPAL.reset(token)
            await self._end(context, method, who.principal, e)
            raise  # abort raises; this is never reached

    async def _end(self, context: grpc.aio.ServicerContext, method: str, principal: str, e: StreamRevoked) -> None:
        """End a stream whose principal is no longer proven: counted, audited, UNAUTHENTICATED."""
        self._authz.closed(method.rsplit("/", 1)[-1], principal, e.message)
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, e.message)

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

    def _access(self, principal: str) -> per_table.Access:
        authz = self._authz
        return per_table.Access(
            principal,
            lambda op, resource: authz.allowed(principal, op, resource),
            lambda resource: authz.visible(principal, resource),
            self._table_name,
        )

    def _gate(self, method: str, grant: StreamGrant) -> Callable[[Any], ApiError | None]:
        """The per-message check of a stream: its grant (StreamRevoked ends the stream), then the message
        as a call of ``method`` by the stream's principal."""
        principal = grant.principal

        def refusal(request: Any) -> ApiError | None:
            grant.check()
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


async def _guarded(requests: AsyncIterator[Any], grant: StreamGrant) -> AsyncIterator[Any]:
    """``requests``, each let through only while the stream's principal is still proven."""
    async for request in requests:
        grant.check()
        yield request


def _refuse(text: str) -> grpc.RpcMethodHandler:
    async def refuse(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, text)

    return grpc.unary_unary_rpc_method_handler(refuse)
