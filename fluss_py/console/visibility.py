"""What of a console snapshot one principal may see: what it may DESCRIBE, as GetMetadata answers it (pure).

``visible(snapshot, viewer)`` is a copy of the snapshot (``build_snapshot``'s document, after the rates and
lags were added) keeping::

    tables, buckets             the tables the viewer may DESCRIBE (a partition by its table's ACLs too)
    timeline                    events of those tables
    groups                      the groups it may DESCRIBE, their offsets and members' buckets cut down to
                                those tables
    servers                     every server (GetMetadata lists them to anyone), with leaders, replicas and
                                under-replicated counted over the visible buckets only; disk figures are the
                                server's own totals (no table in them)
    rebalance                   only with DESCRIBE on the cluster (as GET /rebalance)
    coordinators, ts, error     as they are

A viewer that ``sees_all`` (security off, a super user, a server, DESCRIBE on the cluster) gets the
snapshot itself. Who may call: ConsoleFeed (console/routes.py), on the coordinator's loop.
"""

from __future__ import annotations

from typing import Any, Protocol


class Viewer(Protocol):
    """Answers for one principal (security/http_access.Viewer)."""

    @property
    def sees_all(self) -> bool: ...

    def table(self, name: str) -> bool: ...

    def group(self, name: str) -> bool: ...


def visible(snapshot: dict[str, Any], viewer: Viewer) -> dict[str, Any]:
    if viewer.sees_all or "tables" not in snapshot:
        return snapshot if viewer.sees_all else {k: v for k, v in snapshot.items() if k in ("ts", "error")}
    out = dict(snapshot)
    tables = [t for t in snapshot["tables"] if viewer.table(t["name"])]
    names = {t["name"] for t in tables}
    ids = {t["id"] for t in tables}
    out["tables"] = tables
    out["buckets"] = buckets = [b for b in snapshot["buckets"] if b["table_id"] in ids]
    out["timeline"] = [e for e in snapshot.get("timeline", []) if e["table"] in names]
    out["groups"] = [_group(g, ids) for g in snapshot.get("groups", []) if viewer.group(g["name"])]
    out["rebalance"] = None
    out["servers"] = [_server(s, buckets) for s in snapshot.get("servers", [])]
    return out


def _group(group: dict[str, Any], ids: set[int]) -> dict[str, Any]:
    members = [{**m, "b": [tb for tb in m["b"] if tb[0] in ids]} for m in group["members"]]
    return {**group, "members": members, "offsets": [row for row in group["offsets"] if row[0] in ids]}


def _server(server: dict[str, Any], buckets: list[dict[str, Any]]) -> dict[str, Any]:
    sid = server["id"]
    leads = [b for b in buckets if b["leader"] == sid]
    return {
        **server,
        "leaders": len(leads),
        "replicas": sum(sid in b["replicas"] for b in buckets),
        "under_replicated": sum(bool(b["under_replicated"]) for b in leads),
    }
