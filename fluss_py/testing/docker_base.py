"""A Docker base image made from Debian packages, for engines that cannot reach an image registry.

    tar = base_tarball()                           # debootstrap once, then the cached tarball
    engine.docker("import", ...)                   # see import_base(): the image is named by the inputs' hash

``debootstrap --variant=minbase bookworm`` with Python 3 (and its venv module), a Java runtime and Debian's
ZooKeeper builds a root filesystem from the same Debian mirror apt uses (read from /etc/apt/sources.list*);
the apt caches are dropped and the rest is packed into ``<cache>/base-<key>.tar``, where ``<key>`` hashes
the inputs (suite, packages, this recipe's version). The cache directory is ``$FLUSS_PY_DOCKER_CACHE``, else
``$XDG_CACHE_HOME/fluss-py/docker``, else ``~/.cache/fluss-py/docker``; ``rm -rf`` it to start cold. Two runs
at once build it once: the second waits on ``<cache>/.lock``.

deploy/Dockerfile (``BASE_IMAGE``) and deploy/zookeeper/Dockerfile build on it; docs in deploy/README.md.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "default-jre-headless", "zookeeper")
RECIPE = 1  # bump when the steps below change what the tarball holds
SOURCES = (Path("/etc/apt/sources.list"), Path("/etc/apt/sources.list.d"))
DEBOOTSTRAP_TIMEOUT = 900


class BaseImageError(RuntimeError):
    """debootstrap or packing failed (its output tail is included)."""


def cache_dir() -> Path:
    if os.environ.get("FLUSS_PY_DOCKER_CACHE"):
        return Path(os.environ["FLUSS_PY_DOCKER_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "fluss-py" / "docker"


def base_key() -> str:
    text = json.dumps({"suite": SUITE, "packages": sorted(PACKAGES), "recipe": RECIPE}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def image_name() -> str:
    """The base image's name in an engine: ``fluss-py-base:<key>`` (a new key after any input changed)."""
    return f"fluss-py-base:{base_key()}"


def mirror(sources: tuple[Path, ...] = SOURCES) -> str:
    """The first Debian mirror of apt's sources (one-line ``deb URL suite`` or deb822 ``URIs:``): the one
    mirror this machine's apt reaches, so debootstrap uses it too."""
    files: list[Path] = []
    for s in sources:
        if s.is_dir():
            files += sorted(p for p in s.iterdir() if p.suffix in (".list", ".sources"))
        elif s.is_file():
            files.append(s)
    for f in files:
        for line in f.read_text(errors="replace").splitlines():
            m = re.match(r"\s*(?:deb\s+(?:\[[^]]*\]\s+)?|URIs:\s*)(\S+)", line)
            if m and "security" not in m.group(1):
                return m.group(1).rstrip("/")
    raise BaseImageError(f"no Debian mirror in {', '.join(map(str, sources))}: debootstrap needs one")


def base_tarball(cache: Path | None = None) -> Path:
    """The cached root-filesystem tarball, built first when missing (about a minute, needs root)."""
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / f"base-{base_key()}.tar"
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if tarball.exists():
            return tarball
        work = cache / f"build-{os.getpid()}"
        remove_tree(work)
        root = work / "root"
        try:
            argv = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(root), mirror()]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=DEBOOTSTRAP_TIMEOUT)
            if done.returncode != 0:
                tail = "\n".join((done.stdout + done.stderr).splitlines()[-15:])
                raise BaseImageError(f"`{' '.join(argv)}` failed ({done.returncode}):\n{tail}")
            for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
                for p in (root / junk).glob("*"):
                    if p.is_file():
                        p.unlink()
            partial = work / "base.tar"
            done = subprocess.run(["tar", "-C", str(root), "--numeric-owner", "-cf", str(partial), "."],
                                  capture_output=True, text=True, timeout=300)  # fmt: skip
            if done.returncode != 0:
                raise BaseImageError(f"packing {root} failed: {done.stderr.strip()}")
            partial.rename(tarball)
        finally:
            remove_tree(work)
    return tarball


def mounts_under(path: Path) -> list[str]:
    """Mount points at or below ``path`` (deepest first), from /proc/self/mountinfo."""
    top = str(path.resolve()).rstrip("/")
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == top or point.startswith(top + "/"):
            found.append(point)
    return sorted(found, key=len, reverse=True)


def remove_tree(path: Path) -> list[str]:
    """Unmount what is mounted below ``path`` (a failed debootstrap's /proc, an engine's overlays), then delete
    it; a tree that still has a mount is left alone (never delete through a mount). Returns what is left."""
    for point in mounts_under(path):
        subprocess.run(["umount", "-l", point], capture_output=True, timeout=30)
    left = mounts_under(path)
    if not left:
        shutil.rmtree(path, ignore_errors=True)
    return left + ([str(path)] if path.exists() else [])


if __name__ == "__main__":  # `python -m fluss_py.testing.docker_base`: build or find the tarball, print its path
    print(base_tarball())
