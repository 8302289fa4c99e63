"""Free loopback ports for local clusters and tests, from one allocator.

Ports are chosen *below* the kernel's ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``), so
an outgoing connection of some client can never grab a port we handed out before its server binds it.
Each candidate is checked free by binding 127.0.0.1:<port>; a port handed out once is never handed out
again by the same process (even after the server using it stopped), so a restarted server may keep its
port while a new one never steals it.

Who may call: any thread (a lock guards the allocator). ``free_port()`` uses the process-wide allocator.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

_EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOWEST = 20000


def _ephemeral_low(default: int = 32768) -> int:
    try:
        return int(_EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return default


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on or is bound to ``host:port`` (checked by binding it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


class PortAllocator:
    """Hands out distinct free TCP ports on 127.0.0.1 from ``[low, high)``.

    Owns the set of ports it gave out. Thread-safe. The start point is random so two processes using
    their own allocators at the same time rarely probe the same ports.
    """

    def __init__(self, low: int | None = None, high: int | None = None, seed: int | None = None) -> None:
        self.high = high if high is not None else _ephemeral_low()
        self.low = low if low is not None else min(_LOWEST, self.high - 1000)
        if not 0 < self.low < self.high <= 65536:
            raise ValueError(f"bad port range [{self.low}, {self.high})")
        self._given: set[int] = set()
        self._lock = threading.Lock()
        self._next = random.Random(seed).randrange(self.low, self.high)

    def allocate(self) -> int:
        """One free port never handed out before by this allocator; RuntimeError when the range is used up."""
        with self._lock:
            span = self.high - self.low
            for _ in range(span):
                port = self._next
                self._next = self.low + (self._next + 1 - self.low) % span
                if port in self._given:
                    continue
                if port_is_free(port):
                    self._given.add(port)
                    return port
            raise RuntimeError(f"no free port left in [{self.low}, {self.high})")

    def allocate_many(self, n: int) -> list[int]:
        return [self.allocate() for _ in range(n)]

    def reserve(self, port: int) -> None:
        """Mark ``port`` as handed out (e.g. a port read back from cluster.json) so it is never reused."""
        with self._lock:
            self._given.add(port)

    @property
    def given(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._given)


_DEFAULT = PortAllocator()


def default_allocator() -> PortAllocator:
    """The process-wide allocator used by ZooKeeperProcess, LocalCluster and the CLI."""
    return _DEFAULT


def free_port() -> int:
    """A free loopback port from the process-wide allocator."""
    return _DEFAULT.allocate()
