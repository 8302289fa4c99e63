"""Dynamic configuration, pure parts (docs/dynamic-config.md): validation before storing, merging, layering,
the znode codec and paths."""

import json
import logging

import pytest

from fluss_py import config as cfg
from fluss_py import config_load
from fluss_py.common import dynamic_config as dyn
from fluss_py.common.dynamic_config import LayeredConfig, keys_for, merged, validate
from fluss_py.common.http import Request, json_response
from fluss_py.config_values import Constraint
from fluss_py.coordinator.dynamic_config import DynamicConfigManager, apply_to_plan_options, config_routes
from fluss_py.coordinator.events import AlterConfig, DescribeConfig
from fluss_py.coordinator.rebalance.planner import PlanOptions
from fluss_py.errors import ConfigError, InvalidConfigError
from fluss_py.log.manager import LogManager
from fluss_py.replica.manager import ReplicaManager, ReplicaSettings
from fluss_py.tablet.dynamic_config import DynamicConfigWatcher
from fluss_py.zk.paths import DynamicConfigZNode
from fluss_py.zk.values import ZnodeStat
from tests.unit.coordinator.fakes import FakeZk


@pytest.mark.parametrize(
    "entity, changes",
    [
        ("cluster", {"replica.lag.time.max.ms": "soon"}),
        ("cluster", {"replica.lag.time.max.ms": "0"}),
        ("cluster", {"tablet-server.min.insync.replicas": "0"}),
        ("cluster", {"tablet-server.rebalance.batch.ratio": "0"}),
        ("cluster", {"tablet-server.rebalance.throttle-bytes-per-second": "lots"}),
        ("cluster", {"data.dir": "/x"}),  # a registry key, not dynamic
        ("cluster", {"nope": "1"}),
        ("cluster", {"min.insync.replicas": "1"}),  # table only
        ("table", {"replica.lag.time.max.ms": "1s"}),  # server level only
        ("tablet-server", {"tablet-server.rebalance.batch.ratio": "0.5"}),  # cluster only
        ("table", {"min.insync.replicas": "4"}),  # above the replication factor
        ("database", {"table.log.ttl": "1h"}),
    ],
)
def test_invalid_changes_are_refused(entity, changes):
    with pytest.raises(InvalidConfigError):
        validate(entity, changes, replication_factor=3)


def test_valid_changes_pass_as_given():
    changes = {"replica.lag.time.max.ms": "5s", "log.flush.on-ack": "true", "table.log.ttl": "2h"}
    assert validate("tablet-server", changes) == changes
    assert validate("table", {"min.insync.replicas": "2", "table.log.retention-bytes": "1GB"}, replication_factor=3)
    with pytest.raises(InvalidConfigError):
        validate("cluster", {}, deletions=["data.dir"])  # deletions are checked too


def test_every_dynamic_key_is_in_the_registry_or_the_table_min_isr():
    for entity in ("cluster", "tablet-server", "table"):
        for key in keys_for(entity):
            assert key in cfg.OPTIONS or key == "min.insync.replicas"


def test_merge_sets_and_deletes():
    assert merged({"a": "1", "b": "2"}, {"b": "3", "c": "4"}, ["a"]) == {"b": "3", "c": "4"}


def test_layers_override_the_static_config_lowest_first():
    static = cfg.load_config("tablet-server", None, {"replica.lag.time.max.ms": "30s"})
    layered = LayeredConfig(static, {"replica.lag.time.max.ms": "10s", "log.flush.interval": "2s"},
                            {"replica.lag.time.max.ms": "5s"})  # fmt: skip
    settings = ReplicaSettings.from_config(layered)
    assert settings.lag_time_s == 5.0 and settings.checkpoint_interval_s == 2.0
    assert layered[cfg.MIN_INSYNC_REPLICAS] == static[cfg.MIN_INSYNC_REPLICAS]
    # keys of another role (the coordinator's batch ratio is _SERVERS, so it stays; a client key would not)
    assert "client.request.acks" not in LayeredConfig(static, {"client.request.acks": "1"}).overridden()


def test_znode_codec_and_paths():
    data = DynamicConfigZNode.encode({"table.log.ttl": "2h"})
    assert DynamicConfigZNode.decode(data) == {"table.log.ttl": "2h"}
    assert DynamicConfigZNode.path("/f", "cluster") == "/f/config/cluster"
    assert DynamicConfigZNode.path("/f", "tablet-server", "3") == "/f/config/tablet-servers/3"
    assert DynamicConfigZNode.path("/f", "table", "12") == "/f/config/tables/12"
    with pytest.raises(ValueError):
        DynamicConfigZNode.path("/f", "tablet-server", "../x")


