"""CLI plumbing without a cluster: bootstrap resolution order, usage errors, table names, describe JSON."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from fluss_py.cli.common import BOOTSTRAP_ENV, EXIT_USAGE, CliError, resolve_bootstrap, table_path
from fluss_py.cli.main import build_parser, main
from fluss_py.cli.table import under_replicated
from fluss_py.testing.cluster_file import ClusterRecord, ProcessRecord


def _args(tmp_path: Path, servers: str | None = None) -> argparse.Namespace:
    return argparse.Namespace(bootstrap_servers=servers, dir=tmp_path)


def _record(tmp_path: Path) -> None:
    def proc(name: str, role: str, port: int) -> ProcessRecord:
        return ProcessRecord(name, role, 1, f"127.0.0.1:{port}", None, "", "", "", [])

    procs = [proc("zookeeper", "zookeeper", 1), proc("coordinator-1", "coordinator", 2)]
    procs.append(proc("tablet-server-1", "tablet-server", 3))
    ClusterRecord(str(tmp_path), "127.0.0.1:1", "/fluss", procs).save(tmp_path)


def test_flag_then_environment_then_cluster_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _record(tmp_path)
    monkeypatch.setenv(BOOTSTRAP_ENV, "127.0.0.1:9")
    assert resolve_bootstrap(_args(tmp_path, "127.0.0.1:8")) == ("127.0.0.1:8", "--bootstrap-servers")
    assert resolve_bootstrap(_args(tmp_path)) == ("127.0.0.1:9", BOOTSTRAP_ENV)
    monkeypatch.delenv(BOOTSTRAP_ENV)
    servers, source = resolve_bootstrap(_args(tmp_path))
    assert servers == "127.0.0.1:2,127.0.0.1:3" and source.endswith("cluster.json")


def test_no_bootstrap_anywhere_is_a_usage_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    with pytest.raises(CliError) as e:
        resolve_bootstrap(_args(tmp_path / "none"))
    assert e.value.code == EXIT_USAGE and "--bootstrap-servers" in str(e.value)


def test_no_bootstrap_exits_2_with_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(BOOTSTRAP_ENV, raising=False)
    assert main(["table", "list", "--dir", str(tmp_path / "none")]) == EXIT_USAGE
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_table_names() -> None:
    assert str(table_path("t")) == "fluss.t"
    assert str(table_path("db.t")) == "db.t"
    with pytest.raises(CliError):
        table_path("bad name")


@pytest.mark.parametrize(
    "argv",
    [["table"], ["table", "frob"], ["produce"], ["consume", "t", "--from-beginning", "--from-latest"],
     ["group", "reset", "g", "--table", "t"], ["demo"]],
)  # fmt: skip
def test_usage_errors_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    assert e.value.code == 2


def test_under_replicated() -> None:
    assert not under_replicated((1, 2, 3), (3, 1, 2), 1)
    assert under_replicated((1, 2, 3), (1, 2), 1)
    assert under_replicated((1, 2, 3), (1, 2, 3), -1)
