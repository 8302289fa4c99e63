"""Idempotent writer ids: unique across coordinator failovers, handed out from blocks reserved in ZooKeeper.

``<root>/metadata/writer_id`` (WriterIdCounterZNode) holds the last id reserved by any coordinator. To
reserve a block the leader reads ``(last, version)`` and commits ``set(last + block, version)`` fenced by
its coordinator epoch: a concurrent or later reservation makes the version check fail and we re-read,
so two coordinators can never reserve overlapping blocks; ids of a block left unused by a coordinator
that lost leadership are simply never handed out. Ids start at 1; the first reservation creates the
node (a concurrent create loses with NodeExists and re-reads).

Who may call: the event processor's task (one allocation at a time).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from fluss_py.zk.paths import WriterIdCounterZNode
from fluss_py.zk.values import BadVersionError, CreateOp, EpochFence, NodeExistsError, Op, SetOp, ZnodeStat

log = logging.getLogger(__name__)

DEFAULT_BLOCK_SIZE = 1000
MAX_ATTEMPTS = 20


class CounterStore(Protocol):
    root: str

    async def get(self, path: str) -> tuple[bytes, ZnodeStat] | None: ...

    async def commit(self, ops: Sequence[Op], fence: EpochFence | None = None) -> list[Any]: ...


class WriterIdAllocator:
    """Hands out writer ids from the current block; reserves a new block when it runs out."""

    def __init__(self, store: CounterStore, fence: EpochFence, block_size: int = DEFAULT_BLOCK_SIZE) -> None:
        if block_size < 1:
            raise ValueError("block_size must be positive")
        self._store = store
        self._fence = fence
        self._block_size = block_size
        self._next = 0
        self._end = 0  # exclusive

    async def allocate(self) -> int:
        if self._next >= self._end:
            self._next, self._end = await self._reserve_block()
        writer_id = self._next
        self._next += 1
        return writer_id

    async def _reserve_block(self) -> tuple[int, int]:
        path = WriterIdCounterZNode.path(self._store.root)
        for _ in range(MAX_ATTEMPTS):
            got = await self._store.get(path)
            try:
                if got is None:
                    last = 0
                    await self._store.commit(
                        [CreateOp(path, WriterIdCounterZNode.encode(self._block_size))], fence=self._fence
                    )
                else:
                    last = WriterIdCounterZNode.decode(got[0])
                    await self._store.commit(
                        [SetOp(path, WriterIdCounterZNode.encode(last + self._block_size), got[1].version)],
                        fence=self._fence,
                    )
            except (BadVersionError, NodeExistsError):
                log.info("Writer id counter moved while reserving a block; re-reading")
                continue
            log.info("Reserved writer ids %d..%d", last + 1, last + self._block_size)
            return last + 1, last + 1 + self._block_size
        raise RuntimeError(f"could not reserve a writer id block after {MAX_ATTEMPTS} attempts")
