"""``fluss-py coordinator|tablet-server``: what stops a server before it can log is one line on stderr and
exit 2 (docs/operations.md 7.5), never a traceback: a config file that is not UTF-8, a log directory or
log file that cannot be created. Each case fails before anything is started (no ZooKeeper, no sockets)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.cli.main import EXIT_USAGE, main


def _start(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    code = main(list(argv))
    return code, capsys.readouterr().err.splitlines()


@pytest.mark.parametrize("role", ["coordinator", "tablet-server"])
def test_a_config_file_that_is_not_utf8_is_one_line_and_exit_2(tmp_path: Path, capsys, role: str) -> None:
    f = tmp_path / "server.yaml"
    f.write_bytes(b"log.dir: /srv/fluss\xe9\n")
    code, err = _start(capsys, role, "--config", str(f))
    assert code == EXIT_USAGE
    assert len(err) == 1 and "configuration error" in err[0] and str(f) in err[0] and "not UTF-8" in err[0], err


@pytest.mark.parametrize("role", ["coordinator", "tablet-server"])
def test_a_log_dir_that_cannot_be_created_is_one_line_and_exit_2(tmp_path: Path, capsys, role: str) -> None:
    (tmp_path / "a-file").write_text("")
    code, err = _start(capsys, role, "-D", f"log.dir={tmp_path / 'a-file' / 'logs'}")
    assert code == EXIT_USAGE
    assert len(err) == 1 and "log.dir" in err[0] and str(tmp_path / "a-file") in err[0], err


def test_a_log_file_that_cannot_be_opened_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    (tmp_path / "tablet-server.log").mkdir()  # the log file's name is taken by a directory
    code, err = _start(capsys, "tablet-server", "-D", f"log.dir={tmp_path}")
    assert code == EXIT_USAGE
    assert len(err) == 1 and "log.dir" in err[0] and "tablet-server.log" in err[0], err
