"""FetcherManager: which ReplicaFetcher replicates which bucket — one fetcher per source leader server."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping

from fluss_py.replica.fetcher.fetcher import FlushLogs, ReplicaFetcher
from fluss_py.replica.fetcher.leader_endpoint import LeaderEndpoint
from fluss_py.replica.fetcher.state import FetchSettings
from fluss_py.replica.replica import Replica
from fluss_py.types import ServerNode, TableBucket

log = logging.getLogger(__name__)


class FetcherManager:
    """Maps followed buckets to fetchers keyed by leader (id, address); owned by ReplicaManager.

    Called from the event loop only (ReplicaManager's become_leader_or_follower / stop_replicas / shutdown).
    A fetcher left with no bucket is closed; a leader at a new address gets a new fetcher.
    """

    def __init__(
        self,
        server_id: int,
        endpoint_factory: Callable[[ServerNode], LeaderEndpoint],
        replica_of: Callable[[TableBucket], Replica | None],
        settings: FetchSettings,
        flush: FlushLogs | None = None,
    ) -> None:
        self.server_id = server_id
        self._endpoint_factory = endpoint_factory
        self._flush = flush
        self._replica_of = replica_of
        self.settings = settings
        self._fetchers: dict[tuple[int, str], ReplicaFetcher] = {}
        self._bucket_fetcher: dict[TableBucket, tuple[int, str]] = {}

    @property
    def fetchers(self) -> dict[tuple[int, str], ReplicaFetcher]:
        return dict(self._fetchers)

    def fetcher_of(self, tb: TableBucket) -> ReplicaFetcher | None:
        key = self._bucket_fetcher.get(tb)
        return self._fetchers.get(key) if key else None

    async def add_buckets(self, buckets: Mapping[TableBucket, tuple[ServerNode, int]]) -> None:
        """Follow ``{bucket: (leader server, leader epoch)}``; each bucket restarts in Truncating."""
        moved = [tb for tb, (node, _) in buckets.items() if self._bucket_fetcher.get(tb) != (node.id, node.address)]
        await self.remove_buckets(moved)  # a bucket staying with its fetcher just restarts there
        by_leader: dict[tuple[int, str], dict[TableBucket, int]] = {}
        nodes: dict[tuple[int, str], ServerNode] = {}
        for tb, (leader, epoch) in buckets.items():
            key = (leader.id, leader.address)
            by_leader.setdefault(key, {})[tb] = epoch
            nodes[key] = leader
        for key, group in by_leader.items():
            fetcher = self._fetchers.get(key)
            if fetcher is None:
                fetcher = ReplicaFetcher(
                    self.server_id,
                    nodes[key],
                    self._endpoint_factory(nodes[key]),
                    self._replica_of,
                    self.settings,
                    self._flush,
                )
                self._fetchers[key] = fetcher
                fetcher.start()
                log.info("started replica fetcher from leader %d at %s", key[0], key[1])
            fetcher.add_buckets(group)
            for tb in group:
                self._bucket_fetcher[tb] = key

    async def remove_buckets(self, buckets: Iterable[TableBucket]) -> None:
        touched: set[tuple[int, str]] = set()
        for tb in buckets:
            key = self._bucket_fetcher.pop(tb, None)
            if key is not None and key in self._fetchers:
                self._fetchers[key].remove_buckets([tb])
                touched.add(key)
        for key in touched:
            fetcher = self._fetchers[key]
            if not fetcher.buckets:
                del self._fetchers[key]
                await fetcher.close()
                log.info("closed idle replica fetcher from leader %d", key[0])

    def failures(self) -> list[BaseException]:
        return [f.failure for f in self._fetchers.values() if f.failure is not None]

    async def close(self) -> None:
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        self._bucket_fetcher.clear()
        for f in fetchers:
            await f.close()
