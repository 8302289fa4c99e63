"""``fluss-py cluster servers``: the live servers as the cluster sees them (not the local processes).

    fluss-py cluster servers [--bootstrap-servers ...] [--dir DIR] [--json]

Coordinators: every coordinator address known (the local cluster's cluster.json, the bootstrap list and
the leader named by metadata) is asked GetCoordinatorInfo: its state, which one leads, the epoch.
Tablet servers: the coordinator leader's live set, with per server the buckets it leads, the replicas it
holds and the under-replicated buckets it leads (ISR smaller than the replica set). ``--json``::

    {"coordinators": [{"id": 1, "address": "...", "state": "Leader", "leader": true, "epoch": 3,
                       "error": ""}, ...],
     "tablet_servers": [{"id": 1, "address": "...", "rack": "", "leaders": 2, "replicas": 6,
                         "under_replicated": 0}, ...]}
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
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
from fluss_py.client import Admin
from fluss_py.errors import ErrorCode, FlussError
from fluss_py.testing.cluster_file import COORDINATOR
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
    tablets = [
        {
            "id": n.id,
            "address": f"{n.host}:{n.port}",
            "rack": n.rack,
            "leaders": leaders[n.id],
            "replicas": replicas[n.id],
            "under_replicated": under[n.id],
        }
        for n in sorted(md.tablet_servers, key=lambda n: n.id)
    ]
    leader_address = f"{md.coordinator.host}:{md.coordinator.port}" if md.coordinator.host else None
    coordinators = await _coordinators(args, admin, leader_address, {t["address"] for t in tablets})
    doc = {"coordinators": coordinators, "tablet_servers": tablets}
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
    for col in ("id", "address", "rack", "leaders", "replicas", "under-replicated"):
        tt.add_column(col, no_wrap=True)
    for t in tablets:
        tt.add_row(str(t["id"]), t["address"], t["rack"], str(t["leaders"]), str(t["replicas"]),
                   str(t["under_replicated"]))  # fmt: skip
    out = console()
    out.print(ct)
    out.print(tt)
    return EXIT_OK
