"""The leader's pre-write buffer: the changes appended to the log but not yet applied to the KV.

Invariant 7 of docs/primary-key-tables.md: the leader's view of a key is the KV plus this buffer. The leader
merges a new write against the buffer's entry for its key when there is one (a row, or ``None``: deleted),
else against RocksDB. Each entry remembers the offset of the change that wrote it; when the KV's applied offset
passes that offset the entry is dropped (the KV holds the same value then), unless a later change of the key
replaced it. Only a leader has a buffer: it is rebuilt from the log ``[applied, LEO)`` when a replica becomes
leader and cleared when it stops being one.

Pure data structure; the ``KvTablet`` owning it is called from the event loop only.
"""

from __future__ import annotations

from collections import deque


class PreWriteBuffer:
    """key -> (offset, row or None) of the latest pending change of each key, plus the changes in offset
    order (to drop them as they are applied, O(1) each)."""

    __slots__ = ("_latest", "_order")

    def __init__(self) -> None:
        self._latest: dict[bytes, tuple[int, bytes | None]] = {}
        self._order: deque[tuple[int, bytes]] = deque()

    def put(self, offset: int, key: bytes, row: bytes | None) -> None:
        """The change at ``offset`` left ``key`` as ``row`` (None: deleted). Offsets only grow."""
        if self._order and offset <= self._order[-1][0]:
            raise ValueError(f"pre-write buffer: offset {offset} after {self._order[-1][0]}")
        self._latest[key] = (offset, row)
        self._order.append((offset, key))

    def get(self, key: bytes) -> tuple[int, bytes | None] | None:
        """(offset, row or None) of the latest pending change of ``key``; None when the KV is up to date."""
        return self._latest.get(key)

    def drop_below(self, applied_offset: int) -> int:
        """Forget the changes below ``applied_offset`` (now in the KV); returns how many keys left the buffer."""
        order, latest = self._order, self._latest
        dropped = 0
        while order and order[0][0] < applied_offset:
            offset, key = order.popleft()
            entry = latest.get(key)
            if entry is not None and entry[0] == offset:
                del latest[key]
                dropped += 1
        return dropped

    def clear(self) -> None:
        self._latest.clear()
        self._order.clear()

    @property
    def last_offset(self) -> int:
        """The offset of the latest change held; -1 when empty."""
        return self._order[-1][0] if self._order else -1

    def __len__(self) -> int:
        """Keys with a pending change."""
        return len(self._latest)

    def __repr__(self) -> str:
        return f"PreWriteBuffer({len(self._latest)} keys, {len(self._order)} changes)"
