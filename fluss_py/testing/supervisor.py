"""``python -m fluss_py.testing.supervisor --dir DIR --name NAME``: the supervisor of one server process.

``cluster up --supervise`` (``LocalCluster(supervise=RestartPolicy(...))``) starts one of these per
coordinator and tablet server instead of the server itself, detached like the servers (own session, stdin
/dev/null, output appended to ``DIR/<name>/supervisor.log``), so it outlives the command that started it. It
reads the server's command line and the restart policy from ``DIR/cluster.json``, spawns the server (same
cwd and stdout.log as an unsupervised one), and is its parent: it learns exactly how it ended (exit code or
signal, through a pidfd) and decides what next with ``supervision.after_exit``. Every state change goes to
``DIR/<name>/supervisor.json`` (``supervision.SupervisorRecord``) and one line of ``supervisor.log``.

Signals: SIGTERM or SIGINT to the supervisor is an intentional stop: SIGTERM to the server (SIGCONT first
if it is paused), then ``stopped`` once it exited, however it exited; during a backoff, ``stopped`` at
once. Signals to the server itself are faults: a SIGKILL'd server is restarted. SIGKILL to the supervisor
leaves the server running unsupervised (with ``--die-with-parent``, the tests' mode, the server dies with
it). The supervisor exits after any final state (``stopped``, ``exited``, ``bad-config``, ``given-up``):
0 for the first two, 1 otherwise.

Who may call: nobody in-process; one ``Supervisor`` per process, driven by its own single-threaded loop
(signal handlers only set a flag and wake the loop).
"""

from __future__ import annotations

import argparse
import logging
import os
import select
import signal
import sys
import time
from pathlib import Path
from types import FrameType

from fluss_py.testing.cluster_file import ZOOKEEPER, ClusterRecord, ProcessRecord
from fluss_py.testing.procs import ProcessHandle, proc_start_ticks
from fluss_py.testing.supervision import (
    FINAL_STATES,
    ExitStatus,
    RestartPolicy,
    SupervisorRecord,
    SupervisorState,
    after_exit,
    transition,
)

log = logging.getLogger(__name__)


