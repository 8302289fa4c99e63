"""Fixtures of the integration tests: real ZooKeeper, real processes (see fluss_py.testing.fixtures)."""

from fluss_py.testing.fixtures import cluster_factory, netns_hosts, zk_root, zookeeper

__all__ = ["cluster_factory", "netns_hosts", "zk_root", "zookeeper"]
