"""The servers' ZooKeeper digest credentials from config (``zookeeper.auth.user`` / ``.password``)."""

from __future__ import annotations

from fluss_py import config as cfg
from fluss_py.errors import ConfigError


def zk_credentials(config: cfg.Config) -> tuple[str, str] | None:
    """(user, password), or None when no ZooKeeper user is configured; ConfigError when only one is set."""
    user, password = config[cfg.ZK_AUTH_USER], config.secret(cfg.ZK_AUTH_PASSWORD)
    if bool(user) != bool(password):
        raise ConfigError(cfg.ZK_AUTH_USER.key, "zookeeper.auth.user and zookeeper.auth.password go together")
    return (user, password) if user else None
