"""The schema of each table with a replica on this server (docs/primary-key-tables.md §2).

A schema only grows (a column added is a new version, schema id + 1), and the coordinator's word about it
arrives twice: in NotifyLeaderAndIsr (with a bucket's role) and in UpdateMetadata (after an added column).
Either may be older than what is known here (NotifyLeaderAndIsr falls back on the last metadata view), so
the newer schema is always kept: a replica never forgets a version it has seen, and a row written with it
still decodes.

Who may call: the ReplicaManager (``learn`` when it takes a replica, ``retain`` when replicas stop), the
replica layer (``update`` on UpdateMetadata), and whoever reads rows of a hosted bucket (``get``), all on the
server's loop.
"""

from __future__ import annotations

from collections.abc import Set

from fluss_py.schema.schema import TableSchema


class TableSchemas:
    """Owns table id -> the newest schema known of a table hosted here (log tables without one: absent)."""

    def __init__(self) -> None:
        self._by_table: dict[int, TableSchema] = {}

    def get(self, table_id: int) -> TableSchema | None:
        return self._by_table.get(table_id)

    def learn(self, table_id: int, schema: TableSchema | None) -> None:
        """A replica of ``table_id`` is taken with ``schema``: keep it unless a newer one is known."""
        known = self._by_table.get(table_id)
        if schema is not None and (known is None or len(schema.versions) > len(known.versions)):
            self._by_table[table_id] = schema

    def update(self, table_id: int, schema: TableSchema) -> bool:
        """A newer schema of a hosted table (UpdateMetadata); True when it replaced the one known. Tables
        without a replica here are not kept."""
        known = self._by_table.get(table_id)
        if known is None or len(schema.versions) <= len(known.versions):
            return False
        self._by_table[table_id] = schema
        return True

    def retain(self, table_ids: Set[int]) -> None:
        """Forget the tables that have no replica here any more."""
        for table_id in [t for t in self._by_table if t not in table_ids]:
            del self._by_table[table_id]
