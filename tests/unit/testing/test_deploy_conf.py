"""deploy/conf/*.yaml load through load_config: only registered keys, the documented production values."""

from pathlib import Path

import pytest

from fluss_py.config import COORDINATOR, TABLET, load_config

CONF = Path(__file__).resolve().parents[3] / "deploy" / "conf"


def test_coordinator_yaml_loads_with_the_seed_values():
    cfg = load_config(COORDINATOR, CONF / "coordinator-server.yaml")
    assert cfg["zookeeper.session-timeout"] == 15.0
    assert cfg["zookeeper.connection-timeout"] == 10.0
    assert cfg["coordinator.rebalance.check-interval"] == 300.0
    assert cfg["coordinator.rebalance.trigger-threshold"] == 0.1
    assert (cfg["rpc.port"], cfg["http.port"]) == (9123, 9124)


def test_tablet_server_yaml_loads_with_the_seed_values():
    cfg = load_config(TABLET, CONF / "tablet-server.yaml")
    assert cfg["replica.lag.time.max.ms"] == 30.0
    assert cfg["replica.fetch.max.bytes"] == 10 * 1024**2
    assert cfg["replica.fetch.min.bytes"] == 1024
    assert cfg["replica.fetch.wait.max.ms"] == 0.5
    assert cfg["tablet-server.min.insync.replicas"] == 2
    assert (cfg["rpc.port"], cfg["http.port"]) == (9122, 9125)


@pytest.mark.parametrize(("role", "name"), [(COORDINATOR, "coordinator-server.yaml"), (TABLET, "tablet-server.yaml")])
def test_command_line_overrides_win_over_the_file(role, name):
    cfg = load_config(role, CONF / name, {"zookeeper.session-timeout": "2s", "zookeeper.root": "/fluss-t"})
    assert cfg["zookeeper.session-timeout"] == 2.0
    assert cfg["zookeeper.root"] == "/fluss-t"
