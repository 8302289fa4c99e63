"""A real standalone ZooKeeper server (Debian's zookeeper 3.8) as a child process.

    zk = ZooKeeperProcess(tmp_path / "zk", tick_time=500)   # port: a free loopback port
    zk.start()                      # returns once `srvr` answers "Mode: standalone"
    zk.address                      # "127.0.0.1:<port>"
    zk.four_letter("wchc")          # text answer of a four-letter-word command
    zk.stop()                       # SIGTERM, then SIGKILL after a timeout

The JVM runs ``java -Xmx256m -XX:+UseSerialGC -cp zookeeper.jar[:slf4j-simple.jar]
org.apache.zookeeper.server.quorum.QuorumPeerMain <dir>/zoo.cfg`` in its own session; its output goes to
``<dir>/zookeeper.log``. ``zoo.cfg`` binds 127.0.0.1 only, disables the admin server (Jetty would bind
8080), whitelists the 4lw commands tests use (``wchc``/``wchs`` list watches) and sets ``tickTime``:
sessions may last 2..20 ticks, so tests use ``tick_time=500`` for 1-10 s sessions;
``max_session_timeout_ms`` raises the upper bound (e.g. 30000 for a test of a long production timeout).

Ensemble: given ``ensemble`` (every voting member, ``server.<sid>=host:quorumPort:electionPort``) and its
own ``sid``, the process is one member of a quorum: zoo.cfg lists all members and ``data/myid`` holds the
sid. ``host`` (default 127.0.0.1) is the client address, e.g. the member's namespace address.

Who may call: the thread that owns the object (tests, LocalCluster, the CLI).
"""

from __future__ import annotations

import shutil
import signal
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fluss_py.testing.ports import PortAllocator, default_allocator
from fluss_py.testing.procs import ProcessHandle, WaitTimeout, wait_until

ZOOKEEPER_JAR = Path("/usr/share/java/zookeeper.jar")
SLF4J_SIMPLE_JAR = Path("/usr/share/java/slf4j-simple.jar")
ZKCLI = Path("/usr/share/zookeeper/bin/zkCli.sh")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
FOUR_LETTER_WORDS = "ruok,srvr,stat,mntr,wchc,wchs,cons"


class ZooKeeperUnavailable(RuntimeError):
    """ZooKeeper cannot be started here (no jar, no java) or did not become ready."""


def zookeeper_installed() -> bool:
    return ZOOKEEPER_JAR.exists() and shutil.which("java") is not None


def four_letter(host: str, port: int, cmd: str, timeout: float = 5.0) -> str:
    """Send a four-letter-word command (``srvr``, ``wchc``, ...) and return the whole answer."""
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(cmd.encode("ascii"))
        chunks = []
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


@dataclass(frozen=True)
class EnsembleMember:
    """One voting server of a ZooKeeper ensemble: ``server.<sid>=<host>:<quorum_port>:<election_port>``."""

    sid: int
    host: str
    quorum_port: int
    election_port: int

    def line(self) -> str:
        return f"server.{self.sid}={self.host}:{self.quorum_port}:{self.election_port}"


def zoo_cfg(
    data_dir: Path,
    port: int,
    tick_time: int,
    max_session_timeout_ms: int | None = None,
    *,
    host: str = "127.0.0.1",
    ensemble: Sequence[EnsembleMember] = (),
) -> str:
    """Text of a zoo.cfg: standalone, or one member of ``ensemble`` (see the module docstring)."""
    extra = [f"maxSessionTimeout={max_session_timeout_ms}"] if max_session_timeout_ms else []
    if ensemble:
        # initLimit/syncLimit in ticks: a follower may take 10 ticks to sync, lag 5 before it is dropped
        extra += ["initLimit=10", "syncLimit=5", *(m.line() for m in ensemble)]
    return "\n".join(
        [
            *extra,
            f"tickTime={tick_time}",
            f"dataDir={data_dir}",
            f"clientPort={port}",
            f"clientPortAddress={host}",
            "admin.enableServer=false",
            f"4lw.commands.whitelist={FOUR_LETTER_WORDS}",
            "maxClientCnxns=0",
            "",
        ]
    )


