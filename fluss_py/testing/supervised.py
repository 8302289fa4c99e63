"""The harness's side of a supervised server (the supervisor process is ``supervisor.py``): start its supervisor,
find the server's current process, stop it on purpose, kill everything, and read the status.

    handle = SupervisedHandle.spawn(cluster_dir, "tablet-server-2", die_with_parent=True)
    handle.wait_started(15)    # the supervisor wrote its first state (it spawned the server, or gave up)
    handle.pid                 # the server's current PID (a new one after each restart; None in a backoff)
    handle.kill()              # SIGKILL to the server: a crash, which the supervisor restarts
    handle.stop(15)            # SIGTERM to the supervisor: a stop on purpose, never restarted
    handle.status()            # what supervisor.json says (supervision.SupervisorRecord)

It answers what ``LocalCluster`` asks of a ``ProcessHandle`` (``pid``, ``alive``, ``paused``, ``signal``,
``kill``, ``pause``, ``resume``, ``stop``, ``wait_exit``, ``returncode``) for the *server*, so faults land
on the server as they would unsupervised, plus ``active`` (the supervisor or the server still runs),
``child``, ``summary`` (the ``cluster status`` columns) and ``kill_all`` (the supervisor first, so nothing
is restarted, then the server). Only PIDs whose start time matches are ever signalled: the supervisor's
from cluster.json, the server's from supervisor.json.

Who may call: the thread that owns the ``LocalCluster`` (a test, or the CLI).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from signal import SIGTERM
from typing import Any

from fluss_py.testing.procs import ProcessHandle, WaitTimeout, wait_until
from fluss_py.testing.supervision import LOG_FILE, SupervisorRecord

KILL_WAIT = 10.0  # seconds a SIGKILLed process may take to disappear from /proc


@dataclass
class SupervisedHandle:
    """One supervised server: its home directory (``DIR/<name>``, where supervisor.json lives) and its
    supervisor process."""

    home: Path
    supervisor: ProcessHandle

    @classmethod
    def spawn(cls, directory: Path, name: str, *, die_with_parent: bool = False) -> SupervisedHandle:
        """Start the supervisor of ``name`` detached (own session; output to ``DIR/<name>/supervisor.log``)."""
        home = directory / name
        home.mkdir(parents=True, exist_ok=True)
        argv = [sys.executable, "-m", "fluss_py.testing.supervisor", "--dir", str(directory), "--name", name]
        if die_with_parent:
            argv.append("--die-with-parent")
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        process = ProcessHandle.spawn(
            argv, log_file=home / LOG_FILE, cwd=home, env=env, die_with_parent=die_with_parent
        )
        return cls(home, process)

    @classmethod
    def attach(cls, home: Path, pid: int, start_ticks: int | None) -> SupervisedHandle:
        """A handle for a supervisor started by another process (read from cluster.json)."""
        return cls(home, ProcessHandle.attach(pid, start_ticks))

    def wait_started(self, timeout: float) -> SupervisorRecord | None:
        """Wait until this supervisor wrote its first state (None when it exited without writing one)."""
        try:
            wait_until(lambda: self.status() is not None or not self.supervisor.alive(), timeout, interval=0.02)
        except WaitTimeout:
            return None
        return self.status()

    # ---------------------------------------------------------------- what supervisor.json says
    def status(self) -> SupervisorRecord | None:
        """supervisor.json if this handle's supervisor wrote it (None before its first write, or when the file
        is another supervisor's: an earlier run's, or unreadable)."""
        try:
            rec = SupervisorRecord.load(self.home)
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if rec is None or rec.supervisor_pid != self.supervisor.pid:
            return None
        if self.supervisor.start_ticks is not None and rec.supervisor_start_ticks != self.supervisor.start_ticks:
            return None
        return rec

    def child(self) -> ProcessHandle | None:
        """The server process as it runs now, or None (in a backoff, stopped, given up)."""
        rec = self.status()
        if rec is None or rec.pid is None:
            return None
        handle = ProcessHandle.attach(rec.pid, rec.start_ticks)
        return handle if handle.alive() else None

    def summary(self) -> dict[str, Any]:
        """The supervision columns of ``cluster status``: state, restarts, last exit, why, the supervisor."""
        rec = self.status()
        alive = self.supervisor.alive()
        state = str(rec.state) if rec is not None else "unknown"
        if rec is not None and not rec.final and not alive:
            state = "stopped" if state == "stopping" else f"{state} (supervisor gone)"
        return {
            "state": state,
            "restarts": rec.restarts if rec is not None else 0,
            "last_exit": rec.last_exit_text() if rec is not None else "",
            "reason": rec.reason if rec is not None else "",
            "restart_at": rec.restart_at if rec is not None else None,
            "supervisor_pid": self.supervisor.pid,
            "supervisor_alive": alive,
        }

    # ---------------------------------------------------------------- the server, as a ProcessHandle
    @property
    def pid(self) -> int | None:
        child = self.child()
        return child.pid if child is not None else None

    @property
    def returncode(self) -> int | None:
        """How the server last ended (negative: the signal), like ``Popen.returncode``; None while active."""
        rec = self.status()
        if self.active() or rec is None or rec.last_exit is None:
            return None
        sig = rec.last_exit.get("signal")
        return -sig if sig is not None else rec.last_exit.get("code")

    def alive(self) -> bool:
        return self.child() is not None

    def paused(self) -> bool:
        child = self.child()
        return child is not None and child.paused()

    def active(self) -> bool:
        """The supervisor runs (the server runs, or will be restarted), or an orphaned server still runs."""
        return self.supervisor.alive() or self.alive()

    def signal(self, sig: int) -> bool:
        child = self.child()
        return child.signal(sig) if child is not None else False

    def kill(self) -> bool:
        """SIGKILL the server (a crash: the supervisor restarts it)."""
        child = self.child()
        return child.kill() if child is not None else False

    def pause(self, timeout: float = 5.0) -> bool:
        child = self.child()
        return child.pause(timeout) if child is not None else False

    def resume(self, timeout: float = 5.0) -> bool:
        child = self.child()
        return child.resume(timeout) if child is not None else False

    # ---------------------------------------------------------------- stopping on purpose
    def request_stop(self) -> None:
        """Ask the supervisor to stop the server (SIGTERM to it; to the server itself when the supervisor is
        gone)."""
        if not self.supervisor.signal(SIGTERM):
            self.signal(SIGTERM)

    def wait_exit(self, timeout: float) -> bool:
        """Wait until neither the supervisor nor the server runs; False at the deadline."""
        try:
            wait_until(lambda: not self.active(), timeout, interval=0.02)
        except WaitTimeout:
            return False
        return True

    def stop(self, timeout: float = 10.0) -> str:
        """A stop on purpose; SIGKILL to both after ``timeout``. Returns "gone", "stopped" or "killed"."""
        if not self.active():
            return "gone"
        self.request_stop()
        if self.wait_exit(timeout):
            return "stopped"
        self.kill_all()
        return "killed"

    def kill_all(self) -> None:
        """SIGKILL the supervisor (nothing restarts after this), then the server; wait for both."""
        child = self.child()
        self.supervisor.kill()
        if not self.supervisor.wait_exit(KILL_WAIT):
            raise RuntimeError(f"supervisor {self.supervisor.pid} survived SIGKILL for {KILL_WAIT:g}s")
        child = self.child() or child  # a server spawned just before the kill is in the file by now
        if child is not None and child.kill() and not child.wait_exit(KILL_WAIT):
            raise RuntimeError(f"process {child.pid} survived SIGKILL for {KILL_WAIT:g}s")
