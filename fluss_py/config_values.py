"""Value types of the config registry: parsing (durations, sizes, numbers, lists), the allowed values an
option declares (``Range``, ``Choice``, ``Text``, ``Items``, ``HostPorts``), each able to say in words what it
accepts, ``ConfigOption`` (one setting) and ``Constraint`` (a rule between settings). Pure functions and
frozen dataclasses; ``fluss_py.config`` declares the options with them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from fluss_py.errors import ConfigError

KiB, MiB, GiB = 1024, 1024**2, 1024**3
MINUTE, HOUR, DAY = 60.0, 3600.0, 86400.0

# fullmatch, ASCII digits only: "$" also matches before a final "\n", and "\d" takes "١٢"
_DURATION_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|sec|secs|min|mins|m|h|d)?\s*", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1, "sec": 1, "secs": 1, "min": 60, "mins": 60, "m": 60, "h": 3600, "d": 86400}
_SIZE_RE = re.compile(r"\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([kmgt]i?b?|b)?\s*", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4}


def parse_duration(value: Any, *, bare_unit_ms: bool = False) -> float:
    """Seconds from ``"15s"``, ``"5min"``, ``"500ms"`` or a bare number (ms or s, see module doc)."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        return float(value) / 1000.0 if bare_unit_ms else float(value)
    m = _DURATION_RE.fullmatch(str(value))
    if not m:
        raise ValueError(f"not a duration: {value!r} (use e.g. 15s, 500ms, 5min)")
    number, unit = float(m.group(1)), (m.group(2) or "").lower()
    if not unit:
        return number / 1000.0 if bare_unit_ms else number
    return number * _DURATION_UNITS[unit]


def parse_size(value: Any) -> int:
    """Bytes from ``"10MB"``, ``"1KB"``, ``"64KiB"`` or a bare number (1 KB = 1024 bytes, as in Fluss)."""
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"not a size: {value!r}")
    m = _SIZE_RE.fullmatch(str(value))
    if not m:
        raise ValueError(f"not a size: {value!r} (use e.g. 10MB, 1KB, 1048576)")
    unit = (m.group(2) or "").lower()[:1]
    return int(float(m.group(1)) * _SIZE_UNITS[unit])


def parse_bool(value: Any) -> bool:
    """``true/yes/on/1`` or ``false/no/off/0`` (any case); anything else is a ValueError."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"not a boolean: {value!r}")


def parse_int(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    text = str(value).strip()
    if not re.fullmatch(r"-?[0-9]+", text):
        raise ValueError(f"not an integer: {value!r}")
    return int(text)


def parse_float(value: Any) -> float:
    if isinstance(value, bool):
        raise ValueError(f"not a number: {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"not a finite number: {value!r}")
    return number


def parse_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return tuple(p.strip() for p in str(value).split(",") if p.strip())


# ---------------------------------------------------------------- allowed values
def show_size(n: int) -> str:
    """``1 KiB``, ``48 MiB``, ``2147483647 B``: the largest unit that divides exactly."""
    for unit, name in ((1024**4, "TiB"), (GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if n and n % unit == 0:
            return f"{n // unit} {name}"
    return f"{n} B"


def show_duration(s: float) -> str:
    """``10 ms``, ``30 s``, ``5 min``, ``7 d``: the largest unit that divides exactly."""
    for unit, name in ((DAY, "d"), (HOUR, "h"), (MINUTE, "min"), (1.0, "s")):
        if s and s >= unit and (s / unit).is_integer():
            return f"{int(s / unit)} {name}"
    return f"{s * 1000:g} ms" if s else "0"


class Allowed(Protocol):
    """The values an option accepts (after parsing to its type)."""

    def admits(self, value: Any) -> bool: ...

    def describe(self, show: Callable[[Any], str]) -> str: ...


@dataclass(frozen=True, slots=True)
class Range:
    """``lo <= value <= hi`` (``lo < value`` when ``lo_open``); None: unbounded. NaN and infinities never."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False

    def admits(self, value: Any) -> bool:
        if isinstance(value, float) and not math.isfinite(value):
            return False
        if self.lo is not None and (value <= self.lo if self.lo_open else value < self.lo):
            return False
        return self.hi is None or value <= self.hi

    def describe(self, show: Callable[[Any], str]) -> str:
        if self.lo is not None and self.lo_open:
            low = f"above {show(self.lo)}"
            return low if self.hi is None else f"{low}, up to {show(self.hi)}"
        if self.hi is None:
            return "any" if self.lo is None else f"{show(self.lo)} or more"
        return f"up to {show(self.hi)}" if self.lo is None else f"{show(self.lo)} .. {show(self.hi)}"


