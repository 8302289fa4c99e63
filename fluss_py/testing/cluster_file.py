"""``<DIR>/cluster.json``: every process of a local cluster, so another command can find and signal it.

Format (version 1), written by temp file + fsync + atomic rename::

    {
      "version": 1,
      "directory": "/abs/.fluss-cluster",
      "zookeeper": "127.0.0.1:21810",          # connect string the servers use
      "zk_root": "/fluss",
      "processes": [
        {"name": "zookeeper", "role": "zookeeper", "id": null, "pid": 123, "start_ticks": 456,
         "rpc_address": "127.0.0.1:21810", "http_address": null, "log_file": ".../zookeeper.log",
         "stdout_file": ".../zookeeper.log", "data_dir": ".../zookeeper/data", "argv": ["java", ...]},
        {"name": "coordinator-1", "role": "coordinator", "id": 1, ...,
         "rpc_address": "127.0.0.1:2xxxx", "http_address": "127.0.0.1:2xxxx",
         "log_file": ".../coordinator-1/logs/coordinator-server.log", ...},
        {"name": "tablet-server-1", "role": "tablet-server", "id": 1, ...}
      ]
    }

``pid``/``start_ticks`` are null for a process that is not running (never started, or stopped).
A cluster on test hosts (``--netns``) also has ``"netns": {"prefix": "fpy1a2b3c", "hosts": {name: address},
"detached": bool, "loss": {name: percent}}`` (see netns.py); its processes' argv start with ``ip netns exec``.
An ensemble names its ZooKeeper members ``zookeeper-<sid>`` (a single ZooKeeper is ``zookeeper``).
A supervised cluster (``cluster up --supervise``) also has ``"supervise": {"initial_delay": 1.0, "max_delay":
30.0, "max_restarts": 5, "window": 60.0}``; each of its servers records ``supervisor_pid`` and
``supervisor_start_ticks`` (its supervisor process) and keeps ``pid`` null: the server's current PID, which
changes with every restart, is in ``<name>/supervisor.json`` (supervision.py).
Pure data and codec: no processes, no sockets.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CLUSTER_FILE = "cluster.json"
VERSION = 1
ZOOKEEPER, COORDINATOR, TABLET_SERVER = "zookeeper", "coordinator", "tablet-server"
ROLES = (ZOOKEEPER, COORDINATOR, TABLET_SERVER)


@dataclass
class ProcessRecord:
    """One process of the cluster as recorded in cluster.json."""

    name: str
    role: str
    id: int | None
    rpc_address: str
    http_address: str | None
    log_file: str
    stdout_file: str
    data_dir: str
    argv: list[str]
    pid: int | None = None
    start_ticks: int | None = None
    tls: bool = False  # its HTTP port speaks TLS
    supervisor_pid: int | None = None  # a supervised server: its supervisor (supervised.py); pid stays null
    supervisor_start_ticks: int | None = None

    @property
    def rpc_port(self) -> int:
        return int(self.rpc_address.rsplit(":", 1)[1])

    @property
    def http_port(self) -> int | None:
        return int(self.http_address.rsplit(":", 1)[1]) if self.http_address else None

    @property
    def http_url(self) -> str | None:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.http_address}" if self.http_address else None


@dataclass
class ClusterRecord:
    """The whole cluster.json."""

    directory: str
    zookeeper: str
    zk_root: str
    processes: list[ProcessRecord] = field(default_factory=list)
    version: int = VERSION
    netns: dict[str, Any] | None = None
    security_dir: str | None = None  # a secure cluster's certificates and configs (testing/secure.py)
    supervise: dict[str, Any] | None = None  # the restart policy of a supervised cluster (supervision.py)

    def get(self, name: str) -> ProcessRecord:
        for p in self.processes:
            if p.name == name:
                return p
        names = ", ".join(p.name for p in self.processes) or "none"
        raise KeyError(f"no process named {name!r} in this cluster (processes: {names})")

    def by_role(self, role: str) -> list[ProcessRecord]:
        return [p for p in self.processes if p.role == role]

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> ClusterRecord:
        data: dict[str, Any] = json.loads(text)
        if data.get("version") != VERSION:
            raise ValueError(f"unsupported cluster.json version {data.get('version')!r} (expected {VERSION})")
        procs = [ProcessRecord(**p) for p in data.get("processes", [])]
        for p in procs:
            if p.role not in ROLES:
                raise ValueError(f"process {p.name!r} has unknown role {p.role!r}")
        return cls(
            data["directory"], data["zookeeper"], data["zk_root"], procs, VERSION, data.get("netns"),
            data.get("security_dir"), data.get("supervise"),
        )  # fmt: skip

    def save(self, directory: Path) -> Path:
        path = directory / CLUSTER_FILE
        write_atomic(path, self.to_json())
        return path

    @classmethod
    def load(cls, directory: Path) -> ClusterRecord:
        path = directory / CLUSTER_FILE
        try:
            text = path.read_text()
        except FileNotFoundError:
            raise FileNotFoundError(f"{path} not found: no local cluster in {directory} (run `cluster up`)") from None
        return cls.from_json(text)


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same directory, fsync, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with_suppressed_unlink(tmp)
        raise


def with_suppressed_unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
