"""Loading configuration: ``Config`` (one role's parsed settings), YAML files and ``-D`` overrides, deprecated
key spellings, the rules between keys. The options themselves are declared in ``fluss_py.config`` (which
re-exports everything here: callers use ``cfg.Config``, ``cfg.load_config``); the registry they are declared
into is ``fluss_py.config_values.OPTIONS``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from fluss_py.config_values import CONSTRAINTS, OPTIONS, ConfigOption, masked
from fluss_py.errors import ConfigError


def check_constraints(config: Mapping[Any, Any], role: str) -> None:
    """Raise ConfigError naming the first of ``CONSTRAINTS`` that ``config`` (read by option) breaks for
    ``role``: a ``Config`` when it is built, a dynamic ``LayeredConfig`` on top of one (docs/dynamic-config.md)."""
    for rule in CONSTRAINTS:
        if all(role in o.roles for o in rule.options) and not rule.holds(*(config[o] for o in rule.options)):
            shown = ", ".join(f"{o.key}={o.show_masked(config[o])}" for o in rule.options)
            raise ConfigError(rule.options[0].key, f"{rule.rule} must hold (got {shown})")


class Config(Mapping[str, Any]):
    """Parsed settings of one role (or of a table's properties: role ``table``). ``config[OPTION]`` or
    ``config["key"]``; defaults fill the rest. Built once per process (or per CreateTable); every value is
    checked against its option's range and the role's ``CONSTRAINTS`` here, so holders never re-check."""

    def __init__(self, role: str, values: Mapping[str, Any] | None = None) -> None:
        self.role = role
        self._raw: dict[str, Any] = dict(values or {})
        self.deprecations: list[str] = []  # deprecated keys read by load_config (logged once at start-up)
        self._values: dict[str, Any] = {}
        for key, raw in self._raw.items():
            self._values[key] = _lookup(key, role).parse(raw)
        check_constraints(self, role)

    def __getitem__(self, key: str | ConfigOption) -> Any:
        opt = key if isinstance(key, ConfigOption) else _lookup(key, self.role)
        return self._values.get(opt.key, opt.default)

    def __iter__(self):
        return iter(k for k, o in OPTIONS.items() if self.role in o.roles)

    def __len__(self) -> int:
        return sum(1 for o in OPTIONS.values() if self.role in o.roles)

    def with_overrides(self, overrides: Mapping[str, Any]) -> Config:
        return Config(self.role, {**self._raw, **overrides})

    def explicit(self) -> dict[str, Any]:
        """The settings given explicitly (parsed values), e.g. for logging at start; secrets are masked."""
        return masked(self._values)

    def secret(self, key: ConfigOption) -> str:
        """The value of a secret option (a password); never pass it to a log line."""
        return str(self[key])


# ---------------------------------------------------------------- deprecated spellings
# Key names of the design write-up this project started from, accepted as aliases of the canonical keys
# above (docs/operations.md "Deprecated key names"). The canonical key wins when both are given; a server
# logs one warning at start-up naming every alias it read.
DEPRECATED_ALIASES: dict[str, str] = {
    "tablet-server.rebalance.trigger.threshold": "coordinator.rebalance.trigger-threshold",
    "tablet-server.rebalance.check.interval": "coordinator.rebalance.check-interval",
    "tablet-server.rebalance.max.concurrent.migrations": "tablet-server.rebalance.max-concurrent-migrations",
    "rebalance.max.concurrent.migrations": "tablet-server.rebalance.max-concurrent-migrations",
    "tablet-server.replica.fetch.max.bytes": "replica.fetch.max.bytes",
}


def resolve_aliases(values: Mapping[str, Any], role: str) -> tuple[dict[str, Any], list[str]]:
    """Rename deprecated keys to their canonical ones (pure). Returns the values and one notice per alias:
    renamed, ignored because the canonical key is also set, or ignored because this role does not read it
    (the rebalance keys are spelled ``tablet-server.*`` although the coordinator reads them: docs/rebalance.md)."""
    out: dict[str, Any] = {}
    notices: list[str] = []
    for key, value in values.items():
        canonical = DEPRECATED_ALIASES.get(key)
        if canonical is None:
            out[key] = value
        elif canonical in values:
            notices.append(f"{key} ignored: {canonical} is set")
        elif role not in OPTIONS[canonical].roles:
            notices.append(f"{key} (now {canonical}) ignored: read by {', '.join(OPTIONS[canonical].roles)} only")
        else:
            out[canonical] = value
            notices.append(f"{key} -> {canonical}")
    return out, notices


def _lookup(key: str, role: str) -> ConfigOption:
    opt = OPTIONS.get(key)
    if opt is None:
        raise ConfigError(key, "unknown configuration key")
    if role not in opt.roles:
        raise ConfigError(key, f"not a {role} option (it is for: {', '.join(opt.roles)})")
    return opt


def parse_overrides(pairs: Iterable[str]) -> dict[str, str]:
    """``["a.b=1", "c=2s"]`` -> ``{"a.b": "1", "c": "2s"}``; a pair without '=' is a ConfigError."""
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(pair, "expected -D key=value")
        result[key.strip()] = value.strip()
    return result


def load_config(
    role: str,
    path: str | Path | Iterable[str | Path] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> Config:
    """Read YAML files (flat ``key: value`` mappings; a later file wins) for ``role``, overrides on top."""
    values: dict[str, Any] = {}
    paths = [path] if isinstance(path, str | Path) else list(path or ())
    for file in paths:
        try:
            data = yaml.safe_load(Path(file).read_text(encoding="utf-8")) or {}
        except UnicodeDecodeError as e:  # a ValueError: one line naming the file, like the others below
            line = e.object[: e.start].count(b"\n") + 1
            raise ConfigError(str(file), f"not UTF-8 (byte 0x{e.object[e.start]:02x} on line {line})") from None
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(str(file), f"cannot read config file: {e}") from None
        if not isinstance(data, dict):
            raise ConfigError(str(file), "config file must be a mapping of key: value")
        values.update({str(k): v for k, v in data.items()})
    # aliases are resolved per source, so a -D override (either spelling) still beats the file
    values, notices = resolve_aliases(values, role)
    extra, more = resolve_aliases(dict(overrides or {}), role)
    values.update(extra)
    config = Config(role, values)
    config.deprecations = notices + more
    return config


def describe_options(role: str | None = None) -> list[ConfigOption]:
    """All options (of one role), sorted by key, for docs and ``--help``."""
    return sorted((o for o in OPTIONS.values() if role is None or role in o.roles), key=lambda o: o.key)
