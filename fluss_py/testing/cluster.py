"""``LocalCluster``: ZooKeeper + N coordinators + M tablet servers as detached real processes.

    with LocalCluster(tmp_path, coordinators=3, tablet_servers=3,
                      overrides={"zookeeper.session-timeout": "2s"}) as cluster:
        leader = cluster.wait_for_leader(10)          # "coordinator-2"
        cluster.kill(leader)                          # kill -9
        cluster.wait_for_leader(5, exclude=[leader])

Layout of ``directory``::

    cluster.json                       every process (see cluster_file.py)
    zookeeper/{zoo.cfg,data/,zookeeper.log}
    coordinator-<id>/{logs/coordinator-server.log,stdout.log}
    tablet-server-<id>/{logs/tablet-server.log,stdout.log,data/}

Each server runs ``python -m fluss_py.cli.main coordinator|tablet-server --config deploy/conf/<role>.yaml
-D ...`` in its own session (``start_new_session=True``) so a terminal's Ctrl-C never reaches it; ports come
from one ``PortAllocator``. Readiness follows the process contract (``GET /health``); ZooKeeper is ready when
``srvr`` answers ``Mode:``. ``open(directory)`` re-attaches to a cluster started by another process (the CLI)
through cluster.json; PIDs are checked against their start time before any signal.

``zookeepers=3`` runs an ensemble ``zookeeper-1..3`` (``zookeeper-<sid>/``) instead of one ``zookeeper``.
``netns=True`` puts every process on a test host of its own (netns.py: a namespace named after it, an address
in 198.18.0.0/15, fixed ports) plus the host ``client``; argv starts with ``ip netns exec <ns>``, and
``on_host``/``zk_view`` run the test's own plain-socket probes there (health, four-letter words, kazoo).

``supervise=RestartPolicy(...)`` starts every coordinator and tablet server under a supervisor of its own
(supervisor.py) that restarts it when it crashes; ``handles[name]`` is then a ``SupervisedHandle`` that
answers for the server (its PID changes with each restart), ``stop_process``/``down`` are stops on purpose
(never restarted), ``kill`` is a crash (restarted). ZooKeeper is never supervised.

Cleanup: ``close()`` (and the context manager, and an atexit hook) stops every process this object
started, SIGKILL after a short grace (supervisors first), even when a test failed, then deletes its test
hosts by name.

Who may call: one thread (a test, or the CLI).
"""

from __future__ import annotations

import atexit
import os
import ssl
import time
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from signal import SIGCONT, SIGTERM
from types import MappingProxyType
from typing import Any, TypeVar

from fluss_py.testing.cluster_file import (
    CLUSTER_FILE,
    COORDINATOR,
    TABLET_SERVER,
    ZOOKEEPER,
    ClusterRecord,
    ProcessRecord,
)
from fluss_py.testing.cluster_views import CLIENT, ClusterError, ClusterViews
from fluss_py.testing.layout import CONF_DIR, DEFAULT_DIR, LAUNCHER_ENV, default_launcher, server_record
from fluss_py.testing.netns import HostNetwork
from fluss_py.testing.ports import PortAllocator, default_allocator
from fluss_py.testing.procs import ProcessHandle
from fluss_py.testing.secure import SecureFiles, bootstrap_security
from fluss_py.testing.supervised import SupervisedHandle
from fluss_py.testing.supervision import RestartPolicy
from fluss_py.testing.zookeeper import EnsembleMember, ZooKeeperProcess

NETNS_ZK_PORTS = (2181, 2888, 3888)  # client, quorum, election: every test host has its own port space
NETNS_SERVER_PORTS = (9123, 9124)  # rpc, http

T = TypeVar("T")
_LIVE: weakref.WeakSet[LocalCluster] = weakref.WeakSet()


def _kill_leftovers() -> None:
    for cluster in list(_LIVE):
        cluster.kill_all()
        cluster.remove_netns()


atexit.register(_kill_leftovers)


def _frozen(overrides: Mapping[str, Any] | None) -> Mapping[str, str]:
    return MappingProxyType({str(k): str(v) for k, v in (overrides or {}).items()})