@dataclass(frozen=True, slots=True)
class Choice:
    """One of ``values`` (strings compared case-insensitively)."""

    values: tuple[str, ...]

    def admits(self, value: Any) -> bool:
        return str(value).lower() in (v.lower() for v in self.values)

    def describe(self, show: Callable[[Any], str]) -> str:
        return "one of " + ", ".join(self.values)


@dataclass(frozen=True, slots=True)
class Text:
    """A string matching ``pattern`` entirely; ``what`` says in words what that is."""

    pattern: str
    what: str

    def admits(self, value: Any) -> bool:
        return re.fullmatch(self.pattern, str(value)) is not None

    def describe(self, show: Callable[[Any], str]) -> str:
        return self.what


_HOST_RE = r"[A-Za-z0-9_.\-]+|\[[0-9A-Fa-f:.]+\]"


def split_host_port(text: str) -> tuple[str, int]:
    """``"host:port"`` -> ``("host", port)``; ValueError unless the host is a name or IP (IPv6 in brackets)
    and the port is 1..65535 (a server address to connect to)."""
    host, sep, port = str(text).strip().rpartition(":")
    if not sep or not re.fullmatch(_HOST_RE, host):
        raise ValueError(f"{text!r} is not HOST:PORT")
    if not re.fullmatch(r"\d{1,5}", port) or not 1 <= int(port) <= 65535:
        raise ValueError(f"{text!r}: port {port!r} is not 1..65535")
    return host, int(port)


@dataclass(frozen=True, slots=True)
class Items:
    """A list of ``min_count`` .. ``max_count`` items, each one ``each`` admits (e.g. ``data.dirs``)."""

    each: Allowed
    min_count: int = 1
    max_count: int | None = None

    def admits(self, value: Any) -> bool:
        items = tuple(value)
        if len(items) < self.min_count or (self.max_count is not None and len(items) > self.max_count):
            return False
        return all(self.each.admits(v) for v in items)

    def describe(self, show: Callable[[Any], str]) -> str:
        count = f"{self.min_count}" + (f"..{self.max_count}" if self.max_count != self.min_count else "")
        if self.max_count is None:
            count = f"{self.min_count} or more"
        return f"{count} items, each {self.each.describe(str)}"


NON_EMPTY = Text(r"(?s)\s*\S.*", "not empty")
HOST = Text(_HOST_RE, "a host name or IP address")


@dataclass(frozen=True, slots=True)
class HostPorts:
    """``host:port[,host:port...]``, each as ``split_host_port`` accepts it."""

    def admits(self, value: Any) -> bool:
        try:
            return all(split_host_port(part) for part in str(value).split(","))
        except ValueError:
            return False

    def describe(self, show: Callable[[Any], str]) -> str:
        return "host:port[,host:port...] with ports 1..65535"


ZNODE_PATH = Text(r"(/[^/\s]+)+", "an absolute znode path without a trailing '/'")
PORT = Range(0, 65535)


_BOOL = Choice(("true", "false"))
MASK = "***"
_NOT_SHOWN = "(the value is not shown: a secret)"


def is_secret(key: str) -> bool:
    """Keys whose values are never printed or logged (passwords)."""
    return key.endswith("password")


