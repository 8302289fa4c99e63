"""Stray logs: replicas this tablet server holds on disk that the cluster no longer assigns to it, because it
could not hear of the change — it was down or cut off when their table was dropped, or when a rebalance move
that was adding it was rolled back (or one removing it completed), so it never got the StopReplica that
deletes them. Pure.

Found from the coordinator's UpdateMetadata, which lists every table with every bucket's assignment:
- a table listed: its bucket's log is a stray if the bucket is listed and this server is not among its
  replicas (during a move the adding server is already in the list);
- a table not listed: table ids only grow and are never reused, so a table id missing *below the snapshot's
  highest id* was dropped; a table newer than the snapshot (created after it was taken) has a higher id.
A log this server hosts a replica of is never a stray (it was assigned by a NotifyLeaderAndIsr of this
process; the coordinator owns its fate), so an UpdateMetadata arriving late or out of order cannot touch one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from fluss_py.types import TableBucket

Assignments = Mapping[int, Mapping[int, tuple[int, ...]]]
"""table id -> bucket -> replicas, as one full metadata snapshot lists them."""


def stray_buckets(
    on_disk: Iterable[TableBucket], hosted: Callable[[TableBucket], bool], assignments: Assignments, server_id: int
) -> list[TableBucket]:
    """The logs in ``on_disk`` that the snapshot ``assignments`` no longer assigns to ``server_id``."""
    if not assignments:
        return []
    newest = max(assignments)
    out = []
    for tb in on_disk:
        if hosted(tb):
            continue
        table = assignments.get(tb.table_id)
        if table is None:
            if tb.table_id < newest:
                out.append(tb)
        elif tb.bucket in table and server_id not in table[tb.bucket]:
            out.append(tb)
    return sorted(out)
