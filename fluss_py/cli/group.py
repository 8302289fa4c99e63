"""``fluss-py group list|describe|delete|reset``: consumer groups, their members and committed offsets
(like ``kafka-consumer-groups``).

    fluss-py group list [--json]
    fluss-py group describe G [--json]
    fluss-py group delete G
    fluss-py group reset G --table TABLE (--to-earliest | --to-latest | --to-offset N | --to-timestamp MS)
                         [--bucket B ...] [--dry-run] [--json]

``list`` prints each group's state (EMPTY, RECONCILING, STABLE) and live member count; ``--json``:
``[{"group": G, "state": "STABLE", "members": 3}, ...]``. ``describe`` prints the members (id, instance
id, client host, member epoch, assigned buckets, seconds since the last heartbeat), then per committed
bucket: table, bucket, committed offset, high watermark, lag (HW - committed). ``describe --json``:
``{"group": G, "state": S, "group_epoch": E, "members": [{"member_id", "instance_id", "client_host",
"member_epoch", "assigned": ["5-0", ...], "last_heartbeat_s"}, ...], "buckets": [{"table": "fluss.t",
"table_id": 1, "bucket": 0, "committed": 5, "high_watermark": 9, "lag": 4}, ...]}``. ``delete`` removes
the group's offsets and membership; it is refused (GROUP_NOT_EMPTY, exit 1) while the group has live
members. ``reset`` commits new offsets for the group; it too is refused (GROUP_NOT_EMPTY) while the group
has live members (stop them first), and a consumer reading by ``--bucket`` must be stopped as well (its
next commit would overwrite the reset); ``--dry-run`` only prints them. An unknown group is exit 1 with a
one-line message.
"""

from __future__ import annotations

import argparse

from fluss_py.cli.args import OFFSET_MAX, int_in
from fluss_py.cli.common import (
    EXIT_OK,
    Context,
    add_connection_args,
    add_json_arg,
    client_command,
    emit_table,
    table_path,
)
from fluss_py.config import MAX_BUCKETS
from fluss_py.errors import GroupNotExistError


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("group", help="consumer groups: list, describe (offsets, lag), reset")
    sub = parser.add_subparsers(dest="group_command", metavar="SUBCOMMAND", required=True)

    ls = add_connection_args(sub.add_parser("list", help="groups: state and member count"))
    add_json_arg(ls)
    ls.set_defaults(func=client_command(cmd_list))

    describe = add_connection_args(sub.add_parser("describe", help="members; committed offset, HW, lag per bucket"))
    describe.add_argument("group")
    add_json_arg(describe)
    describe.set_defaults(func=client_command(cmd_describe))

    delete = add_connection_args(sub.add_parser("delete", help="delete a group without live members"))
    delete.add_argument("group")
    delete.set_defaults(func=client_command(cmd_delete))

    reset = add_connection_args(sub.add_parser("reset", help="set a group's committed offsets of one table"))
    reset.add_argument("group")
    reset.add_argument("--table", required=True, help="db.table or table")
    to = reset.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true", help="the log start offset")
    to.add_argument("--to-latest", action="store_true", help="the high watermark")
    to.add_argument("--to-offset", type=int_in(0, OFFSET_MAX), metavar="N",
                    help="offset N (clamped into [log start, HW])")  # fmt: skip
    to.add_argument("--to-timestamp", type=int_in(0, OFFSET_MAX), metavar="MS",
                    help="first record with timestamp >= MS")  # fmt: skip
    reset.add_argument("--bucket", type=int_in(0, MAX_BUCKETS - 1), action="append", metavar="B",
                       help="only this bucket (repeatable)")  # fmt: skip
    reset.add_argument("--dry-run", action="store_true", help="print the new offsets, commit nothing")
    add_json_arg(reset)
    reset.set_defaults(func=client_command(cmd_reset))


async def cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    summaries = await (await ctx.admin()).list_group_summaries()
    doc = [{"group": s.group, "state": s.state, "members": s.members} for s in summaries]
    rows = [(s.group, s.state, s.members) for s in summaries]
    emit_table(args, "consumer groups", ("group", "state", "members"), rows, doc)
    return EXIT_OK


async def cmd_delete(args: argparse.Namespace, ctx: Context) -> int:
    await (await ctx.admin()).delete_group(args.group)
    print(f"Deleted group {args.group}")
    return EXIT_OK


async def cmd_describe(args: argparse.Namespace, ctx: Context) -> int:
    admin = await ctx.admin()
    members = await admin.describe_group_members(args.group)  # GROUP_NOT_EXIST for an unknown group
    try:
        rows = await admin.describe_group(args.group)
    except GroupNotExistError:  # members, but nothing committed yet
        rows = []
    member_docs = [
        {
            "member_id": m.member_id,
            "instance_id": m.instance_id,
            "client_host": m.client_host,
            "member_epoch": m.member_epoch,
            "assigned": [str(tb) for tb in m.assigned],
            "last_heartbeat_s": round(m.since_heartbeat_ms / 1000.0, 1),
            "leaving": m.leaving,
        }
        for m in members.members
    ]
    if not getattr(args, "json", False):
        title = f"consumer group {args.group}: {members.state}, epoch {members.group_epoch}"
        columns = ("member", "instance", "client host", "epoch", "buckets", "heartbeat s ago")
        member_rows = [
            (d["member_id"], d["instance_id"], d["client_host"], d["member_epoch"], " ".join(d["assigned"]),
             d["last_heartbeat_s"])
            for d in member_docs
        ]  # fmt: skip
        emit_table(args, title, columns, member_rows, None)
    doc = {
        "group": args.group,
        "state": members.state,
        "group_epoch": members.group_epoch,
        "members": member_docs,
        "buckets": [
            {
                "table": str(r.path) if r.path else None,
                "table_id": r.table_bucket.table_id,
                "bucket": r.table_bucket.bucket,
                "committed": r.committed,
                "high_watermark": r.high_watermark,
                "lag": r.lag,
            }
            for r in rows
        ],
    }
    columns = ("table", "bucket", "committed", "hw", "lag")
    table_rows = [(b["table"], b["bucket"], b["committed"], b["high_watermark"], b["lag"]) for b in doc["buckets"]]
    emit_table(args, f"consumer group {args.group}", columns, table_rows, doc)
    return EXIT_OK


async def cmd_reset(args: argparse.Namespace, ctx: Context) -> int:
    path = table_path(args.table)
    if args.to_earliest:
        to, value = "earliest", 0
    elif args.to_latest:
        to, value = "latest", 0
    elif args.to_offset is not None:
        to, value = "offset", args.to_offset
    else:
        to, value = "timestamp", args.to_timestamp
    admin = await ctx.admin()
    offsets = await admin.reset_group(args.group, path, to, value, buckets=args.bucket, dry_run=args.dry_run)
    doc = {
        "group": args.group,
        "table": str(path),
        "dry_run": args.dry_run,
        "offsets": [{"bucket": b, "offset": o} for b, o in offsets.items()],
    }
    title = f"{args.group} @ {path}" + (" (dry run)" if args.dry_run else "")
    emit_table(args, title, ("bucket", "offset"), list(offsets.items()), doc)
    return EXIT_OK
