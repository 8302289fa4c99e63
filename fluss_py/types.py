"""Value types shared by servers and clients: small, frozen, hashable, free of I/O."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import IntEnum
from typing import NamedTuple

from fluss_py.errors import InvalidDatabaseNameError, InvalidTableNameError

NO_LEADER = -1
"""Leader id of a bucket that has no live leader."""

# matched with fullmatch: a pattern's "$" also matches before a trailing "\n", and "db\n" is no znode name
_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,200}")
PARTITION_SEPARATOR = "$"
_PARTITION_RE = re.compile(r"([A-Za-z0-9_-]{1,200})\$([A-Za-z0-9_-]{1,64})")


def split_partition(table: str) -> tuple[str, str | None]:
    """``orders$20261201`` -> ``("orders", "20261201")``; a plain table name -> ``(name, None)``."""
    m = _PARTITION_RE.fullmatch(table) if isinstance(table, str) else None
    return (m.group(1), m.group(2)) if m else (table, None)


def validate_name(name: str, *, what: str = "table") -> str:
    """Database and table names: 1-200 of ``[A-Za-z0-9_-]``; a table name may also name one partition of a
    partitioned table, ``<table>$<partition>`` (docs/partitioning.md). Raise INVALID_*_NAME otherwise."""
    if what == "table" and isinstance(name, str) and _PARTITION_RE.fullmatch(name):
        return name
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name):
        error = InvalidDatabaseNameError if what == "database" else InvalidTableNameError
        raise error(f"{what} name {name!r} must be 1-200 characters of letters, digits, '_' or '-'")
    return name


def znode_name_problem(name: str) -> str | None:
    """Why ZooKeeper would refuse ``name`` as one path component, or None when it can store it.

    ZooKeeper's ``PathUtils.validatePath`` checks a path's UTF-16 code units: no NUL, none of U+0001-U+001F,
    U+007F-U+009F, U+D800-U+F8FF (surrogates, so every character above U+FFFF, e.g. an emoji; and the
    private-use area) or U+FFF0-U+FFFF, no empty component and no "." or ".." component. kazoo also drops
    empty components before sending ("g/" is "g") and raises on "." and "..", so a name holding "/" would
    name another node. Client-supplied names that become znode names (consumer groups) pass here first.
    """
    if not name:
        return "empty"
    if name in (".", ".."):
        return f"{name!r} is a relative path component"
    for i, ch in enumerate(name):
        c = ord(ch)
        if ch == "/":
            return f"'/' at {i}"
        if c <= 0x1F or 0x7F <= c <= 0x9F or 0xD800 <= c <= 0xF8FF or c >= 0xFFF0:
            return f"character U+{c:04X} at {i} (ZooKeeper refuses it in a path)"
    return None


@dataclass(frozen=True, slots=True, order=True)
class TablePath:
    """``database.table``."""

    database: str
    table: str

    @classmethod
    def parse(cls, text: str, *, default_database: str = "fluss") -> TablePath:
        """``db.table`` or just ``table`` (in ``default_database``); names are validated."""
        database, _, table = text.rpartition(".")
        path = cls(database or default_database, table)
        path.validate()
        return path

    def validate(self) -> None:
        validate_name(self.database, what="database")
        validate_name(self.table, what="table")

    def __str__(self) -> str:
        return f"{self.database}.{self.table}"


class TableBucket(NamedTuple):
    """One bucket of one table, the unit of replication.

    A named tuple, not a frozen dataclass: it is the key of most per-bucket dicts and sets on every server, and
    a tuple hashes and compares in C where a dataclass runs a generated Python method that builds a tuple per
    call (at 20,000 buckets a dict lookup is ~5x and a sort ~6x faster). Like any tuple it equals the plain
    ``(table_id, bucket)``; nothing mixes the two as keys."""

    table_id: int
    bucket: int

    def __str__(self) -> str:
        return f"{self.table_id}-{self.bucket}"


@dataclass(frozen=True, slots=True)
class ServerNode:
    """A server's RPC address (and rack, for placement)."""

    id: int
    host: str
    port: int
    rack: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """The coordinator's decision for one bucket, stored in ZooKeeper and sent to tablet servers.

    ``leader_epoch`` grows with every leader change; ``bucket_epoch`` with every change of this record
    (leader or ISR), so a stale AdjustIsr can be refused.
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    coordinator_epoch: int
    bucket_epoch: int

    def with_isr(self, isr: tuple[int, ...], coordinator_epoch: int) -> LeaderAndIsr:
        return LeaderAndIsr(self.leader, self.leader_epoch, tuple(isr), coordinator_epoch, self.bucket_epoch + 1)

    def with_leader(self, leader: int, isr: tuple[int, ...], coordinator_epoch: int) -> LeaderAndIsr:
        return LeaderAndIsr(leader, self.leader_epoch + 1, tuple(isr), coordinator_epoch, self.bucket_epoch + 1)


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """A leader epoch and the first offset written in it (one line of ``leader-epoch-checkpoint``)."""

    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class CoordinatorLeaderInfo:
    """The content of ``/fluss/coordinator/leader``."""

    server_id: int
    epoch: int
    host: str
    port: int
    http_port: int = 0
    extra: dict[str, str] = field(default_factory=dict, compare=False, hash=False)
    token: str = field(default="", repr=False, compare=False)  # the term's secret (docs/peer-trust.md)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class OffsetSpec(IntEnum):
    """Which offset ListOffsets answers; the numbers are the wire enum of tablet.proto (``OffsetSpec``), so
    a value converts with ``OffsetSpec(pb.spec)`` and back with ``int``. Shared by the client's
    ``list_offsets`` and the leader's read path."""

    EARLIEST = 0
    LATEST = 1
    HIGH_WATERMARK = 2
    TIMESTAMP = 3
