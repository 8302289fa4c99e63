"""Which led buckets' (log bytes, HW, LEO) may have changed: the liveness heartbeat's size report in
O(changed) (docs/rebalance.md §2).

A led bucket's reported triple changes only when its log changes (an append, a HW move, a truncation, a
retention deletion, a reset: ``LogTablet.on_change``, passed on by the log manager as
``on_log_change``) or when the replica's role changes (``Replica.on_transition``: it becomes or stops being
the leader, goes offline). ``LedChanges`` is told of both and adds the bucket to the touched set of every
open ``LedWatch``. A liveness stream opens one watch with its first (whole) report and then asks, every
interval, only for the buckets it touched since: an idle server's report costs nothing per bucket.

Who may call: the replica manager (construction, hooks), the liveness streams (``watch``, ``take``,
``current``), all on the tablet server's loop.
"""

from __future__ import annotations

from collections.abc import Mapping

from fluss_py.log.tablet import LogTablet
from fluss_py.replica.replica import LocalReplicaState, Replica
from fluss_py.types import TableBucket

Reported = tuple[int, int, int]  # (log bytes, HW, LEO)


class LedWatch:
    """The buckets touched since the last ``take``. Owned by one liveness stream; ``close`` when it ends."""

    def __init__(self, owner: LedChanges) -> None:
        self._owner = owner
        self.touched: set[TableBucket] = set()

    def take(self) -> set[TableBucket]:
        touched, self.touched = self.touched, set()
        return touched

    def close(self) -> None:
        self._owner.watches.discard(self)


class LedChanges:
    """Feeds the open watches from the two hooks above; reads a bucket's current triple from the replica
    map it is given (the replica manager's own dict, not a copy). Owned by the replica manager."""

    def __init__(self, replicas: Mapping[TableBucket, Replica]) -> None:
        self._replicas = replicas
        self.watches: set[LedWatch] = set()

    def touch(self, tb: TableBucket) -> None:
        for w in self.watches:
            w.touched.add(tb)

    def log_changed(self, tablet: LogTablet) -> None:
        if self.watches:
            self.touch(tablet.table_bucket)

    def replica_changed(self, replica: Replica) -> None:
        if self.watches:
            self.touch(replica.table_bucket)

    def watch(self) -> LedWatch:
        """A new watch: what changes from now on (call it in the same loop step as the whole report)."""
        w = LedWatch(self)
        self.watches.add(w)
        return w

    def current(self, tb: TableBucket) -> Reported | None:
        """The bucket's (log bytes, HW, LEO) if this server leads it, else None."""
        r = self._replicas.get(tb)
        if r is None or r.state is not LocalReplicaState.LEADER:
            return None
        return r.log.size_in_bytes, r.log.high_watermark, r.log.log_end_offset

    def all(self) -> list[tuple[TableBucket, Reported]]:
        """Every led bucket's triple (a stream's first report: one pass over the replicas)."""
        return [
            (tb, (r.log.size_in_bytes, r.log.high_watermark, r.log.log_end_offset))
            for tb, r in self._replicas.items()
            if r.state is LocalReplicaState.LEADER
        ]
