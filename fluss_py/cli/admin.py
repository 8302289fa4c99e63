"""``fluss-py admin rebalance [--dry-run] [--wait] [--cancel]``: the coordinator's HTTP rebalance API.

The coordinator's HTTP address, first match wins: ``--coordinator-http HOST:PORT``, the
``FLUSS_COORDINATOR_HTTP`` environment variable, the coordinators of the local cluster in ``--dir``. A
standby answers 503 naming the leader's HTTP address; the command follows it.

    (no flag)   POST /rebalance: plan and start; prints the plan (moves, bytes, before/after spread)
    --dry-run   POST /rebalance?dry_run=true: prints the plan, moves nothing
    --cancel    DELETE /rebalance: rolls back the current batch's open moves
    --wait      after starting (or alone: for the running one), a progress bar of batches and moves until
                it ends, then the before/after table; exit 0 when COMPLETED, 1 otherwise

Exit codes: 0 ok, 1 refused or failed (already running, impossible plan, rebalance FAILED), 2 usage.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn

from fluss_py.cli.args import finite, host_port
from fluss_py.cli.common import http_security, resolve_security
from fluss_py.common.cross_site import REQUEST_HEADER, REQUEST_HEADER_VALUE
from fluss_py.testing.cluster_file import COORDINATOR, ClusterRecord
from fluss_py.testing.layout import DEFAULT_DIR

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
HTTP_ENV = "FLUSS_COORDINATOR_HTTP"


class AdminError(Exception):
    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("admin", help="cluster administration: rebalance")
    sub = parser.add_subparsers(dest="admin_command", metavar="SUBCOMMAND", required=True)
    rb = sub.add_parser("rebalance", help="plan, start, watch or cancel a rebalance (docs/rebalance.md)")
    rb.add_argument("--coordinator-http", type=host_port, metavar="HOST:PORT",
                    help=f"coordinator HTTP address (default: ${HTTP_ENV}, else the cluster in --dir)")  # fmt: skip
    rb.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="local cluster directory (default: %(default)s)")
    what = rb.add_mutually_exclusive_group()
    what.add_argument("--dry-run", action="store_true", help="print the plan, move nothing")
    what.add_argument("--cancel", action="store_true", help="cancel the running rebalance")
    rb.add_argument("--wait", action="store_true", help="show progress until the rebalance ends")
    rb.add_argument("--interval", type=finite(0.0, 3600.0), default=0.5, metavar="S", help="progress poll interval")
    rb.add_argument("--timeout", type=finite(0.0, 30 * 86400.0), default=3600.0, metavar="S",
                    help="give up waiting after S seconds")  # fmt: skip
    rb.add_argument("--json", action="store_true", help="print the JSON answers")
    rb.add_argument("--command-config", type=Path, metavar="FILE",
                    help="client properties: TLS files, user, password (see `fluss-py table --help`)")  # fmt: skip
    rb.set_defaults(func=cmd_rebalance)


def cmd_rebalance(args: argparse.Namespace) -> int:
    console = Console()
    try:
        addresses = coordinator_addresses(args)
        http = http_security(resolve_security(args))  # HTTPS + Basic auth on a secure cluster
        if args.cancel:
            answer = call_leader(addresses, http, "DELETE")
        elif args.dry_run or not args.wait:
            answer = call_leader(addresses, http, "POST", "?dry_run=true" if args.dry_run else "")
        else:
            answer = call_leader(addresses, http, "POST")
            if answer.get("error") == "REBALANCE_IN_PROGRESS":
                answer = call_leader(addresses, http, "GET")  # --wait alone follows the running one
        _show(console, answer, args.json)
        if "error" in answer:
            return EXIT_FAILED
        if args.wait and answer.get("status") == "REBALANCING":
            answer = _follow(console, addresses, args)
            _show(console, answer, args.json)
        return EXIT_OK if answer.get("status") not in ("FAILED",) else EXIT_FAILED
    except AdminError as e:
        print(f"fluss-py admin rebalance: {e}", file=sys.stderr)
        return e.code


def coordinator_addresses(args: argparse.Namespace) -> list[str]:
    """The coordinators' HTTP addresses from --coordinator-http, $FLUSS_COORDINATOR_HTTP or --dir."""
    if args.coordinator_http:
        return [args.coordinator_http]
    env = os.environ.get(HTTP_ENV, "").strip()
    if env:
        try:
            return [host_port(a) for a in env.split(",")]
        except argparse.ArgumentTypeError as e:
            raise AdminError(f"${HTTP_ENV}: {e}", EXIT_USAGE) from None
    try:
        record = ClusterRecord.load(args.dir)
    except (FileNotFoundError, ValueError, KeyError):
        raise AdminError(f"no coordinator: pass --coordinator-http, set {HTTP_ENV}, or use --dir of a local cluster",
                         EXIT_USAGE) from None  # fmt: skip
    found = [p.http_address for p in record.by_role(COORDINATOR) if p.http_address]
    if not found:
        raise AdminError(f"{args.dir}/cluster.json lists no coordinator HTTP address", EXIT_USAGE)
    return found


