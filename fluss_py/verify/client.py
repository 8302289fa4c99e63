"""The workload processes of a cluster's client host (workload.py), started and read from the runner or a test.

    client = WorkloadClient(cluster, out_dir)
    client.create(buckets=1, rf=3)                 # the table, every bucket with a leader
    client.start(producers=1, rate=20, buckets=1)  # detached; dies with the thread that started it
    client.acked()                                 # acknowledgements so far (from history.jsonl)
    client.stop()                                  # producers flush (every send answered), process exits
    final = client.final()                         # {"table_id", "hw", "log"} read after healing
    # WorkloadClient(..., workload="kv", keys=300): the primary-key workload; final() is then
    # {"table_id", "hw", "final": {key: (p, s) | None}, "committed": {(p, s), ...}}

On a cluster on test hosts every process runs under ``ip netns exec <prefix>-client``.
Who calls: the thread that owns the cluster.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fluss_py.testing.cluster import CLIENT, LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER
from fluss_py.testing.procs import ProcessHandle
from fluss_py.verify.history import ACK, decode_lines


class WorkloadClient:
    """Owns the workload process of one run and its files in ``out``."""

    def __init__(
        self,
        cluster: LocalCluster,
        out: Path,
        table: str = "fluss.verify",
        timeout: float = 180.0,
        workload: str = "log",
        keys: int = 300,
    ) -> None:
        self.cluster = cluster
        self.workload = workload  # "log", or "kv": the primary-key workload (kv_workload.py) on ``keys`` keys
        self.keys = keys
        self.out = out.absolute()
        self.table = table
        self.timeout = timeout
        self.process: ProcessHandle | None = None
        self.t0 = time.monotonic()
        self.history = self.out / "history.jsonl"

    def argv(self, mode: str, *extra: str) -> list[str]:
        c = self.cluster
        prefix = c.net.exec_prefix(CLIENT) if c.net is not None else []
        servers = ",".join(c.get(n).rpc_address for n in c.names(TABLET_SERVER) + c.names(COORDINATOR))
        base = [sys.executable, "-m", "fluss_py.verify.workload", mode, "--bootstrap", servers, "--table", self.table]
        kind = ["--workload", self.workload, "--keys", str(self.keys)]
        return [*prefix, *base, *kind, *extra]

    def run_once(self, mode: str, *extra: str) -> None:
        r = subprocess.run(self.argv(mode, *extra), capture_output=True, text=True, timeout=self.timeout)
        if r.returncode != 0:
            raise RuntimeError(f"workload {mode} failed ({r.returncode}): {r.stderr[-2000:]}")

    def create(self, buckets: int, rf: int) -> None:
        self.run_once("create", "--buckets", str(buckets), "--rf", str(rf))

    def start(self, producers: int, rate: float, buckets: int, t0: float | None = None) -> ProcessHandle:
        self.out.mkdir(parents=True, exist_ok=True)
        self.t0 = t0 if t0 is not None else time.monotonic()
        for stale in (self.out / "stop", self.history):
            stale.unlink(missing_ok=True)
        argv = self.argv(
            "run", "--producers", str(producers), "--rate", str(rate), "--buckets", str(buckets),
            "--t0", repr(self.t0), "--stop", str(self.out / "stop"), "--out", str(self.history),
        )  # fmt: skip
        self.process = ProcessHandle.spawn(argv, log_file=self.out / "workload.log", die_with_parent=True)
        return self.process

    def alive(self) -> bool:
        return self.process is not None and self.process.alive()

    def events(self) -> list[dict[str, Any]]:
        try:
            return list(decode_lines(self.history.read_text().splitlines()))
        except FileNotFoundError:
            return []

    def acked(self) -> list[dict[str, Any]]:
        return [e for e in self.events() if e.get("k") == ACK]

    def stop(self) -> None:
        """Ask the producers to stop and flush; wait for the process (SIGKILL and raise after the timeout)."""
        (self.out / "stop").touch()
        if self.process is not None and not self.process.wait_exit(self.timeout):
            self.process.kill()
            raise RuntimeError(f"the workload did not finish flushing; see {self.out / 'workload.log'}")

    def kill(self) -> None:
        if self.process is not None and self.process.alive():
            self.process.kill()
            self.process.wait_exit(10.0)

    def final(self) -> dict[str, Any]:
        path = self.out / "final.json"
        self.run_once("final", "--out", str(path))
        data = json.loads(path.read_text())
        if self.workload == "kv":
            return {
                "table_id": int(data["table_id"]),
                "hw": {int(b): int(h) for b, h in data["hw"].items()},
                "final": {int(k): None if w is None else (int(w[0]), int(w[1])) for k, w in data["final"].items()},
                "committed": {(int(p), int(s)) for p, s in data["committed"]},
            }
        return {
            "table_id": int(data["table_id"]),
            "hw": {int(b): int(h) for b, h in data["hw"].items()},
            "log": {int(b): [(int(o), str(v)) for o, v in records] for b, records in data["log"].items()},
        }
