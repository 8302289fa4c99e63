"""Assigned buckets and where the consumer reads next in each.

A bucket is either *positioned* (``offset`` known: fetchable) or *awaiting a reset* (``reset`` says to
what: earliest, latest (the high watermark), or the first offset at a timestamp), which the fetcher
resolves with ListOffsets at the bucket's leader. ``seek`` sets an offset directly. Every change of a
bucket's position bumps its ``generation`` so a fetch answer taken for an older position is discarded.

Owned by one event loop: ``Consumer`` (user calls) and the ``Fetcher`` task read and write it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from fluss_py.types import TableBucket


class ResetTo(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    TIMESTAMP = "timestamp"


@dataclass(slots=True)
class BucketPosition:
    offset: int | None = None
    reset: ResetTo | None = None
    timestamp_ms: int = 0
    generation: int = 0
    retry_at: float = 0.0  # backoff after a failed fetch or offset lookup
    attempts: int = 0
    out_of_range: int = 0  # OFFSET_OUT_OF_RANGE resets in a row (no fetch answered without error between)
    high_watermark: int = -1


class Positions:
    """The assignment and per-bucket positions (see module docstring)."""

    def __init__(self, default_reset: str) -> None:
        self._default_reset = default_reset
        self.buckets: dict[TableBucket, BucketPosition] = {}

    def assign(self, buckets: list[TableBucket]) -> None:
        """Replace the assignment; buckets kept keep their position, new ones await the default reset."""
        old = self.buckets
        self.buckets = {tb: old.get(tb) or self._fresh() for tb in buckets}

    def _fresh(self) -> BucketPosition:
        position = BucketPosition()
        if self._default_reset != "none":
            position.reset = ResetTo(self._default_reset)
        return position

    def seek(self, tb: TableBucket, offset: int) -> None:
        p = self._get(tb)
        p.offset, p.reset, p.generation, p.retry_at = offset, None, p.generation + 1, 0.0

    def request_reset(self, tb: TableBucket, to: ResetTo, timestamp_ms: int = 0) -> None:
        p = self._get(tb)
        p.offset, p.reset, p.timestamp_ms, p.generation, p.retry_at = None, to, timestamp_ms, p.generation + 1, 0.0

    def reset_to_default(self, tb: TableBucket) -> bool:
        """After OFFSET_OUT_OF_RANGE: reset by the default policy; False when the policy is "none"."""
        if self._default_reset == "none":
            return False
        self.request_reset(tb, ResetTo(self._default_reset))
        return True

    def advance(self, tb: TableBucket, offset: int) -> None:
        """Records up to ``offset - 1`` were handed to the user (same generation)."""
        self._get(tb).offset = offset

    def position(self, tb: TableBucket) -> int | None:
        return self._get(tb).offset

    def _get(self, tb: TableBucket) -> BucketPosition:
        p = self.buckets.get(tb)
        if p is None:
            raise ValueError(f"bucket {tb} is not assigned")
        return p

    def awaiting_reset(self) -> list[TableBucket]:
        return [tb for tb, p in self.buckets.items() if p.offset is None and p.reset is not None]

    def positioned(self) -> list[TableBucket]:
        return [tb for tb, p in self.buckets.items() if p.offset is not None]

    def unpositioned(self) -> list[TableBucket]:
        """Buckets with neither an offset nor a pending reset (auto_offset_reset "none", never seeked)."""
        return [tb for tb, p in self.buckets.items() if p.offset is None and p.reset is None]
