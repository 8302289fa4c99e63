"""Dynamic configuration: which keys may change at run time, for which entity, and how layers combine
(design: docs/dynamic-config.md).

Entities and precedence (highest first) for a value a tablet server uses::

    table (config/tables/<id>)  >  the table's creation properties  >  tablet-server (config/tablet-servers/<id>)
                                >  cluster (config/cluster)  >  the server's static file / -D overrides

Every key here is an option of the registry in ``fluss_py/config.py`` (or the ``min.insync.replicas`` table
property); values are checked with the registry's parser before anything is stored (``validate``), and
the entity's entries after the alter with the registry's rules between keys (``cfg.CONSTRAINTS``) over the
defaults and the other stored entities (``rule_stacks``, ``check_rules``). ``LayeredConfig`` reads like a
``Config`` with dynamic overrides on top, so ``ReplicaSettings.from_config`` and ``LogConfig.from_config``
resolve dynamic values without knowing about them; it checks the same rules on the layered whole, so a
server never runs with a combination its static file would have refused. Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fluss_py import config as cfg
from fluss_py.errors import ConfigError, InvalidConfigError

# the entity types, as named in requests and in the znode paths (``zk/paths.py`` DynamicConfigZNode)
CLUSTER, TABLET_SERVER, TABLE = ENTITY_TYPES = ("cluster", "tablet-server", "table")
TABLE_MIN_ISR = "min.insync.replicas"  # the table property (the server-wide key is tablet-server.min.insync...)

_SERVER_LEVELS = frozenset({CLUSTER, TABLET_SERVER})
_ALL_LEVELS = frozenset({CLUSTER, TABLET_SERVER, TABLE})

# key -> the entity types it may be set on
DYNAMIC_KEYS: dict[str, frozenset[str]] = {
    cfg.REBALANCE_THROTTLE.key: _SERVER_LEVELS,
    cfg.REBALANCE_BATCH_RATIO.key: frozenset({CLUSTER}),
    cfg.TABLE_LOG_TTL.key: _ALL_LEVELS,
    cfg.TABLE_LOG_RETENTION_BYTES.key: _ALL_LEVELS,
    cfg.MIN_INSYNC_REPLICAS.key: _SERVER_LEVELS,
    TABLE_MIN_ISR: frozenset({TABLE}),
    cfg.REPLICA_LAG_TIME_MAX.key: _SERVER_LEVELS,
    cfg.LOG_FLUSH_INTERVAL.key: _SERVER_LEVELS,
    cfg.LOG_FLUSH_ON_ACK.key: _ALL_LEVELS,
}

# checks beyond the type (the registry parses; these bound the values a running server would misbehave with)
_POSITIVE = {cfg.REPLICA_LAG_TIME_MAX.key, cfg.LOG_FLUSH_INTERVAL.key}
_AT_LEAST_ONE = {cfg.MIN_INSYNC_REPLICAS.key, TABLE_MIN_ISR}


def keys_for(entity_type: str) -> list[str]:
    return sorted(k for k, types in DYNAMIC_KEYS.items() if entity_type in types)


def _parse(key: str, raw: str) -> Any:
    try:
        return cfg.OPTIONS[key].parse(raw)
    except ConfigError as e:  # the registry's message names the key
        raise InvalidConfigError(str(e)) from None


def validate(
    entity_type: str, changes: Mapping[str, str], deletions: Iterable[str] = (), replication_factor: int | None = None
) -> dict[str, str]:
    """Check an alter request; return the normalised changes. Raises InvalidConfigError (nothing stored)."""
    if entity_type not in ENTITY_TYPES:
        raise InvalidConfigError(f"unknown entity type {entity_type!r} (cluster, tablet-server, table)")
    out: dict[str, str] = {}
    for key in [*changes, *deletions]:
        types = DYNAMIC_KEYS.get(key)
        if types is None:
            dynamic = ", ".join(sorted(DYNAMIC_KEYS))
            raise InvalidConfigError(f"{key} cannot be changed at run time (dynamic keys: {dynamic})")
        if entity_type not in types:
            raise InvalidConfigError(f"{key} cannot be set on a {entity_type} (only on: {', '.join(sorted(types))})")
    for key, raw in changes.items():
        value = _parse(key, str(raw))
        if key in _POSITIVE and not value > 0:
            raise InvalidConfigError(f"{key} must be positive, got {raw!r}")
        if key in _AT_LEAST_ONE and value < 1:
            raise InvalidConfigError(f"{key} must be at least 1, got {raw!r}")
        if key == TABLE_MIN_ISR and replication_factor is not None and value > replication_factor:
            raise InvalidConfigError(f"{key}={value} exceeds the table's replication factor {replication_factor}")
        if key == cfg.REBALANCE_BATCH_RATIO.key and not 0 < value <= 1:
            raise InvalidConfigError(f"{key} must be in (0, 1], got {raw!r}")
        if key == cfg.REBALANCE_THROTTLE.key and value < 0:
            raise InvalidConfigError(f"{key} must be >= 0, got {raw!r}")
        out[key] = str(raw)
    return out


def merged(current: Mapping[str, str], changes: Mapping[str, str], deletions: Iterable[str]) -> dict[str, str]:
    """The entity's entries after an alter (pure)."""
    out = {k: v for k, v in current.items() if k not in set(deletions)}
    out.update(changes)
    return out


