"""Open streams re-checked (``stream_grant.py``, docs/security.md §2 "Open streams"): a user removed or with
a new password, a certificate expired or whose CA is no longer trusted ends the stream; anything else (an
ACL, another user, a reload that keeps the CA) does not, and costs one look at most. The interceptor closes
a revoked stream with UNAUTHENTICATED at its next message, answer or request. In-memory sources; no sockets."""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from cryptography import x509

from fluss_py.security.authn import Authenticator
from fluss_py.security.authz import Authorizer
from fluss_py.security.certs import CertificateAuthority
from fluss_py.security.identity import PASSWORD_HEADER, USER_HEADER
from fluss_py.security.interceptor import SecurityInterceptor
from fluss_py.security.scram import make_credential
from fluss_py.security.stream_grant import NO_TLS, GrantFactory, StreamRevoked
from fluss_py.security.tls import ca_certificates
from fluss_py.security_types import ScramCredential

pytestmark = pytest.mark.unit

NOW = 1_900_000_000.0


class Users:
    """The user store as a grant reads it; counts lookups."""

    def __init__(self, **passwords: str) -> None:
        self.generation = 1
        self.creds: dict[str, ScramCredential] = {u: make_credential(p) for u, p in passwords.items()}
        self.lookups = 0

    def credential(self, user: str) -> ScramCredential | None:
        self.lookups += 1
        return self.creds.get(user)

    def change(self, user: str, credential: ScramCredential | None) -> None:
        if credential is None:
            self.creds.pop(user, None)
        else:
            self.creds[user] = credential
        self.generation += 1


class Trust:
    """``ServerTls``'s CAs: the trusted ones and every one trusted since start."""

    def __init__(self, *ca_files: Path) -> None:
        self.reloads = 0
        self.trusted_cas: Mapping[bytes, x509.Certificate] = {}
        self.ever_trusted_cas: Mapping[bytes, x509.Certificate] = {}
        self.load(*ca_files)

    def load(self, *ca_files: Path) -> None:
        self.trusted_cas = {k: v for f in ca_files for k, v in ca_certificates(str(f)).items()}
        self.ever_trusted_cas = {**self.ever_trusted_cas, **self.trusted_cas}
        self.reloads += 1


def clock(now: list[float]):
    return lambda: now[0]