class Supervisor:
    """Owns one server process, its restarts and the state file of ``home``; see the module docstring."""

    def __init__(self, rec: ProcessRecord, policy: RestartPolicy, home: Path, die_with_parent: bool = False) -> None:
        self.rec, self.policy, self.home, self.die_with_parent = rec, policy, home, die_with_parent
        self.state: SupervisorState | None = None
        self.child: ProcessHandle | None = None
        self.pidfd: int | None = None
        self.restart_times: list[float] = []  # monotonic time of each restart
        self.restart_due = 0.0  # monotonic time the backoff ends
        self.stop_requested = False
        self.record = SupervisorRecord(
            rec.name, os.getpid(), proc_start_ticks(os.getpid()), SupervisorState.RUNNING, policy
        )
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)

    # ---------------------------------------------------------------- the loop
    def run(self) -> int:
        signal.set_wakeup_fd(self._wake_w, warn_on_full_buffer=False)
        signal.signal(signal.SIGTERM, self._on_stop_signal)
        signal.signal(signal.SIGINT, self._on_stop_signal)
        signal.signal(signal.SIGHUP, self._on_hangup)  # a handler, not SIG_IGN: the server must not inherit it
        log.info("supervising %s: %s", self.rec.name, self.policy.describe())
        if self.stop_requested:
            self._move(SupervisorState.STOPPED, "stop requested before the first start")
        else:
            self._spawn()
        while self.state not in FINAL_STATES:
            if self.state is SupervisorState.BACKOFF:
                self._wait_backoff()
            else:
                self._wait_child()
        return 0 if self.state in (SupervisorState.STOPPED, SupervisorState.EXITED) else 1

    def _on_stop_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop_requested = True  # the wakeup fd wakes the loop's select

    def _on_hangup(self, signum: int, frame: FrameType | None) -> None:
        """SIGHUP (no terminal to lose: it runs in a session of its own) neither stops nor restarts anything."""

    def _wait(self, fds: list[int], timeout: float | None) -> list[int]:
        ready, _, _ = select.select(fds, [], [], timeout)
        if self._wake_r in ready:
            os.read(self._wake_r, 4096)
        return ready

    def _wait_child(self) -> None:
        assert self.child is not None and self.pidfd is not None
        ready = self._wait([self.pidfd, self._wake_r], None)
        if self.stop_requested and self.state is SupervisorState.RUNNING:
            self._begin_stop()
        if self.pidfd in ready:
            assert self.child.popen is not None
            returncode = self.child.popen.wait()
            os.close(self.pidfd)
            self.pidfd = None
            self._on_exit(ExitStatus.from_returncode(returncode))

    def _wait_backoff(self) -> None:
        self._wait([self._wake_r], max(0.0, self.restart_due - time.monotonic()))
        if self.stop_requested:
            self._move(SupervisorState.STOPPED, "stop requested during the backoff: not restarted")
        elif time.monotonic() >= self.restart_due:
            self.restart_times.append(time.monotonic())
            self.record.restarts += 1
            self._spawn()

    # ---------------------------------------------------------------- transitions
    def _spawn(self) -> None:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        try:
            child = ProcessHandle.spawn(
                self.rec.argv,
                log_file=Path(self.rec.stdout_file),
                cwd=Path(self.rec.data_dir),
                env=env,
                die_with_parent=self.die_with_parent,
            )
        except OSError as e:
            self._move(SupervisorState.GIVEN_UP, f"cannot start {self.rec.argv[0]!r}: {e}: given up")
            return
        self.child, self.pidfd = child, os.pidfd_open(child.pid)
        self.record.pid, self.record.start_ticks, self.record.restart_at = child.pid, child.start_ticks, None
        what = f"restart {self.record.restarts}" if self.record.restarts else "first start"
        self._move(SupervisorState.RUNNING, f"started pid {child.pid} ({what})")

    def _begin_stop(self) -> None:
        assert self.child is not None
        if self.child.paused():
            self.child.signal(signal.SIGCONT)
        self.child.signal(signal.SIGTERM)
        self._move(SupervisorState.STOPPING, f"stop requested: SIGTERM sent to pid {self.child.pid}")

    def _on_exit(self, status: ExitStatus) -> None:
        assert self.child is not None
        self.record.last_exit = {"code": status.code, "signal": status.signal, "pid": self.child.pid, "at": time.time()}
        self.record.pid = self.record.start_ticks = None
        if self.state is SupervisorState.STOPPING:
            self._move(SupervisorState.STOPPED, f"pid {self.child.pid} {status.describe()}: stopped on request")
            return
        verdict = after_exit(self.policy, status, self.restart_times, time.monotonic())
        if verdict.delay is not None:
            self.restart_due = time.monotonic() + verdict.delay
            self.record.restart_at = time.time() + verdict.delay
        self._move(verdict.state, f"pid {self.child.pid} {verdict.reason}")

    def _move(self, target: SupervisorState, reason: str) -> None:
        self.state = transition(self.rec.name, self.state, target)
        self.record.state, self.record.reason, self.record.updated_at = target, reason, time.time()
        self.record.save(self.home)
        level = logging.WARNING if target in (SupervisorState.GIVEN_UP, SupervisorState.BAD_CONFIG) else logging.INFO
        log.log(level, "%s: %s: %s", self.rec.name, target, reason)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fluss_py.testing.supervisor", description=__doc__.split("\n")[0])
    parser.add_argument("--dir", type=Path, required=True, help="the cluster directory (cluster.json)")
    parser.add_argument("--name", required=True, help="the server process to supervise, e.g. tablet-server-2")
    parser.add_argument("--die-with-parent", action="store_true", help="tests: the server dies with this process")
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(levelname)s supervisor %(message)s"
    )
    directory = args.dir.absolute()
    try:
        cluster = ClusterRecord.load(directory)
        rec = cluster.get(args.name)
        if cluster.supervise is None:
            raise ValueError(f"the cluster in {directory} is not supervised (cluster.json has no restart policy)")
        if rec.role == ZOOKEEPER:
            raise ValueError(f"{args.name}: only coordinators and tablet servers are supervised")
        policy = RestartPolicy.from_dict(cluster.supervise)
    except (OSError, KeyError, ValueError, TypeError) as e:
        log.error("cannot supervise %s: %s", args.name, e)
        return 2
    home = directory / rec.name
    home.mkdir(parents=True, exist_ok=True)
    return Supervisor(rec, policy, home, args.die_with_parent).run()


if __name__ == "__main__":
    sys.exit(main())
