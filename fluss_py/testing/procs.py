"""Detached child processes addressed by PID: spawn, check, signal, stop.

A ``ProcessHandle`` names one OS process by ``(pid, start_ticks)``: ``start_ticks`` is field 22 of
``/proc/<pid>/stat`` (start time since boot), so a handle read back from ``cluster.json`` never signals an
unrelated process that reused the PID. When the handle was spawned in this process it also holds the
``Popen`` so the child is reaped (no zombies) and its exit code is known.

Stop protocol (``stop``): SIGTERM (or SIGCONT first when the process is paused), wait up to ``timeout``,
then SIGKILL and wait again. Every wait has a deadline.

Who may call: any thread; a handle is not shared between threads that signal it concurrently.
"""

from __future__ import annotations

import asyncio
import ctypes
import os
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from signal import SIGCONT, SIGKILL, SIGSTOP, SIGTERM

_PR_SET_PDEATHSIG = 1
try:
    _LIBC: ctypes.CDLL | None = ctypes.CDLL("libc.so.6", use_errno=True)
except OSError:
    _LIBC = None


def _die_with_parent() -> None:  # runs in the child between fork and exec
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, int(SIGKILL), 0, 0, 0)


class WaitTimeout(AssertionError):
    """A ``wait_until`` condition did not hold before its deadline (an AssertionError, so pytest shows it)."""


def wait_until(
    cond: Callable[[], object],
    timeout: float,
    *,
    interval: float = 0.05,
    message: str | Callable[[], str] = "",
    reraise: tuple[type[BaseException], ...] = (),
) -> object:
    """Poll ``cond`` until it returns a truthy value (returned) or ``timeout`` seconds pass (WaitTimeout).
    The rest is keyword-only: ``ClusterViews.wait_until`` takes ``message`` third, and a message passed here
    positionally was taken for the interval.

    Exceptions raised by ``cond`` count as "not yet" (the last one is chained to the WaitTimeout), except
    those of the ``reraise`` types, which end the wait at once.
    """
    deadline = time.monotonic() + timeout
    last_exc: BaseException | None = None
    while True:
        try:
            value = cond()
            if value:
                return value
            last_exc = None
        except reraise:
            raise
        except Exception as e:  # the condition may probe something not up yet
            last_exc = e
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            what = text or getattr(cond, "__name__", "condition")
            raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {what}") from last_exc
        time.sleep(interval)


async def async_wait_until(
    cond: Callable[[], object], timeout: float = 5.0, interval: float = 0.005, message: str = ""
) -> object:
    """``wait_until`` for a coroutine on an event loop (the one async wait of the tests): polls ``cond``
    every ``interval`` seconds without blocking the loop; returns its truthy value or raises WaitTimeout.
    Unlike ``wait_until``, an exception of ``cond`` ends the wait at once (in-process conditions do not probe
    anything still starting)."""
    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            what = message or getattr(cond, "__name__", "condition")
            raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {what}")
        await asyncio.sleep(interval)


def proc_start_ticks(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot, or None when there is no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # the command name (field 2) may contain spaces and parentheses: split after the last ')'
    fields = stat[stat.rfind(")") + 2 :].split()
    return int(fields[19])  # field 22 overall


def proc_state(pid: int) -> str | None:
    """One-letter state from /proc (R, S, D, T stopped, Z zombie, ...) or None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()[0]


@dataclass
class ProcessHandle:
    """One OS process: PID plus start time, and the Popen when this process spawned it."""

    pid: int
    start_ticks: int | None
    popen: subprocess.Popen | None = field(default=None, repr=False, compare=False)

    @classmethod
    def spawn(
        cls,
        argv: Sequence[str],
        *,
        log_file: Path,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        die_with_parent: bool = False,
    ) -> ProcessHandle:
        """Start ``argv`` detached (own session, stdin /dev/null, stdout+stderr appended to ``log_file``).

        ``die_with_parent``: the kernel SIGKILLs the child when the *thread* that spawned it ends (Linux
        PR_SET_PDEATHSIG), so not even a SIGKILLed test run leaks processes. Not for the CLI's ``up``.
        """
        log_file.parent.mkdir(parents=True, exist_ok=True)
        with open(log_file, "ab") as out:
            popen = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=cwd,
                env=dict(env) if env is not None else None,
                start_new_session=True,
                close_fds=True,
                preexec_fn=_die_with_parent if die_with_parent and _LIBC is not None else None,
            )
        return cls(popen.pid, proc_start_ticks(popen.pid), popen)

    @classmethod
    def attach(cls, pid: int, start_ticks: int | None) -> ProcessHandle:
        """A handle for a process started elsewhere (e.g. read from cluster.json)."""
        return cls(pid, start_ticks)

    # ---------------------------------------------------------------- state
    def _same_process(self) -> bool:
        ticks = proc_start_ticks(self.pid)
        return ticks is not None and (self.start_ticks is None or ticks == self.start_ticks)

    def alive(self) -> bool:
        """True while the process exists and has not exited (a stopped process is alive)."""
        if self.popen is not None:
            return self.popen.poll() is None
        return self._same_process() and proc_state(self.pid) not in ("Z", "X", None)

    def paused(self) -> bool:
        return self.alive() and proc_state(self.pid) in ("T", "t")

    @property
    def returncode(self) -> int | None:
        return self.popen.poll() if self.popen is not None else None

    # ---------------------------------------------------------------- signals
    def signal(self, sig: int) -> bool:
        """Send ``sig`` if the process is still ours and alive; False when it is already gone."""
        if not self.alive():
            return False
        try:
            os.kill(self.pid, sig)
        except ProcessLookupError:
            return False
        return True

    def kill(self) -> bool:
        return self.signal(SIGKILL)

    def pause(self, timeout: float = 5.0) -> bool:
        """SIGSTOP and wait until the kernel shows the process stopped (signal delivery is asynchronous)."""
        if not self.signal(SIGSTOP):
            return False
        wait_until(lambda: self.paused() or not self.alive(), timeout, interval=0.005, message=f"{self.pid} stopped")
        return True

    def resume(self, timeout: float = 5.0) -> bool:
        """SIGCONT and wait until the process no longer shows as stopped."""
        if not self.signal(SIGCONT):
            return False
        wait_until(lambda: not self.paused(), timeout, interval=0.005, message=f"{self.pid} continued")
        return True

    def wait_exit(self, timeout: float) -> bool:
        """Wait until the process is gone; False when it is still alive at the deadline."""
        if self.popen is not None:
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                return False
            return True
        try:
            wait_until(lambda: not self.alive(), timeout, interval=0.02)
        except WaitTimeout:
            return False
        return True

    def stop(self, timeout: float = 10.0, sig: int = SIGTERM) -> str:
        """Graceful stop, then SIGKILL after ``timeout``. Returns "gone", "stopped" or "killed"."""
        if not self.alive():
            self.wait_exit(0.0)
            return "gone"
        if self.paused():
            self.resume()
        self.signal(sig)
        if self.wait_exit(timeout):
            return "stopped"
        self.kill()
        if not self.wait_exit(10.0):
            raise RuntimeError(f"process {self.pid} survived SIGKILL for 10s")
        return "killed"
