"""An unknown user costs the same key derivation as a known one (security/authn.py): a refusal that came back
at once for an unknown user and after a PBKDF2 run for a known one would tell an attacker which user names
exist. The derivation is counted through the ``verify`` seam, not timed."""

from __future__ import annotations

import pytest

from fluss_py.errors import AuthenticationFailedError
from fluss_py.security import scram
from fluss_py.security.authn import Authenticator
from fluss_py.security.identity import PASSWORD_HEADER, USER_HEADER
from fluss_py.security.scram import make_credential
from fluss_py.security_types import ScramCredential

pytestmark = pytest.mark.unit


class Users:
    generation = 1

    def __init__(self) -> None:
        self.creds = {"alice": make_credential("correct horse")}

    def credential(self, user: str) -> ScramCredential | None:
        return self.creds.get(user)


class CountingVerify:
    """``scram.verify`` that records the iteration count of every derivation it runs."""

    def __init__(self) -> None:
        self.iterations: list[int] = []

    def __call__(self, credential: ScramCredential, password: str) -> bool:
        self.iterations.append(credential.iterations)
        return scram.verify(credential, password)


async def refused(authn: Authenticator, user: str, password: str) -> None:
    with pytest.raises(AuthenticationFailedError) as info:
        await authn.principal({USER_HEADER: user, PASSWORD_HEADER: password}, None)
    assert "unknown user or wrong password" in str(info.value)  # the same words either way


async def test_an_unknown_user_is_refused_after_the_same_key_derivation() -> None:
    counted = CountingVerify()
    authn = Authenticator(Users(), enabled=True, verify=counted)
    await refused(authn, "mallory", "guess-1")
    await refused(authn, "alice", "guess-1")
    assert counted.iterations == [scram.DEFAULT_ITERATIONS, scram.DEFAULT_ITERATIONS]
    await refused(authn, "mallory", "guess-1")  # a refusal is never remembered: the work is paid each time
    assert len(counted.iterations) == 3


async def test_only_the_right_password_is_answered_from_the_cache() -> None:
    counted = CountingVerify()
    authn = Authenticator(Users(), enabled=True, verify=counted)
    for _ in range(3):
        assert await authn.principal({USER_HEADER: "alice", PASSWORD_HEADER: "correct horse"}, None) == "alice"
    assert len(counted.iterations) == 1  # verified once, then remembered
    await refused(authn, "alice", "guess-2")  # a known user with a wrong password: not a cache hit, full cost
    assert len(counted.iterations) == 2


async def test_the_dummy_credential_accepts_no_password() -> None:
    authn = Authenticator(Users(), enabled=True)
    for password in ("", "x", "correct horse"):
        await refused(authn, "mallory", password)
