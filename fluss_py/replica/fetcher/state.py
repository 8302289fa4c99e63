"""The follower fetcher's small state: its settings, each bucket's phase (Truncating | Fetching) and retry time,
and the follower's side of its fetch session. Owned by one ``ReplicaFetcher`` (its task only).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from fluss_py.errors import ErrorCode
from fluss_py.replica.messages import (
    NO_SESSION,
    FetchBucketRequest,
)
from fluss_py.types import TableBucket


@dataclass(frozen=True, slots=True)
class FetchSettings:
    """replica.fetch.* options (seconds and bytes)."""

    wait_max_s: float = 0.5
    min_bytes: int = 1
    max_bytes: int = 10 * 1024**2
    backoff_s: float = 0.05


class FetchPhase(Enum):
    TRUNCATING = "Truncating"
    FETCHING = "Fetching"


@dataclass(eq=False, slots=True)
class BucketFetchState:
    leader_epoch: int
    phase: FetchPhase = FetchPhase.TRUNCATING
    retry_at: float = 0.0


SESSION_ERRORS = (ErrorCode.FETCH_SESSION_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH)


class FollowerSession:
    """The follower's side of one fetch session: its id and next epoch, and ``sent`` — what the leader's
    session holds (bucket -> the last request sent for it and the fetch state it was sent for)."""

    __slots__ = ("epoch", "id", "sent")

    def __init__(self) -> None:
        self.id = NO_SESSION
        self.epoch = 0
        self.sent: dict[TableBucket, tuple[FetchBucketRequest, BucketFetchState]] = {}

    def reset(self) -> None:
        """Forget the session: the next request is a full one that opens a new session."""
        self.id = NO_SESSION
        self.epoch = 0
        self.sent.clear()

    def answered(self, session_id: int) -> None:
        """A request was answered: the session (new or continued) expects the next epoch."""
        if session_id == NO_SESSION:  # the leader keeps no session: every request stays full
            self.reset()
        elif session_id != self.id:
            self.id, self.epoch = session_id, 1
        else:
            self.epoch += 1
