"""Where the scale scenario's time goes: py-spy on the coordinator and one tablet server during create, idle,
the SIGTERM of another server, its restart, and the kill -9 of the first (``tests/bench/scale.py``'s
cluster and tables).

    .venv/bin/python -m tests.bench.scale_profile 5000 [OUT_DIR] [idle|create]

With ``create`` as third argument it stops after the create phase, with ``idle`` after the idle phase;
``FLUSS_PROFILE_IDLE_S`` sets the idle window (default 10 s; a longer one gives more samples of a nearly idle process).

For each phase and process, writes ``OUT_DIR/<phase>-<process>.txt`` (py-spy's collapsed stacks, idle
samples dropped) and prints the top frames by inclusive share of the busy samples. The phase figures
(seconds) are printed too, but the profiler's own cost inflates them: take figures from ``bench scale``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from signal import SIGTERM

from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER
from tests.bench.scale import Placement, create, full_isr, kill_until_led, names_of, start_cluster

RATE = 100  # samples per second
PY_SPY = str(Path(sys.executable).with_name("py-spy"))


class Profiler:
    """py-spy record of a set of processes, started and stopped by PID (one subprocess each)."""

    def __init__(self, out: Path, phase: str, pids: dict[str, int]) -> None:
        self.files = {name: out / f"{phase}-{name}.txt" for name in pids}
        self.procs = [self._record(pid, self.files[name]) for name, pid in pids.items()]
        time.sleep(1.0)  # py-spy attaches (not a synchronisation of the system under test)

    @staticmethod
    def _record(pid: int, output: Path) -> subprocess.Popen:
        argv = [PY_SPY, "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw", "--output", str(output)]
        return subprocess.Popen([*argv, "--nonblocking"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        for p in self.procs:
            p.send_signal(2)  # SIGINT: py-spy writes its output and exits
        for p in self.procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def summary(path: Path, top: int = 25) -> str:
    """Top frames by inclusive share of busy samples (a frame counted once per stack)."""
    inclusive: Counter[str] = Counter()
    busy = 0
    if not path.exists():
        return f"{path.name}: no output"
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or "select" in stack.rsplit(";", 1)[-1] or "epoll" in stack.rsplit(";", 1)[-1]:
            continue
        n = int(count)
        busy += n
        for frame in set(stack.split(";")):
            inclusive[frame] += n
    lines = [f"{path.name}: {busy} busy samples"]
    for frame, n in inclusive.most_common(top):
        lines.append(f"  {100 * n / max(1, busy):5.1f}%  {frame[:150]}")
    return "\n".join(lines)


def main() -> None:
    buckets = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="scale-profile-"))
    out.mkdir(parents=True, exist_ok=True)
    stop_after = sys.argv[3] if len(sys.argv) > 3 else ""
    idle_s = float(os.environ.get("FLUSS_PROFILE_IDLE_S", "10"))
    with tempfile.TemporaryDirectory(prefix="scale-profile-cluster-") as d:
        cluster: LocalCluster = start_cluster(Path(d))
        try:
            coordinator = cluster.names(COORDINATOR)[0]
            server = cluster.names(TABLET_SERVER)[0]
            pids = {n: cluster.pid(n) or 0 for n in (coordinator, server)}
            prof = Profiler(out, "create", pids)
            print(f"create: {create(cluster, buckets):.2f} s (profiled)")
            prof.stop()
            if stop_after == "create":
                _print(out)
                return
            time.sleep(3.0)  # start-up work settles before the idle window
            prof = Profiler(out, "idle", pids)
            time.sleep(idle_s)  # the idle window itself
            prof.stop()
            if stop_after == "idle":
                _print(out)
                return
            victim = cluster.names(TABLET_SERVER)[1]
            handle = cluster.handle(victim)
            assert handle is not None
            prof = Profiler(out, "sigterm", {**pids, victim: cluster.pid(victim) or 0})
            t0 = time.monotonic()
            cluster.signal(victim, SIGTERM)
            handle.wait_exit(120)
            print(f"SIGTERM until exit: {time.monotonic() - t0:.2f} s (profiled)")
            prof.stop()
            placement = Placement(",".join(cluster.get(n).rpc_address for n in cluster.names(COORDINATOR)),
                                  names_of(buckets))  # fmt: skip
            try:
                t0 = time.monotonic()
                cluster.start_process(victim, wait=True, timeout=60)
                pids[victim] = cluster.pid(victim) or 0
                prof = Profiler(out, "restart", pids)
                placement.wait(full_isr, 300, "every ISR full after the restart", 0.2)
                print(f"restart until every ISR is full: {time.monotonic() - t0:.2f} s (profiled)")
                prof.stop()
                prof = Profiler(out, "kill", {coordinator: pids[coordinator], victim: pids[victim]})
                seconds = kill_until_led(cluster, server, names_of(buckets))
                print(f"kill -9 of {server} until every bucket is led: {seconds:.2f} s (profiled)")
                prof.stop()
            finally:
                placement.close()
        finally:
            cluster.close()
    _print(out)


def _print(out: Path) -> None:
    for f in sorted(out.glob("*.txt")):
        print(summary(f))
    print(f"collapsed stacks in {out}")


if __name__ == "__main__":
    main()
