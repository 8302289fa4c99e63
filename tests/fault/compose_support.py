"""deploy/docker-compose.yml on a private Docker engine (fluss_py/testing/docker_engine.py), as a user runs it.

``ComposeCluster.up`` builds the images exactly as deploy/README.md ("Without an image registry") says —
the Debian base from its cache, the wheels (``pip wheel``), ``docker-compose build`` with ``BASE_IMAGE``, the
ZooKeeper image of deploy/zookeeper/ — then ``docker-compose -p <unique> up -d`` and waits for every
healthcheck. Clients run in containers of their own on the compose network (``client``): the servers
advertise their service names (``tablet-server-2:9122``), which resolve only there, so a client on the host
could not follow a leader to its address; a client container is also what the README tells users to run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from fluss_py.testing import docker_base
from fluss_py.testing.docker_engine import DOCKER, DockerEngine

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE_FILE = DEPLOY / "docker-compose.yml"
SERVER_IMAGE = "fluss-py:local"
ZOOKEEPER_IMAGE = "fluss-py-zookeeper:local"
BOOTSTRAP = "coordinator-1:9123,coordinator-2:9123,coordinator-3:9123"
HEALTHY_TIMEOUT = 240.0


def log(message: str) -> None:
    print(f"[compose {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class ComposeCluster:
    engine: DockerEngine
    project: str
    timings: dict[str, float]

    def env(self) -> dict[str, str]:
        return {
            **self.engine.env(),
            "FLUSS_PY_BASE_IMAGE": docker_base.image_name(),
            "FLUSS_PY_ZOOKEEPER_IMAGE": ZOOKEEPER_IMAGE,
        }

    def compose(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = ["docker-compose", "-p", self.project, "-f", str(COMPOSE_FILE), *args]
        done = subprocess.run(argv, env=self.env(), capture_output=True, text=True, timeout=timeout, cwd=DEPLOY)
        if check and done.returncode != 0:
            raise AssertionError(f"`{' '.join(argv)}` failed ({done.returncode}):\n{done.stderr[-3000:]}")
        return done

    def docker(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.engine.run([DOCKER, *args], timeout=timeout, check=check)

    # ---------------------------------------------------------------- images and start
    def build_images(self) -> None:
        started = time.monotonic()
        tarball = docker_base.base_tarball()
        self.timings["base tarball (debootstrap or cache)"] = time.monotonic() - started
        step = time.monotonic()
        self.docker("import", str(tarball), docker_base.image_name(), timeout=600)
        self.timings["docker import"] = time.monotonic() - step
        step = time.monotonic()
        wheels = DEPLOY / "wheels"
        done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheels), str(ROOT)],
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        self.timings["pip wheel"] = time.monotonic() - step
        step = time.monotonic()
        self.compose("build", timeout=900)
        self.docker("build", "-t", ZOOKEEPER_IMAGE, "--build-arg", f"BASE_IMAGE={docker_base.image_name()}",
                    str(DEPLOY / "zookeeper"), timeout=600)  # fmt: skip
        self.timings["image builds"] = time.monotonic() - step

    def up(self) -> None:
        step = time.monotonic()
        self.compose("up", "-d", "--no-build", timeout=600)
        self.wait_healthy()
        self.timings["up -d until all healthy"] = time.monotonic() - step

    def containers(self) -> dict[str, str]:
        """service name -> container id, for every service of the project (running or not)."""
        out: dict[str, str] = {}
        for service in self.compose("config", "--services").stdout.split():
            cid = self.compose("ps", "-q", service).stdout.strip()
            if cid:
                out[service] = cid
        return out

    def health(self) -> dict[str, str]:
        """service -> its container's health status (``starting``, ``healthy``, ``unhealthy``) or state."""
        found = self.containers()
        if not found:
            return {}
        fmt = "{{.Id}} {{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}"
        lines = self.docker("inspect", "-f", fmt, *found.values()).stdout.splitlines()
        by_id = {line.split()[0]: line.split()[1:] for line in lines if line.strip()}
        return {s: (by_id[c][1] if len(by_id[c]) > 1 else by_id[c][0]) for s, c in found.items()}

    def wait_healthy(self, timeout: float = HEALTHY_TIMEOUT) -> dict[str, str]:
        deadline = time.monotonic() + timeout
        status: dict[str, str] = {}
        while time.monotonic() < deadline:
            status = self.health()
            if len(status) == 9 and set(status.values()) == {"healthy"}:
                return status
            bad = {s: v for s, v in status.items() if v in ("unhealthy", "exited", "dead")}
            if bad:
                break
            time.sleep(2)
        raise AssertionError(f"not every service is healthy: {status}\n{self.compose('logs', '--tail=30').stdout}")

    # ---------------------------------------------------------------- clients
    def client_argv(self, *fluss_py_args: str, interactive: bool = False) -> list[str]:
        """``docker run`` of a client container (the server image, entrypoint fluss-py) on the compose network."""
        net = f"{self.project}_default"
        flags = ["-i"] if interactive else []
        return [DOCKER, "run", "--rm", *flags, "--network", net, "-e", f"FLUSS_BOOTSTRAP_SERVERS={BOOTSTRAP}",
                SERVER_IMAGE, *fluss_py_args]  # fmt: skip

    def client(self, *fluss_py_args: str, stdin: str | None = None, timeout: float = 120) -> str:
        argv = self.client_argv(*fluss_py_args, interactive=stdin is not None)
        done = self.engine.run(argv, timeout=timeout, check=False, input=stdin)
        assert done.returncode == 0, f"{' '.join(fluss_py_args)}: ({done.returncode}) {done.stderr[-3000:]}"
        return done.stdout

    def inspect(self, container: str) -> dict:
        """``docker inspect`` of one container (State: Pid, Status, ExitCode, Health; RestartCount; ...)."""
        return json.loads(self.docker("inspect", container).stdout)[0]

    def describe(self, table: str) -> dict:
        return json.loads(self.client("table", "describe", table, "--json"))

    def down(self) -> None:
        self.compose("down", "-v", "--timeout", "30", timeout=300, check=False)
