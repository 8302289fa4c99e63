"""Who may read and change what on a server's HTTP port: the same principals and ACLs as gRPC.

    Basic credentials (inside TLS)    -> the user, when the password is right (as gRPC's fluss-user/-password)
    a verified client certificate     -> its CN
    neither (authentication on)       -> 401 AUTHENTICATION_FAILED, with ``WWW-Authenticate: Basic`` so a
                                         browser asks for a user and password
    authentication off                -> ANONYMOUS, who may do everything (a plaintext cluster, as before)

``guard(request)`` is asked before every method route (``common/http.py``): a route of ``HTTP_RULES``
mapped to None is open (``GET /health``: probes); one mapped to (operation, resource) needs it
(``GET /metrics``: DESCRIBE_CONFIGS on the cluster); an unmapped one is refused. ``allowed(request, ...)``
answers without refusing (``/health`` adds per-table details for a principal allowed DESCRIBE_CONFIGS).
``viewer(headers, certificate_cn)`` is the console's: the principal and what it may DESCRIBE (tables,
groups, the cluster), or the 401 to answer. ``stream(headers, certificate_cn, certificate_pem)`` is the
same for a response the port keeps open (``/console/events``), with the ``HttpStream`` it is checked
against before each event: what proved its principal when it opened (a password, the connection's
certificate) must still hold, by the gRPC streams' own ``StreamGrant`` (``stream_grant.py``).

Who may call: the servers' HTTP handlers, on the server's loop.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass

from fluss_py.common.http import Request, Response
from fluss_py.errors import AuthenticationFailedError
from fluss_py.security import operations
from fluss_py.security.authn import ANONYMOUS, Authenticated, Authenticator
from fluss_py.security.authz import Authorizer
from fluss_py.security.identity import PASSWORD_HEADER, USER_HEADER
from fluss_py.security.stream_grant import NO_TLS, GrantFactory, StreamGrant, StreamRevoked
from fluss_py.security_types import CLUSTER, Operation, Resource, ResourceType

REALM = 'Basic realm="fluss", charset="UTF-8"'


@dataclass(frozen=True, slots=True)
class Viewer:
    """One principal's view of the cluster: answers from the authorizer (decisions cached per ACL snapshot,
    no audit line: a hidden table is filtered, not refused)."""

    principal: str
    authorizer: Authorizer | None  # None: security off, everything shows

    @property
    def sees_all(self) -> bool:
        """True when nothing needs filtering: security off, a super user, a server, DESCRIBE on the cluster
        (which covers every table and group it holds)."""
        return self.authorizer is None or self.authorizer.visible(self.principal, CLUSTER)

    def table(self, name: str) -> bool:
        return self.authorizer is None or self.authorizer.visible(self.principal, Resource(ResourceType.TABLE, name))

    def group(self, name: str) -> bool:
        return self.authorizer is None or self.authorizer.visible(self.principal, Resource(ResourceType.GROUP, name))


EVERYTHING = Viewer(ANONYMOUS, None)


class HttpStream:
    """One open HTTP stream (``/console/events``): its viewer and its grant. Owned by the route serving that
    stream, in its task: ``revoked()`` before each event, ``close()`` when the stream ends."""

    __slots__ = ("_authorizer", "_grant", "_route", "viewer")

    def __init__(self, route: str, viewer: Viewer, grant: StreamGrant | None, authorizer: Authorizer) -> None:
        self._route, self.viewer, self._grant, self._authorizer = route, viewer, grant, authorizer

    def revoked(self) -> str | None:
        """Why the stream must end now (its principal is no longer proven: counted and audited as a gRPC
        stream's closing), or None while it is."""
        if self._grant is None:
            return None
        try:
            self._grant.check()
        except StreamRevoked as e:
            self._authorizer.closed(self._route, self._grant.principal, e.message)
            return e.message
        return None

    def close(self) -> None:
        if self._grant is not None:
            self._grant.close()


class HttpAccess:
    """Owns nothing but references: the server's Authenticator, Authorizer and the factory of stream grants
    it shares with the gRPC interceptor (default: re-checked against the authenticator's users, no TLS)."""

    def __init__(
        self,
        authenticator: Authenticator,
        authorizer: Authorizer,
        *,
        enabled: bool,
        grants: GrantFactory | None = None,
    ) -> None:
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.enabled = enabled
        self.grants = grants if grants is not None else GrantFactory(authenticator.users, NO_TLS)

    async def principal(self, headers: Mapping[str, str], certificate_cn: str | None) -> str:
        """The request's principal (lower-case header names); AuthenticationFailedError, counted."""
        return (await self._authenticate(headers, certificate_cn)).principal

    async def _authenticate(self, headers: Mapping[str, str], certificate_cn: str | None) -> Authenticated:
        try:
            return await self.authenticator.authenticate(basic_auth(headers.get("authorization", "")), certificate_cn)
        except AuthenticationFailedError:
            self.authorizer.authentication_failures.inc()
            raise

    async def viewer(self, headers: Mapping[str, str], certificate_cn: str | None) -> Viewer | Response:
        if not self.enabled:
            return EVERYTHING
        try:
            return Viewer(await self.principal(headers, certificate_cn), self.authorizer)
        except AuthenticationFailedError as e:
            return unauthenticated(e)

    async def stream(
        self, route: str, headers: Mapping[str, str], certificate_cn: str | None, certificate_pem: bytes | None
    ) -> HttpStream | Response:
        """``viewer`` for a stream kept open on ``route``, as its ``HttpStream``; the 401 to answer when the
        request proves no principal, or when its proof is already gone (a certificate that expired, or lost
        its CA, while its connection stayed open)."""
        if not self.enabled:
            return HttpStream(route, EVERYTHING, None, self.authorizer)
        try:
            who = await self._authenticate(headers, certificate_cn)
        except AuthenticationFailedError as e:
            return unauthenticated(e)
        try:
            grant = self.grants.open(who.principal, who.user, who.credential, certificate_pem)
        except StreamRevoked as e:
            self.authorizer.closed(route, who.principal, e.message)
            return unauthenticated(AuthenticationFailedError(e.message))
        return HttpStream(route, Viewer(who.principal, self.authorizer), grant, self.authorizer)

    async def allowed(self, request: Request, operation: Operation, resource: Resource) -> bool:
        """May the request's principal do ``operation`` on ``resource``? False without credentials; no
        refusal is counted or audited (the caller only leaves something out)."""
        if not self.enabled:
            return True
        try:
            principal = await self.principal(request.headers, request.certificate_cn)
        except AuthenticationFailedError:
            return False
        if self.authorizer.allows_all(principal):
            return True
        return self.authorizer.visible(principal, resource) if operation is Operation.DESCRIBE else (
            self.authorizer.allowed(principal, operation, resource)
        )  # fmt: skip

    async def guard(self, request: Request) -> Response | None:
        """Refuse a method route unless its principal may do what ``HTTP_RULES`` says (401 / 403)."""
        if not self.enabled:
            return None
        key = f"{'GET' if request.method == 'HEAD' else request.method} {request.path}"
        if key in operations.HTTP_RULES and operations.HTTP_RULES[key] is None:
            return None  # open: probes
        try:
            principal = await self.principal(request.headers, request.certificate_cn)
        except AuthenticationFailedError as e:
            return unauthenticated(e)
        rule = operations.HTTP_RULES.get(key)
        if rule is None:
            self.authorizer.denied(principal, request.method, request.path)
            return 403, "text/plain", f"AUTHORIZATION_FAILED: {request.method} {request.path} is not mapped\n".encode()
        operation, resource = rule
        if not self.authorizer.allowed(principal, operation, resource):
            text = f"AUTHORIZATION_FAILED: {principal} may not {operation.value} {resource}\n"
            return 403, "text/plain", text.encode()
        return None


def unauthenticated(e: AuthenticationFailedError) -> Response:
    """401 with the challenge that makes a browser ask for a user and password."""
    return 401, "text/plain", f"AUTHENTICATION_FAILED: {e.message}\n".encode(), {"WWW-Authenticate": REALM}


def basic_auth(header: str) -> dict[str, str]:
    """``Authorization: Basic base64(user:password)`` as the metadata the authenticator reads ({} if none)."""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic" or not value:
        return {}
    try:
        user, sep, password = base64.b64decode(value, validate=True).decode("utf-8").partition(":")
    except ValueError:
        return {}
    return {USER_HEADER: user, PASSWORD_HEADER: password} if sep else {}
