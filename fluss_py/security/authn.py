"""Who is calling: the principal of a request, from its credentials or its TLS client certificate.

    metadata fluss-user + fluss-password   -> the user, when the password derives its stored SCRAM keys
    a verified client certificate          -> the certificate's subject common name (CN)
    neither (authentication on)            -> AuthenticationFailed
    authentication off                     -> ANONYMOUS

A password is checked once per (user, password, generation of the user store): PBKDF2 costs milliseconds,
so a verified pair is remembered as a keyed digest (keyed BLAKE2b, a MAC, under a random per-process key:
the memory holds no password; ~1 µs where HMAC-SHA256 through OpenSSL costs ~5) until the users change.
The first check runs in a worker thread, off the loop.

A refusal takes as long for an unknown user as for a known one with a wrong password: an unknown user's
password is run through the same PBKDF2 (``scram.DEFAULT_ITERATIONS``, the count of every credential
``fluss-py user add`` makes) against a dummy credential no password derives, in the same worker thread. A
refusal is never remembered, so every guess costs one derivation whoever it names. Only the right password
is answered from memory (the digest is of user *and* password), so a fast answer tells nothing to someone
who does not already know the password.

Who may call: the security interceptor, on the server's loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol

from fluss_py.errors import AuthenticationFailedError
from fluss_py.security import scram
from fluss_py.security.identity import PASSWORD_HEADER, USER_HEADER
from fluss_py.security_types import ScramCredential

ANONYMOUS = "ANONYMOUS"
_MAX_REMEMBERED = 10_000


class UserSource(Protocol):
    """Where users' keys come from (``SecurityCache``; an in-memory dict in unit tests)."""

    generation: int

    def credential(self, user: str) -> ScramCredential | None: ...


class Authenticated(NamedTuple):
    """A request's principal and, when a password proved it, the user and the stored keys it derived."""

    principal: str
    user: str | None = None
    credential: ScramCredential | None = None


class Authenticator:
    """Owns the remembered verified passwords; ``principal`` resolves one request's principal."""

    def __init__(
        self,
        users: UserSource,
        *,
        enabled: bool,
        verify: Callable[[ScramCredential, str], bool] = scram.verify,  # a seam: unit tests count derivations
    ) -> None:
        self._users = users
        self._verify = verify
        # random keys: no password derives them (the salt is fresh per process, as a real user's is per user)
        self._dummy = ScramCredential(os.urandom(24), scram.DEFAULT_ITERATIONS, os.urandom(32), os.urandom(32))
        self.enabled = enabled
        self._secret = os.urandom(32)
        self._verified: dict[tuple[str, bytes], int] = {}
        self.failures = 0

    @property
    def users(self) -> UserSource:
        return self._users

    async def principal(self, metadata: Mapping[str, str], certificate_cn: str | None) -> str:
        """The request's principal, or AuthenticationFailedError (a generic message: it never says whether
        the user exists)."""
        return (await self.authenticate(metadata, certificate_cn)).principal

    async def authenticate(self, metadata: Mapping[str, str], certificate_cn: str | None) -> Authenticated:
        """``principal`` with what proved it (a stream is re-checked against it: ``stream_grant.py``)."""
        if not self.enabled:
            return Authenticated(ANONYMOUS)
        user = metadata.get(USER_HEADER)
        if user is not None:
            credential = await self._password_ok(user, metadata.get(PASSWORD_HEADER, ""))
            if credential is not None:
                return Authenticated(user, user, credential)
            self.failures += 1
            raise AuthenticationFailedError(f"authentication failed for user {user!r}: unknown user or wrong password")
        if certificate_cn:
            return Authenticated(certificate_cn)
        self.failures += 1
        raise AuthenticationFailedError("no credentials: send a user and password, or a client certificate")

    async def _password_ok(self, user: str, password: str) -> ScramCredential | None:
        """The stored keys of ``user`` that ``password`` derives, or None."""
        if not password:  # refused at once for every user, known or not: tells nothing
            return None
        credential = self._users.credential(user)
        if credential is None:  # the same work as a wrong password of a known user, then no
            await asyncio.get_running_loop().run_in_executor(None, self._verify, self._dummy, password)
            return None
        tag = hashlib.blake2b(f"{user}\0{password}".encode(), key=self._secret, digest_size=32).digest()
        generation = self._users.generation
        if self._verified.get((user, tag)) == generation:
            return credential
        ok = await asyncio.get_running_loop().run_in_executor(None, self._verify, credential, password)
        if not ok:
            return None
        if len(self._verified) >= _MAX_REMEMBERED:
            self._verified.clear()
        self._verified[(user, tag)] = generation
        return credential
