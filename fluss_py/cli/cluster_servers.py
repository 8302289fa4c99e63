"""``fluss-py cluster servers``: the live servers as the cluster sees them (not the local processes).

    fluss-py cluster servers [--bootstrap-servers ...] [--dir DIR] [--json]

Coordinators: every coordinator address known (the local cluster's cluster.json, the bootstrap list and
the leader named by metadata) is asked GetCoordinatorInfo: its state, which one leads, the epoch.
Tablet servers: the coordinator leader's live set, with per server its tag (docs/rebalance.md §12), the
buckets it leads, the replicas it holds and the under-replicated buckets it leads (ISR smaller than the
replica set); then the servers that are down but tagged or still assigned replicas, and the running or last
replacement of permanent-offline servers. ``--json``::

    {"coordinators": [{"id": 1, "address": "...", "state": "Leader", "leader": true, "epoch": 3,
                       "error": ""}, ...],
     "tablet_servers": [{"id": 1, "address": "...", "rack": "", "tag": "none", "leaders": 2, "replicas": 6,
                         "under_replicated": 0}, ...],
     "down_tablet_servers": [{"id": 3, "tag": "permanent-offline", "by": "operator", "replicas": 4}],
     "replacement": {"id": "...", "status": "REBALANCING", "replacing": [3], "moves_total": 6,
                     "moves_done": 2, ...} | null,
     "to_replace": 4}

The tags come from DescribeServerTags (DESCRIBE on the cluster); when it is refused, ``tag`` is ``"?"`` and
``tags_error`` names the error code.
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from dataclasses import asdict
from typing import Any

from fluss_py.cli.common import (
    EXIT_OK,
    Context,
    add_connection_args,
    add_json_arg,
    client_command,
    console,
    local_cluster,
    print_json,
)
from fluss_py.cli.server_tag import replacement_line
from fluss_py.client import Admin
from fluss_py.client.server_tags import Replacement, ServerTags
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER
from fluss_py.types import NO_LEADER


def register_subcommand(sub: argparse._SubParsersAction) -> None:
    p = add_connection_args(
        sub.add_parser("servers", help="live coordinators (leader, epoch) and tablet servers (leaders, replicas)")
    )
    add_json_arg(p)
    p.set_defaults(func=client_command(cmd_servers))


async def _coordinators(
    args: argparse.Namespace, admin: Admin, leader_address: str | None, tablet_addresses: set[str]
) -> list[dict[str, Any]]:
    addresses = []
    record = local_cluster(args)
    known_ids: dict[str, int | None] = {}  # address -> coordinator id, from cluster.json
    if record is not None and not args.bootstrap_servers:
        known_ids = {p.rpc_address: p.id for p in record.by_role(COORDINATOR)}
        addresses += list(known_ids)
        tablet_addresses = tablet_addresses | {p.rpc_address for p in record.by_role(TABLET_SERVER)}  # dead too
    addresses += [a for a in admin.metadata.bootstrap_servers if a not in tablet_addresses]
    if leader_address:
        addresses.append(leader_address)

    async def ask(address: str) -> dict[str, Any] | None:
        try:
            info = await admin.coordinator_info(address)
        except FlussError as e:
            if e.code == ErrorCode.INVALID_REQUEST:
                return None  # that address serves the tablet service
            return {"id": known_ids.get(address), "address": address, "state": "unreachable", "leader": False,
                    "epoch": None, "error": e.code.name}  # fmt: skip
        return {
            "id": info.server_id,
            "address": address,
            "state": info.state,
            "leader": info.leader_id == info.server_id,
            "epoch": info.coordinator_epoch,
            "error": "",
        }

    found = await asyncio.gather(*(ask(a) for a in dict.fromkeys(addresses)))
    out = {}
    for c in found:
        if c is not None:
            out.setdefault(c["id"] if c["id"] is not None else c["address"], c)
    return sorted(out.values(), key=lambda c: (c["id"] is None, c["id"] or 0, c["address"]))


async def cmd_servers(args: argparse.Namespace, ctx: Context) -> int:
    admin = await ctx.admin()
    md = await admin.describe_cluster()
    leaders: Counter[int] = Counter()
    replicas: Counter[int] = Counter()
    under: Counter[int] = Counter()
    for table in md.tables:
        for b in table.buckets:
            for r in b.replicas:
                replicas[r] += 1
            if b.leader != NO_LEADER:
                leaders[b.leader] += 1
                if len(set(b.isr)) < len(set(b.replicas)):
                    under[b.leader] += 1
    tags, tags_error = await _tags(admin)
    tag_of = {s.server_id: s for s in tags.servers} if tags is not None else {}
    tablets = [
        {
            "id": n.id,
            "address": f"{n.host}:{n.port}",
            "rack": n.rack,
            "tag": tag_of[n.id].tag if n.id in tag_of else "none" if tags is not None else "?",
            "leaders": leaders[n.id],
            "replicas": replicas[n.id],
            "under_replicated": under[n.id],
        }
        for n in sorted(md.tablet_servers, key=lambda n: n.id)
    ]
    live = {t["id"] for t in tablets}
    down = [
        {"id": s.server_id, "tag": s.tag, "by": s.by, "replicas": s.replicas}
        for s in sorted(tag_of.values(), key=lambda s: s.server_id)
        if s.server_id not in live and not s.live
    ]
    leader_address = f"{md.coordinator.host}:{md.coordinator.port}" if md.coordinator.host else None
    coordinators = await _coordinators(args, admin, leader_address, {t["address"] for t in tablets})
    replacement = tags.replacement if tags is not None else None
    doc: dict[str, Any] = {"coordinators": coordinators, "tablet_servers": tablets, "down_tablet_servers": down,
                           "replacement": _replacement_doc(replacement),
                           "to_replace": tags.to_replace if tags is not None else None}  # fmt: skip
    if tags_error:
        doc["tags_error"] = tags_error
    if args.json:
        print_json(doc)
        return EXIT_OK
    from rich.table import Table

    ct = Table(title=f"coordinators (epoch {md.coordinator_epoch})")
    for col in ("id", "address", "state", "leader", "epoch", "error"):
        ct.add_column(col, no_wrap=True)
    for c in doc["coordinators"]:
        ct.add_row(
            str(c["id"] if c["id"] is not None else "?"), c["address"], c["state"],
            "LEADER" if c["leader"] else "", str(c["epoch"] if c["epoch"] is not None else ""), c["error"],
        )  # fmt: skip
    tt = Table(title="tablet servers (live)")
    for col in ("id", "address", "rack", "tag", "leaders", "replicas", "under-replicated"):
        tt.add_column(col, no_wrap=True)
    for t in tablets:
        tt.add_row(str(t["id"]), t["address"], t["rack"], t["tag"], str(t["leaders"]), str(t["replicas"]),
                   str(t["under_replicated"]))  # fmt: skip
    out = console()
    out.print(ct)
    out.print(tt)
    for d in down:
        by = f" ({d['by']})" if d["by"] else ""
        out.print(f"tablet server {d['id']}: down, tag {d['tag']}{by}, {d['replicas']} replica(s) assigned")
    if replacement is not None:
        out.print(replacement_line(replacement))
    if tags_error:
        out.print(f"server tags unavailable: {tags_error}")
    return EXIT_OK


async def _tags(admin: Admin) -> tuple[ServerTags | None, str]:
    """The leader's server tags, or (None, the error code) when it refuses them (no DESCRIBE on the cluster)."""
    try:
        return await admin.describe_server_tags(), ""
    except FlussError as e:
        return None, e.code.name


def _replacement_doc(r: Replacement | None) -> dict[str, Any] | None:
    return None if r is None else {**asdict(r), "replacing": list(r.replacing)}