async def test_the_http_routes_refuse_unknown_or_repeated_parameters_before_submitting():
    submitted = []

    async def call(event):
        submitted.append(event)
        return json_response({"ok": True})

    routes = config_routes(call)
    changes = json.dumps({"set": {"table.log.ttl": "2h"}, "delete": ["log.flush.on-ack"]})
    good = {"entity": ["cluster"], "changes": [changes]}
    status, _, _ = await routes["POST /config"](Request("POST", "/config", {}, good))
    assert status == 200 and isinstance(submitted[-1], AlterConfig)
    assert (submitted[-1].set, submitted[-1].delete) == ({"table.log.ttl": "2h"}, ["log.flush.on-ack"])
    for bad in ({**good, "dry": ["1"]}, {"entity": ["cluster", "table"], "changes": [changes]},
                {"entity": ["cluster"], "changes": ["not json"]}):  # fmt: skip
        status, _, body = await routes["POST /config"](Request("POST", "/config", {}, bad))
        assert status == 400 and json.loads(body)["error"] == "INVALID_REQUEST"
    assert len(submitted) == 1
    status, _, _ = await routes["GET /config"](Request("GET", "/config", {}, {"entity": ["table"], "name": ["db.t"]}))
    assert status == 200 and isinstance(submitted[-1], DescribeConfig)
    assert (submitted[-1].entity_type, submitted[-1].name) == ("table", "db.t")


# ---------------------------------------------------------------- rules between keys (cfg.CONSTRAINTS)
LAG_BELOW_FETCH_WAIT = {"replica.lag.time.max.ms": "200ms"}  # the default replica.fetch.wait.max.ms is 500 ms
RULE = "replica.fetch.wait.max.ms < replica.lag.time.max.ms"


def test_a_dynamic_value_is_held_to_the_rules_the_static_config_enforces():
    static = cfg.Config(cfg.TABLET)
    with pytest.raises(ConfigError, match=RULE):  # in the file or -D: refused at start
        static.with_overrides(LAG_BELOW_FETCH_WAIT)
    with pytest.raises(ConfigError, match=RULE):  # as a dynamic layer: refused as well
        LayeredConfig(static, LAG_BELOW_FETCH_WAIT)
    with pytest.raises(ConfigError, match=RULE):  # a lower layer's value counts when no upper one replaces it
        LayeredConfig(static, LAG_BELOW_FETCH_WAIT, {"log.flush.interval": "2s"})
    # the server's own static file decides: with a shorter fetch wait the same value is fine
    short_wait = static.with_overrides({"replica.fetch.wait.max.ms": "100ms"})
    assert ReplicaSettings.from_config(LayeredConfig(short_wait, LAG_BELOW_FETCH_WAIT)).lag_time_s == 0.2
    assert LayeredConfig(static, LAG_BELOW_FETCH_WAIT, {"replica.lag.time.max.ms": "5s"})[cfg.REPLICA_LAG_TIME_MAX] == 5


def test_rule_stacks_cover_every_server_the_alter_reaches():
    cluster, servers = {"log.flush.interval": "2s"}, {"1": {"replica.lag.time.max.ms": "5s"}, "2": {}}
    new = {"table.log.ttl": "1h"}
    assert dyn.rule_stacks("cluster", new, cluster, servers) == [[new], [new, servers["1"]], [new, {}]]
    assert dyn.rule_stacks("tablet-server", new, cluster, servers) == [[cluster, new]]
    assert dyn.rule_stacks("table", new, cluster, servers) == []  # table entries do not layer server settings
    dyn.check_rules(dyn.rule_stacks("cluster", new, cluster, servers))
    with pytest.raises(InvalidConfigError, match=RULE):
        dyn.check_rules(dyn.rule_stacks("cluster", LAG_BELOW_FETCH_WAIT, cluster, servers))
    with pytest.raises(InvalidConfigError, match=RULE):
        dyn.check_rules(dyn.rule_stacks("tablet-server", LAG_BELOW_FETCH_WAIT, cluster, servers))
    # a server-level 5 s covers its own server, but the cluster entity reaches servers without one too
    dyn.check_rules([[LAG_BELOW_FETCH_WAIT, servers["1"]]])


class _Zk(FakeZk):
    async def ensure_path(self, path: str) -> None:
        self.put(path)


class _Ctx:
    def __init__(self, zk: FakeZk) -> None:
        self.fence = zk.fence()


