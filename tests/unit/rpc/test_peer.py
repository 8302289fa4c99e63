"""Who is the peer (docs/peer-trust.md): replica tokens, the ZooKeeper lookup behind them, the refusal log."""

from __future__ import annotations

import asyncio
import logging

from fluss_py.rpc.peer import (
    REPLICA_TOKEN_KEY,
    CertificateReplicaVerifier,
    RefusalLog,
    TokenReplicaVerifier,
    replica_verifier,
    same_token,
)


class Context:
    """A request context: the token in its metadata and the URI SANs of the peer's certificate."""

    def __init__(self, token: str | None = None, uris: tuple[str, ...] = ()) -> None:
        self._metadata = ((REPLICA_TOKEN_KEY, token),) if token is not None else ()
        self._auth = {"peer_uri": [u.encode() for u in uris]} if uris else {}

    def invocation_metadata(self):
        return self._metadata

    def auth_context(self):
        return self._auth


class Registrations:
    """Tokens in tablet servers' registrations (ZooKeeper); counts reads."""

    def __init__(self, tokens: dict[int, str]) -> None:
        self.tokens = tokens
        self.reads: list[int] = []

    async def __call__(self, server_id: int) -> str | None:
        self.reads.append(server_id)
        await asyncio.sleep(0)
        return self.tokens.get(server_id)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_same_token_never_matches_an_empty_expected_token():
    assert same_token("a", "a") and not same_token("a", "b") and not same_token("", "")


async def test_a_restarted_follower_is_proven_by_its_registration_before_the_coordinator_says_so():
    zk, clock = Registrations({2: "new-2"}), Clock()
    v = TokenReplicaVerifier(1, zk, min_lookup_interval_s=1.0, clock=clock)
    v.update({2: "old-2", 3: "t3"})
    assert await v.verify(3, Context("t3")) is None and zk.reads == []  # known token: no read
    assert await v.verify(2, Context("new-2")) is None and zk.reads == [2]  # one read of its registration
    assert await v.verify(2, Context("new-2")) is None and zk.reads == [2]  # remembered
    assert await v.verify(2, Context("old-2")) is not None  # the earlier incarnation is refused


async def test_impostors_cost_at_most_one_registration_read_per_id_and_interval():
    zk, clock = Registrations({2: "t2"}), Clock()
    v = TokenReplicaVerifier(1, zk, min_lookup_interval_s=1.0, clock=clock)
    v.update({2: "t2"})
    for _ in range(50):
        assert "wrong replica token" in (await v.verify(2, Context("guess")))
        assert "no tablet server" in (await v.verify(99, Context("guess")))
    assert sorted(zk.reads) == [2, 99]
    clock.now += 1.5
    await asyncio.gather(*(v.verify(2, Context("guess")) for _ in range(10)))  # concurrent: one shared read
    assert sorted(zk.reads) == [2, 2, 99]
    assert await v.verify(1, Context("t1")) == "that is this server's own id"
    assert await v.verify(2, Context()) == "no replica token presented"
    assert await v.verify(2, Context("t2")) is None


async def test_a_failed_lookup_proves_nothing():
    async def broken(server_id: int) -> str | None:
        raise ConnectionError("ZooKeeper unreachable")

    v = TokenReplicaVerifier(1, broken)
    assert await v.verify(2, Context("t2")) is not None


def test_refusal_log_counts_every_refusal_and_logs_one_line_per_subject_and_interval(caplog):
    clock = Clock()
    refusals = RefusalLog(logging.getLogger("test.refusals"), interval_s=10.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.refusals"):
        for _ in range(5):
            refusals.refuse("replica_not_authenticated", "2", "Refused FetchLog claiming replica 2")
        refusals.refuse("replica_not_authenticated", "3", "Refused FetchLog claiming replica 3")
        clock.now += 11
        refusals.refuse("replica_not_authenticated", "2", "Refused FetchLog claiming replica 2")
    assert refusals.counts == {"replica_not_authenticated": 7}
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "Refused FetchLog claiming replica 2",
        "Refused FetchLog claiming replica 3",
        "Refused FetchLog claiming replica 2 (4 more since the last such line)",
    ]


async def test_with_certificates_the_certificate_must_name_the_claimed_server_and_the_token_must_match():
    verifier = CertificateReplicaVerifier(1)
    verifier.update({2: "t2", 3: "t3"})
    assert await verifier.verify(2, Context("t2", ("fluss://tablet-server/2",))) is None
    # a real server's certificate with another server's (leaked) token
    why = await verifier.verify(2, Context("t2", ("fluss://tablet-server/3",)))
    assert why == "the peer certificate names fluss://tablet-server/3, not fluss://tablet-server/2"
    assert "names no server" in (await verifier.verify(2, Context("t2")) or "")
    assert "names fluss://coordinator/2" in (await verifier.verify(2, Context("t2", ("fluss://coordinator/2",))) or "")
    # the right certificate, an earlier incarnation's token: the token is the second factor
    assert "wrong replica token" in (await verifier.verify(2, Context("old", ("fluss://tablet-server/2",))) or "")
    assert await verifier.verify(1, Context("t1", ("fluss://tablet-server/1",))) == "that is this server's own id"


def test_the_server_picks_the_verifier_from_mutual_tls():
    assert type(replica_verifier(1, Registrations({}), certificates=True)) is CertificateReplicaVerifier
    assert type(replica_verifier(1, Registrations({}), certificates=False)) is TokenReplicaVerifier
