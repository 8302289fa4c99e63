"""fluss_py/testing/docker_base.py without debootstrap: the mirror apt uses, the cache key, the cache place."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.testing import docker_base


def test_mirror_is_read_from_deb822_sources_skipping_security(tmp_path: Path) -> None:
    d = tmp_path / "sources.list.d"
    d.mkdir()
    (d / "a-security.sources").write_text("Types: deb\nURIs: http://mirror.test/debian-security\nSuites: x\n")
    (d / "debian.sources").write_text("Types: deb\n# comment\nURIs: http://mirror.test/debian/\nSuites: bookworm\n")
    assert docker_base.mirror((tmp_path / "sources.list", d)) == "http://mirror.test/debian"


def test_mirror_is_read_from_one_line_sources(tmp_path: Path) -> None:
    f = tmp_path / "sources.list"
    f.write_text("# deb http://old.test/debian bookworm main\ndeb [arch=amd64] http://one.test/debian bookworm main\n")
    assert docker_base.mirror((f,)) == "http://one.test/debian"


def test_no_mirror_is_an_error_not_a_guess(tmp_path: Path) -> None:
    with pytest.raises(docker_base.BaseImageError, match="no Debian mirror"):
        docker_base.mirror((tmp_path / "missing.list",))


def test_the_image_name_changes_with_the_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    name = docker_base.image_name()
    assert name == docker_base.image_name() and name.startswith("fluss-py-base:")
    monkeypatch.setattr(docker_base, "PACKAGES", (*docker_base.PACKAGES, "curl"))
    assert docker_base.image_name() != name


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FLUSS_PY_DOCKER_CACHE", str(tmp_path / "c"))
    assert docker_base.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("FLUSS_PY_DOCKER_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert docker_base.cache_dir() == tmp_path / "x" / "fluss-py" / "docker"