class ZooKeeperProcess:
    """Owns one standalone ZooKeeper JVM: its directory (zoo.cfg, data/, zookeeper.log), port and PID."""

    def __init__(
        self,
        directory: Path | str,
        port: int | None = None,
        tick_time: int = 500,
        *,
        heap: str = "256m",
        ports: PortAllocator | None = None,
        die_with_parent: bool = False,
        max_session_timeout_ms: int | None = None,
        host: str = "127.0.0.1",
        ensemble: Sequence[EnsembleMember] = (),
        sid: int | None = None,
    ) -> None:
        self.directory = Path(directory).absolute()
        self.port = port if port is not None else (ports or default_allocator()).allocate()
        self._host = host
        self.ensemble = tuple(ensemble)
        self.sid = sid
        if self.ensemble and sid not in {m.sid for m in self.ensemble}:
            raise ValueError(f"sid {sid} is not a member of the ensemble {[m.sid for m in self.ensemble]}")
        self.tick_time = tick_time
        self.max_session_timeout_ms = max_session_timeout_ms
        self.heap = heap
        self.die_with_parent = die_with_parent
        self.handle: ProcessHandle | None = None

    # ---------------------------------------------------------------- addresses and paths
    @property
    def host(self) -> str:
        return self._host

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def config_file(self) -> Path:
        return self.directory / "zoo.cfg"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_file(self) -> Path:
        return self.directory / "zookeeper.log"

    @property
    def pid(self) -> int | None:
        return self.handle.pid if self.handle else None

    def command(self) -> list[str]:
        classpath = str(ZOOKEEPER_JAR)
        if SLF4J_SIMPLE_JAR.exists():
            classpath += f":{SLF4J_SIMPLE_JAR}"
        java = shutil.which("java") or "java"
        return [java, f"-Xmx{self.heap}", "-XX:+UseSerialGC", "-cp", classpath, MAIN_CLASS, str(self.config_file)]

    # ---------------------------------------------------------------- lifecycle
    def prepare(self) -> list[str]:
        """Create the directory and zoo.cfg; return the command line (used by ``start`` and LocalCluster)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = zoo_cfg(
            self.data_dir,
            self.port,
            self.tick_time,
            self.max_session_timeout_ms,
            host=self.host,
            ensemble=self.ensemble,
        )
        self.config_file.write_text(cfg)
        if self.ensemble:
            (self.data_dir / "myid").write_text(f"{self.sid}\n")
        return self.command()

    def start(self, timeout: float = 30.0) -> ZooKeeperProcess:
        """Write zoo.cfg, start the JVM and wait until ``srvr`` answers ``Mode:``."""
        if not ZOOKEEPER_JAR.exists():
            raise ZooKeeperUnavailable(f"{ZOOKEEPER_JAR} is missing: run `make install` (apt-get install zookeeper)")
        if shutil.which("java") is None:
            raise ZooKeeperUnavailable("no `java` on PATH: install a JRE (apt-get install zookeeper pulls one in)")
        if self.alive():
            return self
        self.handle = ProcessHandle.spawn(
            self.prepare(), log_file=self.log_file, cwd=self.directory, die_with_parent=self.die_with_parent
        )
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def wait_ready(self, timeout: float = 30.0) -> None:
        def ready() -> bool:
            if self.handle is not None and not self.handle.alive():
                raise ZooKeeperUnavailable(f"ZooKeeper exited early; see {self.log_file}:\n{self._log_tail()}")
            return self.is_ready()

        try:
            wait_until(ready, timeout, interval=0.05, message=f"ZooKeeper on {self.address}")
        except WaitTimeout as e:
            if isinstance(e.__cause__, ZooKeeperUnavailable):
                raise e.__cause__ from None
            raise ZooKeeperUnavailable(f"{e}; see {self.log_file}:\n{self._log_tail()}") from None

    def is_ready(self) -> bool:
        try:
            return "Mode:" in self.four_letter("srvr", timeout=1.0)
        except OSError:
            return False

    def four_letter(self, cmd: str, timeout: float = 5.0) -> str:
        return four_letter(self.host, self.port, cmd, timeout)

    def alive(self) -> bool:
        return self.handle is not None and self.handle.alive()

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout``. Data stays in ``directory``; ``start()`` again resumes it."""
        if self.handle is not None:
            self.handle.stop(timeout)

    def kill(self) -> None:
        if self.handle is not None:
            self.handle.kill()
            self.handle.wait_exit(10.0)

    def pause(self) -> None:
        if self.handle is not None:
            self.handle.signal(signal.SIGSTOP)

    def resume(self) -> None:
        if self.handle is not None:
            self.handle.signal(signal.SIGCONT)

    def _log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> ZooKeeperProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