_RULE_ROLES = (cfg.COORDINATOR, cfg.TABLET)  # the roles that read dynamic server-level values


def rule_stacks(
    entity_type: str,
    entries: Mapping[str, str],
    cluster: Mapping[str, str],
    servers: Mapping[str, Mapping[str, str]],
) -> list[list[Mapping[str, str]]]:
    """The server-level layers (lowest first) an alter of ``entity_type`` to ``entries`` produces, one stack per
    kind of server it reaches: ``cluster`` is the stored cluster entity, ``servers`` the stored tablet-server
    entities by id. A table entity's entries do not layer server settings (none)."""
    if entity_type == CLUSTER:
        return [[entries], *([entries, server] for server in servers.values())]
    if entity_type == TABLET_SERVER:
        return [[cluster, entries]]
    return []


def check_rules(stacks: Iterable[Sequence[Mapping[str, str]]]) -> None:
    """Check ``cfg.CONSTRAINTS`` on the registry defaults of each server role with each stack of layers on top.
    Raises InvalidConfigError naming the rule (nothing stored). A server whose static file differs from the
    defaults checks again when it applies the values (``LayeredConfig``)."""
    for layers in stacks:
        for role in _RULE_ROLES:
            try:
                LayeredConfig(cfg.Config(role), *layers)
            except ConfigError as e:
                raise InvalidConfigError(f"{e.message} (with the defaults and the stored dynamic entries)") from None


class LayeredConfig(Mapping[str, Any]):
    """A ``Config`` with dynamic overrides on top (server level: tablet-server over cluster). Read-only.
    Raises ConfigError when a value does not parse or the layered whole breaks a rule of ``cfg.CONSTRAINTS``."""

    def __init__(self, base: cfg.Config, *layers: Mapping[str, str]) -> None:
        self._base = base
        self._over: dict[str, Any] = {}
        for layer in layers:  # lowest first
            for key, raw in layer.items():
                option = cfg.OPTIONS.get(key)
                if option is not None and base.role in option.roles:
                    self._over[key] = option.parse(raw)
        cfg.check_constraints(self, base.role)

    @property
    def role(self) -> str:
        return self._base.role

    def __getitem__(self, key: str | cfg.ConfigOption) -> Any:
        name = key.key if isinstance(key, cfg.ConfigOption) else key
        return self._over[name] if name in self._over else self._base[key]

    def __iter__(self):
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)

    def overridden(self) -> dict[str, Any]:
        return dict(self._over)
