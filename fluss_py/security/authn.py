"""Who is calling: the principal of a request, from its credentials or its TLS client certificate.

    metadata fluss-user + fluss-password   -> the user, when the password derives its stored SCRAM keys
    a verified client certificate          -> the certificate's subject common name (CN)
    neither (authentication on)            -> AuthenticationFailed
    authentication off                     -> ANONYMOUS

A password is checked once per (user, password, generation of the user store): PBKDF2 costs milliseconds,
so a verified pair is remembered as a keyed digest (keyed BLAKE2b, a MAC, under a random per-process key:
the memory holds no password; ~1 µs where HMAC-SHA256 through OpenSSL costs ~5) until the users change.
The first check runs in a worker thread, off the loop.

Who may call: the security interceptor, on the server's loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Mapping
from typing import Protocol

from fluss_py.errors import AuthenticationFailedError
from fluss_py.security import scram
from fluss_py.security.identity import PASSWORD_HEADER, USER_HEADER
from fluss_py.security.scram import ScramCredential

ANONYMOUS = "ANONYMOUS"
_MAX_REMEMBERED = 10_000


class UserSource(Protocol):
    """Where users' keys come from (``SecurityCache``; an in-memory dict in unit tests)."""

    generation: int

    def credential(self, user: str) -> ScramCredential | None: ...


class Authenticator:
    """Owns the remembered verified passwords; ``principal`` resolves one request's principal."""

    def __init__(self, users: UserSource, *, enabled: bool) -> None:
        self._users = users
        self.enabled = enabled
        self._secret = os.urandom(32)
        self._verified: dict[tuple[str, bytes], int] = {}
        self.failures = 0

    async def principal(self, metadata: Mapping[str, str], certificate_cn: str | None) -> str:
        """The request's principal, or AuthenticationFailedError (a generic message: it never says whether
        the user exists)."""
        if not self.enabled:
            return ANONYMOUS
        user = metadata.get(USER_HEADER)
        if user is not None:
            if await self._password_ok(user, metadata.get(PASSWORD_HEADER, "")):
                return user
            self.failures += 1
            raise AuthenticationFailedError(f"authentication failed for user {user!r}: unknown user or wrong password")
        if certificate_cn:
            return certificate_cn
        self.failures += 1
        raise AuthenticationFailedError("no credentials: send a user and password, or a client certificate")

    async def _password_ok(self, user: str, password: str) -> bool:
        credential = self._users.credential(user)
        if credential is None or not password:
            return False
        tag = hashlib.blake2b(f"{user}\0{password}".encode(), key=self._secret, digest_size=32).digest()
        generation = self._users.generation
        if self._verified.get((user, tag)) == generation:
            return True
        ok = await asyncio.get_running_loop().run_in_executor(None, scram.verify, credential, password)
        if ok:
            if len(self._verified) >= _MAX_REMEMBERED:
                self._verified.clear()
            self._verified[(user, tag)] = generation
        return ok
