"""What the console reads of the coordinator leader, as narrow Protocols.

The console lies below ``coordinator/`` (docs/architecture.md, "Layers"): the coordinator's server wires the
feed and hands it the leader's state, and the console names that state only by the shape it reads. The
coordinator's ``ClusterView`` is a ``LeaderView``, its ``GroupMembers`` a ``GroupView``; unit tests may
pass anything of the same shape. Who may call: read on the coordinator's loop, like the view itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence, Set
from typing import Protocol

from fluss_py.types import LeaderAndIsr, TableBucket, TablePath

# told (bucket, old, new) on every LeaderAndIsr change of a loaded bucket: the failover timeline's feed
LeaderAndIsrHook = Callable[[TableBucket, "LeaderAndIsr | None", LeaderAndIsr], None]


class TableView(Protocol):
    @property
    def path(self) -> TablePath: ...

    @property
    def num_buckets(self) -> int: ...

    @property
    def replication_factor(self) -> int: ...


class BucketView(Protocol):
    @property
    def replicas(self) -> Sequence[int]: ...  # preferred leader first

    @property
    def leader_and_isr(self) -> LeaderAndIsr | None: ...  # None before the first election


class LeaderView(Protocol):
    """The serving leader's tables and buckets, and the hook the feed sets to follow leader changes."""

    on_leader_and_isr: LeaderAndIsrHook | None

    @property
    def tables(self) -> Mapping[int, TableView]: ...

    @property
    def buckets(self) -> Mapping[TableBucket, BucketView]: ...

    def is_offline(self, tb: TableBucket) -> bool: ...  # the leader's state machine holds the bucket Offline

    @property
    def tagged(self) -> Mapping[int, str]: ...  # server -> its tag (docs/rebalance.md §12)


class MemberView(Protocol):
    @property
    def member_id(self) -> str: ...

    @property
    def client_host(self) -> str: ...

    @property
    def assigned(self) -> Set[TableBucket]: ...


class GroupView(Protocol):
    """One consumer group's membership in the leader's memory."""

    @property
    def state(self) -> str: ...  # EMPTY, STABLE or RECONCILING

    @property
    def members(self) -> Mapping[str, MemberView]: ...
