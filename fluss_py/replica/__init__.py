"""Bucket replicas of a tablet server: roles, ISR, high watermark, delayed requests and follower fetchers.

The tablet server builds one ``ReplicaManager`` (see docs/replication.md) with a ``GrpcCoordinatorEndpoint``
and ``GrpcLeaderEndpoint`` as the endpoint factory; the tablet service converts protobuf to and from the
values in ``fluss_py.replica.messages``.
"""

from fluss_py.replica.fetcher.leader_endpoint import GrpcLeaderEndpoint, LeaderEndpoint
from fluss_py.replica.gateway import CoordinatorEndpoint, GrpcCoordinatorEndpoint
from fluss_py.replica.manager import ReplicaManager, ReplicaSettings, ReplicaStats
from fluss_py.replica.replica import LocalReplicaState, Replica

__all__ = [
    "CoordinatorEndpoint",
    "GrpcCoordinatorEndpoint",
    "GrpcLeaderEndpoint",
    "LeaderEndpoint",
    "LocalReplicaState",
    "Replica",
    "ReplicaManager",
    "ReplicaSettings",
    "ReplicaStats",
]
