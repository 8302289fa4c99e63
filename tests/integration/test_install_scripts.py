"""deploy/*.sh fail with a message that says what to do when they cannot install (no apt-get, old Python)."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _bin_without_apt(tmp_path: Path) -> str:
    """A PATH with the few tools the scripts need, but no apt-get, sudo or java."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "id", "dirname", "tail", "cat"):
        os.symlink(shutil.which(tool), bindir / tool)
    return str(bindir)


def test_zookeeper_install_without_apt_get_explains_what_to_do(tmp_path):
    env = {"PATH": _bin_without_apt(tmp_path), "FLUSS_PY_ZOOKEEPER_JAR": str(tmp_path / "missing.jar")}
    r = subprocess.run(["bash", str(DEPLOY / "install-zookeeper.sh")], env=env, capture_output=True, text=True)
    assert r.returncode == 1
    assert "no apt-get" in r.stderr and "--zookeeper HOST:PORT" in r.stderr


def test_zookeeper_install_is_a_no_op_when_present():
    if not Path("/usr/share/java/zookeeper.jar").exists() or not shutil.which("java"):
        pytest.skip("ZooKeeper is not installed")
    r = subprocess.run(["bash", str(DEPLOY / "install-zookeeper.sh")], capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_fuse_install_is_a_no_op_when_present():
    if not shutil.which("fusermount3"):
        pytest.skip("FUSE 3 is not installed")
    r = subprocess.run(["bash", str(DEPLOY / "install-fuse.sh")], capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_bench_tools_install_without_apt_get_explains_what_to_do(tmp_path):
    r = subprocess.run(
        ["bash", str(DEPLOY / "install-bench-tools.sh")],
        env={"PATH": _bin_without_apt(tmp_path)},
        capture_output=True,
        text=True,
    )
    assert r.returncode == 1
    assert "no apt-get" in r.stderr and "nats-server" in r.stderr


def test_bench_tools_install_is_a_no_op_when_present():
    if not shutil.which("nats-server"):
        pytest.skip("nats-server is not installed")
    r = subprocess.run(["bash", str(DEPLOY / "install-bench-tools.sh")], capture_output=True, text=True)
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "")


def test_check_python_rejects_an_old_interpreter(tmp_path):
    bindir = _bin_without_apt(tmp_path)
    fake = Path(bindir) / "python3"
    fake.write_text('#!/bin/bash\nif [ "$1" = "--version" ]; then echo "Python 3.9.2"; exit 0; fi\nexit 1\n')
    fake.chmod(0o755)
    r = subprocess.run(
        ["bash", str(DEPLOY / "check-python.sh"), "python3"], env={"PATH": bindir}, capture_output=True, text=True
    )
    assert r.returncode == 1
    assert "Python 3.9.2 is too old" in r.stderr
