"""Who is the peer: the seam through which a server learns what a caller has proven (docs/peer-trust.md).

Two credentials travel in gRPC call metadata, never in a protobuf message that is served back to anyone:

    fluss-replica-token       a tablet server's per-process replica token (its follower fetches)
    fluss-coordinator-token   the coordinator leader's per-term token (its control requests)

``ReplicaVerifier`` answers "does the caller of this request prove it is tablet server N?" from the
claimed id and the request's context. ``TokenReplicaVerifier`` compares the token the caller presents with
the one the coordinator handed out for N; when they differ (N restarted since, or the coordinator is down)
it reads N's registration in ZooKeeper once (``lookup``, at most once per ``min_lookup_interval_s`` per id)
before refusing. With mutual TLS, ``CertificateReplicaVerifier`` first requires the peer certificate to
name tablet server N (``fluss://tablet-server/N``, ``security/server_names.py``), then the token as a
second factor; nothing around the seam changes.

``RefusalLog`` logs and counts refused callers: one line per (kind, subject) per ``interval_s`` with the
number of refusals not logged since, so a flood of forged requests cannot flood the log.

Who may call: the tablet service on the server's loop (verifiers, ``RefusalLog``); the coordinator's and
the follower's RPC clients (``call_metadata``).
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

from fluss_py.security import call_context
from fluss_py.security.server_names import TABLET_SERVER, certificate_refusal

REPLICA_TOKEN_KEY = "fluss-replica-token"
COORDINATOR_TOKEN_KEY = "fluss-coordinator-token"

CallMetadata = tuple[tuple[str, str], ...]
TokenLookup = Callable[[int], Awaitable[str | None]]  # the token in server N's registration; None: none

log = logging.getLogger(__name__)


def new_token() -> str:
    """A fresh secret token (192 random bits, URL-safe text)."""
    return secrets.token_urlsafe(24)


def call_metadata(key: str, token: str) -> CallMetadata:
    """gRPC call metadata presenting ``token`` under ``key`` (empty when there is no token)."""
    return ((key, token),) if token else ()


def presented(context: Any, key: str) -> str:
    """The value the caller sent under ``key`` in its call metadata ('' when absent)."""
    for k, v in call_context.metadata(context):
        if k == key:
            return v if isinstance(v, str) else v.decode("ascii", "replace")
    return ""


def same_token(presented_token: str, expected: str) -> bool:
    """Constant-time comparison; an empty expected token never matches (nothing was handed out)."""
    return bool(expected) and hmac.compare_digest(presented_token.encode(), expected.encode())


class ReplicaVerifier(Protocol):
    """Does the caller prove it is tablet server ``claimed``? None when it does, else why not (for the log)."""

    async def verify(self, claimed: int, context: Any) -> str | None: ...


class TokenReplicaVerifier:
    """Replica identity without TLS: the token the caller presents must be the one in ``claimed``'s
    registration, as handed out by the coordinator leader or, when that differs, as read from ZooKeeper by
    ``lookup``. ``own_id``: the server's own tablet-server id, never proven by anyone else (None on a
    coordinator). Owned by the tablet server (the service calls ``update`` on each accepted UpdateMetadata
    and ``verify`` per follower fetch) and by the coordinator (``verify`` per AdjustIsr and
    ControlledShutdown, lookups only), on the loop."""

    def __init__(
        self,
        own_id: int | None,
        lookup: TokenLookup | None = None,
        min_lookup_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.own_id = own_id
        self._tokens: dict[int, str] = {}
        self._lookup = lookup
        self._min_interval = min_lookup_interval_s
        self._clock = clock
        self._looked_up: dict[int, float] = {}  # server id -> when its registration was last read
        self._lookups: dict[int, asyncio.Future[None]] = {}  # reads in flight, shared by concurrent fetches
        self.lookups = 0

    def update(self, tokens: Mapping[int, str]) -> None:
        """Replace the known tokens (the coordinator sends those of every live server, each time)."""
        self._tokens = dict(tokens)

    def known(self) -> list[int]:
        return sorted(self._tokens)

    def still_current(self, claimed: int, token: str) -> bool:
        """Is ``token`` still the one known for ``claimed`` (no ZooKeeper read)? A stream proven at open asks
        this per message: a server that restarted with a new token, or was dropped, loses its old stream."""
        return same_token(token, self._tokens.get(claimed, ""))

    async def verify(self, claimed: int, context: Any) -> str | None:
        if claimed == self.own_id:
            return "that is this server's own id"
        if claimed < 0:
            return "not a tablet server id"
        token = presented(context, REPLICA_TOKEN_KEY)
        if not token:
            return "no replica token presented"
        if same_token(token, self._tokens.get(claimed, "")):
            return None
        # a restart since the coordinator's last UpdateMetadata (or no coordinator): ask ZooKeeper, rarely
        await self._look_up(claimed)
        expected = self._tokens.get(claimed)
        if expected is None:
            return "no tablet server with that id is registered"
        if not same_token(token, expected):
            return "wrong replica token (another process, or an earlier incarnation of that server)"
        return None

    async def _look_up(self, server_id: int) -> None:
        if self._lookup is None:
            return
        pending = self._lookups.get(server_id)
        if pending is not None:
            await asyncio.shield(pending)
            return
        last = self._looked_up.get(server_id)
        if last is not None and self._clock() - last < self._min_interval:
            return
        if len(self._looked_up) > 10_000:  # bounded: forged ids cannot grow it without limit
            self._looked_up.clear()
        done = self._lookups[server_id] = asyncio.get_running_loop().create_future()
        try:
            self.lookups += 1
            token = await self._lookup(server_id)
            if token:
                self._tokens[server_id] = token
            else:
                self._tokens.pop(server_id, None)
        except Exception as e:
            log.warning("Could not read the registration of tablet server %d from ZooKeeper: %s", server_id, e)
        finally:
            self._looked_up[server_id] = self._clock()
            del self._lookups[server_id]
            done.set_result(None)


class CertificateReplicaVerifier(TokenReplicaVerifier):
    """Replica identity with mutual TLS: the peer certificate must name tablet server ``claimed``
    (``fluss://tablet-server/<claimed>``), and the caller must also present that server's token (a second
    factor: it tells a server's current process from an earlier incarnation holding the same certificate).
    Same owners and calls as ``TokenReplicaVerifier``."""

    async def verify(self, claimed: int, context: Any) -> str | None:
        if claimed == self.own_id:
            return "that is this server's own id"
        if claimed < 0:
            return "not a tablet server id"
        why = certificate_refusal(context, TABLET_SERVER, claimed)
        if why is not None:
            return why
        return await super().verify(claimed, context)


def replica_verifier(own_id: int | None, lookup: TokenLookup, *, certificates: bool) -> TokenReplicaVerifier:
    """The verifier a server uses: certificate and token with mutual TLS (``certificates``), else the token."""
    kind = CertificateReplicaVerifier if certificates else TokenReplicaVerifier
    return kind(own_id, lookup)


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
