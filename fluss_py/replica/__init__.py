"""Bucket replicas of a tablet server: roles, ISR, high watermark, delayed requests and follower fetchers.

The tablet server builds one ``ReplicaManager`` (see docs/replication.md) with a ``GrpcCoordinatorGateway``
and ``GrpcLeaderEndpoint`` as the endpoint factory; the tablet service converts protobuf to and from the
values in ``fluss_py.replica.messages``.
"""

from fluss_py.replica.fetcher.leader_endpoint import GrpcLeaderEndpoint, LeaderEndpoint
from fluss_py.replica.gateway import CoordinatorGateway, GrpcCoordinatorGateway
from fluss_py.replica.manager import ReplicaManager, ReplicaSettings, ReplicaStats
from fluss_py.replica.replica import Replica, ReplicaState

__all__ = [
    "CoordinatorGateway",
    "GrpcCoordinatorGateway",
    "GrpcLeaderEndpoint",
    "LeaderEndpoint",
    "Replica",
    "ReplicaManager",
    "ReplicaSettings",
    "ReplicaState",
    "ReplicaStats",
]
