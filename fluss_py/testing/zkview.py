"""A test's own read-only view of ZooKeeper (raw kazoo, independent of fluss_py.zk), and ``wchc`` parsing.

Acceptance tests check the server's state against the *documented* znode layout (docs/design.md) with their
own client, so a bug in fluss_py.zk cannot hide itself. The view never sets watches (that would show up
in ``wchc``). ``parse_wchc`` is pure.

Who may call: test code, one thread per ZkView.
"""

from __future__ import annotations

import json
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError


def parse_wchc(text: str) -> dict[int, set[str]]:
    """``wchc`` answer -> {session id: watched paths}. Only data watches (exists/get) are listed by ZooKeeper.

    Format: a line ``0x<session>`` followed by tab-indented paths, sessions separated by blank lines.
    """
    result: dict[int, set[str]] = {}
    current: int | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("0x"):
            current = int(line.strip(), 16)
            result.setdefault(current, set())
        elif line[0].isspace() and current is not None:
            result[current].add(line.strip())
    return result


class ZkView:
    """Owns one kazoo session used only to read: JSON nodes, children, ephemeral owners."""

    def __init__(self, address: str, timeout: float = 10.0) -> None:
        self.client = KazooClient(hosts=address, timeout=timeout)
        self.client.start(timeout=timeout)

    def close(self) -> None:
        self.client.stop()
        self.client.close()

    def __enter__(self) -> ZkView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def exists(self, path: str) -> bool:
        return self.client.exists(path) is not None

    def get_bytes(self, path: str) -> bytes | None:
        try:
            return self.client.get(path)[0]
        except NoNodeError:
            return None

    def get_json(self, path: str) -> Any:
        data = self.get_bytes(path)
        return None if data is None else json.loads(data)

    def get_int(self, path: str) -> int | None:
        data = self.get_bytes(path)
        return None if data is None else int(data.decode().strip())

    def children(self, path: str) -> list[str]:
        try:
            return sorted(self.client.get_children(path))
        except NoNodeError:
            return []

    def ephemeral_owner(self, path: str) -> int | None:
        stat = self.client.exists(path)
        return stat.ephemeralOwner if stat is not None and stat.ephemeralOwner else None

    def mtime_ms(self, path: str) -> int | None:
        stat = self.client.exists(path)
        return stat.mtime if stat is not None else None

    def registered_coordinators(self, root: str) -> set[int]:
        """Server ids of the ``coordinator/servers`` registrations (each lives as long as its session)."""
        parent = f"{root}/coordinator/servers"
        return {int((self.get_json(f"{parent}/{c}") or {}).get("server_id", -1)) for c in self.children(parent)}
