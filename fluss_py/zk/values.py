"""What the ZooKeeper facade (``zk/client.py``) speaks, free of kazoo: the ``ZkError`` tree, session states and
events, ``ZnodeStat``, ``WatchEvent``, the ``EpochFence`` of fenced writes and the ops of a transaction
(``CreateOp``, ``SetOp``, ``DeleteOp``, ``CheckOp``). Plain values; anyone may use them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from fluss_py.errors import ErrorCode, FlussError


# ---------------------------------------------------------------- errors
class ZkError(FlussError):
    """A ZooKeeper operation failed."""

    code = ErrorCode.UNKNOWN_SERVER_ERROR


class NodeExistsError(ZkError):
    """The node to create exists already."""


class NoNodeError(ZkError):
    """The node (or a parent of the node to create) does not exist."""


class BadVersionError(ZkError):
    """A version-conditional set/delete/check saw another version."""


class NotEmptyError(ZkError):
    """The node to delete has children."""


class NotAuthorizedError(ZkError):
    """The node's ACL does not let this session do that (no or wrong ZooKeeper credentials)."""


class SessionLostError(ZkError):
    """The connection dropped or the session expired before the answer arrived."""

    code = ErrorCode.NETWORK_EXCEPTION


class ZkUnavailableError(ZkError):
    """No ZooKeeper server answered within ``zookeeper.connection-timeout``."""

    code = ErrorCode.NETWORK_EXCEPTION


class EpochFencedError(ZkError):
    """A fenced transaction failed its epoch check: another coordinator leader has taken over."""

    code = ErrorCode.INVALID_COORDINATOR_EPOCH


# ---------------------------------------------------------------- values
class SessionState(enum.Enum):
    CONNECTED = "CONNECTED"
    SUSPENDED = "SUSPENDED"
    LOST = "LOST"


@dataclass(frozen=True, slots=True)
class SessionEvent:
    """A change of the ZooKeeper session as seen on the loop."""

    state: SessionState
    session_id: int  # 0 when not connected
    new_session: bool = False  # CONNECTED only: a different session than before (ephemerals gone)


@dataclass(frozen=True, slots=True)
class ZnodeStat:
    version: int
    ephemeral_owner: int  # session id owning an ephemeral node, 0 for persistent nodes
    ctime_ms: int
    mtime_ms: int
    num_children: int


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A one-shot watch fired: ``type`` is CREATED, DELETED, CHANGED, CHILD or NONE (connection change)."""

    type: str
    path: str


@dataclass(frozen=True, slots=True)
class EpochFence:
    """The coordinator epoch a leader won and the epoch node's version after its bump (the fencing token)."""

    epoch: int
    zk_version: int


@dataclass(frozen=True, slots=True)
class CreateOp:
    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False
    private: bool = False  # readable by the servers only (nodes holding tokens), with credentials


@dataclass(frozen=True, slots=True)
class SetOp:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class CheckOp:
    path: str
    version: int


Op = CreateOp | SetOp | DeleteOp | CheckOp
