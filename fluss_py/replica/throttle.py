"""Leader-side replication throttle for followers being added (docs/rebalance.md §6).

A token bucket per tablet server (``tablet-server.rebalance.throttle-bytes-per-second``), shared by every
follower fetch this server answers as leader for a follower that a rebalance move is adding (named in the
NotifyLeaderAndIsr's ``adding_replicas``) and that is not in the (maximal) ISR yet (a follower not yet known
to the leader as assigned is not served at all: REPLICA_NOT_ASSIGNED, docs/peer-trust.md). ISR followers,
clients and a follower catching up after a restart are never throttled, so neither acks=all latency nor the
return to full replication waits for the copy.

Accounting is per fetch response, never per record: ``allowance()`` is how many bytes a throttled bucket
may read now (0: none; it answers empty and the follower asks again), ``take(n)`` charges what was actually
returned. A read returns at least one whole batch, so the bucket may go into debt by at most one batch;
the refill pays it back before the next throttled read. Over any window of ``t`` seconds at most
``rate * t + burst + one batch`` bytes are served.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class ReplicationThrottle:
    """Token bucket: ``rate`` bytes/s, at most ``burst`` bytes saved up. ``rate`` 0 is unlimited.

    Owned by ``ReplicaManager``; called from the event-loop thread only (the fetch path), so no lock.
    """

    def __init__(self, rate: int, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = max(0, int(rate))
        self.burst = max(1, int(burst))
        self._clock = clock
        self._tokens = float(self.burst)
        self._at = clock()
        self.bytes_total = 0  # bytes served to throttled followers (fluss_replica_throttled_bytes_total)
        self.deferred_total = 0  # throttled bucket reads answered empty for want of tokens

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def _refill(self) -> None:
        now = self._clock()
        if now > self._at:
            self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        self._at = now

    def allowance(self, budget: int) -> int:
        """Bytes a throttled bucket may read now, at most ``budget`` (0: none left; counted as deferred)."""
        if not self.enabled:
            return budget
        self._refill()
        if self._tokens < 1.0:
            self.deferred_total += 1
            return 0
        return min(budget, int(self._tokens))

    def take(self, nbytes: int) -> None:
        """Charge ``nbytes`` actually returned to a throttled follower (may leave a debt of one batch)."""
        self.bytes_total += nbytes
        if self.enabled and nbytes:
            self._refill()
            self._tokens -= nbytes
