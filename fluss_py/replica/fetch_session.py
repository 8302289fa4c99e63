"""Incremental fetch sessions on the leader (docs/replication.md "Fetch sessions", after Kafka KIP-227).

A ``FetchSession`` is one follower's (or consumer's) standing fetch: its last position in every bucket it
fetches from this server, and the buckets something happened to since it last saw them (``dirty``). It stays
registered on its buckets between requests, so appends, HW moves and role changes mark it whether or not a
request is parked on it; a request then reads only the buckets it names plus the carried and dirty ones.

``FetchSessionCache`` applies requests to sessions (opening, continuing, epoch checks), keeps the bucket index,
and bounds the cache: at most ``per_follower`` sessions per follower server and ``max_clients`` for all
consumers together (least recently used evicted), none unused for ``idle_s``. Event-loop thread only; owned by
``ReplicaManager``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence

from fluss_py.errors import FetchSessionNotFoundError, InvalidFetchSessionEpochError
from fluss_py.replica.delayed import Waker
from fluss_py.replica.messages import NO_SESSION, FetchBucketRequest, FetchSessionRequest
from fluss_py.types import TableBucket

MAX_SESSIONS_PER_FOLLOWER = 2
"""One per fetcher; two leave room for a fetcher being replaced (a leader's address changed)."""
MAX_CLIENT_SESSIONS = 1000
"""Consumers' sessions (all ``replica_id`` -1), least recently used evicted (Kafka's cache has 1000 slots)."""
SESSION_IDLE_S = 60.0
"""A session nobody continued for this long is dropped (its follower died or opened another)."""


class FetchSession(Waker):
    """One follower's (or consumer's: ``replica_id`` -1) session. A follower's is woken by appends and marked
    by HW moves; a consumer reads below the HW, so HW moves wake its session and appends do not.
    ``positions``: the last request per bucket; ``last_used``: when its last request arrived (replica clock),
    i.e. the last time the follower was known to poll; ``stale``: the
    buckets appended to or changing role since the session last read them (an HW move marks a bucket dirty
    but not stale); ``carried``: buckets the last answer left behind, read first at the next request.
    The read fence's ticks (``replica/read_fence.py``): ``answered_at`` (the last answer), ``proven_at`` (the
    current request was sent after this tick), ``fence_demand`` (a round needs an answer after this tick)."""

    __slots__ = (
        "answered_at",
        "carried",
        "closed",
        "fence_demand",
        "for_follower",
        "id",
        "last_used",
        "next_epoch",
        "positions",
        "proven_at",
        "replica_id",
        "stale",
    )

    def __init__(self, session_id: int, replica_id: int, now: float) -> None:
        super().__init__()
        self.id = session_id
        self.replica_id = replica_id
        self.for_follower = replica_id >= 0
        self.next_epoch = 1
        self.positions: dict[TableBucket, FetchBucketRequest] = {}
        self.stale: set[TableBucket] = set()
        self.carried: dict[TableBucket, None] = {}  # an ordered set
        self.last_used = now
        self.closed = False
        self.answered_at = self.proven_at = self.fence_demand = 0

    def answer_now(self) -> None:
        """Wake a parked request without marking a bucket: its long poll ends and it answers what it has."""
        if self.future is not None and not self.future.done():
            self.future.set_result(None)

    def take_dirty(self) -> set[TableBucket]:
        """The buckets to read now (they are read at once: no longer stale)."""
        dirty = super().take_dirty()
        self.stale.difference_update(dirty)
        return dirty

    def carry(self, bucket: TableBucket) -> None:
        """Read ``bucket`` first at the next request (without waking a parked one)."""
        self.carried[bucket] = None

    def take_carried(self) -> list[TableBucket]:
        carried, self.carried = list(self.carried), {}
        return carried

    def __repr__(self) -> str:
        return f"FetchSession(id={self.id}, replica={self.replica_id}, buckets={len(self.positions)})"


class FetchSessionCache:
    def __init__(
        self,
        clock: Callable[[], float],
        *,
        per_follower: int = MAX_SESSIONS_PER_FOLLOWER,
        max_clients: int = MAX_CLIENT_SESSIONS,
        idle_s: float = SESSION_IDLE_S,
        new_id: Callable[[], int] | None = None,
    ) -> None:
        self._clock = clock
        self._per_follower = per_follower
        self._max_clients = max_clients
        self._idle_s = idle_s
        self._new_id = new_id or (lambda: random.getrandbits(31))
        self._sessions: dict[int, FetchSession] = {}
        self._by_bucket: dict[TableBucket, set[FetchSession]] = {}
        self.opened_total = 0  # full requests: a steady rise while idle means followers keep starting over

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    # ------------------------------------------------------------ requests

    def begin(
        self, replica_id: int, request: FetchSessionRequest, buckets: Sequence[FetchBucketRequest]
    ) -> FetchSession:
        """Apply one request: open a session (``request.id`` 0, ``buckets`` = all of them) or continue one
        (``buckets`` = added or moved, ``request.forgotten`` = dropped). Raises FETCH_SESSION_NOT_FOUND for an
        unknown id or another follower's, INVALID_FETCH_SESSION_EPOCH (and drops the session) for an epoch
        other than the next one: either way the follower starts over with a full request."""
        now = self._clock()
        if request.id == NO_SESSION:
            session = self._open(replica_id, now)
        else:
            session = self._sessions.get(request.id)
            if session is None or session.replica_id != replica_id:
                raise FetchSessionNotFoundError(f"no fetch session {request.id} of follower {replica_id}")
            if request.epoch != session.next_epoch:
                self._close(session)
                raise InvalidFetchSessionEpochError(
                    f"fetch session {request.id}: epoch {request.epoch}, expected {session.next_epoch}"
                )
            for tb in request.forgotten:
                self._forget(session, tb)
            session.next_epoch += 1
        session.last_used = now
        for b in buckets:
            self._track(session, b)
        return session

    def _open(self, replica_id: int, now: float) -> FetchSession:
        room = self._per_follower if replica_id >= 0 else self._max_clients  # consumers share replica id -1
        mine = sorted((s for s in self._sessions.values() if s.replica_id == replica_id), key=lambda s: s.last_used)
        for old in mine[: max(0, len(mine) - room + 1)]:
            self._close(old)
        session_id = self._new_id()
        while session_id == NO_SESSION or session_id in self._sessions:
            session_id = self._new_id()
        session = FetchSession(session_id, replica_id, now)
        self._sessions[session_id] = session
        self.opened_total += 1
        return session

    def _track(self, session: FetchSession, request: FetchBucketRequest) -> None:
        tb = request.table_bucket
        if tb not in session.positions:
            self._by_bucket.setdefault(tb, set()).add(session)
        session.positions[tb] = request
        session.stale.discard(tb)  # read by this request

    def _forget(self, session: FetchSession, tb: TableBucket) -> None:
        if session.positions.pop(tb, None) is None:
            return
        session.dirty.discard(tb)
        session.stale.discard(tb)
        session.carried.pop(tb, None)
        watchers = self._by_bucket.get(tb)
        if watchers is not None:
            watchers.discard(session)
            if not watchers:
                del self._by_bucket[tb]

    def _close(self, session: FetchSession) -> None:
        for tb in list(session.positions):
            self._forget(session, tb)
        self._sessions.pop(session.id, None)
        session.closed = True
        if session.future is not None and not session.future.done():
            session.future.set_result(None)  # a request parked on it answers now

    def evict_idle(self) -> int:
        """Drop sessions unused for ``idle_s``; returns how many."""
        cutoff = self._clock() - self._idle_s
        stale = [s for s in self._sessions.values() if s.last_used < cutoff]
        for s in stale:
            self._close(s)
        return len(stale)

    def close_all(self) -> None:
        for s in list(self._sessions.values()):
            self._close(s)

    # ------------------------------------------------------------ events

    def sessions_of(self, tb: TableBucket) -> Iterable[FetchSession]:
        return self._by_bucket.get(tb, ())

    def appended(self, tb: TableBucket) -> list[FetchSession]:
        """The bucket's LEO moved: wake its followers' sessions. Returns those in which it was clean (read at
        the session's last look, not appended to since), for the caught-up rule."""
        clean = []
        for s in self._by_bucket.get(tb, ()):
            if not s.for_follower:
                continue  # below the HW nothing changed
            if tb not in s.stale:
                clean.append(s)
            s.stale.add(tb)
            s.wake(tb)
        return clean

    def produce_waits(self, tb: TableBucket) -> None:
        """An acks=all produce of ``tb`` waits without an append (a duplicate retry): wake its followers'
        sessions to look again (the LEO did not move: the caught-up state is left alone)."""
        for s in self._by_bucket.get(tb, ()):
            if s.for_follower:
                s.wake(tb)

    def hw_moved(self, tb: TableBucket) -> None:
        """Wake consumers' sessions (new records to read); mark followers' without waking (the new HW rides on
        their next answer)."""
        for s in self._by_bucket.get(tb, ()):
            if s.for_follower:
                s.mark(tb)
            else:
                s.wake(tb)

    def role_changed(self, tb: TableBucket) -> None:
        for s in self._by_bucket.get(tb, ()):
            s.stale.add(tb)
            s.wake(tb)

    def wake_all(self) -> None:
        for tb, sessions in self._by_bucket.items():
            for s in sessions:
                s.wake(tb)