def masked(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with the value of every secret key replaced by ``***``: what a message or log line shows."""
    return {k: (MASK if is_secret(k) else v) for k, v in values.items()}


@dataclass(frozen=True, slots=True)
class ConfigOption:
    """One setting: ``key`` (dotted kebab-case), its type, default, the scopes that read it, a doc and the
    values it allows (None only for bool, whose type is its range)."""

    key: str
    type: str  # duration | size | int | float | bool | str | list
    default: Any
    roles: tuple[str, ...]
    doc: str
    allowed: Allowed | None = None

    def parse(self, raw: Any) -> Any:
        """The typed value of ``raw``; ConfigError (naming key, value and what is allowed) when it is not
        one or is out of range."""
        parsers: dict[str, Callable[[Any], Any]] = {
            "duration": lambda v: parse_duration(v, bare_unit_ms=self.key.endswith(".ms")),
            "size": parse_size,
            "int": parse_int,
            "float": parse_float,
            "bool": parse_bool,
            "str": lambda v: "" if v is None else str(v),
            "list": parse_list,
        }
        secret = is_secret(self.key)  # its value stays out of the message (printed by the CLI, logged by servers)
        try:
            value = parsers[self.type](raw)
        except (ValueError, TypeError, OverflowError) as e:
            why = _NOT_SHOWN if secret else f"{raw!r}: {e}"
            raise ConfigError(self.key, f"invalid {self.type} value {why}") from None
        if self.allowed is not None and not self.admits(value):
            verdict = "out of range" if isinstance(self.allowed, Range) else "not allowed"
            shown = _NOT_SHOWN if secret else repr(raw)
            raise ConfigError(self.key, f"{shown} is {verdict} (allowed: {self.allowed_text()})")
        return value

    def admits(self, value: Any) -> bool:
        if self.allowed is None:
            return True
        if self.type == "list" and not isinstance(self.allowed, Items):
            return all(self.allowed.admits(v) for v in value)
        return self.allowed.admits(value)

    def show(self, value: Any) -> str:
        """``value`` (of this option's type) as a person writes it."""
        if self.type == "size" and isinstance(value, int):
            return show_size(value)
        if self.type == "duration" and isinstance(value, int | float):
            return show_duration(float(value))
        if isinstance(value, bool):
            return str(value).lower()
        if isinstance(value, tuple):
            return ",".join(value)
        return f"{value:g}" if isinstance(value, float) else str(value)

    def show_masked(self, value: Any) -> str:
        """``show(value)``, or ``***`` for a secret option: for messages and log lines."""
        return MASK if is_secret(self.key) else self.show(value)

    def allowed_text(self) -> str:
        return (self.allowed or _BOOL).describe(self.show)


@dataclass(frozen=True, slots=True)
class Constraint:
    """A rule between options of one role, e.g. ``replica.fetch.wait.max.ms < replica.lag.time.max.ms``."""

    rule: str
    options: tuple[ConfigOption, ...]
    holds: Callable[..., bool]


# ---------------------------------------------------------------- the registry (declarations: fluss_py.config)
COORDINATOR = "coordinator"
TABLET = "tablet-server"
CLIENT = "client"
TABLE = "table"  # a table property (CreateTable), read by the tablet servers hosting its buckets
ROLES = (COORDINATOR, TABLET, CLIENT)
SCOPES = (*ROLES, TABLE)


OPTIONS: dict[str, ConfigOption] = {}


def option(
    key: str, type: str, default: Any, roles: Iterable[str], doc: str, allowed: Allowed | None = None
) -> ConfigOption:
    """Declare an option (import time only). Returns it so modules can keep a handle. A default outside
    ``allowed`` is a bug of the declaration (RuntimeError at import)."""
    if key in OPTIONS:
        raise RuntimeError(f"config option {key} declared twice")
    opt = ConfigOption(key, type, default, tuple(roles), doc, allowed)
    unknown = set(opt.roles) - set(SCOPES)
    if unknown:
        raise RuntimeError(f"config option {key}: unknown scopes {sorted(unknown)}")
    if default is not None and not opt.admits(default):
        raise RuntimeError(f"config option {key}: default {default!r} is outside {opt.allowed_text()}")
    OPTIONS[key] = opt
    return opt


CONSTRAINTS: list[Constraint] = []


def constraint(rule: str, holds: Callable[..., bool], *options: ConfigOption) -> None:
    """Declare a rule checked on every config of a role that reads all of ``options``."""
    CONSTRAINTS.append(Constraint(rule, options, holds))
