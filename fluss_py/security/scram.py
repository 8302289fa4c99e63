"""Salted password keys with SCRAM-SHA-256 semantics (RFC 5802/7677): the server stores no password.

    SaltedPassword = PBKDF2-HMAC-SHA256(password, salt, iterations)
    ClientKey      = HMAC(SaltedPassword, "Client Key")      StoredKey = SHA-256(ClientKey)
    ServerKey      = HMAC(SaltedPassword, "Server Key")

Only (salt, iterations, StoredKey, ServerKey) are kept (``ScramCredential`` and its bounds in
``fluss_py/security_types.py``; in ZooKeeper, see ``zk/paths.py``). A password presented over TLS is checked
by deriving StoredKey again and comparing in constant time; whoever reads the znode cannot log in with what
it holds. Pure functions; no I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from fluss_py.security_types import MIN_ITERATIONS, ScramCredential

DEFAULT_ITERATIONS = 4096  # the RFC 7677 minimum; Kafka's default too


def _keys(password: str, salt: bytes, iterations: int) -> tuple[bytes, bytes]:
    salted = hashlib.pbkdf2_hmac("sha256", password.encode("utf-8"), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    return hashlib.sha256(client_key).digest(), hmac.digest(salted, b"Server Key", "sha256")


def make_credential(
    password: str, *, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None
) -> ScramCredential:
    """New keys for ``password`` with a fresh random salt (ValueError for an empty password)."""
    if not password:
        raise ValueError("the password must not be empty")
    if iterations < MIN_ITERATIONS:
        raise ValueError(f"iterations must be at least {MIN_ITERATIONS}")
    salt = salt if salt is not None else os.urandom(24)
    stored, server = _keys(password, salt, iterations)
    return ScramCredential(salt, iterations, stored, server)


def verify(credential: ScramCredential, password: str) -> bool:
    """True when ``password`` derives the credential's StoredKey (constant-time comparison)."""
    stored, _ = _keys(password, credential.salt, credential.iterations)
    return hmac.compare_digest(stored, credential.stored_key)
