"""``fluss-py config describe|alter``: dynamic configuration of the cluster, a tablet server or a table,
kept in ZooKeeper and applied live (docs/dynamic-config.md).

    fluss-py config describe --entity cluster
    fluss-py config describe --entity table --name fluss.orders
    fluss-py config alter --entity tablet-server --name 2 --set replica.lag.time.max.ms=5s --delete log.flush.interval
    fluss-py config alter --entity table --name fluss.orders --set table.log.ttl=2h --set min.insync.replicas=1

The coordinator leader validates every value with the option registry before storing anything (exit 1
with its message when refused). Addresses as for ``fluss-py admin``: ``--coordinator-http``,
``$FLUSS_COORDINATOR_HTTP``, or the local cluster in ``--dir``.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from pathlib import Path

from fluss_py import config as cfg
from fluss_py.cli.admin import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    HTTP_ENV,
    AdminError,
    call_leader,
    coordinator_addresses,
)
from fluss_py.cli.common import http_security, resolve_security
from fluss_py.testing.layout import DEFAULT_DIR

ENTITIES = ("cluster", "tablet-server", "table")


def add_subcommands(parser: argparse.ArgumentParser) -> None:
    """``describe`` and ``alter`` under ``fluss-py config`` (whose bare form lists the registry: config_cmd.py)."""
    sub = parser.add_subparsers(dest="config_command", metavar="SUBCOMMAND", required=False)
    for name, helptext in (("describe", "show an entity's dynamic entries and the defaults"),
                           ("alter", "set or delete dynamic entries of an entity")):  # fmt: skip
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--entity", choices=ENTITIES, required=True, help="entity type")
        p.add_argument("--name", default="", help="tablet-server id or table name (db.table); none for cluster")
        p.add_argument("--coordinator-http", metavar="HOST:PORT", help=f"coordinator HTTP address (default: "
                       f"${HTTP_ENV}, else the local cluster in --dir)")  # fmt: skip
        p.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="local cluster directory (default: %(default)s)")
        p.add_argument("--json", action="store_true", help="print the JSON answer")
        p.add_argument("--command-config", type=Path, metavar="FILE",
                       help="client properties: TLS files, user, password (see `fluss-py table --help`)")  # fmt: skip
        if name == "alter":
            p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="set an entry (repeat)")
            p.add_argument("--delete", action="append", default=[], metavar="KEY", help="delete an entry (repeat)")
        p.set_defaults(func=cmd_config)


def parse_sets(pairs: list[str]) -> dict[str, str]:
    """``KEY=VALUE`` arguments as a dict (pure); raises AdminError (usage) on a malformed one."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise AdminError(f"--set expects KEY=VALUE, got {pair!r}", EXIT_USAGE)
        out[key.strip()] = value.strip()
    return out


def cmd_config(args: argparse.Namespace) -> int:
    try:
        if args.entity != "cluster" and not args.name:
            raise AdminError(f"--name is required for a {args.entity}", EXIT_USAGE)
        query = {"entity": args.entity, "name": args.name}
        if args.config_command == "alter":
            if not args.set and not args.delete:
                raise AdminError("nothing to alter: pass --set KEY=VALUE and/or --delete KEY", EXIT_USAGE)
            query["changes"] = json.dumps({"set": parse_sets(args.set), "delete": list(args.delete)})
            method = "POST"
        else:
            method = "GET"
        http = http_security(resolve_security(args))  # HTTPS + Basic auth on a secure cluster
        answer = call_leader(coordinator_addresses(args), http, method, "?" + urllib.parse.urlencode(query), "/config")
    except AdminError as e:
        print(f"fluss-py config {args.config_command}: {e}", file=sys.stderr)
        return e.code
    if "error" in answer:
        print(f"fluss-py config {args.config_command}: {answer['error']}: {answer.get('message', '')}", file=sys.stderr)
        return EXIT_FAILED
    answer["dynamic"] = cfg.masked(answer.get("dynamic", {}))  # the coordinator masks secrets; so does the CLI
    if args.json:
        print(json.dumps(answer, indent=2, sort_keys=True))
        return EXIT_OK
    what = args.entity + (f" {args.name}" if args.name else "")
    dynamic = answer.get("dynamic", {})
    print(f"Dynamic configuration of {what}: " + ("(none)" if not dynamic else ""))
    for key, value in sorted(dynamic.items()):
        print(f"  {key} = {value}")
    defaults = answer.get("defaults")
    if defaults:
        print("Keys that may be set here (registry default):")
        for key, value in sorted(defaults.items()):
            print(f"  {key}  (default {value})")
    return EXIT_OK