class LocalCluster(ClusterViews):
    """Owns the processes of one local cluster, its directory and its cluster.json."""

    def __init__(
        self,
        directory: Path | str = DEFAULT_DIR,
        coordinators: int = 3,
        tablet_servers: int = 3,
        *,
        zookeeper: str | None = None,
        zk_root: str = "/fluss",
        tick_time: int = 500,
        overrides: Mapping[str, Any] | None = None,
        coordinator_overrides: Mapping[str, Any] | None = None,
        tablet_overrides: Mapping[str, Any] | None = None,
        ports: PortAllocator | None = None,
        conf_dir: Path | None = CONF_DIR,
        launcher: list[str] | None = None,
        die_with_parent: bool = False,
        zookeepers: int = 1,
        netns: bool = False,
        secure: bool = False,
        client_certificates: bool = True,
        supervise: RestartPolicy | None = None,
    ) -> None:
        self.directory = Path(directory).absolute()
        # secure: TLS (with client certificates unless told), authentication, ACLs (testing/secure.py,
        # docs/security.md)
        self.security = SecureFiles.create(self.directory, client_certificates=client_certificates) if secure else None
        self.ports = ports or default_allocator()
        # Read-only: every server's command line is recorded from them here (and by add_*), so a change
        # made after the constructor would silently miss the servers already recorded.
        self.overrides = _frozen(overrides)
        self.role_overrides = MappingProxyType(
            {COORDINATOR: _frozen(coordinator_overrides), TABLET_SERVER: _frozen(tablet_overrides)}
        )
        self.conf_dir = conf_dir
        self.launcher = list(launcher) if launcher else default_launcher()
        self.die_with_parent = die_with_parent
        self.handles: dict[str, ProcessHandle | SupervisedHandle] = {}
        self._zks: dict[str, ZooKeeperProcess] = {}
        self._http_context: ssl.SSLContext | None = None
        self.record = ClusterRecord(str(self.directory), zookeeper or "", zk_root)
        self.record.supervise = supervise.to_dict() if supervise is not None else None
        if self.security is not None:
            self.record.security_dir = str(self.security.directory)
        self.net: HostNetwork | None = HostNetwork.create() if netns else None
        _LIVE.add(self)
        try:
            if self.net is not None:
                self.net.add_host(CLIENT)
            if zookeeper is None:
                self._plan_zookeepers(zookeepers, tick_time)
            self._save_net()
            for i in range(1, coordinators + 1):
                self._add(COORDINATOR, i)
            for i in range(1, tablet_servers + 1):
                self._add(TABLET_SERVER, i)
        except BaseException:
            self.close(grace=0.0)
            raise

    def _plan_zookeepers(self, count: int, tick_time: int) -> None:
        """One standalone ZooKeeper (``zookeeper``) or an ensemble of ``count`` (``zookeeper-<sid>``)."""
        if count < 1:
            raise ValueError(f"a cluster needs at least one ZooKeeper, not {count}")
        names = [ZOOKEEPER] if count == 1 else [f"{ZOOKEEPER}-{sid}" for sid in range(1, count + 1)]
        members = []
        for sid, name in enumerate(names, 1):
            host = self._host(name)
            if self.net is not None:
                client, quorum, election = NETNS_ZK_PORTS
            else:
                client, quorum, election = self.ports.allocate_many(3)
            members.append((name, host, client, EnsembleMember(sid, host, quorum, election)))
        ensemble = [m for *_, m in members] if count > 1 else []
        for name, host, client, member in members:
            zk = ZooKeeperProcess(
                self.directory / name, client, tick_time, host=host, ensemble=ensemble, sid=member.sid
            )
            self._zks[name] = zk
            self.record.processes.append(
                ProcessRecord(
                    name=name,
                    role=ZOOKEEPER,
                    id=member.sid if count > 1 else None,
                    rpc_address=zk.address,
                    http_address=None,
                    log_file=str(zk.log_file),
                    stdout_file=str(zk.log_file),
                    data_dir=str(zk.data_dir),
                    argv=self._exec_prefix(name) + zk.command(),
                )
            )
        self.record.zookeeper = ",".join(zk.address for zk in self._zks.values())

    def _host(self, name: str) -> str:
        return self.net.add_host(name) if self.net is not None else "127.0.0.1"

    def _exec_prefix(self, name: str) -> list[str]:
        return self.net.exec_prefix(name) if self.net is not None else []

    def _save_net(self) -> None:
        if self.net is not None:
            self.record.netns = self.net.to_dict()
            if self.directory.exists():
                self.save()

    # ---------------------------------------------------------------- re-attaching (CLI)
    @classmethod
    def open(cls, directory: Path | str = DEFAULT_DIR, ports: PortAllocator | None = None) -> LocalCluster:
        """Attach to the cluster described by ``<directory>/cluster.json`` (processes keep running)."""
        directory = Path(directory).absolute()
        record = ClusterRecord.load(directory)
        self = cls.__new__(cls)
        self.directory = directory
        self.ports = ports or default_allocator()
        self.overrides = _frozen(None)
        self.role_overrides = MappingProxyType({COORDINATOR: _frozen(None), TABLET_SERVER: _frozen(None)})
        self.conf_dir, self.launcher, self._zks = CONF_DIR, default_launcher(), {}
        self.net = HostNetwork.from_dict(record.netns) if record.netns else None
        self.die_with_parent = False
        self.record = record
        self._http_context = None
        self.security = SecureFiles(Path(record.security_dir)) if record.security_dir else None
        self.handles = {}
        for p in record.processes:
            for addr in (p.rpc_address, p.http_address):
                if addr:
                    self.ports.reserve(int(addr.rsplit(":", 1)[1]))
            if p.supervisor_pid is not None:
                self.handles[p.name] = SupervisedHandle.attach(directory / p.name, p.supervisor_pid,
                                                               p.supervisor_start_ticks)  # fmt: skip
            elif p.pid is not None:
                self.handles[p.name] = ProcessHandle.attach(p.pid, p.start_ticks)
        _LIVE.add(self)
        return self

    @staticmethod
    def exists(directory: Path | str = DEFAULT_DIR) -> bool:
        return (Path(directory) / CLUSTER_FILE).exists()

    # ---------------------------------------------------------------- process table
    def _add(self, role: str, server_id: int) -> ProcessRecord:
        if any(p.id == server_id and p.role == role for p in self.record.processes):
            raise ValueError(f"{role}-{server_id} already exists")
        name = f"{role}-{server_id}"
        if self.net is not None:
            rpc_port, http_port = NETNS_SERVER_PORTS
        else:
            rpc_port, http_port = self.ports.allocate_many(2)
        rec = server_record(
            self.directory,
            role,
            server_id,
            zookeeper=self.record.zookeeper,
            zk_root=self.record.zk_root,
            rpc_port=rpc_port,
            http_port=http_port,
            launcher=self.launcher,
            conf_dir=self.conf_dir,
            overrides={**self.overrides, **self.role_overrides[role], **self._tls_overrides(role, server_id)},
            host=self._host(name),
            exec_prefix=self._exec_prefix(name),
            secure_config=self.security.server_config if self.security else None,
        )
        self._save_net()
        self.record.processes.append(rec)
        return rec

    def _tls_overrides(self, role: str, server_id: int) -> dict[str, str]:
        """A secure cluster's server presents a certificate of its own, naming it (per-server keys, rotated
        alone)."""
        return self.security.server_tls_overrides(role, server_id) if self.security is not None else {}

    def add_coordinator(self, server_id: int | None = None, start: bool = True) -> str:
        ids = [p.id or 0 for p in self.record.by_role(COORDINATOR)]
        rec = self._add(COORDINATOR, server_id if server_id is not None else max(ids, default=0) + 1)
        if start:
            self.start_process(rec.name)
        return rec.name

    def add_tablet_server(self, server_id: int | None = None, start: bool = True) -> str:
        ids = [p.id or 0 for p in self.record.by_role(TABLET_SERVER)]
        rec = self._add(TABLET_SERVER, server_id if server_id is not None else max(ids, default=0) + 1)
        if start:
            self.start_process(rec.name)
        return rec.name

    def get(self, name: str) -> ProcessRecord:
        return self.record.get(name)

    def supervised(self, name: str) -> bool:
        """Whether ``name`` runs under a supervisor (a server of a ``supervise=`` cluster)."""
        return self.record.supervise is not None and self.get(name).role != ZOOKEEPER

    def names(self, role: str | None = None) -> list[str]:
        return [p.name for p in self.record.processes if role is None or p.role == role]

    @property
    def zookeeper_address(self) -> str:
        return self.record.zookeeper

    @property
    def zk_root(self) -> str:
        return self.record.zk_root

    def save(self) -> None:
        self.record.save(self.directory)

    # ---------------------------------------------------------------- starting
    def start(self, timeout: float = 60.0, wait: bool = True) -> LocalCluster:
        """Start every process not running (ZooKeeper first, then all servers at once); wait until ready."""
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            zookeepers = [n for n in self.names(ZOOKEEPER) if not self.active(n)]
            for name in zookeepers:  # every member at once: an ensemble serves only once a quorum runs
                self.start_process(name)
            self.wait_ready(zookeepers, timeout=timeout)
            if self.security is not None:
                bootstrap_security(self.security, self.record.zookeeper, self.record.zk_root)
            for rec in self.record.processes:
                if not self.active(rec.name):
                    self.start_process(rec.name)
            if wait:
                self.wait_ready(timeout=timeout)
        except BaseException:
            self.kill_all()
            raise
        return self

    def start_process(self, name: str, wait: bool = False, timeout: float = 30.0) -> ProcessHandle | SupervisedHandle:
        """Spawn one process from its recorded command line (its ports and directories stay the same); a
        supervised one through a new supervisor (its restart count starts from 0)."""
        rec = self.get(name)
        if self.active(name):
            if self.supervised(name):
                raise ClusterError(f"{name} is already supervised: {self._supervision_text(name)}")
            raise ClusterError(f"{name} is already running (pid {rec.pid})")
        if rec.role == ZOOKEEPER:
            if name in self._zks:
                self._zks[name].prepare()  # zoo.cfg names this cluster's ports (a reused directory has old ones)
            elif not (Path(rec.data_dir).parent / "zoo.cfg").exists():
                raise ClusterError(f"{name}: zoo.cfg is missing in {Path(rec.data_dir).parent}")
        Path(rec.data_dir).mkdir(parents=True, exist_ok=True)
        Path(rec.log_file).parent.mkdir(parents=True, exist_ok=True)
        if self.supervised(name):
            return self._start_supervised(rec, wait, timeout)
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        handle = ProcessHandle.spawn(
            rec.argv,
            log_file=Path(rec.stdout_file),
            cwd=Path(rec.data_dir),
            env=env,
            die_with_parent=self.die_with_parent,
        )
        self.handles[name] = handle
        rec.pid, rec.start_ticks = handle.pid, handle.start_ticks
        self.save()
        if wait:
            self.wait_ready([name], timeout=timeout)
        return handle

    def _start_supervised(self, rec: ProcessRecord, wait: bool, timeout: float) -> SupervisedHandle:
        self.save()  # the supervisor reads the command line and the policy from cluster.json
        handle = SupervisedHandle.spawn(self.directory, rec.name, die_with_parent=self.die_with_parent)
        self.handles[rec.name] = handle
        rec.pid = rec.start_ticks = None
        rec.supervisor_pid, rec.supervisor_start_ticks = handle.supervisor.pid, handle.supervisor.start_ticks
        self.save()
        if handle.wait_started(min(timeout, 15.0)) is None:
            tail = self._log_tails([rec.name], supervisor=True)
            raise ClusterError(f"the supervisor of {rec.name} did not start it\n{tail}")
        if wait:
            self.wait_ready([rec.name], timeout=timeout)
        return handle

    # ---------------------------------------------------------------- stopping and faults
    def signal(self, name: str, sig: int) -> bool:
        h = self.handles.get(name)
        return h.signal(sig) if h else False

    def kill(self, name: str, timeout: float = 10.0) -> None:
        """kill -9 and wait until the process is gone (a supervised server: that process; its supervisor
        restarts it)."""
        h = self.handles.get(name)
        victim = h.child() if isinstance(h, SupervisedHandle) else h
        if victim is not None:
            victim.kill()
            if not victim.wait_exit(timeout):
                raise ClusterError(f"{name} (pid {victim.pid}) survived SIGKILL")

    def pause(self, name: str) -> None:
        """SIGSTOP (returns once the process shows as stopped)."""
        h = self.handles.get(name)
        if h is None or not h.pause():
            raise ClusterError(f"{name} is not running")

    def resume(self, name: str) -> None:
        """SIGCONT (returns once the process runs again)."""
        h = self.handles.get(name)
        if h is None or not h.resume():
            raise ClusterError(f"{name} is not running")

    def stop_process(self, name: str, timeout: float = 10.0) -> str:
        """SIGTERM, SIGKILL after ``timeout``; returns "gone", "stopped" or "killed". A supervised server is
        stopped through its supervisor (a stop on purpose: not restarted)."""
        h = self.handles.get(name)
        return h.stop(timeout) if h else "gone"

    def stop_many(self, names: Iterable[str], timeout: float) -> dict[str, str]:
        """Stop several processes at once: SIGTERM to all, wait with one deadline, SIGKILL the rest."""
        todo = [n for n in names if self.active(n)]
        for n in todo:
            h = self.handles[n]
            if isinstance(h, SupervisedHandle):
                h.request_stop()  # the supervisor resumes a paused server itself
                continue
            if self.paused(n):
                self.signal(n, SIGCONT)
            self.signal(n, SIGTERM)
        deadline = time.monotonic() + timeout
        result = {}
        for n in todo:
            h = self.handles[n]
            if h.wait_exit(max(0.0, deadline - time.monotonic())):
                result[n] = "stopped"
            else:
                if isinstance(h, SupervisedHandle):
                    h.kill_all()
                else:
                    h.kill()
                    h.wait_exit(10.0)
                result[n] = "killed"
        return result

    def down(self, timeout: float = 15.0) -> dict[str, str]:
        """Graceful stop of the servers (all at once), then ZooKeeper; SIGKILL after ``timeout``."""
        servers = [n for n in self.names() if self.get(n).role != ZOOKEEPER]
        result = self.stop_many(servers, timeout)
        result.update(self.stop_many(self.names(ZOOKEEPER), timeout))
        if self.record_path().exists():
            self.save()
        return result

    def kill_all(self) -> None:
        """SIGKILL every process this object knows (used on failure and at exit); supervisors first."""
        for h in self.handles.values():
            if isinstance(h, SupervisedHandle):
                h.kill_all()
        for h in self.handles.values():
            if isinstance(h, ProcessHandle) and h.alive():
                h.resume()
                h.kill()
        for h in self.handles.values():
            if isinstance(h, ProcessHandle):
                h.wait_exit(5.0)

    def close(self, grace: float = 5.0) -> None:
        try:
            self.down(timeout=grace)
        finally:
            try:
                self.kill_all()
            finally:
                self.remove_netns()
                _LIVE.discard(self)

    def remove_netns(self) -> list[str]:
        """Delete this cluster's test hosts by name (after its processes are gone); returns what is left."""
        if self.net is None:
            return []
        left = self.net.teardown()
        if left:
            raise ClusterError(f"namespaces left behind: {', '.join(left)}")
        return left

    def detach(self) -> None:
        """Leave the processes running when this Python process exits (the CLI's ``up``, ``status``, ...)."""
        if self.net is not None and not self.net.detached:
            self.net.detach()
            self._save_net()
        _LIVE.discard(self)

    def record_path(self) -> Path:
        return self.directory / CLUSTER_FILE

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["DEFAULT_DIR", "LAUNCHER_ENV", "ClusterError", "LocalCluster"]
