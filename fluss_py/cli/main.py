"""``fluss-py``: the single entry point for servers, the local cluster, and tools.

Each command group lives in its own module under ``fluss_py.cli`` exposing
``register(subparsers) -> None``; the handler it sets with ``set_defaults(func=...)`` receives the parsed
arguments and returns an exit code. Exit codes: 0 ok, 1 failed, 2 usage or configuration error.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from fluss_py.errors import ConfigError, FlussError

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

# Command modules, in the order their commands appear in --help.
_COMMAND_MODULES = (
    "fluss_py.cli.servers",  # coordinator, tablet-server
    "fluss_py.cli.cluster",  # cluster up/down/status/start/stop/kill
    "fluss_py.cli.dump_log",  # dump-log
    "fluss_py.cli.table",  # table create/drop/list/describe
    "fluss_py.cli.produce",  # produce
    "fluss_py.cli.consume",  # consume
    "fluss_py.cli.kv",  # upsert, delete, lookup, scan (primary-key tables)
    "fluss_py.cli.group",  # group list/describe/reset
    "fluss_py.cli.admin",  # admin rebalance
    "fluss_py.cli.server_tag",  # server tag (permanent-offline, temporary-offline, none)
    "fluss_py.cli.console",  # console (the web console's URL)
    "fluss_py.cli.security",  # user add/list/remove, acl add/list/remove
    "fluss_py.cli.demo",  # demo failover
    "fluss_py.cli.config_cmd",  # config (every key, default and range); config describe/alter (dynamic)
    "fluss_py.cli.metrics_cmd",  # metrics (every Prometheus metric, from the catalogue)
    "fluss_py.cli.verify",  # verify (a Jepsen-style check under faults)
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fluss-py",
        description="fluss_py: a replicated, partitioned log store (servers, local cluster and tools)",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or EXIT_OK)
    except ConfigError as e:
        print(f"fluss-py: configuration error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except FlussError as e:
        print(f"fluss-py: {e}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
