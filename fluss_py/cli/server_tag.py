"""``fluss-py server tag``: what an operator knows about a tablet server (docs/rebalance.md §12).

    fluss-py server tag N permanent-offline|temporary-offline|none [--json]

``permanent-offline``: the server is gone for good; its replicas are rebuilt on the other servers by a
replacement (the rebalance machinery: throttle, batches, progress in ``admin rebalance``, cancel).
``temporary-offline``: down for a while; its leaderships are moved away and nothing new is placed on it.
``none`` removes the tag. Prints what changed and what follows; ``--json``: ``{"server_id": 3, "tag":
"permanent-offline", "message": "...", "replacement": {"id", "status", "replacing", "moves_total",
"moves_done", ...} | null}``. A refused tag (an unknown server, the last live server, a bucket left below its
min ISR) is exit 1 with the coordinator's reason; nothing was written. The tags are listed by ``cluster
servers``.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict

from fluss_py.cli.args import int_in
from fluss_py.cli.common import EXIT_OK, Context, add_connection_args, add_json_arg, client_command, print_json
from fluss_py.client.server_tags import TAGS, Replacement
from fluss_py.config import INT32_MAX


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("server", help="tablet-server tags: permanent-offline, temporary-offline, none")
    sub = parser.add_subparsers(dest="server_command", metavar="SUBCOMMAND", required=True)
    tag = add_connection_args(sub.add_parser("tag", help="tag a tablet server (its replicas or leaderships move)"))
    tag.add_argument("server_id", type=int_in(0, INT32_MAX), metavar="N", help="the tablet server's id")
    tag.add_argument("tag", choices=TAGS, help="permanent-offline (gone for good: its replicas are rebuilt "
                     "elsewhere), temporary-offline (leaderships move away), none (remove the tag)")  # fmt: skip
    add_json_arg(tag)
    tag.set_defaults(func=client_command(cmd_tag))


async def cmd_tag(args: argparse.Namespace, ctx: Context) -> int:
    change = await (await ctx.admin()).set_server_tag(args.server_id, args.tag)
    if getattr(args, "json", False):
        doc = asdict(change)
        if change.replacement is not None:
            doc["replacement"]["replacing"] = list(change.replacement.replacing)
        print_json(doc)
        return EXIT_OK
    print(change.message)
    if change.replacement is not None:
        print(replacement_line(change.replacement))
    return EXIT_OK


def replacement_line(r: Replacement) -> str:
    """One line of a replacement's progress (also ``cluster servers``)."""
    why = f" ({r.message})" if r.message else ""
    return (
        f"replacement {r.id[:8]} of server(s) {list(r.replacing)}: {r.status}, {r.moves_done}/{r.moves_total} "
        f"move(s) done, {r.bytes_moved}/{r.bytes_total} bytes{why}"
    )
