"""Dynamic configuration on the coordinator leader: describe and alter, stored in ZooKeeper (design:
docs/dynamic-config.md).

    fluss-py config alter ──HTTP POST /config──▶ leader: AlterConfig event (single writer)
        validate (registry parser, entity rules)  ── invalid ──▶ 400 INVALID_CONFIG, nothing stored
        read config/<entity>, merge; rules between keys over the defaults and the other stored entities
                                                  ── broken ──▶ 400 INVALID_CONFIG, nothing stored
        fenced write (epoch check + node version) ──▶ tablet servers' watches
        apply what the coordinator itself uses (rebalance batch ratio) at once

Tablet servers watch their nodes and apply live (``tablet/dynamic_config.py``). A new leader reads
``config/cluster`` when it starts (``load``).

Who may call: LeaderServices installs the handlers; the HTTP routes put events on the serving leader's loop.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fluss_py import config as cfg
from fluss_py.common import dynamic_config as dyn
from fluss_py.common.http import Request, RequestHandler, Response, json_response
from fluss_py.common.schema_rules import check_keeps_changelog
from fluss_py.coordinator.events import AlterConfig, DescribeConfig, Event, LoadClusterConfig
from fluss_py.errors import ConfigError, InvalidConfigError, InvalidRequestError, TableNotExistError
from fluss_py.types import CoordinatorLeaderInfo, TablePath
from fluss_py.zk.client import ZkClient
from fluss_py.zk.paths import DynamicConfigZNode
from fluss_py.zk.values import CreateOp, NoNodeError, SetOp

log = logging.getLogger(__name__)


class DynamicConfigManager:
    """Owns nothing but the fenced writes of ``config/...`` nodes; handlers run on the event loop. ``view``
    resolves table names; ``on_cluster`` receives the cluster entity's entries (the rebalance executor's
    options)."""

    def __init__(self, zk: ZkClient, context: Any, view: Any, on_cluster: Callable[[dict[str, str]], None]) -> None:
        self._zk = zk
        self._ctx = context
        self._view = view
        self._on_cluster = on_cluster

    def install(self, loop: Any) -> None:
        loop.register(AlterConfig, self.alter)
        loop.register(DescribeConfig, self.describe)
        loop.register(LoadClusterConfig, self.load)

    async def load(self, _event: LoadClusterConfig | None = None) -> None:
        """Read the cluster entity at the start of a leadership and apply it."""
        self._on_cluster(await self._read(DynamicConfigZNode.path(self._zk.root, dyn.CLUSTER)))

    def _entity(self, entity_type: str, name: str) -> tuple[str, Any]:
        """The znode path of an entity and, for a table, its registration (``TableRegistration``)."""
        root = self._zk.root
        if entity_type == dyn.CLUSTER:
            return DynamicConfigZNode.path(root, entity_type), None
        if entity_type == dyn.TABLET_SERVER:
            if not name.isdigit():
                raise InvalidRequestError(f"a tablet-server entity is named by its id, got {name!r}")
            return DynamicConfigZNode.path(root, entity_type, name), None
        if entity_type == dyn.TABLE:
            table_id = self._view.by_path.get(TablePath.parse(name))
            if table_id is None:
                raise TableNotExistError(f"table {name} does not exist")
            return DynamicConfigZNode.path(root, entity_type, str(table_id)), self._view.tables[table_id]
        raise InvalidConfigError(f"unknown entity type {entity_type!r} (cluster, tablet-server, table)")

    async def _read(self, path: str) -> dict[str, str]:
        got = await self._zk.get(path)
        return DynamicConfigZNode.decode(got[0]) if got is not None else {}

    async def _server_entities(self, entity_type: str) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
        """What an alter of ``entity_type`` is checked over: the stored cluster entity (for a tablet-server
        alter) and the stored tablet-server entities by id (for a cluster alter)."""
        root = self._zk.root
        if entity_type == dyn.TABLET_SERVER:
            return await self._read(DynamicConfigZNode.path(root, dyn.CLUSTER)), {}
        if entity_type != dyn.CLUSTER:
            return {}, {}
        try:
            ids = await self._zk.get_children(DynamicConfigZNode.tablet_servers_parent(root))
        except NoNodeError:
            ids = []
        servers = {i: await self._read(DynamicConfigZNode.path(root, dyn.TABLET_SERVER, i)) for i in ids if i.isdigit()}
        return {}, servers

    async def describe(self, event: DescribeConfig) -> dict[str, Any]:
        path, _ = self._entity(event.entity_type, event.name)
        entries = await self._read(path)
        defaults = {k: _default(k) for k in dyn.keys_for(event.entity_type)}
        shown = cfg.masked(entries)  # only dynamic keys can be stored through alter; a hand-written node may hold more
        return {"entity_type": event.entity_type, "name": event.name, "dynamic": shown, "defaults": defaults}

    async def alter(self, event: AlterConfig) -> dict[str, Any]:
        path, table = self._entity(event.entity_type, event.name)
        rf = table.replication_factor if table is not None else None
        changes = dyn.validate(event.entity_type, event.set, event.delete, rf)  # raises before any write
        got = await self._zk.get(path)
        current = DynamicConfigZNode.decode(got[0]) if got is not None else {}
        entries = dyn.merged(current, changes, event.delete)
        if table is not None and table.schema is not None and table.schema.is_primary_key_table:
            check_keeps_changelog(entries)  # its log is the source of its KV (docs/primary-key-tables.md §1)
        cluster, servers = await self._server_entities(event.entity_type)
        dyn.check_rules(dyn.rule_stacks(event.entity_type, entries, cluster, servers))  # raises before any write
        data = DynamicConfigZNode.encode(entries)
        op = SetOp(path, data, got[1].version) if got is not None else CreateOp(path, data)
        if got is None:
            await self._zk.ensure_path(path.rsplit("/", 1)[0])
        await self._zk.commit([op], fence=self._ctx.fence)
        log.info("Dynamic config of %s %s: %s", event.entity_type, event.name or "(default)", cfg.masked(entries))
        if event.entity_type == dyn.CLUSTER:
            self._on_cluster(entries)
        return {"entity_type": event.entity_type, "name": event.name, "dynamic": cfg.masked(entries)}


def _default(key: str) -> str:
    option = cfg.OPTIONS.get(key)
    return str(option.default) if option is not None else "(the tablet server's value)"


def apply_to_plan_options(options: Any, entries: dict[str, str], static: cfg.Config) -> Any:
    """The rebalance PlanOptions with the cluster's dynamic batch ratio (or the static one). A cluster entity
    this coordinator cannot use with its static config (a value that does not parse, a rule between keys it
    breaks) leaves ``options`` as they are, with one ERROR naming the problem, as on the tablet servers."""
    try:
        layered = dyn.LayeredConfig(static, entries)
    except ConfigError as e:
        log.error("Dynamic configuration of the cluster refused, previous settings kept: %s", e)
        return options
    return dataclasses.replace(options, batch_ratio=float(layered[cfg.REBALANCE_BATCH_RATIO]))


def config_routes(
    call: Callable[[Event], Awaitable[Response]],
    leader: Callable[[], Awaitable[CoordinatorLeaderInfo | None]] | None = None,
) -> dict[str, RequestHandler]:
    """``GET /config?entity=table&name=fluss.t`` and ``POST /config?entity=...&name=...&changes=<JSON>``
    (``{"set":{key:value},"delete":[key]}``); ``call`` submits to the serving leader (rebalance/routes.py)."""

    async def get(request: Request) -> Response:
        try:
            q = _params(request, ("entity", "name"))
        except ValueError as e:
            return json_response({"error": "INVALID_REQUEST", "message": str(e)}, 400)
        return await call(DescribeConfig(q.get("entity", ""), q.get("name", "")))

    async def post(request: Request) -> Response:
        try:  # a POST that changes the cluster fails closed: unknown or repeated parameters are refused
            q = _params(request, ("entity", "name", "changes"))
            changes = json.loads(q.get("changes", "{}"))
            set_, delete = dict(changes.get("set", {})), [str(k) for k in changes.get("delete", [])]
            set_ = {str(k): str(v) for k, v in set_.items()}
        except (ValueError, TypeError, AttributeError) as e:
            return json_response({"error": "INVALID_REQUEST", "message": str(e)}, 400)
        return await call(AlterConfig(q.get("entity", ""), q.get("name", ""), set_, delete))

    return {"GET /config": get, "POST /config": post}


def _params(request: Request, names: tuple[str, ...]) -> dict[str, str]:
    """The query parameters ``names``, each at most once; ValueError for an unknown or repeated one."""
    given = request.query_all or {k: [v] for k, v in request.query.items()}
    out: dict[str, str] = {}
    for name, values in given.items():
        if name not in names:
            raise ValueError(f"unknown query parameter {name!r} (allowed: {', '.join(names)})")
        if len(values) != 1:
            raise ValueError(f"query parameter {name!r} given {len(values)} times")
        out[name] = values[0]
    return out