Http = tuple[ssl.SSLContext | None, dict[str, str]]


def call_leader(
    addresses: list[str], http: Http, method: str, query: str = "", path: str = "/rebalance"
) -> dict[str, Any]:
    """The leader's answer: standbys (503 + leader_http) are followed once; unreachable ones skipped."""
    tried: list[str] = []
    queue = list(addresses)
    while queue:
        address = queue.pop(0)
        if address in tried:
            continue
        tried.append(address)
        context, headers = http
        headers = {**headers, REQUEST_HEADER: REQUEST_HEADER_VALUE}  # not a cross-site form (common/cross_site.py)
        scheme = "https" if context is not None else "http"
        request = urllib.request.Request(f"{scheme}://{address}{path}{query}", method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=30, context=context) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raw = e.read() or b"{}"
            if e.code in (401, 403):  # refused by the server's guard: AUTHENTICATION/AUTHORIZATION_FAILED
                raise AdminError(raw.decode("utf-8", "replace").strip()) from None
            body = json.loads(raw)
            if e.code == 503 and body.get("leader_http"):
                queue.insert(0, body["leader_http"])
                continue
            if e.code == 503:
                continue
            return body
        except (urllib.error.URLError, OSError):
            continue
    raise AdminError(f"no coordinator leader answered at {', '.join(tried)}")


def _follow(console: Console, addresses: list[str], args: argparse.Namespace) -> dict[str, Any]:
    deadline = time.monotonic() + args.timeout
    http = http_security(resolve_security(args))
    answer = call_leader(addresses, http, "GET")
    columns = (TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed:.0f}/{task.total:.0f}"))
    with Progress(*columns, console=console, transient=False) as progress:
        batches = progress.add_task("batches", total=answer.get("batches_total", 1))
        moves = progress.add_task("moves", total=answer.get("moves_total", 1))
        data = progress.add_task("bytes", total=max(1, answer.get("bytes_total", 0)))
        while answer.get("status") == "REBALANCING":
            if time.monotonic() > deadline:
                raise AdminError(f"still rebalancing after {args.timeout:g}s")
            progress.update(batches, completed=answer.get("batch", 0))
            progress.update(moves, completed=answer.get("moves_done", 0))
            progress.update(data, completed=answer.get("bytes_moved", 0))
            time.sleep(args.interval)
            answer = call_leader(addresses, http, "GET")
        progress.update(batches, completed=answer.get("batches_total", 0) if answer.get("status") == "COMPLETED"
                        else answer.get("batch", 0))  # fmt: skip
        progress.update(moves, completed=answer.get("moves_done", 0))
        progress.update(data, completed=answer.get("bytes_moved", 0))
    return answer


def _show(console: Console, answer: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(answer, indent=2, sort_keys=True))
        return
    if "error" in answer:
        console.print(f"[red]{answer['error']}[/red]: {answer.get('message', '')}")
        return
    status = answer.get("status", "?")
    line = f"status: {status}"
    if "moves_total" in answer and isinstance(answer["moves_total"], int):
        line += (f" — batch {min(answer.get('batch', 0) + 1, answer.get('batches_total', 0))}/"
                 f"{answer.get('batches_total', 0)}, moves {answer.get('moves_done', 0)}/{answer['moves_total']}, "
                 f"{answer.get('bytes_moved', 0)} bytes moved")  # fmt: skip
    if answer.get("message"):
        line += f" ({answer['message']})"
    console.print(line)
    if answer.get("summary"):
        console.print(answer["summary"], markup=False)
