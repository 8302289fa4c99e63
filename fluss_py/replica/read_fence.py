"""The read fence of KV reads: a leader answers a read only once its ISR confirmed, after the read arrived,
that it still leads (docs/primary-key-tables.md §1, invariant 5; Raft's read index).

A deposed leader that does not know it yet (paused, cut off from the coordinator) would otherwise answer from
its KV while a newer leader acknowledges writes. The proof: a new leader is chosen (cleanly) from the
coordinator's ISR, a subset of this leader's maximal ISR (expansions go through this leader, the coordinator
only removes), and it stops fetching from us (the bucket leaves its fetch session) once it learns it leads,
before it acknowledges anything. So a read that arrived at T may be answered once every other member of the
maximal ISR has *sent*, after T, a fetch that still holds the bucket at our leader epoch.

"Sent after T" is proven by the fetch session's order, not by when the fetch reached us: a follower sends the
request of session epoch n only once it has the answer to request n-1 (``replica/fetcher``), so request n was
sent after we produced that answer. A request merely received after T proves nothing: it may have waited in
a socket buffer while we were paused, sent by a follower that has since become leader. Every fetch session
therefore carries two ticks of this fence's logical clock: ``answered_at`` (its last answer) and
``proven_at`` (``answered_at`` as of its current request's arrival: the request was sent after that tick).

Rounds: reads arriving in the same loop turn share one round, which starts at the next turn with a tick S
later than all of them; it asks each follower session holding a read bucket for an answer after S
(``fence_demand``): a parked long poll is answered at once, and the session's next request does not park until
it was. A bucket of the round is confirmed when every other member of its maximal ISR has a session holding
it at the current leader epoch with ``proven_at`` > S; a follower's next request arrives about one round trip
after the wake-up. An ISR of the leader alone needs no confirmation. A member that stopped fetching holds the
round until it leaves the ISR (``replica.lag.time.max.ms``), like an acks=all write: reads then time out with
KV_NOT_READY (retriable).

Who may call: the ``ReadPath`` (``requested`` when a session request arrives, ``answered`` when it is answered,
``owes`` while it long-polls), the ``ReplicaManager``'s role and ISR changes (``recheck``) and its ISR shrink
scan (``stopped``), ``KvReads`` (``needed``, ``confirm``). Everything on the server's one asyncio loop; no I/O.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from fluss_py.replica.delayed import wait_futures
from fluss_py.replica.fetch_session import FetchSession, FetchSessionCache
from fluss_py.replica.replica import Replica
from fluss_py.types import TableBucket

if TYPE_CHECKING:
    from fluss_py.replica.delayed import Waker

Proof = tuple[int, int, int]
"""(follower id, the leader epoch its session holds the bucket at, the session's ``proven_at`` tick)."""


def confirmed_through(leader_id: int, leader_epoch: int, isr: Iterable[int], proofs: Iterable[Proof]) -> float:
    """The tick before which every read is confirmed: the least, over the members of ``isr`` other than the
    leader, of the latest tick each proved at ``leader_epoch``; 0 when one has no such proof, infinity for an ISR
    of the leader alone. A round that started at tick S is confirmed when S < this."""
    members = {r for r in isr if r != leader_id}
    if not members:
        return math.inf
    latest: dict[int, int] = {}
    for follower, epoch, at in proofs:
        if epoch == leader_epoch and follower in members and at > latest.get(follower, 0):
            latest[follower] = at
    if len(latest) < len(members):
        return 0
    return min(latest.values())


class _Waiter:
    """One read request's wait: its future and the buckets of its round still unconfirmed."""

    __slots__ = ("future", "left", "round")

    def __init__(self, future: asyncio.Future[None], buckets: set[TableBucket], round_: _Round) -> None:
        self.future = future
        self.left = buckets
        self.round = round_


class _Round:
    """Reads sharing one confirmation: ``start`` is its tick (0 while it collects reads), ``buckets`` the
    waiters of each bucket still unconfirmed."""

    __slots__ = ("buckets", "start")

    def __init__(self) -> None:
        self.start = 0
        self.buckets: dict[TableBucket, set[_Waiter]] = {}


class ReadFence:
    """Owns the fence's logical clock, the round collecting reads and the started rounds still waiting, per
    bucket in start order. Built by the ``ReadPath`` over its session cache and the manager's replica map
    (read, never changed here). See the module docstring."""

    def __init__(
        self,
        server_id: int,
        replicas: Mapping[TableBucket, Replica],
        sessions: FetchSessionCache,
        clock: Callable[[], float],
    ) -> None:
        self._server_id = server_id
        self._clock = clock
        self._replicas = replicas
        self._sessions = sessions
        self._tick = 0
        self._collecting: _Round | None = None
        self._waiting: dict[TableBucket, list[_Round]] = {}
        self.rounds = 0  # rounds started (tests, the benchmark)
        self.wakeups = 0  # follower sessions asked to answer at once

    def _next_tick(self) -> int:
        self._tick += 1
        return self._tick

    # ------------------------------------------------------------ the fetch sessions' side
    def requested(self, session: FetchSession) -> None:
        """A request of ``session`` arrived (its buckets applied): it was sent after the session's last answer.
        Rounds waiting on buckets it holds look again; if one still waits for this ISR member's proof, the
        request answers at once."""
        session.proven_at = session.answered_at
        if not self._waiting or not session.for_follower:
            return
        for tb in [tb for tb in self._waiting if tb in session.positions]:
            self.recheck(tb)
            rounds, replica = self._waiting.get(tb), self._replicas.get(tb)
            if rounds and replica is not None and session.replica_id in replica.maximal_isr:
                session.fence_demand = max(session.fence_demand, rounds[-1].start)

    def answered(self, session: FetchSession) -> None:
        """The current request of ``session`` is answered (the answer leaves after this tick)."""
        session.answered_at = self._next_tick()

    @staticmethod
    def owes(waiter: Waker) -> bool:
        """A round needs an answer of this parked request (a follower session's): do not keep it waiting."""
        return isinstance(waiter, FetchSession) and waiter.fence_demand > waiter.answered_at

    def stopped(self, replica: Replica) -> tuple[int, ...]:
        """ISR members that KV reads of this leader replica wait for, and that sent no request holding its
        bucket at its leader epoch for ``replica.lag.time.max``: the ISR shrink removes them, as it removes a
        follower an acks=all write waits for. (An idle bucket's caught-up follower is otherwise in sync
        however long ago it fetched: it holds everything there is.)"""
        tb = replica.table_bucket
        if tb not in self._waiting or not replica.is_leader:
            return ()
        since = self._clock() - replica.lag_time_s
        fetching = {
            s.replica_id
            for s in self._sessions.sessions_of(tb)
            if s.for_follower and s.last_used >= since and s.positions[tb].current_leader_epoch == replica.leader_epoch
        }
        return tuple(r for r in replica.isr if r != self._server_id and r not in fetching)

    # ------------------------------------------------------------ the reads' side
    def needed(self, replica: Replica) -> bool:
        """A read of this leader replica waits for a confirmation: its maximal ISR has another member."""
        return any(r != self._server_id for r in replica.maximal_isr)

    async def confirm(self, buckets: Collection[TableBucket], timeout_s: float) -> set[TableBucket]:
        """Wait until the ISR of each bucket confirmed its leader after now, or ``timeout_s``; returns the
        buckets left unconfirmed (the caller checks again that it still leads at the same epoch)."""
        if not buckets:
            return set()
        loop = asyncio.get_running_loop()
        round_ = self._collecting
        if round_ is None:
            round_ = self._collecting = _Round()
            loop.call_soon(self._start)
        waiter = _Waiter(loop.create_future(), set(buckets), round_)
        for tb in buckets:
            round_.buckets.setdefault(tb, set()).add(waiter)
        try:
            await wait_futures((waiter.future,), timeout_s)
        finally:
            self._leave(waiter)
        return waiter.left

    def waiting(self, tb: TableBucket) -> int:
        """How many started rounds wait for ``tb``'s confirmation."""
        return len(self._waiting.get(tb, ()))

    def _start(self) -> None:
        """Start the collecting round: its tick, then an answer asked of every follower session of its buckets."""
        round_, self._collecting = self._collecting, None
        if round_ is None:
            return
        round_.start = self._next_tick()
        self.rounds += 1
        for tb in list(round_.buckets):
            self._waiting.setdefault(tb, []).append(round_)
            replica = self._replicas.get(tb)
            isr = replica.maximal_isr if replica is not None else ()
            for session in self._sessions.sessions_of(tb):
                if session.for_follower and session.replica_id in isr:
                    session.fence_demand = round_.start
                    session.answer_now()
                    self.wakeups += 1
            self.recheck(tb)  # (an ISR that shrank to the leader alone meanwhile)

    def recheck(self, tb: TableBucket) -> None:
        """Settle the rounds of ``tb`` that its ISR confirmed; all of them when the replica no longer leads
        (their reads look again and fail). Called when a session proves, or the bucket's ISR or role changed."""
        rounds = self._waiting.get(tb)
        if not rounds:
            return
        replica = self._replicas.get(tb)
        if replica is None or not replica.is_leader:
            through = math.inf
        else:
            through = confirmed_through(self._server_id, replica.leader_epoch, replica.maximal_isr, self._proofs(tb))
        n = 0
        while n < len(rounds) and rounds[n].start < through:
            self._settle(rounds[n], tb)
            n += 1
        del rounds[:n]
        if not rounds:
            del self._waiting[tb]

    def _proofs(self, tb: TableBucket) -> Iterable[Proof]:
        for session in self._sessions.sessions_of(tb):
            if session.for_follower:
                position = session.positions.get(tb)
                if position is not None:
                    yield session.replica_id, position.current_leader_epoch, session.proven_at

    @staticmethod
    def _settle(round_: _Round, tb: TableBucket) -> None:
        for waiter in round_.buckets.pop(tb, ()):
            waiter.left.discard(tb)
            if not waiter.left and not waiter.future.done():
                waiter.future.set_result(None)

    def _leave(self, waiter: _Waiter) -> None:
        """A read stops waiting (answered, timed out, cancelled): drop it from its round's unconfirmed buckets,
        and the round from a bucket no read waits on any more."""
        round_ = waiter.round
        for tb in waiter.left:
            waiters = round_.buckets.get(tb)
            if waiters is None:
                continue
            waiters.discard(waiter)
            if waiters:
                continue
            del round_.buckets[tb]
            rounds = self._waiting.get(tb)
            if rounds is not None and round_ in rounds:
                rounds.remove(round_)
                if not rounds:
                    del self._waiting[tb]
