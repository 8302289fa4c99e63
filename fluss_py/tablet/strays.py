"""Stray logs: replicas of tables dropped while this tablet server could not hear of it (down or cut off
during the drop, so it never got the StopReplica that deletes them). Pure.

Found from the coordinator's UpdateMetadata, which lists every table: table ids only grow and are never
reused, so a table id missing from a snapshot *below the snapshot's highest id* was dropped — a table newer
than the snapshot (created after it was taken, possibly already hosted here) has a higher id, and a snapshot
arriving late cannot name a stale set. A log this server hosts a replica of is never a stray (the
coordinator owns its fate: a drop sends StopReplica with delete).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Set

from fluss_py.types import TableBucket


def stray_buckets(
    on_disk: Iterable[TableBucket], hosted: Callable[[TableBucket], bool], table_ids: Set[int]
) -> list[TableBucket]:
    """The logs in ``on_disk`` whose table was dropped, given the table ids of one full metadata snapshot."""
    if not table_ids:
        return []
    newest = max(table_ids)
    return sorted(tb for tb in on_disk if tb.table_id < newest and tb.table_id not in table_ids and not hosted(tb))
