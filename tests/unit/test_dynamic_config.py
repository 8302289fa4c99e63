"""Dynamic configuration, pure parts (docs/dynamic-config.md): validation before storing, merging, layering,
the znode codec and paths."""

import json

import pytest

from fluss_py import config as cfg
from fluss_py.common.dynamic_config import LayeredConfig, keys_for, merged, validate
from fluss_py.common.http import Request, json_response
from fluss_py.coordinator.dynamic_config import config_routes
from fluss_py.coordinator.events import AlterConfig, DescribeConfig
from fluss_py.errors import InvalidConfigError
from fluss_py.replica.manager import ReplicaSettings
from fluss_py.zk.paths import DynamicConfigZNode


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
