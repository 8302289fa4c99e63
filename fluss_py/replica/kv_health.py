"""What /health and /metrics say of each primary-key replica's KV (docs/primary-key-tables.md §9)::

    applying    it applies the committed changelog (its apply lag: HW - applied offset)
    rebuilding  it started empty over a log that holds changes (a KV rebuilt: unreadable, corrupt, truncated
                below what it applied) and has not yet applied what the log held then
    stopped     it stopped applying (why: ``reason``); its replica is offline here (``KvApplier.stop``), or
                about to be

A KV rebuilds in ``KvTablet`` (at open, before an apply round, after a truncation): ``KvHealth`` notices it by
the tablet's ``rebuilds`` count and the applied offset at open, without being told.

Who may call: ``KvApplier`` (``opened``, ``forget``, ``stopped``), the stats pass (``state``). On the
server's loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from fluss_py.kv.tablet import KvTablet
from fluss_py.log.tablet import LogTablet
from fluss_py.types import TableBucket


class KvState(StrEnum):
    APPLYING = "applying"
    REBUILDING = "rebuilding"
    STOPPED = "stopped"

    @property
    def code(self) -> int:
        """The value of ``fluss_kv_state``: 0 applying, 1 rebuilding, 2 stopped."""
        return _CODES[self]


_CODES = {KvState.APPLYING: 0, KvState.REBUILDING: 1, KvState.STOPPED: 2}


@dataclass(frozen=True, slots=True)
class KvStatus:
    state: KvState
    reason: str = ""  # why it stopped, or what it is rebuilding from


class KvHealth:
    """Owns what is remembered to tell a KV's state: the rebuild count seen per bucket, the log end a
    rebuilding KV must reach, and the buckets whose KV stopped (their replicas offline). See the module
    docstring."""

    def __init__(self) -> None:
        self._rebuilds: dict[TableBucket, int] = {}
        self._rebuilding: dict[TableBucket, int] = {}  # bucket -> the log end when its KV started empty
        self.stopped: dict[TableBucket, str] = {}  # KVs that stopped, why (kept while the replica is offline)

    def opened(self, tb: TableBucket, kv: KvTablet, log_: LogTablet) -> None:
        """A KV was opened (and checked) beside ``log_``."""
        self._rebuilds[tb] = kv.rebuilds
        self.stopped.pop(tb, None)
        if kv.applied_offset == log_.log_start_offset < log_.log_end_offset:  # it holds nothing of its log
            self._rebuilding[tb] = log_.log_end_offset
        else:
            self._rebuilding.pop(tb, None)

    def state(self, tb: TableBucket, kv: KvTablet, log_: LogTablet) -> KvStatus:
        """The KV's state now (notes a rebuild that happened since the last look)."""
        if kv.rebuilds != self._rebuilds.get(tb, kv.rebuilds):
            self._rebuilding[tb] = log_.log_end_offset
        self._rebuilds[tb] = kv.rebuilds
        if kv.failed is not None:
            return KvStatus(KvState.STOPPED, kv.failed)
        target = self._rebuilding.get(tb)
        if target is not None and kv.applied_offset < min(target, log_.log_end_offset):
            return KvStatus(KvState.REBUILDING, f"from offset {log_.log_start_offset} to {target}")
        self._rebuilding.pop(tb, None)
        return KvStatus(KvState.APPLYING)

    def forget(self, tb: TableBucket) -> None:
        """The replica's KV was closed (it left this server, or went offline)."""
        self._rebuilds.pop(tb, None)
        self._rebuilding.pop(tb, None)
