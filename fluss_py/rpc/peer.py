"""Who is the peer: the seam through which a server learns what a caller has proven (docs/peer-trust.md).

Two credentials travel in gRPC call metadata, never in a protobuf message that is served back to anyone:

    fluss-replica-token       a tablet server's per-process replica token (its follower fetches)
    fluss-coordinator-token   the coordinator leader's per-term token (its control requests)

``ReplicaVerifier`` answers "does the caller of this request prove it is tablet server N?" from the
claimed id and the request's context. ``TokenReplicaVerifier`` compares the token the caller presents with
the one the coordinator handed out for N; the TLS work adds a verifier that reads the peer certificate from
``context.auth_context()`` instead, and nothing around the seam changes.

``RefusalLog`` logs and counts refused callers: one line per (kind, subject) per ``interval_s`` with the
number of refusals not logged since, so a flood of forged requests cannot flood the log.

Who may call: the tablet service on the server's loop (verifiers, ``RefusalLog``); the coordinator's and
the follower's RPC clients (``call_metadata``).
"""

from __future__ import annotations

import hmac
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

REPLICA_TOKEN_KEY = "fluss-replica-token"
COORDINATOR_TOKEN_KEY = "fluss-coordinator-token"

CallMetadata = tuple[tuple[str, str], ...]


def new_token() -> str:
    """A fresh secret token (192 random bits, URL-safe text)."""
    return secrets.token_urlsafe(24)


def call_metadata(key: str, token: str) -> CallMetadata:
    """gRPC call metadata presenting ``token`` under ``key`` (empty when there is no token)."""
    return ((key, token),) if token else ()


def presented(context: Any, key: str) -> str:
    """The value the caller sent under ``key`` in its call metadata ('' when absent)."""
    for k, v in context.invocation_metadata() or ():
        if k == key:
            return v if isinstance(v, str) else v.decode("ascii", "replace")
    return ""


def same_token(presented_token: str, expected: str) -> bool:
    """Constant-time comparison; an empty expected token never matches (nothing was handed out)."""
    return bool(expected) and hmac.compare_digest(presented_token.encode(), expected.encode())


class ReplicaVerifier(Protocol):
    """Does the caller prove it is tablet server ``claimed``? None when it does, else why not (for the log)."""

    def verify(self, claimed: int, context: Any) -> str | None: ...


class TokenReplicaVerifier:
    """Replica identity without TLS: the token the caller presents must be the one the coordinator leader
    handed out for ``claimed`` (from that server's registration). Owned by the tablet server; the service
    calls ``update`` on each accepted UpdateMetadata and ``verify`` per follower fetch, on the loop."""

    def __init__(self, own_id: int) -> None:
        self.own_id = own_id
        self._tokens: dict[int, str] = {}

    def update(self, tokens: Mapping[int, str]) -> None:
        """Replace the known tokens (the coordinator sends those of every live server, each time)."""
        self._tokens = dict(tokens)

    def known(self) -> list[int]:
        return sorted(self._tokens)

    def verify(self, claimed: int, context: Any) -> str | None:
        if claimed == self.own_id:
            return "that is this server's own id"
        expected = self._tokens.get(claimed)
        if expected is None:
            return "no live tablet server with that id is known here"
        token = presented(context, REPLICA_TOKEN_KEY)
        if not token:
            return "no replica token presented"
        if not same_token(token, expected):
            return "wrong replica token (another process, or an earlier incarnation of that server)"
        return None


class RefusalLog:
    """Counts refusals per kind and logs them, at most one line per (kind, subject) per ``interval_s``.
    Owned by the tablet service; loop-only."""

    def __init__(
        self, logger: logging.Logger, interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._log = logger
        self._interval = interval_s
        self._clock = clock
        self.counts: dict[str, int] = {}
        self._last: dict[tuple[str, str], tuple[float, int]] = {}  # (kind, subject) -> (logged at, suppressed)

    def refuse(self, kind: str, subject: str, message: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1
        now = self._clock()
        key = (kind, subject)
        logged_at, suppressed = self._last.get(key, (None, 0))
        if logged_at is not None and now - logged_at < self._interval:
            self._last[key] = (logged_at, suppressed + 1)
            return
        more = f" ({suppressed} more since the last such line)" if suppressed else ""
        self._log.warning("%s%s", message, more)
        if len(self._last) > 10_000:  # bounded: forged subjects cannot grow it without limit
            self._last.clear()
        self._last[key] = (now, 0)
