"""Automatic preferred-leader election (design: docs/control-plane.md "Leader balance").

After a failover the buckets a server led are led by other replicas; when it comes back it only follows.
Every ``leader.imbalance.check-interval`` the coordinator leader looks at each live server's *preferred*
buckets (those whose first assigned replica it is) and, for a server where more than
``leader.imbalance.per-server.percentage`` of them are led by someone else, gives each such bucket back
to it — only when it is live, in the ISR, not shutting down and not tagged (``election.preferred_leader``;
docs/rebalance.md §12), and never for a bucket a running rebalance batch is moving::

    tick ──▶ PreferredLeaderCheck (event loop) ──▶ imbalance per server ──▶ plan (pure) ──▶ fenced write
         ──▶ NotifyLeaderAndIsr to the replicas of the moved buckets (through the TableProcessor)

A preferred leader in the ISR holds every acknowledged record (the ISR invariant), so the move loses
nothing; the old leader becomes a follower and truncates any unacknowledged tail by leader epoch.

``imbalance`` and ``plan`` are pure; ``LeaderBalancer`` owns the tick task. Who may call: LeaderServices
(``install``/``start``/``close``); the handler runs on the event loop task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass
from typing import Any

from fluss_py import config as cfg
from fluss_py.coordinator import election
from fluss_py.coordinator.event_loop import Ticker
from fluss_py.coordinator.events import PreferredLeaderCheck
from fluss_py.coordinator.tables import BucketInfo
from fluss_py.types import LeaderAndIsr, TableBucket

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LeaderBalanceOptions:
    enabled: bool = True
    threshold_percent: int = 10
    check_interval: float = 300.0

    @staticmethod
    def from_config(config: Any) -> LeaderBalanceOptions:
        return LeaderBalanceOptions(
            bool(config[cfg.AUTO_LEADER_REBALANCE]),
            int(config[cfg.LEADER_IMBALANCE_PERCENTAGE]),
            float(config[cfg.LEADER_IMBALANCE_CHECK_INTERVAL]),
        )


def imbalance(buckets: Mapping[TableBucket, BucketInfo], live: Set[int]) -> dict[int, float]:
    """Per live server: the fraction of the buckets it is preferred leader of that another replica leads
    (pure). Servers preferred for no bucket are left out."""
    preferred: dict[int, int] = {}
    not_led: dict[int, int] = {}
    for bucket in buckets.values():
        if not bucket.replicas or bucket.replicas[0] not in live:
            continue
        server = bucket.replicas[0]
        preferred[server] = preferred.get(server, 0) + 1
        lai = bucket.leader_and_isr
        if lai is None or lai.leader != server:
            not_led[server] = not_led.get(server, 0) + 1
    return {s: not_led.get(s, 0) / n for s, n in preferred.items()}


def plan(
    buckets: Mapping[TableBucket, BucketInfo],
    live: Set[int],
    shutting_down: Set[int],
    busy: Set[TableBucket],
    threshold_percent: int,
    coordinator_epoch: int,
) -> list[tuple[TableBucket, LeaderAndIsr]]:
    """The preferred-leader elections to make now (pure): for every server whose imbalance exceeds the
    threshold, each of its preferred buckets it can lead (live, in the ISR, not shutting down), except the
    ``busy`` ones (a running rebalance batch moves them)."""
    over = {s for s, ratio in imbalance(buckets, live).items() if ratio * 100 > threshold_percent}
    changes = []
    for tb in sorted(buckets):
        bucket = buckets[tb]
        if tb in busy or not bucket.replicas or bucket.replicas[0] not in over or bucket.leader_and_isr is None:
            continue
        new = election.preferred_leader(bucket.replicas, bucket.leader_and_isr, live, coordinator_epoch, shutting_down)
        if new is not None:
            changes.append((tb, new))
    return changes


class LeaderBalancer:
    """Owns the check tick task; its handler runs on the event loop. ``processor`` is the TableProcessor
    (view, live servers, fenced writes, notifications); ``busy`` names the buckets of the running rebalance
    batch."""

    def __init__(
        self, processor: Any, options: LeaderBalanceOptions, busy: Callable[[], Set[TableBucket]] = frozenset
    ) -> None:
        self._p = processor
        self.options = options
        self._busy = busy
        self._ticker = Ticker("leader-balance-tick", options.check_interval, PreferredLeaderCheck)
        self.elections = 0  # preferred-leader elections made during this leadership (metrics, tests)

    def install(self, loop: Any) -> None:
        loop.register(PreferredLeaderCheck, self.check)

    def start(self, loop: Any) -> None:
        if self.options.enabled:
            self._ticker.start(loop)

    async def close(self) -> None:
        await self._ticker.close()

    async def check(self, _event: PreferredLeaderCheck | None = None) -> int:
        """Make the elections ``plan`` asks for; returns how many were written."""
        p = self._p
        excluded = p.view.shutting_down | p.view.tagged.keys()  # a tagged server gets no leadership back
        changes = plan(p.view.buckets, p.live(), excluded, self._busy(), self.options.threshold_percent, p.epoch)
        written = await write_leaders(p, changes, "Preferred leader election: bucket %s led by %d again")
        self.elections += len(written)
        return len(written)


async def write_leaders(
    p: Any, changes: list[tuple[TableBucket, LeaderAndIsr]], line: str, logger: logging.Logger = log
) -> list[tuple[TableBucket, LeaderAndIsr]]:
    """Write leadership changes of the TableProcessor ``p`` (fenced, conditional), tell each bucket's replicas
    and every server's metadata, log ``line % (bucket, leader)`` per change; returns what was written. On the
    event loop (the preferred-leader check, the tag room's moves off tagged servers)."""
    if not changes:
        return []
    written = await p.store.write_leader_isr(changes)
    batch = p.new_batch()
    for tb, new in written:
        p.notify(batch, tb)
        p.refresh_states(tb)
        logger.info(line, tb, new.leader)
    batch.metadata_delta(p.live(), [tb for tb, _ in written])
    p.send(batch)
    return written
