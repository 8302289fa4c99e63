"""An in-memory ZooKeeper session for lifecycle unit tests: ephemeral owners, sequential names, and
connection losses injected before or after ZooKeeper applies a create (the reply lost). Unit tests only.

``lose`` holds one entry per next create: ``"before"`` (refused, nothing written) or ``"after"`` (written,
then the connection drops so the caller never learns the name). Either way the connection is SUSPENDED
until ``reconnect()``; the session itself lives on.
"""

from __future__ import annotations

from fluss_py.zk.values import NodeExistsError, NoNodeError, SessionLostError, SessionState, ZnodeStat


class SessionZk:
    def __init__(self, session_id: int = 0x2, first_sequence: int = 0) -> None:
        self._session_id = session_id
        self.session_state = SessionState.CONNECTED
        self.nodes: dict[str, tuple[bytes, int]] = {}  # path -> (data, ephemeral owner)
        self.lose: list[str] = []
        self._seq = first_sequence

    @property
    def connected(self) -> bool:
        return self.session_state is SessionState.CONNECTED

    @property
    def session_id(self) -> int:
        return self._session_id if self.connected else 0

    def reconnect(self, session_id: int | None = None) -> None:
        self._session_id = self._session_id if session_id is None else session_id
        self.session_state = SessionState.CONNECTED

    def _lost(self) -> SessionLostError:
        self.session_state = SessionState.SUSPENDED
        return SessionLostError("ZooKeeper session lost: ConnectionLoss")

    def _check(self) -> None:
        if not self.connected:
            raise SessionLostError("ZooKeeper session lost: ConnectionLoss")

    async def create(self, path: str, data: bytes = b"", *, ephemeral: bool = False, sequence: bool = False,
                     makepath: bool = False, private: bool = False) -> str:  # fmt: skip
        self._check()
        mode = self.lose.pop(0) if self.lose else None
        if mode == "before":
            raise self._lost()
        if sequence:
            path, self._seq = f"{path}{self._seq:010d}", self._seq + 1
        if path in self.nodes:
            raise NodeExistsError(path)
        self.nodes[path] = (data, self._session_id if ephemeral else 0)
        if mode == "after":
            raise self._lost()
        return path

    async def get(self, path: str, watch: object = None) -> tuple[bytes, ZnodeStat] | None:
        self._check()
        if path not in self.nodes:
            return None
        data, owner = self.nodes[path]
        return data, ZnodeStat(0, owner, 0, 0, 0)

    async def exists(self, path: str, watch: object = None) -> ZnodeStat | None:
        got = await self.get(path)
        return None if got is None else got[1]

    async def get_children(self, path: str, watch: object = None) -> list[str]:
        self._check()
        prefix = path.rstrip("/") + "/"
        return sorted(p[len(prefix) :] for p in self.nodes if p.startswith(prefix) and "/" not in p[len(prefix) :])

    async def delete(self, path: str, version: int = -1) -> None:
        self._check()
        if path not in self.nodes:
            raise NoNodeError(path)
        del self.nodes[path]

    def owned(self, parent: str) -> list[str]:
        """Children of ``parent`` our session owns (what ZooKeeper would show)."""
        prefix = parent.rstrip("/") + "/"
        return sorted(
            p[len(prefix) :] for p, (_, o) in self.nodes.items() if p.startswith(prefix) and o == self._session_id
        )
