"""The codecs the znodes of ``zk/paths.py`` share (compact JSON, JSON with a version, decimal integers, sequence
numbers) and the two registrations servers write (``CoordinatorRegistration``, ``TabletServerRegistration``).
The znodes themselves, each with its path and codec, are all declared in ``zk/paths.py``. Pure, no I/O.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

SEQUENCE_DIGITS = 10  # ZooKeeper appends a 10-digit zero-padded counter to sequential nodes


def dump_json(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode("utf-8")


def load_json(data: bytes) -> dict[str, Any]:
    value = json.loads(data.decode("utf-8"))
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def versioned_encode(obj: dict[str, Any]) -> bytes:
    """A JSON object with ``"version": 1`` added (the format of every free-form metadata node)."""
    return dump_json({"version": 1, **obj})


def versioned_decode(data: bytes) -> dict[str, Any]:
    d = load_json(data)
    d.pop("version", None)
    return d


def int_encode(value: int) -> bytes:
    return str(int(value)).encode("ascii")


def int_decode(data: bytes) -> int:
    return int(data.decode("ascii").strip() or "0")


def sequence_of(name: str) -> int:
    """The ZooKeeper sequence number at the end of a sequential node's name (``candidate_0000000007`` -> 7)."""
    return int(name[-SEQUENCE_DIGITS:])


# ---------------------------------------------------------------- coordinator
@dataclass(frozen=True, slots=True)
class CoordinatorRegistration:
    """What a running coordinator (Standby or Leader) registers under ``coordinator/servers``."""

    server_id: int
    host: str
    port: int
    http_port: int = 0


# ---------------------------------------------------------------- tablet servers
@dataclass(frozen=True, slots=True)
class TabletServerRegistration:
    """What a live tablet server registers under ``tabletservers/ids/<id>``."""

    host: str
    port: int
    http_port: int = 0
    rack: str = ""
    registered_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    # Random id of the registering process (one per process start): two registrations of one server id
    # with different incarnations are two lives of the server (docs/failure-detection.md).
    incarnation: str = ""
    # Secret of this process (docs/peer-trust.md): its follower fetches present it, the coordinator hands it
    # to the other servers. Unlike the incarnation it is shown nowhere (not in repr, heartbeats or /health).
    replica_token: str = field(default="", repr=False)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"
