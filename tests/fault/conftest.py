"""Fixtures of the fault tests: real ZooKeeper, real processes (see fluss_py.testing.fixtures)."""

from fluss_py.testing.fixtures import (
    cluster_factory,
    long_session_zookeeper,
    netns_hosts,
    powercut_fs,
    zk_root,
    zookeeper,
)
from tests.fault.group_support import members

__all__ = [
    "cluster_factory",
    "long_session_zookeeper",
    "members",
    "netns_hosts",
    "powercut_fs",
    "zk_root",
    "zookeeper",
]
