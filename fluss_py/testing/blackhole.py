"""A TCP proxy between a test's client and one server that can become a black hole: ``BlackHoleProxy``.

A host that powers off or is partitioned away sends no FIN or RST; its peers' sockets stay open and their
writes are accepted by the kernel. The proxy plays that without namespaces or privileges::

    proxy = await BlackHoleProxy.start(server_address)  # listens on 127.0.0.1, port 0
    client_talks_to(proxy.address)
    proxy.black_hole()     # every connection: both sockets stay open, nothing is forwarded, what arrives is
                           # read and discarded (so each side's writes succeed and its FIN or RST is seen)
    await asyncio.wait_for(conn.upstream_closed.wait(), deadline)   # the server gave up its side
    proxy.heal()           # the black-holed connections are closed (as a healed network resets connections
                           # that one end already forgot); new ones are forwarded again
    await proxy.close()

While forwarding, it reads the HTTP/2 frames of each connection (a plaintext gRPC connection is the client
preface, then frames with a 9-byte header: length 3, type 1, flags 1, stream id 4) and counts them per
direction, ``conn.frames[("up" | "down", name)]`` with names such as ``PING``, ``PING_ACK``, ``GOAWAY``; the
GOAWAYs' debug data is kept in ``conn.goaways``. So a test sees keepalive pings without a packet capture.
Connections accepted during a black hole get no upstream: the client's bytes are discarded until ``heal``.

Who may call: coroutines of the test's event loop (one loop: the proxy's tasks run on it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from dataclasses import dataclass, field

from fluss_py.config import split_host_port

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
FRAME_NAMES = {0: "DATA", 1: "HEADERS", 3: "RST_STREAM", 4: "SETTINGS", 6: "PING", 7: "GOAWAY", 8: "WINDOW_UPDATE"}
_CHUNK = 64 * 1024


@dataclass
class _FrameReader:
    """Splits one direction's bytes into HTTP/2 frames; ``up`` starts with the client preface."""

    skip_preface: bool
    buffer: bytearray = field(default_factory=bytearray)
    broken: str | None = None  # not HTTP/2 (e.g. TLS): why; no more frames are read

    def feed(self, data: bytes) -> list[tuple[str, bytes]]:
        if self.broken is not None:
            return []
        self.buffer += data
        if self.skip_preface:
            if len(self.buffer) < len(PREFACE):
                return []
            if not self.buffer.startswith(PREFACE):
                self.broken = f"no HTTP/2 client preface: {bytes(self.buffer[:24])!r}"
                return []
            del self.buffer[: len(PREFACE)]
            self.skip_preface = False
        frames: list[tuple[str, bytes]] = []
        while len(self.buffer) >= 9:
            length = int.from_bytes(self.buffer[0:3], "big")
            if len(self.buffer) < 9 + length:
                break
            kind, flags = self.buffer[3], self.buffer[4]
            name = FRAME_NAMES.get(kind, f"TYPE_{kind}")
            if kind == 6 and flags & 1:
                name = "PING_ACK"
            frames.append((name, bytes(self.buffer[9 : 9 + length])))
            del self.buffer[: 9 + length]
        return frames


class ProxiedConnection:
    """One client connection and its upstream one (None when accepted during a black hole); owned by the
    proxy. ``upstream_closed`` / ``downstream_closed`` are set when that side read EOF or was reset."""

    def __init__(
        self,
        client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
        upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None,
        black_holed: bool,
    ) -> None:
        self.client = client
        self.upstream = upstream
        self.black_holed = black_holed
        self.upstream_closed = asyncio.Event()
        self.downstream_closed = asyncio.Event()
        self.frames: Counter[tuple[str, str]] = Counter()
        self.goaways: list[bytes] = []  # each GOAWAY's payload: last stream id, error code, debug data
        self._readers = {"up": _FrameReader(skip_preface=True), "down": _FrameReader(skip_preface=False)}
        self.tasks: list[asyncio.Task[None]] = []

    def count(self, direction: str, data: bytes) -> None:
        for name, payload in self._readers[direction].feed(data):
            self.frames[(direction, name)] += 1
            if name == "GOAWAY":
                self.goaways.append(payload)

    async def pump(self, direction: str) -> None:
        """Copy one direction (``up``: client to server) until EOF; while black-holed, read and discard. An
        EOF while forwarding closes both sides (a FIN passes the proxy); while black-holed it is only recorded."""
        if direction == "up":
            source, sink, closed = self.client[0], self.upstream[1] if self.upstream else None, self.downstream_closed
        elif self.upstream is not None:
            source, sink, closed = self.upstream[0], self.client[1], self.upstream_closed
        else:
            raise ValueError("a connection without upstream has no down direction")
        while True:
            try:
                data = await source.read(_CHUNK)
            except (ConnectionError, OSError):  # a reset: this side is gone, as with EOF
                data = b""
            if not data:
                closed.set()
                if not self.black_holed:
                    self.close()
                return
            if self.black_holed or sink is None:
                continue
            self.count(direction, data)
            sink.write(data)
            try:
                await sink.drain()
            except (ConnectionError, OSError):  # the other side is gone: its own pump records it
                self.close()
                return

    def close(self) -> None:
        """Close both sockets (a reset for a peer still writing)."""
        for _, writer in (self.client, self.upstream) if self.upstream else (self.client,):
            writer.close()


class BlackHoleProxy:
    """Listens on 127.0.0.1 (port 0) and forwards each connection to ``upstream`` until ``black_hole``; owns
    its listening socket, its connections and their tasks until ``close``."""

    def __init__(self, upstream: str) -> None:
        self.upstream = split_host_port(upstream)
        self.connections: list[ProxiedConnection] = []
        self.black_holed = False
        self._server: asyncio.Server | None = None
        self.address = ""

    @classmethod
    async def start(cls, upstream: str) -> BlackHoleProxy:
        proxy = cls(upstream)
        proxy._server = await asyncio.start_server(proxy._accept, "127.0.0.1", 0)
        port = proxy._server.sockets[0].getsockname()[1]
        proxy.address = f"127.0.0.1:{port}"
        return proxy

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream = None if self.black_holed else await asyncio.open_connection(*self.upstream)
        conn = ProxiedConnection((reader, writer), upstream, self.black_holed)
        self.connections.append(conn)
        conn.tasks.append(asyncio.create_task(conn.pump("up")))
        if upstream is not None:
            conn.tasks.append(asyncio.create_task(conn.pump("down")))

    def black_hole(self) -> None:
        """From now on nothing passes, either way, on any connection; no socket is closed."""
        self.black_holed = True
        for conn in self.connections:
            conn.black_holed = True

    def heal(self) -> None:
        """Close every black-holed connection and forward new connections again."""
        self.black_holed = False
        for conn in self.connections:
            if conn.black_holed:
                conn.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for conn in self.connections:
            conn.close()
            for task in conn.tasks:
                task.cancel()
            for task in conn.tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._server is not None:
            await self._server.wait_closed()
