"""What a request's security checks remember (docs/security.md §2): ACL decisions per ACL snapshot, the
peer's certificate and metadata per call; never longer, never for another call."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import grpc
import pytest

from fluss_py.rpc.pb import tablet_pb2
from fluss_py.rpc.peer import REPLICA_TOKEN_KEY, presented
from fluss_py.security.authn import Authenticator
from fluss_py.security.authz import MAX_DECISIONS, Authorizer
from fluss_py.security.interceptor import SecurityInterceptor, current_principal
from fluss_py.security.server_names import ServerName, peer_server
from fluss_py.security_types import Acl, Operation, PatternType, Permission, ResourceType, table

pytestmark = pytest.mark.unit

FETCH = "/fluss.v1.TabletService/FetchLog"


def allow(principal: str, op: Operation, name: str = "db.t", permission: Permission = Permission.ALLOW) -> Acl:
    return Acl(principal, ResourceType.TABLE, PatternType.LITERAL, name, op, permission)


class Snapshots:
    """An ACL source like ``SecurityCache``: an immutable tuple, replaced on every change; counts how often
    the authorizer walks it."""

    def __init__(self, *acls: Acl) -> None:
        self.walks = 0
        self.set(*acls)

    def set(self, *acls: Acl) -> None:
        self.current = Counted(acls, self)

    def __call__(self) -> tuple[Acl, ...]:
        return self.current


class Counted(tuple):
    def __new__(cls, acls: tuple[Acl, ...], owner: Snapshots) -> Counted:
        made = super().__new__(cls, acls)
        made.owner = owner  # type: ignore[attr-defined]
        return made

    def __iter__(self) -> Any:
        self.owner.walks += 1  # type: ignore[attr-defined]
        return super().__iter__()


def authorizer(source: Any) -> Authorizer:
    return Authorizer(source, enabled=True, super_users=[], internal_principals=["fluss-server"])


def test_a_decision_is_made_once_per_acl_snapshot_and_again_after_any_change() -> None:
    acls = Snapshots(allow("alice", Operation.WRITE))
    authz = authorizer(acls)
    for _ in range(100):
        assert authz.allowed("alice", Operation.WRITE, table("db", "t"))
    assert acls.walks == 1
    acls.set(allow("alice", Operation.WRITE), allow("alice", Operation.WRITE, permission=Permission.DENY))
    assert not authz.allowed("alice", Operation.WRITE, table("db", "t"))  # the new snapshot: DENY wins
    acls.set()
    assert not authz.allowed("alice", Operation.WRITE, table("db", "t"))  # nothing allows it any more
    acls.set(allow("alice", Operation.WRITE))
    assert authz.allowed("alice", Operation.WRITE, table("db", "t"))
    assert authz.visible("alice", table("db", "t")) and not authz.visible("bob", table("db", "t"))


def test_a_remembered_denial_is_still_counted_on_every_request() -> None:
    authz = authorizer(Snapshots())
    for _ in range(5):
        assert not authz.allowed("mallory", Operation.WRITE, table("db", "t"))
    assert authz.denials.labels("WRITE", "table")._value.get() == 5


def test_a_source_that_is_not_a_snapshot_is_asked_every_time() -> None:
    acls = [allow("alice", Operation.READ)]
    authz = authorizer(lambda: acls)
    assert authz.allowed("alice", Operation.READ, table("db", "t"))
    acls.clear()  # changed in place: nothing may be remembered about a list
    assert not authz.allowed("alice", Operation.READ, table("db", "t"))


def test_forged_names_cannot_grow_the_decisions_without_bound() -> None:
    authz = authorizer(Snapshots())
    for i in range(MAX_DECISIONS + 10):
        authz.visible(f"p{i}", table("db", "t"))
    assert len(authz._decisions) <= MAX_DECISIONS


# ---------------------------------------------------------------- one read per call, none across calls
class Call:
    """A grpc.aio ServicerContext as the interceptor and the handlers read it; counts the reads."""

    def __init__(self, cn: str, uri: str, token: str) -> None:
        self._auth = {"x509_common_name": [cn.encode()], "peer_uri": [uri.encode()]}
        self.metadata = ((REPLICA_TOKEN_KEY, token),)
        self.auth_reads = 0
        self.metadata_reads = 0

    def auth_context(self) -> dict[str, list[bytes]]:
        self.auth_reads += 1
        return self._auth

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        self.metadata_reads += 1
        return self.metadata

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise PermissionError(f"{code.name}: {details}")


async def _serve(interceptor: SecurityInterceptor, call: Call) -> tuple[str, ServerName | None, str]:
    async def handler(request: Any, context: Any) -> tuple[str, ServerName | None, str]:
        return current_principal(), peer_server(context), presented(context, REPLICA_TOKEN_KEY)

    async def continuation(details: Any) -> grpc.RpcMethodHandler:
        return grpc.unary_unary_rpc_method_handler(handler)

    details = SimpleNamespace(method=FETCH, invocation_metadata=call.metadata)
    wrapped = await interceptor.intercept_service(continuation, details)
    return await wrapped.unary_unary(tablet_pb2.FetchLogRequest(replica_id=2), call)


class NoUsers:
    generation = 0

    def credential(self, user: str) -> None:
        return None


async def test_the_peer_certificate_is_read_once_per_call_and_never_reused_for_another() -> None:
    interceptor = SecurityInterceptor(Authenticator(NoUsers(), enabled=True), authorizer(Snapshots()), lambda _id: None)
    first = Call("fluss-server", "fluss://tablet-server/2", "t2")
    assert await _serve(interceptor, first) == ("fluss-server", ServerName("tablet-server", 2), "t2")
    assert (first.auth_reads, first.metadata_reads) == (1, 0)  # the handler reused the interceptor's reads

    second = Call("fluss-server", "fluss://tablet-server/3", "t3")  # the next call, on the same task
    assert await _serve(interceptor, second) == ("fluss-server", ServerName("tablet-server", 3), "t3")
    assert second.auth_reads == 1

    client = Call("fluss-client", "fluss://tablet-server/2", "t2")  # not an internal principal
    with pytest.raises(PermissionError, match="fluss-client may not call FetchLog"):
        await _serve(interceptor, client)
