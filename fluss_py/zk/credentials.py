"""The servers' ZooKeeper client from config: address, root, timeouts and digest credentials
(``zookeeper.auth.user`` / ``.password``)."""

from __future__ import annotations

from fluss_py import config as cfg
from fluss_py.errors import ConfigError
from fluss_py.zk.client import ZkClient


def zk_credentials(config: cfg.Config) -> tuple[str, str] | None:
    """(user, password), or None when no ZooKeeper user is configured; ConfigError when only one is set."""
    user, password = config[cfg.ZK_AUTH_USER], config.secret(cfg.ZK_AUTH_PASSWORD)
    if bool(user) != bool(password):
        raise ConfigError(cfg.ZK_AUTH_USER.key, "zookeeper.auth.user and zookeeper.auth.password go together")
    return (user, password) if user else None


def server_zk_client(config: cfg.Config) -> ZkClient:
    """The (not yet started) ZooKeeper client of a coordinator or tablet server, as its config says."""
    return ZkClient(
        config[cfg.ZK_ADDRESS],
        config[cfg.ZK_ROOT],
        session_timeout=float(config[cfg.ZK_SESSION_TIMEOUT]),
        connection_timeout=float(config[cfg.ZK_CONNECTION_TIMEOUT]),
        auth=zk_credentials(config),
    )
