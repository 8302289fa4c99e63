"""pytest fixtures for integration and fault tests (imported by tests/integration and tests/fault conftests).

- ``zookeeper``        one real ZooKeeper per test session (tickTime 500 ms: 1-10 s sessions allowed)
- ``long_session_zookeeper``  another one that allows sessions up to 30 s (fast-failover tests, which show
                       that a failover did not wait for a long session)
- ``zk_root``          a fresh root per test, e.g. ``/fluss-test_leader_failover-3``
- ``cluster_factory``  ``make(coordinators, tablet_servers, ...) -> LocalCluster`` on the shared ZooKeeper
                       under ``zk_root`` (or with its own ZooKeeper and the default ``/fluss`` root);
                       ``overrides`` go to every server, ``coordinator_overrides`` / ``tablet_overrides``
                       to one role only (fixed when the cluster is made: its command lines are recorded);
                       every cluster it made is closed after the test, every PID killed, pass or fail
                       ``netns=True``: every process (and the test's clients, host ``client``) on its own
                       test host; ``zookeepers=3``: an ensemble (both imply the cluster's own ZooKeeper);
                       ``supervise=RestartPolicy(...)``: every server under a supervisor (supervisor.py)
- ``netns_hosts``      skips the test, saying why, where namespaces cannot be created (no privilege, no tools)
- ``powercut_fs``      a mounted power-cut filesystem (``testing/powercut.py``), unmounted after the test (ask
                       for it before ``cluster_factory``: the servers writing there are killed first); skips
                       the test, saying why, where FUSE cannot be used

``secure_module_cluster(directory, zookeeper, root, tablet_servers)`` makes (does not start) the secure
cluster a security test module shares: one coordinator, replication factor ``min(2, tablet_servers)``, a
minimum ISR of 1.

Test clusters use short ZooKeeper sessions (``TEST_OVERRIDES``) so failover tests stay fast. Their processes
die with the thread that started them (PR_SET_PDEATHSIG): start processes from the test's own thread, not
from a worker thread that ends before the test does.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.netns import unavailable_reason as netns_unavailable_reason
from fluss_py.testing.powercut import PowerCutFs
from fluss_py.testing.powercut import unavailable_reason as fuse_unavailable_reason
from fluss_py.testing.supervision import RestartPolicy
from fluss_py.testing.zookeeper import ZooKeeperProcess, zookeeper_installed

SESSION_TIMEOUT_S = 2.0
TEST_OVERRIDES = {
    "zookeeper.session-timeout": f"{SESSION_TIMEOUT_S:g}s",
    "zookeeper.connection-timeout": "20s",
    "log.level": "INFO",
}
_counter = itertools.count(1)


@pytest.fixture(scope="session")
def netns_hosts() -> None:
    """Skips the test (with the reason) where network namespaces cannot be created or filtered here."""
    reason = netns_unavailable_reason()
    if reason is not None:
        pytest.skip(f"test hosts in network namespaces: {reason}")


@pytest.fixture
def powercut_fs(tmp_path: Path) -> Iterator[PowerCutFs]:
    reason = fuse_unavailable_reason()
    if reason is not None:
        pytest.skip(f"no FUSE filesystem for the power-cut tests: {reason}")
    fs = PowerCutFs(tmp_path / "powercut-mnt")
    fs.mount()
    try:
        yield fs
    finally:
        fs.close()  # unmounted by path, the filesystem process ended, even when the test failed


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    if not zookeeper_installed():
        pytest.skip("ZooKeeper is not installed (make install)")
    zk = ZooKeeperProcess(tmp_path_factory.mktemp("zookeeper"), tick_time=500, die_with_parent=True).start()
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture(scope="session")
def long_session_zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperProcess]:
    if not zookeeper_installed():
        pytest.skip("ZooKeeper is not installed (make install)")
    zk = ZooKeeperProcess(
        tmp_path_factory.mktemp("zk-long"), tick_time=500, die_with_parent=True, max_session_timeout_ms=30_000
    ).start()
    try:
        yield zk
    finally:
        zk.stop()


@pytest.fixture
def zk_root(request: pytest.FixtureRequest) -> str:
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", request.node.name)[:60]
    return f"/fluss-{name}-{next(_counter)}"


@pytest.fixture
def cluster_factory(
    request: pytest.FixtureRequest, tmp_path: Path, zk_root: str
) -> Iterator[Callable[..., LocalCluster]]:
    made: list[LocalCluster] = []

    def make(
        coordinators: int = 3,
        tablet_servers: int = 3,
        *,
        own_zookeeper: bool = False,
        start: bool = True,
        overrides: Mapping[str, Any] | None = None,
        coordinator_overrides: Mapping[str, Any] | None = None,
        tablet_overrides: Mapping[str, Any] | None = None,
        timeout: float = 60.0,
        netns: bool = False,
        zookeepers: int = 1,
        secure: bool = False,
        client_certificates: bool = True,
        supervise: RestartPolicy | None = None,
    ) -> LocalCluster:
        if netns:
            request.getfixturevalue("netns_hosts")
        if own_zookeeper or netns or zookeepers > 1:
            zk_address, root = None, "/fluss"
        else:
            zk_address, root = request.getfixturevalue("zookeeper").address, zk_root
        cluster = LocalCluster(
            tmp_path / f"cluster-{len(made) + 1}",
            coordinators,
            tablet_servers,
            zookeeper=zk_address,
            zk_root=root,
            tick_time=500,
            overrides={**TEST_OVERRIDES, **(overrides or {})},
            coordinator_overrides=coordinator_overrides,
            tablet_overrides=tablet_overrides,
            die_with_parent=True,
            zookeepers=zookeepers,
            netns=netns,
            secure=secure,
            client_certificates=client_certificates,
            supervise=supervise,
        )
        made.append(cluster)
        if start:
            cluster.start(timeout=timeout)
        return cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.close(grace=3.0)


def secure_module_cluster(directory: Path, zookeeper: str, zk_root: str, tablet_servers: int = 2) -> LocalCluster:
    """The secure cluster of a security test module (see the module docstring); the caller starts and closes it."""
    return LocalCluster(
        directory,
        1,
        tablet_servers,
        zookeeper=zookeeper,
        zk_root=zk_root,
        overrides=TEST_OVERRIDES,
        coordinator_overrides={"default.replication.factor": str(min(2, tablet_servers))},
        tablet_overrides={"tablet-server.min.insync.replicas": "1"},
        die_with_parent=True,
        secure=True,
    )
