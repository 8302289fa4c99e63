"""A private Docker engine: Debian's dockerd in a network namespace of its own, started and stopped by a test.

    engine = DockerEngine.start(Path("/var/tmp/run1"))   # netns <prefix>-docker, dockerd inside it
    engine.run(["docker", "images"])                      # DOCKER_HOST points at its own socket
    engine.stop()                                         # dockerd stopped by PID; returns leftovers

Nothing of the host's is shared or changed:

- its own ``--data-root`` (images, containers, volumes) under the directory given, its own ``--exec-root``,
  ``--pidfile`` and unix socket under ``/run/fluss-py-docker/<prefix>/``;
- its own network namespace, made by the project's harness (fluss_py/testing/netns.py: a hub namespace and
  one host ``docker``; ``remove_stale`` deletes those of crashed runs): dockerd's bridge (``--bip``), the
  compose networks (``--default-address-pool``), their veths and dockerd's iptables rules all live inside
  it, so the host gets no link, route or rule, and the namespace has no way out (no registry is reached;
  builds cannot download);
- addresses in 198.19.0.0/16 only (part of the benchmarking range 198.18.0.0/15; the harness's test hosts
  use 198.18.0.0/16), never Docker's 172.17 default.

``stop`` runs even when a test failed: SIGTERM to dockerd (it stops its containers), SIGKILL after a grace
period, then any of its containerd/shim processes (found by the exec-root in their command line) by PID, the
mounts under its directories, the directories, and the namespaces by name.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from fluss_py.testing.docker_base import remove_tree
from fluss_py.testing.netns import HostNetwork, stale_prefixes

RUN_DIR = Path("/run/fluss-py-docker")
BRIDGE_IP = "198.19.0.1/24"
ADDRESS_POOL = "base=198.19.64.0/18,size=24"
HOST = "docker"
START_TIMEOUT = 60.0
STOP_GRACE = 30.0
# Debian's docker.io CLI (the engine's own version) when it is there, else whichever `docker` is on PATH
DOCKER = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else "docker"


class DockerEngineError(RuntimeError):
    """dockerd did not start (the tail of its log is included) or a docker command failed."""


def unavailable_reason() -> str | None:
    """Why a private engine cannot run here, or None."""
    for tool in ("dockerd", "docker", "nsenter"):
        if shutil.which(tool) is None:
            return f"`{tool}` is not installed (run deploy/install-docker.sh)"
    if os.geteuid() != 0:
        return "a private dockerd needs root"
    return None


@dataclass
class DockerEngine:
    net: HostNetwork
    data_root: Path
    run_dir: Path
    proc: subprocess.Popen[bytes]

    @property
    def socket_path(self) -> Path:
        return self.run_dir / "docker.sock"

    @property
    def log_path(self) -> Path:
        return self.data_root.parent / "dockerd.log"

    def env(self) -> dict[str, str]:
        """An environment for docker and docker-compose that talks to this engine only."""
        keep = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
        return {**keep, "DOCKER_HOST": f"unix://{self.socket_path}", "DOCKER_BUILDKIT": "0"}

    @classmethod
    def start(cls, base: Path) -> DockerEngine:
        """dockerd with state under ``base`` (created); waits until it answers on its socket."""
        remove_stale_engines()
        net = HostNetwork.create()
        run_dir = RUN_DIR / net.prefix
        data_root = base / "data-root"
        proc = None
        try:
            net.add_host(HOST)
            for d in (run_dir, data_root):
                d.mkdir(parents=True, exist_ok=True)
            (run_dir / "data-root").write_text(str(data_root))  # for remove_stale_engines after a crash
            argv = [
                "nsenter", f"--net=/run/netns/{net.ns(HOST)}", "dockerd",
                "--data-root", str(data_root), "--exec-root", str(run_dir / "exec"),
                "--pidfile", str(run_dir / "dockerd.pid"), "-H", f"unix://{run_dir / 'docker.sock'}",
                "--bip", BRIDGE_IP, "--default-address-pool", ADDRESS_POOL,
            ]  # fmt: skip
            with open(base / "dockerd.log", "ab") as log:
                proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            engine = cls(net, data_root, run_dir, proc)
            engine._wait_ready()
            return engine
        except BaseException:
            if proc is not None:
                cls(net, data_root, run_dir, proc).stop()
            else:
                net.teardown()
            raise

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise DockerEngineError(f"dockerd exited ({self.proc.returncode}):\n{self._log_tail()}")
            if self.socket_path.exists():
                try:
                    with socket.socket(socket.AF_UNIX) as s:
                        s.settimeout(2)
                        s.connect(str(self.socket_path))
                        s.sendall(b"GET /_ping HTTP/1.0\r\n\r\n")
                        if b" 200 " in s.recv(64):
                            return
                except OSError:
                    pass
            time.sleep(0.2)
        raise DockerEngineError(f"dockerd did not answer within {START_TIMEOUT:.0f} s:\n{self._log_tail()}")

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def run(self, argv: list[str], timeout: float = 300, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
        """``argv`` (docker, docker-compose, ...) against this engine; text output captured."""
        kwargs.setdefault("capture_output", True)
        done = subprocess.run(argv, env=self.env(), text=True, timeout=timeout, **kwargs)
        if check and done.returncode != 0:
            raise DockerEngineError(f"`{' '.join(argv)}` failed ({done.returncode}): {(done.stderr or '')[-2000:]}")
        return done

    def _own_pids(self) -> list[int]:
        return _pids_naming(self.run_dir, self.data_root)

    def stop(self) -> list[str]:
        """Stop dockerd by PID and remove everything it made; returns what could not be removed."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_GRACE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        left = _kill_and_remove(self.run_dir, self.data_root)
        left += self.net.teardown()
        return left


def _pids_naming(*paths: Path) -> list[int]:
    """Processes whose command line names one of ``paths``: an engine's dockerd, containerd and shims."""
    marks = [str(p).encode() for p in paths]
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if any(m in cmdline for m in marks):
                pids.append(int(entry.name))
    return pids


def _kill_and_remove(run_dir: Path, data_root: Path) -> list[str]:
    for pid in _pids_naming(run_dir, data_root):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    time.sleep(0.2)
    left = [f"process {pid}" for pid in _pids_naming(run_dir, data_root)]
    return left + remove_tree(run_dir) + remove_tree(data_root)


def remove_stale_engines() -> list[str]:
    """Engines of crashed runs (their namespace's owner is gone): processes killed, directories removed by the
    paths they were started with; the namespaces go with the harness's ``remove_stale``. Returns the prefixes."""
    if not RUN_DIR.exists():
        return []
    stale = set(stale_prefixes())
    removed = []
    for run_dir in sorted(RUN_DIR.iterdir()):
        if run_dir.name in stale:
            recorded = run_dir / "data-root"
            data_root = Path(recorded.read_text().strip()) if recorded.exists() else run_dir / "exec"
            _kill_and_remove(run_dir, data_root)
            removed.append(run_dir.name)
    return removed


def unique_project() -> str:
    """A compose project name no other run uses (also names its containers, network and volumes)."""
    return f"fpy{secrets.token_hex(3)}"
