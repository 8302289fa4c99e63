"""Planning a server's directories and command line (pure)."""

from pathlib import Path

import pytest

from fluss_py.testing.layout import CONF_DIR, server_record


def _plan(role, conf_dir=CONF_DIR, overrides=None):
    return server_record(
        Path("/c"), role, 2, zookeeper="127.0.0.1:2000", zk_root="/fluss-t", rpc_port=3001, http_port=3002,
        launcher=["py", "-m", "fluss_py.cli.main"], conf_dir=conf_dir, overrides=overrides or {},
    )  # fmt: skip


def _settings(argv):
    return dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "-D")


def test_tablet_server_plan_has_its_own_dirs_ports_id_and_the_yaml():
    rec = _plan("tablet-server")
    assert (rec.name, rec.rpc_address, rec.http_address) == ("tablet-server-2", "127.0.0.1:3001", "127.0.0.1:3002")
    assert rec.log_file == "/c/tablet-server-2/logs/tablet-server.log"
    assert rec.data_dir == "/c/tablet-server-2/data"
    assert rec.argv[:4] == ["py", "-m", "fluss_py.cli.main", "tablet-server"]
    assert rec.argv[rec.argv.index("--config") + 1] == str(CONF_DIR / "tablet-server.yaml")
    s = _settings(rec.argv)
    assert s["tablet-server.id"] == "2" and s["data.dir"] == "/c/tablet-server-2/data"
    assert (s["zookeeper.address"], s["zookeeper.root"], s["rpc.port"]) == ("127.0.0.1:2000", "/fluss-t", "3001")


def test_coordinator_plan_has_no_data_dir_option_and_overrides_win():
    rec = _plan("coordinator", conf_dir=None, overrides={"zookeeper.session-timeout": "2s", "rpc.port": "9"})
    s = _settings(rec.argv)
    assert "data.dir" not in s and s["coordinator.id"] == "2"
    assert s["zookeeper.session-timeout"] == "2s" and s["rpc.port"] == "9"
    assert "--config" not in rec.argv
    assert rec.log_file == "/c/coordinator-2/logs/coordinator-server.log"


def test_only_server_roles_are_planned():
    with pytest.raises(ValueError, match="zookeeper"):
        _plan("zookeeper")
