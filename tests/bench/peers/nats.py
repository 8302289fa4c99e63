"""A 3-node NATS JetStream cluster on loopback, the peer of the benchmark suite (docs/performance.md).

``NatsCluster(directory)`` writes one ``nats.conf`` per node (client, HTTP monitor and route ports from the
suite's ``PortAllocator``, file store under ``directory``), starts ``nats-server -c`` for each, and waits (with
a deadline) until every node's ``/jsz`` reports a meta leader. Nodes are stopped and killed by PID only.
``available()`` says whether ``nats-server`` and nats-py are installed; callers skip the peer otherwise.

Who may call: one thread (the benchmark's), which owns the processes.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from fluss_py.testing.ports import PortAllocator, default_allocator
from fluss_py.testing.procs import wait_until

NATS_SERVER = "nats-server"


def available() -> bool:
    try:
        import nats  # noqa: F401
    except ImportError:
        return False
    return shutil.which(NATS_SERVER) is not None


@dataclass
class NatsNode:
    name: str
    client_port: int
    http_port: int
    route_port: int
    directory: Path
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.client_port}"

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def jsz(self, timeout: float = 1.0) -> dict:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/jsz", timeout=timeout) as r:
            return json.loads(r.read())


class NatsCluster:
    """Owns three nats-server processes (by PID) and their directories."""

    def __init__(self, directory: Path, nodes: int = 3, ports: PortAllocator | None = None) -> None:
        self.directory = Path(directory)
        ports = ports or default_allocator()
        self.nodes = [
            NatsNode(f"n{i}", ports.allocate(), ports.allocate(), ports.allocate(), self.directory / f"n{i}")
            for i in range(1, nodes + 1)
        ]

    @property
    def urls(self) -> list[str]:
        return [n.url for n in self.nodes if n.alive()]

    def node(self, name: str) -> NatsNode:
        return next(n for n in self.nodes if n.name == name)

    def _conf(self, node: NatsNode) -> str:
        routes = ", ".join(f"nats-route://127.0.0.1:{n.route_port}" for n in self.nodes)
        return (
            f"server_name: {node.name}\n"
            f"listen: 127.0.0.1:{node.client_port}\n"
            f"http: 127.0.0.1:{node.http_port}\n"
            f'jetstream {{ store_dir: "{node.directory / "js"}", max_memory_store: 256MB, max_file_store: 4GB }}\n'
            f"cluster {{ name: C1, listen: 127.0.0.1:{node.route_port}, routes: [{routes}] }}\n"
        )

    def start(self, timeout: float = 30.0) -> NatsCluster:
        """Start every node and wait until each names a meta leader; on failure stop what was started."""
        try:
            for node in self.nodes:
                self.start_node(node)
            self.wait_ready(timeout)
        except BaseException:
            self.close()
            raise
        return self

    def start_node(self, node: NatsNode) -> None:
        node.directory.mkdir(parents=True, exist_ok=True)
        conf = node.directory / "nats.conf"
        conf.write_text(self._conf(node))
        out = open(node.directory / "nats.log", "ab")  # noqa: SIM115 - owned by the child process
        node.process = subprocess.Popen(
            [NATS_SERVER, "-c", str(conf)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
        out.close()

    def wait_ready(self, timeout: float) -> None:
        def ready() -> bool:
            return all(n.jsz().get("meta_cluster", {}).get("leader") for n in self.nodes if n.alive())

        wait_until(ready, timeout, interval=0.05, message="every nats-server's /jsz to name a meta leader")

    def kill(self, name: str) -> float:
        """SIGKILL one node by its PID and reap it; returns the monotonic time of the kill."""
        node = self.node(name)
        assert node.process is not None
        t = time.monotonic()
        os.kill(node.process.pid, signal.SIGKILL)
        node.process.wait(10)
        return t

    def close(self, grace: float = 5.0) -> None:
        for node in self.nodes:
            if node.alive():
                assert node.process is not None
                node.process.send_signal(signal.SIGTERM)
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(grace)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait(5)

    def __enter__(self) -> NatsCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()
