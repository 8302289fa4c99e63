"""deploy/docker-compose.yml and deploy/Dockerfile, checked without a Docker engine.

``compose_problems`` reads the compose file the way Docker would (PyYAML, merge keys, paths relative to
deploy/) and lists everything that would break the cluster: a server command the CLI does not accept, a -D key
that is not an option of the role or has a bad value, a config file that does not exist, a healthcheck on the
wrong port, data outside a volume, duplicate ids. The real file must have no problems; mutated copies show
that each check catches its violation.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import io
import json
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml
from cryptography import x509

from fluss_py import config as cfg
from fluss_py.cli.main import build_parser
from fluss_py.cli.servers import load_server_config
from fluss_py.errors import ConfigError
from fluss_py.security.identity import read_properties

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
COMPOSE = DEPLOY / "docker-compose.yml"
SECURE_COMPOSE = DEPLOY / "docker-compose.secure.yml"
DOCKERFILE = DEPLOY / "Dockerfile"
ROLE_OF_COMMAND = {"coordinator": cfg.COORDINATOR, "tablet-server": cfg.TABLET}
ROLE_DEFAULT_HTTP_PORT = {cfg.COORDINATOR: 9124, cfg.TABLET: 9125}
ZOOKEEPER_IMAGE = "zookeeper:3.8"
ZOOKEEPER_MEMBERS = 3


def with_defaults(text: str) -> str:
    """``${VAR:-default}`` replaced by its default, as Compose does when VAR is unset."""
    return re.sub(r"\$\{[A-Z0-9_]+:-([^}]*)\}", r"\1", text)


def load_compose(path: Path = COMPOSE) -> dict[str, Any]:
    return yaml.safe_load(with_defaults(path.read_text()))


def _mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each short-syntax volume entry."""
    out = []
    for entry in service.get("volumes", []):
        source, target = str(entry).split(":")[:2]
        out.append((source, target))
    return out


def _is_named(source: str) -> bool:
    return not source.startswith((".", "/", "~"))


