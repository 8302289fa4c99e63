"""Streamed follower fetches (``FetchLogStream``): one fetch session on one bidirectional stream, one answer
per request, in order (docs/replication.md "Streamed follower fetches").

Two halves, both free of gRPC so that unit and model tests drive them over in-memory streams:

- ``FetchStreamGuard``, the leader's side: what one stream is bound to — the replica id proven when it
  opened, one fetch session, one leader epoch per bucket — and whether a message keeps to it. Pure.
- ``FetchStreamClient``, the follower's side: lockstep exchanges on the open stream; a full request opens a
  new stream; an exchange that does not end with its answer read (cancelled, failed) drops the stream, so
  an answer still on its way can never be taken for the answer to a later request.

Who calls: the tablet servicer's ``FetchLogStream`` handler (one guard per stream) and the in-memory leader
of the unit tests; ``GrpcLeaderEndpoint`` (one client per endpoint, driven by its ``ReplicaFetcher`` task).
All on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from typing import Any, Protocol

from fluss_py.errors import ApiError, FetchSessionNotFoundError, InvalidRequestError
from fluss_py.replica.messages import NO_SESSION

STREAM_RETRY_S = 60.0
"""After a leader answered UNIMPLEMENTED (it has no FetchLogStream), unary calls only for this long."""


class FetchStreamGuard:
    """The leader's record of what one FetchLogStream is bound to. Owned by the servicer's handler of that
    stream (created once the first message's replica id is proven), which asks ``admit`` before handling each
    message and tells ``answered`` after writing its answer."""

    __slots__ = ("_epochs", "replica_id", "session_id")

    def __init__(self, replica_id: int) -> None:
        self.replica_id = replica_id
        self.session_id: int | None = None  # None until the first answer names the stream's session
        self._epochs: dict[Hashable, int] = {}  # bucket -> the leader epoch it was first named with here

    def admit(
        self, replica_id: int, session_id: int | None, buckets: Iterable[tuple[Hashable, int]]
    ) -> ApiError | None:
        """None when the message keeps to the stream's bindings, else the error that ends the stream.
        ``session_id`` None: the message has no session; ``buckets``: (bucket, current_leader_epoch) named."""
        if replica_id != self.replica_id:
            return InvalidRequestError(f"a fetch stream of replica {self.replica_id} carried a fetch as {replica_id}")
        if session_id is None:
            return InvalidRequestError("a fetch stream carries one fetch session: this request has none")
        if self.session_id is None:
            if session_id != NO_SESSION:
                return FetchSessionNotFoundError("a fetch stream opens with a full request (session id 0)")
        elif session_id != self.session_id:
            return FetchSessionNotFoundError(
                f"this fetch stream carries session {self.session_id}, not {session_id}: open a new stream"
            )
        epochs = self._epochs
        for bucket, epoch in buckets:
            bound = epochs.setdefault(bucket, epoch)
            if bound != epoch:
                return InvalidRequestError(
                    f"bucket {bucket} was fetched at leader epoch {bound} on this stream, now at {epoch}: "
                    "a new epoch needs a new stream"
                )
        return None

    def answered(self, session_id: int, failed: bool) -> bool:
        """The answer to the admitted message was written; False: end the stream now (a whole-request error,
        or the leader kept no session for it)."""
        if failed or session_id == NO_SESSION:
            return False
        self.session_id = session_id
        return True


class FetchStream(Protocol):
    """One open bidirectional stream: ``read`` returns the next answer or raises when the stream ended;
    ``cancel`` ends it at once (the leader stops handling whatever it was handling)."""

    async def write(self, message: Any) -> None: ...

    async def read(self) -> Any: ...

    def cancel(self) -> None: ...


class FetchStreamClient:
    """The follower's stream to one leader server: at most one open stream, one exchange at a time.
    Owned by a ``GrpcLeaderEndpoint`` (or a unit test's in-memory endpoint); called by its fetcher's task."""

    def __init__(self, open_stream: Callable[[], FetchStream]) -> None:
        self._open = open_stream
        self._stream: FetchStream | None = None
        self.opened = 0  # streams opened so far (tests, logs)

    @property
    def is_open(self) -> bool:
        return self._stream is not None

    async def exchange(self, message: Any, *, opens_session: bool) -> Any:
        """Send ``message`` and return its answer. A request that opens a session goes on a new stream; one
        that continues a session needs the stream that carried the session so far (else
        FETCH_SESSION_NOT_FOUND: the fetcher then sends a full request). Anything but a normal return of the
        answer (an error, a cancel, a timeout around this call) drops the stream."""
        if opens_session:
            self.drop()
            stream = self._open()
            self.opened += 1
        else:
            stream = self._stream
            if stream is None:
                raise FetchSessionNotFoundError("no open fetch stream carries this session: send a full request")
        self._stream = None  # taken until its answer is read: an abandoned exchange leaves nothing to reuse
        try:
            await stream.write(message)
            answer = await stream.read()
        except BaseException:
            stream.cancel()
            raise
        self._stream = stream
        return answer

    def drop(self) -> None:
        """End the open stream (if any): its session is over, the next request must open a new one."""
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.cancel()
