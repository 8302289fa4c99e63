"""What a supervisor decides and what it writes down: the restart policy, the states, the decision after an exit
(pure), and the state file ``<DIR>/<name>/supervisor.json``. The process that acts on them is
``supervisor.py``; the harness's side (start, stop, status) is ``supervised.py``; docs/local-cluster.md draws
the state machine.

Decision after the supervised process exited on its own (``after_exit``):

- exit code 0: a clean exit (someone sent SIGTERM to the process itself): ``exited``, not restarted;
- exit code 2: the project's "bad configuration" (cli/servers.py): ``bad-config``, not restarted — it would
  fail the same way again;
- anything else (another code, or killed by a signal) is a crash: restarted after
  ``min(initial_delay * 2**k, max_delay)`` seconds, where ``k`` is the number of restarts within the last
  ``window`` seconds (so a process that ran quietly for a window starts again from ``initial_delay``), unless
  ``max_restarts`` restarts already happened within the window: then ``given-up`` (a crash loop).

State file (version 1), written by temp file + fsync + rename, by the supervisor only::

    {"version": 1, "name": "tablet-server-2", "supervisor_pid": 4100, "supervisor_start_ticks": 88120,
     "state": "backoff", "pid": null, "start_ticks": null, "restarts": 1,
     "last_exit": {"code": null, "signal": 9, "pid": 4101, "at": 1717171717.2},
     "restart_at": 1717171718.2, "reason": "killed by signal 9 (SIGKILL): restarting in 1.0 s (...)",
     "policy": {"initial_delay": 1.0, "max_delay": 30.0, "max_restarts": 5, "window": 60.0},
     "updated_at": 1717171717.2}

``pid``/``start_ticks`` name the supervised process while it runs (null in ``backoff`` and the final
states); times are Unix seconds. Pure data, decisions and codec: no processes.
"""

from __future__ import annotations

import enum
import json
import logging
import math
import signal
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from fluss_py.common.state_machine import check_transition
from fluss_py.testing.cluster_file import write_atomic

log = logging.getLogger(__name__)

STATE_FILE = "supervisor.json"
LOG_FILE = "supervisor.log"
VERSION = 1
EXIT_BAD_CONFIG = 2  # cli/main.py: usage or configuration error


class SupervisorState(enum.StrEnum):
    RUNNING = "running"  # the process runs
    BACKOFF = "backoff"  # it crashed; it is started again at restart_at
    STOPPING = "stopping"  # a stop was asked for (SIGTERM to the supervisor); the process is stopping
    STOPPED = "stopped"  # final: stopped on purpose
    EXITED = "exited"  # final: it exited with code 0 by itself (not a crash)
    BAD_CONFIG = "bad-config"  # final: it exited with code 2 (configuration error)
    GIVEN_UP = "given-up"  # final: a crash loop (max_restarts within window), or it could not be spawned


FINAL_STATES = frozenset(
    {SupervisorState.STOPPED, SupervisorState.EXITED, SupervisorState.BAD_CONFIG, SupervisorState.GIVEN_UP}
)

VALID_PREVIOUS: dict[SupervisorState, frozenset[SupervisorState | None]] = {
    SupervisorState.RUNNING: frozenset({None, SupervisorState.BACKOFF}),
    SupervisorState.BACKOFF: frozenset({SupervisorState.RUNNING}),
    SupervisorState.STOPPING: frozenset({SupervisorState.RUNNING}),
    SupervisorState.STOPPED: frozenset({None, SupervisorState.STOPPING, SupervisorState.BACKOFF}),
    SupervisorState.EXITED: frozenset({SupervisorState.RUNNING}),
    SupervisorState.BAD_CONFIG: frozenset({SupervisorState.RUNNING}),
    SupervisorState.GIVEN_UP: frozenset({None, SupervisorState.RUNNING, SupervisorState.BACKOFF}),
}


def transition(name: str, current: SupervisorState | None, target: SupervisorState) -> SupervisorState:
    """``target`` if ``current`` may move to it; else log and raise ``IllegalStateTransition``."""
    check_transition(f"supervisor of {name}", current, target, VALID_PREVIOUS[target], log)
    return target