def _under(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _health_url(service: dict[str, Any]) -> str | None:
    test = service.get("healthcheck", {}).get("test")
    text = " ".join(test) if isinstance(test, list) else str(test or "")
    m = re.search(r"https?://[^\s'\"]+", text)
    return m.group(0) if m else None


def server_role(service: dict[str, Any]) -> str | None:
    """The role a service's command names (whether or not the rest of the command line is valid)."""
    command = service.get("command") or [None]
    first = shlex.split(command)[0] if isinstance(command, str) else command[0]
    return ROLE_OF_COMMAND.get(str(first))


def _server_problems(name: str, service: dict[str, Any], named_volumes: set[str]) -> tuple[list[str], dict[str, Any]]:
    """Problems of one fluss-py server service, and its effective settings (for the cross-service checks)."""
    problems: list[str] = []
    command = service.get("command") or []
    if isinstance(command, str):
        command = shlex.split(command)
    try:
        with contextlib.redirect_stderr(io.StringIO()):
            args = build_parser().parse_args([str(c) for c in command])
    except SystemExit:
        return [f"{name}: `fluss-py {' '.join(map(str, command))}` is not a valid command line"], {}
    role = ROLE_OF_COMMAND.get(args.command)
    if role is None:
        return [f"{name}: {args.command!r} is not a server command"], {}
    conf_paths: list[str] = []
    for config_file in args.config or ():
        source = next((s for s, t in _mounts(service) if t == config_file), None)
        if source is None or _is_named(source):
            problems.append(f"{name}: --config {config_file} is not bind-mounted from deploy/conf")
        else:
            conf_path = (DEPLOY / source).resolve()
            if not conf_path.is_file() or not _under(str(conf_path), str(DEPLOY / "conf")):
                problems.append(f"{name}: config file {source} does not exist under deploy/conf")
            else:
                conf_paths.append(str(conf_path))
    overrides = cfg.parse_overrides(args.overrides)
    for key in overrides:
        opt = cfg.OPTIONS.get(key)
        if opt is None or role not in opt.roles:
            problems.append(f"{name}: -D {key} is not a {role} option")
    try:
        config = load_server_config(role, conf_paths, args.overrides)
    except ConfigError as e:
        return [*problems, f"{name}: invalid configuration: {e}"], {}
    http_port = config[cfg.HTTP_PORT] or ROLE_DEFAULT_HTTP_PORT[role]
    if config[cfg.BIND_HOST] != "0.0.0.0":
        problems.append(f"{name}: bind.host is {config[cfg.BIND_HOST]!r}, other containers cannot reach it")
    if config[cfg.ADVERTISED_HOST] != name:
        problems.append(f"{name}: advertised.host is {config[cfg.ADVERTISED_HOST]!r}, not the service name")
    url = _health_url(service)
    parsed = urlparse(url) if url else None
    if parsed is None or parsed.path != "/health" or parsed.port != http_port:
        problems.append(f"{name}: healthcheck {url!r} does not GET /health on http.port {http_port}")
    for entry in service.get("ports", []):
        parts = str(entry).split(":")
        if len(parts) != 3 or parts[0] != "127.0.0.1":
            problems.append(f"{name}: port {entry} is not published on 127.0.0.1 only")
        elif int(parts[2]) != http_port:
            problems.append(f"{name}: published port {entry} is not http.port {http_port}")
    named_targets = [t for s, t in _mounts(service) if _is_named(s) and s in named_volumes]
    state_dirs = [config[cfg.LOG_DIR]] + ([config[cfg.DATA_DIR]] if role == cfg.TABLET else [])
    for directory in state_dirs:
        if not directory.startswith("/") or not any(_under(directory, t) for t in named_targets):
            problems.append(f"{name}: {directory} is not on a named volume")
    restart = str(service.get("restart", "no"))
    if not re.fullmatch(r"on-failure:[1-9][0-9]*", restart):
        problems.append(f'{name}: restart policy {restart!r} is not on-failure:N (deploy/README.md "Restart policy")')
    zookeepers = [n for n in service.get("depends_on", {}) if n.startswith("zookeeper")]
    conditions = {service["depends_on"][n].get("condition") for n in zookeepers}
    if len(zookeepers) != ZOOKEEPER_MEMBERS or conditions != {"service_healthy"}:
        problems.append(f"{name}: does not wait for a healthy zookeeper ensemble")
    settings = {
        "zookeeper": config[cfg.ZK_ADDRESS],
        "id": config[cfg.TABLET_SERVER_ID] if role == cfg.TABLET else config[cfg.COORDINATOR_ID],
        "volumes": {s for s, _ in _mounts(service) if _is_named(s)},
        "host_ports": [str(p).rsplit(":", 1)[0] for p in service.get("ports", [])],
    }
    return problems, settings


def compose_problems(compose: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    services: dict[str, Any] = compose.get("services", {})
    named_volumes = set(compose.get("volumes") or {})
    zookeepers = [n for n, s in services.items() if s.get("image") == ZOOKEEPER_IMAGE]
    if len(zookeepers) != ZOOKEEPER_MEMBERS:
        problems.append(f"expected {ZOOKEEPER_MEMBERS} {ZOOKEEPER_IMAGE} services (an ensemble), found {zookeepers}")
    zk_volumes: dict[str, str] = {}
    for zk in zookeepers:
        data = [s for s, t in _mounts(services[zk]) if t == "/data" and _is_named(s)]
        if not data:
            problems.append(f"{zk}: /data is not on a named volume")
        elif data[0] in zk_volumes:
            problems.append(f"{zk} and {zk_volumes[data[0]]} share volume {data[0]}")
        else:
            zk_volumes[data[0]] = zk
        env = services[zk].get("environment", {})
        servers = str(env.get("ZOO_SERVERS", "")).split()
        if sorted(x.split("=", 1)[1].split(":", 1)[0] for x in servers if "=" in x) != sorted(zookeepers):
            problems.append(f"{zk}: ZOO_SERVERS {servers} does not list every zookeeper service")
        if f"server.{env.get('ZOO_MY_ID')}={zk}:" not in " ".join(servers):
            problems.append(f"{zk}: ZOO_MY_ID {env.get('ZOO_MY_ID')} is not its own entry in ZOO_SERVERS")
        if "healthcheck" not in services[zk]:
            problems.append(f"{zk}: no healthcheck")
    settings: dict[str, dict[str, Any]] = {}
    for name, service in services.items():
        if name in zookeepers:
            continue
        found, s = _server_problems(name, service, named_volumes)
        problems += found
        if s:
            settings[name] = s
        build = service.get("build")
        if build and (DEPLOY / build["context"] / build.get("dockerfile", "Dockerfile")).resolve() != DOCKERFILE:
            problems.append(f"{name}: does not build deploy/Dockerfile")
    for role, want in ((cfg.COORDINATOR, 3), (cfg.TABLET, 3)):
        members = sorted(n for n, s in services.items() if n not in zookeepers and server_role(s) == role)
        if len(members) != want:
            problems.append(f"expected {want} {role} services, found {members}")
        ids = [settings[n]["id"] for n in members if n in settings]
        if len(set(ids)) != len(ids) or (role == cfg.COORDINATOR and min(ids, default=0) < 0):
            problems.append(f"{role} ids are not unique explicit ids: {ids}")
    for name, s in settings.items():
        hosts = {h.rsplit(":", 1)[0] for h in s["zookeeper"].split(",")}
        if hosts != set(zookeepers):
            problems.append(f"{name}: zookeeper.address {s['zookeeper']} does not name the zookeeper service")
    for key in ("volumes", "host_ports"):
        seen: dict[str, str] = {}
        for name, s in settings.items():
            for v in s[key]:
                if v in seen:
                    problems.append(f"{name} and {seen[v]} share {key[:-1].replace('_', ' ')} {v}")
                seen[v] = name
    return problems


def test_compose_file_has_no_problems() -> None:
    assert compose_problems(load_compose()) == []


def test_compose_services_are_three_zookeepers_three_coordinators_three_tablet_servers() -> None:
    services = load_compose()["services"]
    commands = sorted(str(s.get("command", [s.get("image")])[0]) for s in services.values())
    assert commands == ["coordinator"] * 3 + ["tablet-server"] * 3 + [ZOOKEEPER_IMAGE] * 3


def _mutated(service: str, edit) -> list[str]:
    compose = copy.deepcopy(load_compose())
    edit(compose["services"][service], compose)
    return compose_problems(compose)


def _set_override(key: str, value: str):
    def edit(service: dict[str, Any], compose: dict[str, Any]) -> None:
        cmd = service["command"]
        i = next(i for i, c in enumerate(cmd) if str(c).startswith(f"{key}="))
        cmd[i] = f"{key}={value}"

    return edit


@pytest.mark.parametrize(
    ("service", "edit", "expected"),
    [
        ("coordinator-2", lambda s, c: s["command"].__setitem__(0, "coordinater"), "not a valid command line"),
        ("coordinator-1", lambda s, c: s["command"].extend(["-D", "data.dir=/x"]), "not a coordinator option"),
        ("tablet-server-1", lambda s, c: s["command"].extend(["-D", "no.such.key=1"]), "not a tablet-server option"),
        ("tablet-server-1", _set_override("rpc.port", "70000"), "invalid configuration"),
        ("tablet-server-2", _set_override("tablet-server.id", "1"), "ids are not unique"),
        ("coordinator-3", _set_override("coordinator.id", "1"), "ids are not unique"),
        ("tablet-server-3", _set_override("http.port", "9999"), "does not GET /health on http.port 9999"),
        ("tablet-server-3", _set_override("data.dir", "/tmp/data"), "/tmp/data is not on a named volume"),
        ("coordinator-1", _set_override("zookeeper.address", "127.0.0.1:2181"), "does not name the zookeeper"),
        ("coordinator-1", _set_override("advertised.host", "127.0.0.1"), "not the service name"),
        ("tablet-server-1", _set_override("bind.host", "127.0.0.1"), "cannot reach it"),
        (
            "tablet-server-1",
            lambda s, c: s["volumes"].__setitem__(0, "./conf/missing.yaml:/etc/fluss/tablet-server.yaml:ro"),
            "does not exist under deploy/conf",
        ),
        ("tablet-server-2", lambda s, c: s["volumes"].__setitem__(1, "tablet-server-1:/var/lib/fluss"), "share"),
        ("coordinator-2", lambda s, c: s["ports"].__setitem__(0, "19242:9124"), "127.0.0.1 only"),
        ("coordinator-2", lambda s, c: s.pop("depends_on"), "healthy zookeeper"),
        ("coordinator-2", lambda s, c: s["depends_on"].pop("zookeeper-3"), "healthy zookeeper ensemble"),
        ("zookeeper-2", lambda s, c: s["environment"].__setitem__("ZOO_MY_ID", "3"), "not its own entry"),
        ("zookeeper-3", lambda s, c: s["volumes"].__setitem__(0, "zookeeper-1-data:/data"), "share volume"),
        ("zookeeper-1", lambda s, c: c["services"].pop("zookeeper-3"), "an ensemble"),
        ("tablet-server-3", lambda s, c: c["services"].pop("tablet-server-3"), "expected 3 tablet-server"),
        ("tablet-server-2", lambda s, c: s.__setitem__("restart", "unless-stopped"), "restart policy"),
        ("coordinator-1", lambda s, c: s.__setitem__("restart", "on-failure"), "restart policy"),
        ("coordinator-3", lambda s, c: s.pop("restart"), "is not on-failure:N"),
    ],
)
def test_each_check_catches_its_violation(service: str, edit, expected: str) -> None:
    problems = _mutated(service, edit)
    assert any(expected in p for p in problems), problems


def _dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def test_dockerfile_installs_host_built_wheels_on_python_311_slim_by_default_with_fluss_py_entrypoint() -> None:
    instructions = _dockerfile_instructions()
    assert instructions[0] == ("ARG", "BASE_IMAGE=python:3.11-slim")  # the public image unless told otherwise
    assert instructions[1] == ("FROM", "${BASE_IMAGE}")
    assert [json.loads(rest) for word, rest in instructions if word == "ENTRYPOINT"] == [["fluss-py"]]
    installs = [rest for word, rest in instructions if word == "RUN" and "pip install" in rest]
    assert len(installs) == 1 and "--no-index --find-links /tmp/wheels fluss-py" in installs[0]  # no network
    copies = [rest.split() for word, rest in instructions if word == "COPY"]
    assert copies == [["wheels/", "/tmp/wheels/"]]  # deploy/wheels, made by `make wheels`
    assert (DEPLOY / ".dockerignore").read_text().split("\n")[-3:] == ["*", "!wheels/", ""]
    assert "wheels:" in (ROOT / "Makefile").read_text() and "deploy/wheels/" in (ROOT / ".gitignore").read_text()
    scripts = __import__("tomllib").loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["fluss-py"] == "fluss_py.cli.main:main"


@pytest.mark.parametrize("compose_file", [COMPOSE, SECURE_COMPOSE], ids=lambda p: p.name)
def test_images_default_to_the_public_ones_and_can_be_swapped_by_variables(compose_file: Path) -> None:
    """The compose test's engine reaches no registry: it sets these two variables (deploy/README.md)."""
    raw = yaml.safe_load(compose_file.read_text())["services"]
    for name, service in raw.items():
        if name.startswith("zookeeper-"):
            assert service["image"] == "${FLUSS_PY_ZOOKEEPER_IMAGE:-zookeeper:3.8}", name
        elif "build" in service:
            assert service["build"] == {
                "context": ".",
                "args": {"BASE_IMAGE": "${FLUSS_PY_BASE_IMAGE:-python:3.11-slim}"},
            }
            assert service["image"] == "fluss-py:local", name


def test_readme_documents_up_and_the_kill_walkthrough() -> None:
    text = (DEPLOY / "README.md").read_text()
    for tool in ("docker-compose", "docker compose"):  # both spellings, the same arguments
        words = [*tool.split(), "-p", "fluss-py", "-f", "deploy/docker-compose.yml", "up", "-d", "--build"]
        assert re.search(r"\s+".join(map(re.escape, words)), text), tool
    for variable in ("FLUSS_PY_BASE_IMAGE", "FLUSS_PY_ZOOKEEPER_IMAGE", "FLUSS_PY_DOCKER_CACHE"):
        assert variable in text
    assert "kill" in text
    for name in load_compose()["services"]:
        if name.startswith(("coordinator-", "tablet-server-")):
            assert name in text


# ---------------------------------------------------------------- the secure variant (docs/security.md)
SECURITY_CONFIG = "/etc/fluss/secure/security.yaml"


def test_secure_compose_is_the_plain_cluster_plus_security(tmp_path: Path) -> None:
    plain = load_compose()["services"]
    secure = load_compose(SECURE_COMPOSE)["services"]
    assert set(secure) == set(plain) | {"security-init"}
    for name, service in plain.items():
        if service.get("image") == ZOOKEEPER_IMAGE:  # the ensemble's members are the same
            assert secure[name] == service
            continue
        command = list(secure[name]["command"])
        i = command.index(SECURITY_CONFIG)
        assert command[i - 1] == "--config"
        own = [
            f"security.tls.cert-file=/etc/fluss/secure/{name}.pem",
            f"security.tls.key-file=/etc/fluss/secure/{name}-key.pem",
        ]
        assert command[i + 1 : i + 5] == ["-D", own[0], "-D", own[1]], name  # a certificate of its own
        assert command[: i - 1] + command[i + 5 :] == service["command"], name  # the same server, plus security
        assert "./secure:/etc/fluss/secure:ro" in secure[name]["volumes"]
        assert set(service["volumes"]) <= set(secure[name]["volumes"])
        assert secure[name]["ports"] == service["ports"]
        assert "https://localhost:" in secure[name]["healthcheck"]["test"][-1]
        assert secure[name]["depends_on"]["security-init"]["condition"] == "service_completed_successfully"
        args = build_parser().parse_args([str(c) for c in command])
        assert args.config[-1] == SECURITY_CONFIG


def test_make_secure_writes_a_valid_server_security_config(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("make_secure", DEPLOY / "make-secure.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(tmp_path / "secure") == 0
    for role in (cfg.COORDINATOR, cfg.TABLET):
        config = load_server_config(role, [str(tmp_path / "secure" / "security.yaml")], [])
        assert config[cfg.TLS_ENABLED] and config[cfg.TLS_CLIENT_AUTH] and config[cfg.AUTHORIZER_ENABLED]
    for name in ("coordinator-1", "tablet-server-3"):
        assert oct((tmp_path / "secure" / f"{name}-key.pem").stat().st_mode)[-3:] == "600"
    cert = x509.load_pem_x509_certificate((tmp_path / "secure" / "tablet-server-3.pem").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.UniformResourceIdentifier) == ["fluss://tablet-server/3"]
    properties = read_properties(tmp_path / "secure" / "admin.properties")
    cfg.Config(cfg.CLIENT, properties)  # every key is a client key
    init = yaml.safe_load(SECURE_COMPOSE.read_text())["services"]["security-init"]["command"][0]
    for step in init.split("&&"):
        build_parser().parse_args(step.split()[1:])  # a valid fluss-py command line


@pytest.mark.parametrize("compose_file", sorted(DEPLOY.glob("docker-compose*.yml")), ids=lambda p: p.name)
def test_every_compose_file_validates_with_debians_docker_compose(compose_file: Path):
    """docker-compose 1.29 (Debian's) refuses Compose-spec-only keys such as a top-level ``name:``; the
    files must keep to what it and ``docker compose`` both accept. No engine is needed: ``config -q``."""
    tool = shutil.which("docker-compose")
    if tool is None:
        pytest.fail("docker-compose is missing: run `make install` (deploy/install-test-tools.sh installs it)")
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", "/tmp")}
    done = subprocess.run([tool, "-f", str(compose_file), "config", "-q"], capture_output=True, text=True,
                          timeout=60, env=env, cwd=DEPLOY)  # fmt: skip
    assert done.returncode == 0, done.stderr
