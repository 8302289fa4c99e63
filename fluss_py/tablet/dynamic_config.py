"""A tablet server's dynamic configuration: watch the ZooKeeper nodes that concern it and apply them live
(design: docs/dynamic-config.md).

    config/cluster, config/tablet-servers/<own id>   data watches (kept: re-armed after every change)
    config/tables                                    children watch, then one data watch per table node
        any change ──▶ DynamicOverrides(cluster, server, tables) ──▶ apply(overrides) (ReplicaManager)

The coordinator leader validated every value before storing it; a node this server cannot read is logged
and that layer is ignored. Values it cannot use (one that does not parse, or layers that break a rule
between keys of ``cfg.CONSTRAINTS`` with this server's static file) are refused as a whole: one ERROR
naming the key or the rule, and the previous settings stay. Never fatal.

Who may call: TabletServer creates, ``start``s and ``close``s it on its loop; the callbacks run there too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from fluss_py.errors import ConfigError
from fluss_py.zk.client import ZkClient
from fluss_py.zk.paths import DynamicConfigZNode
from fluss_py.zk.values import ZnodeStat

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DynamicOverrides:
    """The dynamic entries that concern one tablet server, per layer."""

    cluster: dict[str, str] = field(default_factory=dict)
    server: dict[str, str] = field(default_factory=dict)
    tables: dict[int, dict[str, str]] = field(default_factory=dict)


class DynamicConfigWatcher:
    """Owns the watches; calls ``apply`` with the whole picture after every change."""

    def __init__(self, zk: ZkClient, server_id: int, apply: Callable[[DynamicOverrides], None]) -> None:
        self._zk = zk
        self._root = zk.root
        self._server_id = server_id
        self._apply = apply
        self._cluster: dict[str, str] = {}
        self._server: dict[str, str] = {}
        self._tables: dict[int, dict[str, str]] = {}
        self._watchers: list = []
        self._table_watchers: dict[int, object] = {}

    def start(self) -> None:
        root = self._root
        self._watchers.append(
            self._zk.watch_data(DynamicConfigZNode.path(root, DynamicConfigZNode.CLUSTER), self._layer("cluster"))
        )
        server_path = DynamicConfigZNode.path(root, DynamicConfigZNode.TABLET_SERVER, str(self._server_id))
        self._watchers.append(self._zk.watch_data(server_path, self._layer("server")))
        self._watchers.append(self._zk.watch_children(DynamicConfigZNode.tables_parent(root), self._on_tables))

    def close(self) -> None:
        for w in [*self._watchers, *self._table_watchers.values()]:
            w.cancel()  # type: ignore[attr-defined]
        self._watchers.clear()
        self._table_watchers.clear()

    def _layer(self, which: str) -> Callable[[tuple[bytes, ZnodeStat] | None], None]:
        def on_change(got: tuple[bytes, ZnodeStat] | None) -> None:
            entries = _decode(got, which)
            if which == "cluster":
                self._cluster = entries
            else:
                self._server = entries
            self._publish()

        return on_change

    def _on_tables(self, children: list[str] | None) -> None:
        ids = {int(c) for c in children or [] if c.isdigit()}
        for table_id in [t for t in self._table_watchers if t not in ids]:
            self._table_watchers.pop(table_id).cancel()  # type: ignore[attr-defined]
            self._tables.pop(table_id, None)
        for table_id in ids - set(self._table_watchers):
            path = DynamicConfigZNode.path(self._root, DynamicConfigZNode.TABLE, str(table_id))
            self._table_watchers[table_id] = self._zk.watch_data(path, self._table_changed(table_id))
        self._publish()

    def _table_changed(self, table_id: int) -> Callable[[tuple[bytes, ZnodeStat] | None], None]:
        def on_change(got: tuple[bytes, ZnodeStat] | None) -> None:
            self._tables[table_id] = _decode(got, f"table {table_id}")
            self._publish()

        return on_change

    def _publish(self) -> None:
        overrides = DynamicOverrides(
            dict(self._cluster), dict(self._server), {k: dict(v) for k, v in self._tables.items()}
        )
        try:
            self._apply(overrides)
        except ConfigError as e:  # a value (or combination) this server cannot use: keep the previous settings
            log.error("Dynamic configuration refused, previous settings kept: %s", e)
        except Exception:  # a bug of applying: keep serving with the previous settings, loudly
            log.exception("Applying dynamic configuration %s failed; previous settings kept", overrides)


def _decode(got: tuple[bytes, ZnodeStat] | None, what: str) -> dict[str, str]:
    if got is None:
        return {}
    try:
        return DynamicConfigZNode.decode(got[0])
    except (ValueError, KeyError) as e:
        log.error("Ignoring unreadable dynamic config of %s: %s", what, e)
        return {}
