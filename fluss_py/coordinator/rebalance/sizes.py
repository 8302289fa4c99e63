"""Bucket log sizes for the rebalance planner (docs/rebalance.md §2), as the tablet servers report them.

Every tablet server puts the log sizes of the buckets it leads on its liveness heartbeat (the first one of
a stream, then every few seconds: ``tablet/liveness.py``); the coordinator leader's liveness stream hands
each report to ``BucketSizes.report``. A report replaces that server's previous one (a bucket it no
longer leads drops out of it); reports older than ``max_age_s`` are ignored (a dead server's). Per
bucket the largest fresh report counts (two servers may both claim a bucket for a moment around a
leadership change; the leader's log is the one that holds everything).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from fluss_py.types import TableBucket

MAX_AGE_S = 60.0


class BucketSizes:
    """The latest size report per tablet server. Owned by LeaderServices; ``report`` is called by the
    liveness stream tasks and ``__call__`` by the rebalance executor (its ``sizes`` provider), both on the
    leader's asyncio loop."""

    def __init__(self, max_age_s: float = MAX_AGE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age_s = max_age_s
        self._clock = clock
        self._reports: dict[int, tuple[float, dict[TableBucket, int]]] = {}
        self._offsets: dict[int, dict[TableBucket, tuple[int, int]]] = {}  # (HW, LEO) per led bucket (console)

    def report(
        self,
        server_id: int,
        sizes: Mapping[TableBucket, int],
        dropped: Iterable[TableBucket] = (),
        incremental: bool = False,
        offsets: Mapping[TableBucket, tuple[int, int]] | None = None,
    ) -> None:
        """A server's report: whole (replaces its previous one), or ``incremental`` (changed sizes and the
        buckets it no longer leads, on top of the previous report of the same stream). ``offsets``: the
        same buckets' (HW, LEO), merged the same way (O(changed) per report)."""
        previous = self._reports.get(server_id)
        if not incremental or previous is None:
            self._reports[server_id] = (self._clock(), dict(sizes))
            self._offsets[server_id] = dict(offsets or {})
            return
        merged, merged_offsets = previous[1], self._offsets.setdefault(server_id, {})
        for tb in dropped:
            merged.pop(tb, None)
            merged_offsets.pop(tb, None)
        merged.update(sizes)
        merged_offsets.update(offsets or {})
        self._reports[server_id] = (self._clock(), merged)

    def offsets(self) -> dict[int, Mapping[TableBucket, tuple[int, int]]]:
        """(HW, LEO) per led bucket of each server with a fresh report, as of that report (the console takes
        a bucket's from its current leader; no copy is made)."""
        oldest = self._clock() - self.max_age_s
        return {sid: self._offsets.get(sid, {}) for sid, (at, _) in self._reports.items() if at >= oldest}

    def __call__(self) -> dict[TableBucket, int]:
        """Bytes per bucket from the fresh reports (a bucket no server reported is absent: 0 to the planner)."""
        oldest = self._clock() - self.max_age_s
        out: dict[TableBucket, int] = {}
        for at, sizes in self._reports.values():
            if at < oldest:
                continue
            for tb, size in sizes.items():
                if size > out.get(tb, -1):
                    out[tb] = size
        return out
