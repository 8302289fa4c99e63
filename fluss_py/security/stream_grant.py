"""Re-authentication of open streams: a stream's principal stays proven only while what proved it holds.

A unary call is authenticated when it arrives; a stream only when it opens, and it may stay open for hours.
``StreamGrant`` remembers what proved the principal of one stream and is asked before each of its messages::

    proof at open                          still holds while                      else (the stream ends)
    a password of user U                   U's stored keys are those it derived   AUTHENTICATION_FAILED
    the connection's TLS certificate       now < its notAfter, and the CA that    AUTHENTICATION_FAILED
    (when the peer presented one)          issued it is still trusted

Per message (``check``, the produce stream's hot path) it compares two generations with those it last
checked against — the user store's (``SecurityCache.generation``: any user or ACL change) and the trusted
CAs' (``ServerTls.reloads``); a timer at the certificate's notAfter makes the next check look again. Only
then does it look again (``recheck``: the clock, a dictionary lookup and a comparison of the stored keys;
never a PBKDF2), so a change that leaves this stream's proof intact (another user, an ACL, an unchanged CA)
costs one recheck.
A failed check raises ``StreamRevoked``; the security interceptor ends the stream with it (gRPC
UNAUTHENTICATED, which clients raise as AUTHENTICATION_FAILED).

An ACL removed under an open stream is not a revocation: the principal is still who it was. Each message
of a produce or consumer fetch stream is authorized on its own against the current ACLs and a refused one
is answered AUTHORIZATION_FAILED while the stream goes on (Kafka's answer to a produce or fetch whose ACL
went away: the request fails, the connection stays).

``GrantFactory.open`` makes the grant of a new stream: it parses the peer's certificate (once per distinct
certificate and trust generation, remembered in a bounded map) and refuses at once a certificate that
expired while its connection stayed open, or whose CA was removed since. A certificate's CA is looked up
among every CA the server trusted since it started (the handshake accepted it against one of them): found
and no longer trusted, the certificate is refused. Only a CA of the trust file that signed the certificate
directly is found (gRPC shows the handler the leaf, not the chain): a certificate issued by an intermediate
CA is rechecked for expiry only.

Who may call: the security interceptor, on the server's loop (``open`` when a stream opens, ``check`` in
the stream's task before each message); the HTTP port's access the same way for the console's event stream
(``http_access.HttpStream``: ``check`` before each sample).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable, Mapping
from typing import Protocol

from cryptography import x509
from cryptography.exceptions import InvalidSignature

from fluss_py.security_types import ScramCredential

_MAX_CERTIFICATES = 1_000


class StreamRevoked(Exception):
    """The principal of an open stream is no longer proven: end the stream with ``message``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UserSource(Protocol):
    """The user store as a grant reads it (``SecurityCache`` through ``ServerSecurity``)."""

    @property
    def generation(self) -> int: ...

    def credential(self, user: str) -> ScramCredential | None: ...


class TrustSource(Protocol):
    """The CAs a server trusts now and every CA it trusted since it started (``ServerTls``), by SHA-256
    fingerprint: ``reloads`` grows whenever they may have changed."""

    @property
    def reloads(self) -> int: ...

    @property
    def trusted_cas(self) -> Mapping[bytes, x509.Certificate]: ...

    @property
    def ever_trusted_cas(self) -> Mapping[bytes, x509.Certificate]: ...


class _NoTrust:
    reloads = 0
    trusted_cas: Mapping[bytes, x509.Certificate] = {}
    ever_trusted_cas: Mapping[bytes, x509.Certificate] = {}


NO_TLS: TrustSource = _NoTrust()


class Certificate:
    """What a grant needs of a peer's certificate: its subject, its notAfter (epoch seconds) and the
    fingerprint of the CA that issued it (None: no CA this server ever trusted signed it directly)."""

    __slots__ = ("anchor", "not_after", "subject")

    def __init__(self, subject: str, not_after: float, anchor: bytes | None) -> None:
        self.subject = subject
        self.not_after = not_after
        self.anchor = anchor


def read_certificate(pem: bytes, cas: Mapping[bytes, x509.Certificate]) -> Certificate:
    """Parse a peer's PEM certificate and find its issuer among ``cas``; ValueError when it does not parse."""
    cert = x509.load_pem_x509_certificate(pem)
    anchor = None
    for fingerprint, ca in cas.items():
        if ca.subject != cert.issuer:
            continue
        try:
            cert.verify_directly_issued_by(ca)
        except (ValueError, TypeError, InvalidSignature):
            continue
        anchor = fingerprint
        break
    return Certificate(cert.subject.rfc4514_string(), cert.not_valid_after_utc.timestamp(), anchor)


def _when(epoch: float) -> str:
    return f"{dt.datetime.fromtimestamp(epoch, dt.UTC):%Y-%m-%d %H:%M:%S} UTC"


class Timer(Protocol):
    def cancel(self) -> None: ...


Schedule = Callable[[float, Callable[[], None]], Timer]  # (delay in seconds, callback): loop.call_later

