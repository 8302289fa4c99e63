"""Which server a certificate names: the URI subject alternative name ``fluss://<role>/<id>``.

A server certificate carries two names (docs/security.md §2, docs/peer-trust.md):

    CN  fluss-server                     the internal principal: "a server of this cluster" (authorization)
    URI fluss://tablet-server/<id>       which server: tablet server <id> ...
    URI fluss://coordinator/<id>         ... or coordinator <id> (replica and coordinator identity)

A certificate names at most one server: one with several ``fluss://`` URIs names none (it could otherwise
be used as any of them). ``peer_server`` reads the URIs gRPC verified in the peer's certificate from
the call's auth context (property ``peer_uri``, one value per URI SAN; read once per call and shared with
the interceptor, ``call_context.py``); no certificate parsing per request. ``certificate_refusal`` is
the check both the leader (follower fetches), the coordinator (AdjustIsr, ControlledShutdown,
ReportReplicaFaults) and a tablet server (control requests) apply when mutual TLS is on.

Who may call: anyone; pure functions (``peer_server`` only reads the request context).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fluss_py.security.call_context import auth_properties

SCHEME = "fluss://"
TABLET_SERVER = "tablet-server"
COORDINATOR = "coordinator"
ROLES = (TABLET_SERVER, COORDINATOR)
_URI_PROPERTY = "peer_uri"


@dataclass(frozen=True, slots=True)
class ServerName:
    """A server of the cluster as a certificate names it."""

    role: str
    server_id: int

    @property
    def uri(self) -> str:
        return f"{SCHEME}{self.role}/{self.server_id}"

    def __str__(self) -> str:
        return self.uri


def server_uri(role: str, server_id: int) -> str:
    """The URI SAN naming ``role`` ``server_id`` (``fluss://tablet-server/2``); ValueError on a bad role/id."""
    if role not in ROLES or server_id < 0:
        raise ValueError(f"not a server: role {role!r}, id {server_id}")
    return ServerName(role, server_id).uri


def parse_server_uri(text: str) -> ServerName | None:
    """The server a ``fluss://<role>/<id>`` URI names; None for anything else (other URIs, bad ids)."""
    if not text.startswith(SCHEME):
        return None
    role, sep, number = text[len(SCHEME) :].partition("/")
    if not sep or role not in ROLES or not number.isascii() or not number.isdigit() or len(number) > 10:
        return None
    if len(number) > 1 and number.startswith("0"):
        return None  # one spelling per server
    return ServerName(role, int(number))


def named_server(uris: list[str]) -> ServerName | None:
    """The one server a certificate's URIs name; None when they name none or several."""
    names = {n for n in (parse_server_uri(u) for u in uris) if n is not None}
    return names.pop() if len(names) == 1 else None


def peer_server(context: Any) -> ServerName | None:
    """The server named by the peer's verified TLS certificate (None: no certificate, or it names none)."""
    if context is None:
        return None
    values = auth_properties(context).get(_URI_PROPERTY) or ()
    return named_server([v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v) for v in values])


def certificate_refusal(context: Any, role: str, claimed: int) -> str | None:
    """None when the peer's certificate names ``role`` ``claimed``; else why not (for the log and the error)."""
    named = peer_server(context)
    expected = ServerName(role, claimed)
    if named == expected:
        return None
    if named is None:
        return f"the peer certificate names no server (expected {expected.uri})"
    return f"the peer certificate names {named.uri}, not {expected.uri}"