def _at(epoch: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(epoch, dt.UTC)


def test_a_removed_user_or_a_new_password_ends_the_stream_and_other_changes_do_not() -> None:
    users = Users(alice="a-pw", bob="b-pw")
    grants = GrantFactory(users, NO_TLS)
    grant = grants.open("alice", "alice", users.creds["alice"], None)
    lookups = users.lookups
    for _ in range(1000):
        grant.check()
    assert users.lookups == lookups  # nothing changed: no lookup per message

    users.change("bob", None)  # another user; an ACL change grows the generation the same way
    grant.check()
    grant.check()
    assert users.lookups == lookups + 1  # one look after the change, then the shortcut again
    users.change("alice", users.creds["alice"])  # the same keys written again
    grant.check()

    users.change("alice", make_credential("a-pw"))  # the same password, new salt: a new credential
    with pytest.raises(StreamRevoked, match="'alice' was removed or its password changed"):
        grant.check()
    users.change("alice", None)
    with pytest.raises(StreamRevoked):
        grant.check()


def test_a_certificate_principal_is_not_tied_to_any_user() -> None:
    users = Users(alice="a-pw")
    grant = GrantFactory(users, NO_TLS).open("fluss-server", None, None, None)
    users.change("alice", None)
    grant.check()


def test_a_user_changed_while_its_password_was_checked_is_refused_at_open() -> None:
    users = Users(alice="a-pw")
    verified = users.creds["alice"]
    users.change("alice", make_credential("new-pw"))
    with pytest.raises(StreamRevoked):
        GrantFactory(users, NO_TLS).open("alice", "alice", verified, None)


class Timers:
    """``loop.call_later`` as a grant's factory uses it: the test fires the timers."""

    def __init__(self) -> None:
        self.pending: list[tuple[float, Any]] = []

    def __call__(self, delay: float, callback: Any) -> Any:
        entry = (delay, callback)
        self.pending.append(entry)
        return SimpleNamespace(cancel=lambda: self.pending.remove(entry))

    def fire(self) -> None:
        due, self.pending = self.pending, []
        for _, callback in due:
            callback()


def test_an_expired_certificate_ends_the_stream_and_is_refused_at_open(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca")
    cert = ca.issue(tmp_path / "c", "fluss-client", not_after=_at(NOW + 60))
    trust = Trust(ca.cert_file)
    now, timers = [NOW], Timers()
    grants = GrantFactory(Users(), trust, clock(now), timers)
    grant = grants.open("fluss-client", None, None, cert.cert_file.read_bytes())
    assert [delay for delay, _ in timers.pending] == [60.0]  # a timer at its notAfter, no clock read per message
    ended = grants.open("fluss-client", None, None, cert.cert_file.read_bytes())
    ended.close()  # a stream's end cancels its timer
    assert len(timers.pending) == 1
    now[0] = NOW + 60
    grant.check()  # the timer has not fired: nothing is looked at
    timers.fire()
    with pytest.raises(StreamRevoked, match=r"\(CN=fluss-client\) expired at"):
        grant.check()
    with pytest.raises(StreamRevoked, match="expired at"):  # a new stream on a connection opened before
        grants.open("fluss-client", None, None, cert.cert_file.read_bytes())


def test_a_timer_that_fires_early_changes_nothing(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca")
    cert = ca.issue(tmp_path / "c", "fluss-client", not_after=_at(NOW + 60))
    now, timers = [NOW], Timers()
    grant = GrantFactory(Users(), Trust(ca.cert_file), clock(now), timers).open(
        "fluss-client", None, None, cert.cert_file.read_bytes()
    )
    timers.fire()  # a loop's clock a little ahead of the wall clock
    grant.check()
    assert [delay for delay, _ in timers.pending] == [60.0]  # set again


def test_a_certificate_whose_ca_is_no_longer_trusted_ends_the_stream(tmp_path: Path) -> None:
    first = CertificateAuthority.create(tmp_path / "first", name="first CA")
    second = CertificateAuthority.create(tmp_path / "second", name="second CA")
    of_first = first.issue(tmp_path / "a", "fluss-server").cert_file.read_bytes()
    of_second = second.issue(tmp_path / "b", "fluss-server").cert_file.read_bytes()
    trust = Trust(first.cert_file, second.cert_file)
    grants = GrantFactory(Users(), trust, schedule=Timers())
    keeps, loses = grants.open("fluss-server", None, None, of_first), grants.open("fluss-server", None, None, of_second)
    trust.load(first.cert_file, second.cert_file)  # reloaded, the same CAs
    keeps.check()
    loses.check()
    trust.load(first.cert_file)
    keeps.check()
    with pytest.raises(StreamRevoked, match="issued by a CA this server no longer trusts"):
        loses.check()
    with pytest.raises(StreamRevoked, match="no longer trusts"):  # a new stream on a connection opened before
        grants.open("fluss-server", None, None, of_second)


def test_a_certificate_of_a_ca_never_trusted_here_is_checked_for_expiry_only(tmp_path: Path) -> None:
    """A leaf signed by an intermediate CA (gRPC shows the handler the leaf only): its issuer is not in the
    trust file, so only its validity dates can be rechecked."""
    root = CertificateAuthority.create(tmp_path / "root", name="root CA")
    intermediate = CertificateAuthority.create(tmp_path / "intermediate", name="intermediate CA")
    leaf = intermediate.issue(tmp_path / "leaf", "fluss-client").cert_file.read_bytes()
    trust = Trust(root.cert_file)
    grant = GrantFactory(Users(), trust, schedule=Timers()).open("fluss-client", None, None, leaf)
    trust.load(root.cert_file)
    grant.check()


# ---------------------------------------------------------------- the interceptor closes the stream
class Context:
    """A grpc.aio ServicerContext as the interceptor reads it."""

    def __init__(self, pem: bytes | None = None) -> None:
        self._auth = {"x509_pem_cert": [pem]} if pem else {}
        self.aborted: tuple[grpc.StatusCode, str] | None = None

    def auth_context(self) -> dict[str, list[bytes]]:
        return self._auth

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        self.aborted = (code, details)
        raise PermissionError(f"{code.name}: {details}")


def interceptor(users: Users) -> SecurityInterceptor:
    authz = Authorizer(lambda: (), enabled=True, super_users=[], internal_principals=["fluss-server"])
    return SecurityInterceptor(Authenticator(users, enabled=True), authz, lambda _id: None)


async def _wrapped(icpt: SecurityInterceptor, method: str, handler: grpc.RpcMethodHandler, user: str) -> Any:
    metadata = ((USER_HEADER, user), (PASSWORD_HEADER, f"{user}-pw"))

    async def continuation(details: Any) -> grpc.RpcMethodHandler:
        return handler

    return await icpt.intercept_service(continuation, SimpleNamespace(method=method, invocation_metadata=metadata))


async def test_a_stream_of_answers_is_closed_at_its_next_answer_once_its_user_is_removed() -> None:
    """WatchLiveness: one request, then answers; the user's removal closes it before the next answer."""
    users = Users(**{"fluss-server": "fluss-server-pw"})

    async def beats(request: Any, context: Any) -> AsyncIterator[int]:
        for n in range(3):
            if n == 1:
                users.change("fluss-server", None)
            yield n

    handler = grpc.unary_stream_rpc_method_handler(beats)
    wrapped = await _wrapped(interceptor(users), "/fluss.v1.TabletService/WatchLiveness", handler, "fluss-server")
    context = Context()
    got: list[int] = []
    with pytest.raises(PermissionError):
        async for beat in wrapped.unary_stream(object(), context):
            got.append(beat)
    assert got == [0]
    assert context.aborted is not None and context.aborted[0] is grpc.StatusCode.UNAUTHENTICATED
    assert "'fluss-server' was removed" in context.aborted[1]


async def test_a_stream_of_requests_is_closed_at_its_next_request_once_its_user_is_removed() -> None:
    """FetchLogStream (a generator over the requests): the request read after the removal is not handled."""
    users = Users(**{"fluss-server": "fluss-server-pw"})
    handled: list[int] = []

    async def requests() -> AsyncIterator[int]:
        yield 1
        users.change("fluss-server", make_credential("another"))
        yield 2

    async def fetches(stream: AsyncIterator[int], context: Any) -> AsyncIterator[int]:
        async for request in stream:
            handled.append(request)
            yield request

    handler = grpc.stream_stream_rpc_method_handler(fetches)
    wrapped = await _wrapped(interceptor(users), "/fluss.v1.TabletService/FetchLogStream", handler, "fluss-server")
    context = Context()
    with pytest.raises(PermissionError, match="UNAUTHENTICATED"):
        async for _ in wrapped.stream_stream(requests(), context):
            pass
    assert handled == [1]
