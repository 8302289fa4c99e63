"""Where each process of a local cluster lives and how it is started: names, directories, command lines.

Pure: no processes, no sockets. ``server_record`` plans one coordinator or tablet server::

    DIR/<role>-<id>/logs/<role log file>     coordinator-server.log | tablet-server.log
    DIR/<role>-<id>/stdout.log               stdout+stderr of the process (tracebacks land here)
    DIR/tablet-server-<id>/data/             data.dir of a tablet server

    <launcher> <role> [--config deploy/conf/<role>.yaml] -D zookeeper.address=... -D zookeeper.root=...
        -D bind.host=127.0.0.1 -D advertised.host=127.0.0.1 -D rpc.port=.. -D http.port=.. -D log.dir=..
        -D coordinator.id=<id> | -D tablet-server.id=<id> -D data.dir=..   [then the caller's overrides]
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER, ProcessRecord

CONF_DIR = Path(__file__).resolve().parents[2] / "deploy" / "conf"
CONF_FILES = {COORDINATOR: "coordinator-server.yaml", TABLET_SERVER: "tablet-server.yaml"}
LOG_FILES = {COORDINATOR: "coordinator-server.log", TABLET_SERVER: "tablet-server.log"}
ID_KEYS = {COORDINATOR: "coordinator.id", TABLET_SERVER: "tablet-server.id"}
DEFAULT_DIR = Path(".fluss-cluster")
LAUNCHER_ENV = "FLUSS_PY_SERVER_LAUNCHER"


def default_launcher() -> list[str]:
    """Command prefix of a server process: this interpreter running the ``fluss-py`` entry point.

    ``$FLUSS_PY_SERVER_LAUNCHER`` (a shell-quoted command) replaces it; the harness's own tests use it to
    run the CLI against stand-in servers.
    """
    custom = os.environ.get(LAUNCHER_ENV)
    return shlex.split(custom) if custom else [sys.executable, "-m", "fluss_py.cli.main"]


def server_record(
    directory: Path,
    role: str,
    server_id: int,
    *,
    zookeeper: str,
    zk_root: str,
    rpc_port: int,
    http_port: int,
    launcher: list[str],
    conf_dir: Path | None,
    overrides: Mapping[str, str],
    host: str = "127.0.0.1",
    exec_prefix: list[str] | None = None,
    secure_config: Path | None = None,
) -> ProcessRecord:
    """The cluster.json entry (and command line) of one server; ``overrides`` win over everything.

    ``host`` is the address it binds and advertises (a test host's namespace address); ``exec_prefix``
    runs it elsewhere (``ip netns exec <ns>``); ``secure_config``: a second ``--config`` file with the
    security settings (secrets stay off the command line); its ports then speak TLS.
    """
    if role not in ID_KEYS:
        raise ValueError(f"not a server role: {role!r}")
    name = f"{role}-{server_id}"
    home = directory / name
    data_dir = home / "data" if role == TABLET_SERVER else home
    settings = {
        "zookeeper.address": zookeeper,
        "zookeeper.root": zk_root,
        "bind.host": host,
        "advertised.host": host,
        "rpc.port": str(rpc_port),
        "http.port": str(http_port),
        "log.dir": str(home / "logs"),
        ID_KEYS[role]: str(server_id),
    }
    if role == TABLET_SERVER:
        settings["data.dir"] = str(data_dir)
    settings.update(overrides)
    argv = [*(exec_prefix or []), *launcher, role]
    conf = conf_dir / CONF_FILES[role] if conf_dir else None
    if conf is not None and conf.exists():
        argv += ["--config", str(conf)]
    if secure_config is not None:
        argv += ["--config", str(secure_config)]
    for key, value in settings.items():
        argv += ["-D", f"{key}={value}"]
    return ProcessRecord(
        name=name,
        role=role,
        id=server_id,
        rpc_address=f"{host}:{rpc_port}",
        http_address=f"{host}:{http_port}",
        log_file=str(home / "logs" / LOG_FILES[role]),
        stdout_file=str(home / "stdout.log"),
        data_dir=str(data_dir),
        argv=argv,
        tls=secure_config is not None,
    )
