"""What a ``LocalCluster`` can be asked: each process's state and /health, the coordinator leader, ZooKeeper's
view, waits with deadlines, log files, and the status table of ``fluss-py cluster status``. Part of
``LocalCluster`` (a mixin: the same object; the same caller, the test's or the CLI's thread).
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

from fluss_py.security.identity import PLAINTEXT, PeerIdentity
from fluss_py.security.tls import client_ssl_context
from fluss_py.testing.cluster_file import (
    COORDINATOR,
    ZOOKEEPER,
)
from fluss_py.testing.health import fetch_health, is_ready, leader_of
from fluss_py.testing.procs import ProcessHandle, WaitTimeout, wait_until
from fluss_py.testing.supervised import SupervisedHandle
from fluss_py.testing.supervision import LOG_FILE as SUPERVISOR_LOG
from fluss_py.testing.zkview import ZkView
from fluss_py.testing.zookeeper import four_letter

T = TypeVar("T")
CLIENT = "client"  # the test host of the test's (or the CLI user's) own clients in a --netns cluster


class ClusterError(RuntimeError):
    """A process of the local cluster failed to start, exited, or the cluster did not become ready."""


class ClusterViews:
    """The questions half of ``LocalCluster`` (see the module docstring)."""

    # ---------------------------------------------------------------- state
    def handle(self, name: str) -> ProcessHandle | SupervisedHandle | None:
        return self.handles.get(name)

    def pid(self, name: str) -> int | None:
        h = self.handles.get(name)
        return h.pid if h else None

    def alive(self, name: str) -> bool:
        h = self.handles.get(name)
        return h is not None and h.alive()

    def paused(self, name: str) -> bool:
        h = self.handles.get(name)
        return h is not None and h.paused()

    def active(self, name: str) -> bool:
        """Alive, or (a supervised server) its supervisor still runs: in a backoff it will be restarted."""
        h = self.handles.get(name)
        if isinstance(h, SupervisedHandle):
            return h.active()
        return h is not None and h.alive()

    def supervision(self, name: str) -> dict[str, Any] | None:
        """A supervised server's state, restarts, last exit and why (``SupervisedHandle.summary``), else None."""
        h = self.handles.get(name)
        return h.summary() if isinstance(h, SupervisedHandle) else None

    def _supervision_text(self, name: str) -> str:
        s = self.supervision(name)
        if s is None:
            return ""
        return f"{s['state']}, {s['restarts']} restart(s); {s['reason'] or 'no exit yet'}"

    def health(self, name: str, timeout: float = 1.0) -> dict[str, Any] | None:
        rec = self.get(name)
        url = rec.http_url
        if url is None or not self.alive(name) or self.paused(name):
            return None
        return self.on_host(name, lambda: fetch_health(url, timeout, self.http_context()))

    def http_context(self) -> ssl.SSLContext | None:
        """What an HTTP client of this cluster needs: the CA and the client certificate (secure clusters)."""
        if self.security is None:
            return None
        if self._http_context is None:
            self._http_context = client_ssl_context(self.security.client_tls())
        return self._http_context

    def client_identity(self) -> PeerIdentity:
        """What a client of this cluster presents (plaintext and anonymous for a plaintext cluster)."""
        return PeerIdentity.from_settings(self.client_config()) if self.security is not None else PLAINTEXT

    def client_config(self) -> dict[str, str]:
        """Client settings (``security.*``) that reach this cluster: empty for a plaintext one."""
        return self.security.client_settings() if self.security is not None else {}

    def ready(self, name: str) -> bool:
        rec = self.get(name)
        if not self.alive(name) or self.paused(name):
            return False
        if rec.role == ZOOKEEPER:
            host = rec.rpc_address.rsplit(":", 1)[0]
            try:
                return "Mode:" in self.on_host(name, lambda: four_letter(host, rec.rpc_port, "srvr", timeout=1.0))
            except OSError:
                return False
        return is_ready(rec.role, self.health(name))

    def coordinator_healths(self) -> dict[str, dict[str, Any] | None]:
        return {n: self.health(n) for n in self.names(COORDINATOR)}

    def coordinator_leader(self) -> str | None:
        """Name of the coordinator whose /health says Leader (highest epoch wins), None when there is none."""
        return leader_of(self.coordinator_healths())

    def zk_four_letter(self, cmd: str, timeout: float = 5.0, name: str | None = None) -> str:
        """A four-letter word to ZooKeeper ``name`` (default: the first member), asked from its own host; a
        cluster on an outside ZooKeeper (no member of its own) asks the first address it was given."""
        members = self.names(ZOOKEEPER)
        if name is None and not members:
            host, port = self.record.zookeeper.split(",")[0].rsplit(":", 1)
            return four_letter(host, int(port), cmd, timeout)
        rec = self.get(name or members[0])
        host = rec.rpc_address.rsplit(":", 1)[0]
        return self.on_host(rec.name, lambda: four_letter(host, rec.rpc_port, cmd, timeout))

    def zk_view(self, timeout: float = 10.0, members: Iterable[str] | None = None) -> ZkView:
        """A read-only ZooKeeper session of the test's own (on the client host of a --netns cluster); with
        ``members`` (ZooKeeper process names) it connects to those members only, e.g. all but a paused one."""
        address = self.zookeeper_address
        if members is not None:
            address = ",".join(self.get(name).rpc_address for name in members)
        return self.on_host(CLIENT, lambda: ZkView(address, timeout))

    def on_host(self, name: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` (plain sockets: urllib, kazoo, four-letter words) on test host ``name``, or here."""
        if self.net is None:
            return fn()
        return self.net.call_in(name, fn)

    # ---------------------------------------------------------------- waiting
    def wait_until(
        self, cond: Callable[[], object], timeout: float, message: str | Callable[[], str] = "", interval: float = 0.1
    ) -> object:
        """``wait_until(cond, timeout)``; on timeout the message ends with every process's state."""
        return wait_until(cond, timeout, interval=interval, message=lambda: self._describe(message))

    def wait_ready(self, names: Iterable[str] | None = None, timeout: float = 60.0) -> None:
        """Wait until every named process (default: all) is ready; fail fast when one exits (a supervised
        server: when its supervisor gave up on it or did not restart it; a backoff is "not yet")."""
        todo = list(names) if names is not None else self.names()

        def all_ready() -> bool:
            dead = [n for n in todo if not self.active(n)]
            if dead:
                codes = {n: h.returncode if (h := self.handles.get(n)) else None for n in dead}
                why = "".join(f"\n{n}: {self._supervision_text(n)}" for n in dead if self.supervision(n))
                tails = self._log_tails(dead, supervisor=True)
                raise ClusterError(f"not running: {codes} (name: exit code){why}\n{tails}")
            return all(self.ready(n) for n in todo)

        try:
            wait_until(all_ready, timeout, interval=0.1, reraise=(ClusterError,))
        except WaitTimeout:
            not_ready = [n for n in todo if not self.ready(n)]
            raise ClusterError(
                f"not ready after {timeout:.0f}s: {', '.join(not_ready)}\n{self._log_tails(not_ready)}"
            ) from None

    def wait_for_leader(self, timeout: float, exclude: Iterable[str] = ()) -> str:
        """Wait until exactly one coordinator (not in ``exclude``) reports Leader; return its name."""
        excluded = set(exclude)

        def leader() -> str | None:
            name = self.coordinator_leader()
            return name if name is not None and name not in excluded else None

        return str(self.wait_until(leader, timeout, message="a coordinator leader"))

    def wait_for_log(self, name: str, pattern: str, timeout: float) -> re.Match[str]:
        """Wait until the process's log file (or stdout) matches ``pattern``; return the match."""
        regex = re.compile(pattern)

        def found() -> re.Match[str] | None:
            return regex.search(self.log_text(name))

        return self.wait_until(found, timeout, message=f"{pattern!r} in the log of {name}")  # type: ignore[return-value]

    def log_text(self, name: str) -> str:
        rec = self.get(name)
        parts = []
        for path in dict.fromkeys([rec.log_file, rec.stdout_file]):
            try:
                parts.append(Path(path).read_text(errors="replace"))
            except OSError:
                continue
        return "\n".join(parts)

    # ---------------------------------------------------------------- diagnostics
    def status_rows(self) -> list[dict[str, Any]]:
        """One row per process: name, role, id, pid, alive, paused, ready, state, leader, epoch, addresses."""
        rows = []
        healths = {n: self.health(n, timeout=0.5) for n in self.names() if self.get(n).role != ZOOKEEPER}
        leader = leader_of({n: h for n, h in healths.items() if self.get(n).role == COORDINATOR})
        for rec in self.record.processes:
            h = healths.get(rec.name) or {}
            alive = self.alive(rec.name)
            rows.append(
                {
                    "name": rec.name,
                    "role": rec.role,
                    "id": rec.id,
                    "pid": self.pid(rec.name),
                    "alive": alive,
                    "paused": self.paused(rec.name),
                    "ready": self.ready(rec.name) if alive else False,
                    "state": h.get("state") if rec.role != ZOOKEEPER else ("Running" if alive else None),
                    "leader": rec.name == leader,
                    "coordinator_epoch": h.get("coordinator_epoch"),
                    "rpc_address": rec.rpc_address,
                    "http_address": rec.http_address,
                    "log_file": rec.log_file,
                    "data_dir": rec.data_dir,
                    "supervisor": self.supervision(rec.name),
                }
            )
        return rows

    def _describe(self, message: str | Callable[[], str]) -> str:
        text = message() if callable(message) else message
        states = []
        for n in self.names():
            h = self.health(n, timeout=0.3) if self.get(n).role != ZOOKEEPER else None
            flag = "paused" if self.paused(n) else ("alive" if self.alive(n) else "dead")
            states.append(f"{n}={flag}{'/' + str(h.get('state')) if h else ''}")
        return f"{text} [{' '.join(states)}]"

    def _log_tails(self, names: Iterable[str], lines: int = 15, supervisor: bool = False) -> str:
        out = []
        for n in names:
            tail = self.log_text(n).splitlines()[-lines:]
            out.append(f"--- {n} ({self.get(n).log_file}) ---\n" + "\n".join(tail))
            path = self.directory / n / SUPERVISOR_LOG
            if supervisor and isinstance(self.handles.get(n), SupervisedHandle) and path.exists():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {n} ({path}) ---\n" + "\n".join(tail))
        return "\n".join(out)