_LOOK_AGAIN = -1  # a generation no source ever has: the next check looks again


class StreamGrant:
    """One open stream's principal and what proved it. Owned by the interceptor's wrapper of that stream;
    ``check`` before each message, in the stream's task; ``close`` when the stream ends."""

    __slots__ = ("_cert", "_clock", "_credential", "_schedule", "_timer", "_trust", "_trust_seen", "_user",
                 "_users", "_users_seen", "principal")  # fmt: skip

    def __init__(
        self,
        principal: str,
        users: UserSource,
        trust: TrustSource,
        *,
        user: str | None = None,
        credential: ScramCredential | None = None,
        certificate: Certificate | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.principal = principal
        self._users, self._trust = users, trust
        self._user, self._credential = user, credential  # the user whose password opened it, and its keys then
        self._cert = certificate
        self._clock = clock
        self._schedule: Schedule | None = None
        self._timer: Timer | None = None
        self._users_seen, self._trust_seen = users.generation, trust.reloads

    def check(self) -> None:
        """Raise ``StreamRevoked`` unless the stream's principal is still proven: two integer compares while
        nothing changed (the certificate's expiry makes the next check look again: ``expire``)."""
        if self._users.generation != self._users_seen or self._trust.reloads != self._trust_seen:
            self.recheck()

    def arm(self, schedule: Schedule) -> None:
        """Call ``expire`` at the certificate's notAfter (no certificate: never), through ``schedule``."""
        self._schedule = schedule
        self._arm()

    def _arm(self) -> None:
        if self._cert is not None and self._schedule is not None and self._timer is None:
            self._timer = self._schedule(max(0.0, self._cert.not_after - self._clock()), self.expire)

    def expire(self) -> None:
        """The certificate's notAfter has come (its timer): the next check looks again and finds it expired
        (a timer early by the loop's clock finds it valid and is set again)."""
        self._timer = None
        self._users_seen = _LOOK_AGAIN

    def close(self) -> None:
        """The stream ended: its expiry timer is not needed any more."""
        self._schedule = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def recheck(self) -> None:
        """``check`` without the shortcut: look at the proof again now."""
        users_now, trust_now = self._users.generation, self._trust.reloads
        cert = self._cert
        if cert is not None:
            if self._clock() >= cert.not_after:
                raise StreamRevoked(
                    f"the TLS certificate of this stream ({cert.subject}) expired at {_when(cert.not_after)}: "
                    "reconnect with a valid one"
                )
            if cert.anchor is not None and cert.anchor not in self._trust.trusted_cas:
                raise StreamRevoked(
                    f"the TLS certificate of this stream ({cert.subject}) was issued by a CA this server no "
                    "longer trusts (security.tls.ca-file)"
                )
        if self._user is not None and self._users.credential(self._user) != self._credential:
            raise StreamRevoked(
                f"user {self._user!r} was removed or its password changed after this stream opened: "
                "open a new one with valid credentials"
            )
        self._users_seen, self._trust_seen = users_now, trust_now
        self._arm()  # after its timer fired early


class GrantFactory:
    """Makes the grants of new streams; owns the bounded map of parsed peer certificates (per PEM and trust
    generation). Called by the interceptor on the server's loop; ``schedule`` defaults to that loop's
    ``call_later`` (the expiry timers of grants)."""

    def __init__(
        self,
        users: UserSource,
        trust: TrustSource,
        clock: Callable[[], float] = time.time,
        schedule: Schedule | None = None,
    ) -> None:
        self._users, self._trust, self._clock, self._schedule = users, trust, clock, schedule
        self._certificates: dict[tuple[bytes, int], Certificate] = {}

    def open(
        self, principal: str, user: str | None, credential: ScramCredential | None, pem: bytes | None
    ) -> StreamGrant:
        """The grant of a stream opened by ``principal`` (proven by ``user``'s ``credential``, None for a
        certificate, and the connection's certificate ``pem`` when it presented one). StreamRevoked when it
        is not proven even now: a certificate that expired while its connection stayed open, or whose CA
        was removed since. The caller closes the grant when the stream ends."""
        certificate = self._certificate(pem) if pem else None
        grant = StreamGrant(
            principal, self._users, self._trust, user=user, credential=credential, certificate=certificate,
            clock=self._clock,
        )  # fmt: skip
        grant.recheck()  # the user may have changed while its password was being checked
        if certificate is not None:
            grant.arm(self._schedule or asyncio.get_running_loop().call_later)
        return grant

    def _certificate(self, pem: bytes) -> Certificate:
        key = (pem, self._trust.reloads)
        known = self._certificates.get(key)
        if known is None:
            if len(self._certificates) >= _MAX_CERTIFICATES:
                self._certificates.clear()
            try:
                known = read_certificate(pem, self._trust.ever_trusted_cas)
            except ValueError as e:  # gRPC verified it: should not happen; refuse rather than trust blindly
                raise StreamRevoked(f"the connection's TLS certificate cannot be read: {e}") from None
            self._certificates[key] = known
        return known