@dataclass(frozen=True)
class RestartPolicy:
    """How a supervisor restarts: exponential backoff from ``initial_delay`` to ``max_delay`` seconds, and at
    most ``max_restarts`` restarts within ``window`` seconds (then it gives up). Checked when made."""

    initial_delay: float = 1.0
    max_delay: float = 30.0
    max_restarts: int = 5
    window: float = 60.0

    def __post_init__(self) -> None:
        for key in ("initial_delay", "max_delay", "window"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"restart policy: {key} must be a finite number of seconds, not {value!r}")
        if self.initial_delay < 0 or self.window <= 0:
            raise ValueError(f"restart policy: initial_delay must be >= 0 and window > 0 ({self})")
        if self.max_delay < self.initial_delay:
            raise ValueError(
                f"restart policy: max_delay ({self.max_delay:g} s) is below initial_delay ({self.initial_delay:g} s)"
            )
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) or self.max_restarts < 1:
            raise ValueError(f"restart policy: max_restarts must be an integer >= 1, not {self.max_restarts!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RestartPolicy:
        unknown = set(data) - {"initial_delay", "max_delay", "max_restarts", "window"}
        if unknown:
            raise ValueError(f"restart policy: unknown key(s) {sorted(unknown)}")
        return cls(**data)

    def describe(self) -> str:
        return (
            f"backoff {self.initial_delay:g} s doubling to {self.max_delay:g} s, "
            f"at most {self.max_restarts} restarts within {self.window:g} s"
        )


@dataclass(frozen=True)
class ExitStatus:
    """How a process ended: an exit code, or the signal that killed it (``Popen.returncode`` < 0)."""

    code: int | None
    signal: int | None

    @classmethod
    def from_returncode(cls, returncode: int) -> ExitStatus:
        return cls(None, -returncode) if returncode < 0 else cls(returncode, None)

    def describe(self) -> str:
        if self.signal is not None:
            try:
                name = signal.Signals(self.signal).name
            except ValueError:
                name = "unknown signal"
            return f"killed by signal {self.signal} ({name})"
        return f"exited with code {self.code}"


@dataclass(frozen=True)
class Verdict:
    """What to do after an exit: the next state, the delay before a restart (backoff only), and why."""

    state: SupervisorState
    delay: float | None
    reason: str


def after_exit(policy: RestartPolicy, status: ExitStatus, restarts: Sequence[float], now: float) -> Verdict:
    """The decision after the supervised process exited on its own (not asked to stop). ``restarts``: the
    times (same clock as ``now``) of the restarts done so far. Pure; the module docstring has the rules."""
    what = status.describe()
    if status.code == 0:
        return Verdict(SupervisorState.EXITED, None, f"{what} (a clean exit, not a crash): not restarted")
    if status.code == EXIT_BAD_CONFIG:
        return Verdict(
            SupervisorState.BAD_CONFIG,
            None,
            f"{what} (configuration error: see its stdout.log): not restarted; fix the setting and start it",
        )
    recent = sum(1 for t in restarts if now - t < policy.window)
    if recent >= policy.max_restarts:
        return Verdict(
            SupervisorState.GIVEN_UP,
            None,
            f"{what}: crash loop ({recent} restarts within {policy.window:g} s): given up, not restarting",
        )
    delay = min(policy.initial_delay * 2**recent, policy.max_delay)
    return Verdict(
        SupervisorState.BACKOFF,
        delay,
        f"{what}: restarting in {delay:g} s (restart {recent + 1} of at most {policy.max_restarts} "
        f"within {policy.window:g} s)",
    )


@dataclass
class SupervisorRecord:
    """The state file (see the module docstring). Written by the supervisor, read by ``cluster status``."""

    name: str
    supervisor_pid: int
    supervisor_start_ticks: int | None
    state: SupervisorState
    policy: RestartPolicy
    pid: int | None = None
    start_ticks: int | None = None
    restarts: int = 0
    last_exit: dict[str, Any] | None = None  # {"code", "signal", "pid", "at"}
    restart_at: float | None = None
    reason: str = ""
    updated_at: float = 0.0
    version: int = field(default=VERSION)

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES

    def last_exit_text(self) -> str:
        if self.last_exit is None:
            return ""
        return ExitStatus(self.last_exit.get("code"), self.last_exit.get("signal")).describe()

    def to_json(self) -> str:
        data = asdict(self)
        data["state"] = str(self.state)
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> SupervisorRecord:
        data: dict[str, Any] = json.loads(text)
        if data.get("version") != VERSION:
            raise ValueError(f"unsupported supervisor.json version {data.get('version')!r} (expected {VERSION})")
        data["state"] = SupervisorState(data["state"])
        data["policy"] = RestartPolicy.from_dict(data["policy"])
        return cls(**data)

    def save(self, home: Path) -> None:
        write_atomic(home / STATE_FILE, self.to_json())

    @classmethod
    def load(cls, home: Path) -> SupervisorRecord | None:
        """The state file in ``home``, or None when there is none (never supervised there)."""
        try:
            text = (home / STATE_FILE).read_text()
        except FileNotFoundError:
            return None
        return cls.from_json(text)