async def test_alter_refuses_a_value_that_breaks_a_rule_and_stores_nothing():
    zk = _Zk()
    applied: list[dict[str, str]] = []
    manager = DynamicConfigManager(zk, _Ctx(zk), None, applied.append)
    cluster_path = DynamicConfigZNode.path(zk.root, "cluster")
    with pytest.raises(InvalidConfigError, match=RULE):
        await manager.alter(AlterConfig("cluster", "", LAG_BELOW_FETCH_WAIT, []))
    assert await zk.get(cluster_path) is None and applied == []
    # a tablet-server entity is checked over the stored cluster entity
    await manager.alter(AlterConfig("cluster", "", {"replica.lag.time.max.ms": "1s"}, []))
    with pytest.raises(InvalidConfigError, match=RULE):
        await manager.alter(AlterConfig("tablet-server", "3", LAG_BELOW_FETCH_WAIT, []))
    assert await zk.get(DynamicConfigZNode.path(zk.root, "tablet-server", "3")) is None
    # a server entity of its own does not cover the servers without one
    await manager.alter(AlterConfig("tablet-server", "3", {"replica.lag.time.max.ms": "2s"}, []))
    with pytest.raises(InvalidConfigError, match=RULE):
        await manager.alter(AlterConfig("cluster", "", LAG_BELOW_FETCH_WAIT, []))
    assert DynamicConfigZNode.decode(zk.data(cluster_path)) == {"replica.lag.time.max.ms": "1s"}
    await manager.alter(AlterConfig("cluster", "", {}, ["replica.lag.time.max.ms"]))  # back to the default: fine
    assert applied[-1] == {}


HAND_WRITTEN_SECRET = "hunter2-TOPSECRET"


async def test_dynamic_answers_and_logs_mask_a_hand_written_secret(caplog) -> None:
    zk = _Zk()
    zk.put(
        DynamicConfigZNode.path(zk.root, "cluster"),
        DynamicConfigZNode.encode({cfg.ZK_AUTH_PASSWORD.key: HAND_WRITTEN_SECRET}),
    )
    manager = DynamicConfigManager(zk, _Ctx(zk), None, lambda _entries: None)
    described = await manager.describe(DescribeConfig("cluster", ""))
    assert described["dynamic"] == {cfg.ZK_AUTH_PASSWORD.key: "***"}
    with caplog.at_level(logging.INFO):
        altered = await manager.alter(AlterConfig("cluster", "", {"table.log.ttl": "2h"}, []))
    assert altered["dynamic"] == {cfg.ZK_AUTH_PASSWORD.key: "***", "table.log.ttl": "2h"}
    assert HAND_WRITTEN_SECRET not in caplog.text and "table.log.ttl" in caplog.text


class _NoZk:
    root = "/fluss"


def test_a_tablet_server_keeps_its_settings_when_the_layers_break_a_rule(tmp_path, caplog):
    static = cfg.Config(cfg.TABLET)
    manager = ReplicaManager(1, LogManager(tmp_path, static), static, None, lambda node: None)  # type: ignore[arg-type]
    watcher = DynamicConfigWatcher(_NoZk(), 1, lambda o: manager.apply_dynamic([o.cluster, o.server], o.tables))  # type: ignore[arg-type]
    node = (DynamicConfigZNode.encode({"replica.lag.time.max.ms": "1s"}), ZnodeStat(1, 0, 0, 0, 0))
    watcher._layer("cluster")(node)
    assert manager.settings.lag_time_s == 1.0
    caplog.clear()
    with caplog.at_level(logging.ERROR):
        watcher._layer("server")((DynamicConfigZNode.encode(LAG_BELOW_FETCH_WAIT), ZnodeStat(1, 0, 0, 0, 0)))
    assert manager.settings.lag_time_s == 1.0 and manager.effective_config[cfg.REPLICA_LAG_TIME_MAX] == 1.0
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(errors) == 1 and RULE in errors[0].getMessage() and errors[0].exc_info is None, errors
    assert "previous settings kept" in errors[0].getMessage()


def test_the_coordinator_keeps_its_plan_options_when_the_cluster_entity_breaks_a_rule(monkeypatch, caplog):
    static = cfg.Config(cfg.COORDINATOR)
    options = PlanOptions(batch_ratio=0.25)
    assert apply_to_plan_options(options, {"tablet-server.rebalance.batch.ratio": "0.5"}, static).batch_ratio == 0.5
    with caplog.at_level(logging.ERROR):  # a hand-edited node the coordinator cannot parse
        assert apply_to_plan_options(options, {"tablet-server.rebalance.batch.ratio": "lots"}, static) is options
    rule = Constraint("batch ratio <= 0.75 (a test rule)", (cfg.REBALANCE_BATCH_RATIO,), lambda r: r <= 0.75)
    monkeypatch.setattr(config_load, "CONSTRAINTS", [*cfg.CONSTRAINTS, rule])  # the list the loader checks
    with caplog.at_level(logging.ERROR):
        assert apply_to_plan_options(options, {"tablet-server.rebalance.batch.ratio": "0.9"}, static) is options
    assert "a test rule" in caplog.text and "previous settings kept" in caplog.text
