"""``fluss-py console``: print the URL of the web console (docs/console.md).

Every coordinator serves the console on its HTTP port; a standby redirects to the leader. With a local
cluster (``--dir``) this prints the leader's URL; ``--http HOST:PORT`` names any coordinator instead.

Who may call: ``fluss_py.cli.main`` (registers the command); the handler runs in the CLI process.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from fluss_py.cli.args import host_port
from fluss_py.testing.cluster import DEFAULT_DIR, LocalCluster

EXIT_OK, EXIT_FAILED = 0, 1


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("console", help="print the URL of the web console")
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="local cluster directory (default: %(default)s)")
    parser.add_argument("--http", type=host_port, metavar="HOST:PORT", help="a coordinator's HTTP address instead")
    parser.add_argument("--https", action="store_true", help="with --http: the coordinator speaks TLS")
    parser.set_defaults(func=cmd_console)


def console_url(cluster: LocalCluster) -> str | None:
    """The console URL of the local cluster's coordinator leader (None while there is none)."""
    leader = cluster.coordinator_leader()
    if leader is None:
        return None
    scheme = "https" if cluster.security is not None else "http"
    return f"{scheme}://{cluster.get(leader).http_address}/console"


def cmd_console(args: argparse.Namespace) -> int:
    if args.http is not None:
        print(f"{'https' if args.https else 'http'}://{args.http}/console")
        return EXIT_OK
    if not LocalCluster.exists(args.dir):
        print(f"fluss-py console: no local cluster in {args.dir}; use --http HOST:PORT", file=sys.stderr)
        return EXIT_FAILED
    url = console_url(LocalCluster.open(args.dir))
    if url is None:
        print("fluss-py console: no coordinator leader right now; retry shortly", file=sys.stderr)
        return EXIT_FAILED
    print(url)
    return EXIT_OK
