"""Argument types for every ``fluss-py`` command: each value is checked where argparse reads it.

A bad value becomes argparse's usage error: one ``fluss-py ...: error: argument --buckets: ...`` line on
stderr and exit code 2, never a traceback from deeper down (a protobuf int32 overflow, an address without a
port, a NaN timeout). Bounds come from the config registry where one exists (buckets, replication factor,
batch size), so the CLI cannot accept what a server would refuse.

    int_in(lo, hi)        an integer in [lo, hi]           --buckets, --bucket, --from-offset, --kills ...
    finite(lo, hi)        a finite number (seconds, ms)     --timeout, --interval, --linger-ms ...
    host_port             HOST:PORT with a port 1..65535    --coordinator-http, --zookeeper
    bootstrap_servers     HOST:PORT[,HOST:PORT...]          --bootstrap-servers (empty is an error)
    config_override       KEY=VALUE of a server option      cluster up -D
    table_property        KEY=VALUE of a table option       table create --property

Who may call: the ``register`` functions of the command modules (argparse calls the types while parsing).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

from fluss_py import config as cfg
from fluss_py.errors import ConfigError

OFFSET_MAX = cfg.INT64_MAX  # offsets and timestamps travel as int64


def int_in(lo: int, hi: int) -> Callable[[str], int]:
    """An argparse type: an integer in [lo, hi]."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"{value} is out of range (allowed: {lo} .. {hi})")
        return value

    return parse


def finite(lo: float = 0.0, hi: float = 86400.0, *, lo_open: bool = True) -> Callable[[str], float]:
    """An argparse type: a finite number (of seconds or milliseconds) above ``lo`` (or at least, when not
    ``lo_open``) and at most ``hi``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        low_ok = value > lo if lo_open else value >= lo
        if not math.isfinite(value) or not low_ok or value > hi:
            bound = f"above {lo:g}" if lo_open else f"at least {lo:g}"
            raise argparse.ArgumentTypeError(f"{text!r} is out of range (allowed: {bound}, up to {hi:g})")
        return value

    return parse


def host_port(text: str) -> str:
    """An argparse type: ``HOST:PORT`` (port 1..65535); returned as given, stripped."""
    try:
        cfg.split_host_port(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text.strip()


def bootstrap_servers(text: str) -> str:
    """An argparse type: a non-empty comma-separated list of ``HOST:PORT``."""
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise argparse.ArgumentTypeError("no servers given (expected HOST:PORT[,HOST:PORT...])")
    for part in parts:
        host_port(part)
    return ",".join(parts)


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    return key.strip(), value.strip()


def _checked(text: str, scopes: tuple[str, ...]) -> str:
    key, value = _key_value(text)
    option = cfg.OPTIONS.get(key)
    if option is None or not set(scopes) & set(option.roles):
        raise argparse.ArgumentTypeError(f"{key}: not a {' or '.join(scopes)} option")
    try:
        option.parse(value)
    except ConfigError as e:
        raise argparse.ArgumentTypeError(e.message) from None
    return f"{key}={value}"


def config_override(text: str) -> str:
    """An argparse type: ``KEY=VALUE`` of a coordinator or tablet-server option, in its range."""
    return _checked(text, (cfg.COORDINATOR, cfg.TABLET))


def table_property(text: str) -> str:
    """An argparse type: ``KEY=VALUE`` of a table option, in its range (the coordinator checks again, with
    the rules that need the table, e.g. min.insync.replicas <= replication factor)."""
    return _checked(text, (cfg.TABLE,))
