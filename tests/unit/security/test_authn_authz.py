"""Authentication (password / certificate / none) and the authorizer's audit rate limit."""

import logging

import pytest

from fluss_py.errors import AuthenticationFailedError
from fluss_py.security.authn import ANONYMOUS, Authenticator
from fluss_py.security.authz import Authorizer
from fluss_py.security.identity import PASSWORD_HEADER, USER_HEADER
from fluss_py.security.scram import make_credential
from fluss_py.security_types import CLUSTER, Acl, Operation, PatternType, Permission, ResourceType, table

pytestmark = pytest.mark.unit


class Users:
    def __init__(self) -> None:
        self.generation = 1
        self.creds = {"alice": make_credential("alice-pw")}

    def credential(self, user: str):
        return self.creds.get(user)


async def test_password_certificate_and_none() -> None:
    users = Users()
    authn = Authenticator(users, enabled=True)
    assert await authn.principal({USER_HEADER: "alice", PASSWORD_HEADER: "alice-pw"}, None) == "alice"
    assert await authn.principal({USER_HEADER: "alice", PASSWORD_HEADER: "alice-pw"}, "cn") == "alice"
    assert await authn.principal({}, "fluss-server") == "fluss-server"
    for bad in ({USER_HEADER: "alice", PASSWORD_HEADER: "nope"}, {USER_HEADER: "bob", PASSWORD_HEADER: "x"}, {}):
        with pytest.raises(AuthenticationFailedError) as info:
            await authn.principal(bad, None)
        assert "nope" not in str(info.value)
    assert await Authenticator(users, enabled=False).principal({}, None) == ANONYMOUS


async def test_a_changed_password_is_checked_again() -> None:
    users = Users()
    authn = Authenticator(users, enabled=True)
    assert await authn.principal({USER_HEADER: "alice", PASSWORD_HEADER: "alice-pw"}, None) == "alice"
    users.creds["alice"] = make_credential("new-pw")
    users.generation += 1
    with pytest.raises(AuthenticationFailedError):
        await authn.principal({USER_HEADER: "alice", PASSWORD_HEADER: "alice-pw"}, None)


def test_super_users_servers_and_the_audit_rate_limit(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    acls = [Acl("alice", ResourceType.TABLE, PatternType.LITERAL, "db.t", Operation.READ, Permission.ALLOW)]
    authz = Authorizer(
        lambda: acls, enabled=True, super_users=["root"], internal_principals=["fluss-server"], clock=lambda: now[0]
    )
    assert authz.allowed("root", Operation.ALTER, CLUSTER)
    assert authz.allowed("fluss-server", Operation.WRITE, table("db", "t"))
    assert authz.allowed("alice", Operation.READ, table("db", "t"))
    caplog.set_level(logging.WARNING, "fluss_py.security.audit")
    for _ in range(5):
        assert not authz.allowed("alice", Operation.WRITE, table("db", "t"))
    assert len(caplog.records) == 1
    assert "DENIED principal=alice operation=WRITE resource=table db.t" in caplog.records[0].getMessage()
    now[0] = 61.0
    assert not authz.allowed("alice", Operation.WRITE, table("db", "t"))
    assert len(caplog.records) == 2
    assert authz.denials.labels("WRITE", "table")._value.get() == 6
    assert Authorizer(lambda: [], enabled=False, super_users=[], internal_principals=[]).allowed(
        "x", Operation.DROP, CLUSTER
    )
