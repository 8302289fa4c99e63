"""What a new table's schema must satisfy beyond itself: its fit with the table's properties (pure).

``TableSchema`` checks its own rules (names, types, keys; ``fluss_py.schema.schema``); these are the rules that
need the rest of a CreateTable (docs/primary-key-tables.md §2):

- a create carries exactly one version, schema id 1 (later ones come from ``add_column``);
- the merge-engine properties (``table.merge-engine``, ``table.merge-engine.versioned.ver-column``) belong
  to primary-key tables, and name a column of the schema of the right kind (``MergeRule.from_properties``);
- a table with a schema is not partitioned: a primary key lives in one bucket of one table whatever its
  rows' timestamps, and a partition would not follow its table's added columns;
- a primary-key table does not delete its changelog (``table.log.ttl`` > 0, ``table.log.retention-bytes``
  >= 0, at create or later as a table's dynamic entry): its log is the source of truth every replica's KV is
  rebuilt from (docs/primary-key-tables.md §1). ``keep_changelog`` writes ``table.log.ttl=0`` and
  ``table.log.retention-bytes=-1`` into its properties, so the servers' (and the cluster's dynamic)
  retention defaults, which a creation property overrides, never apply to it;
- the schema, every version, fits its table's znode (``MAX_SCHEMA_BYTES``), checked again per added column.

Who may call: anyone (no I/O): the coordinator's CreateTable and AddColumn, and the CLI before it sends
anything (bad input is one line and exit 2 there, with nothing written).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from fluss_py import config as cfg
from fluss_py.errors import InvalidConfigError, InvalidRequestError
from fluss_py.schema.merge import MergeRule
from fluss_py.schema.schema import TableSchema

MAX_SCHEMA_BYTES = 512 * 1024
"""Bound on a table's schema in its znode (every version, JSON): half of ZooKeeper's 1 MiB node limit, the rest
for the other fields of the node."""

PARTITION_KEYS = (cfg.TABLE_PARTITION_KEY.key, cfg.TABLE_AUTO_PARTITION_UNIT.key)


def check_new_table(schema: TableSchema | None, properties: Mapping[str, str]) -> None:
    """Raise INVALID_REQUEST / INVALID_CONFIG naming the first rule of the module docstring ``schema`` and the
    (already validated) ``properties`` of a new table break."""
    MergeRule.from_properties(properties, schema)
    if schema is None:
        return
    if len(schema.versions) != 1:
        ids = [v.schema_id for v in schema.versions]
        raise InvalidRequestError(f"a new table's schema has one version, schema id 1; got schema ids {ids}")
    if any(properties.get(k) for k in PARTITION_KEYS):
        raise InvalidRequestError("a table with a schema cannot be partitioned (a primary key lives in one bucket "
                                  "of one table, and a partition would not follow its table's added columns): "
                                  "drop the partition properties or the schema")  # fmt: skip
    if schema.is_primary_key_table:
        check_keeps_changelog(properties)
    check_schema_size(schema)


def keep_changelog(schema: TableSchema | None, properties: Mapping[str, str]) -> dict[str, str]:
    """A new table's properties to store: a primary-key table's with retention off (checked first)."""
    if schema is None or not schema.is_primary_key_table:
        return dict(properties)
    return {cfg.TABLE_LOG_TTL.key: "0", cfg.TABLE_LOG_RETENTION_BYTES.key: "-1", **properties}


def check_keeps_changelog(properties: Mapping[str, str]) -> None:
    """INVALID_CONFIG when ``properties`` (a primary-key table's, or its dynamic entries)
    would delete any of its changelog."""
    ttl, size = cfg.TABLE_LOG_TTL, cfg.TABLE_LOG_RETENTION_BYTES
    deletes = {
        ttl.key: ttl.key in properties and ttl.parse(properties[ttl.key]) > 0,
        size.key: size.key in properties and size.parse(properties[size.key]) >= 0,
    }
    for key, deleting in deletes.items():
        if deleting:
            raise InvalidConfigError(f"{key}={properties[key]}: a primary-key table keeps its whole changelog "
                                     "(every replica's KV is rebuilt from it); leave it out")  # fmt: skip


def check_schema_size(schema: TableSchema) -> None:
    """INVALID_REQUEST when ``schema`` (every version) would not fit in its table's znode."""
    size = len(json.dumps(schema.to_json(), separators=(",", ":")).encode())
    if size > MAX_SCHEMA_BYTES:
        raise InvalidRequestError(f"the schema is {size} bytes in ZooKeeper with every version, more than "
                                  f"{MAX_SCHEMA_BYTES}: fewer or shorter columns")  # fmt: skip
