"""asyncio facade over one kazoo session: the only place in fluss_py that touches kazoo objects.

kazoo runs its own threads (connection, callbacks). Every result and every callback is hopped back onto
the owning asyncio loop with ``loop.call_soon_threadsafe``; nothing of ours ever runs on a kazoo thread
except the tiny hop functions. kazoo exceptions are translated into the ``ZkError`` tree (``zk/values.py``), and kazoo
stats into ``ZnodeStat``, so callers never import kazoo.

Session events (``add_session_listener``) are delivered on the loop as ``SessionEvent``::

    CONNECTED  (new_session=True after a LOST or at start: every ephemeral node and watch is gone)
    SUSPENDED  connection lost; the session may still be alive; watches were reset by kazoo
    LOST       the session expired (or was closed): its ephemeral nodes are gone

Watches: ``watch_children``/``watch_data`` keep a watch armed on a path and call back on the loop with
the fresh children/data after every change; they re-arm themselves after a reconnect (kazoo drops
watches on every disconnect). One-shot watches (``exists(path, watch=fn)``) call ``fn(WatchEvent)``.

Fenced writes: ``commit(ops, fence=EpochFence)`` sends one ZooKeeper transaction whose first op is
``check(<epoch node>, fence.zk_version)``: if another coordinator has bumped the epoch since, nothing
is written and ``EpochFencedError`` is raised.

Credentials (``auth=(user, password)``, docs/security.md): the session authenticates with ZooKeeper's
digest scheme and every node it creates gets the ACL "this user may do anything, anyone may read"
(``private=True``: nobody else may even read, for users' keys); a write by any other session is refused
with ``NotAuthorizedError``.

Who may call: coroutines on the loop that called ``start()``; listeners are called on that loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.states import EventType
from kazoo.security import OPEN_ACL_UNSAFE, READ_ACL_UNSAFE, make_digest_acl

from fluss_py.zk.values import (
    BadVersionError,
    CreateOp,
    DeleteOp,
    EpochFence,
    EpochFencedError,
    NodeExistsError,
    NoNodeError,
    NotAuthorizedError,
    NotEmptyError,
    Op,
    SessionEvent,
    SessionLostError,
    SessionState,
    SetOp,
    WatchEvent,
    ZkError,
    ZkUnavailableError,
    ZnodeStat,
)

log = logging.getLogger(__name__)
T = TypeVar("T")


def _translate(exc: BaseException) -> BaseException:
    if isinstance(exc, ZkError):
        return exc
    if isinstance(exc, kz.NodeExistsError):
        return NodeExistsError(f"node exists: {exc}")
    if isinstance(exc, kz.NoNodeError):
        return NoNodeError(f"no node: {exc}")
    if isinstance(exc, kz.BadVersionError):
        return BadVersionError(f"bad version: {exc}")
    if isinstance(exc, kz.NotEmptyError):
        return NotEmptyError(f"not empty: {exc}")
    if isinstance(exc, kz.NoAuthError):
        return NotAuthorizedError(f"ZooKeeper refused: not authorized ({exc})")
    if isinstance(exc, kz.ConnectionLoss | kz.SessionExpiredError | kz.ConnectionClosedError):
        return SessionLostError(f"ZooKeeper session lost: {type(exc).__name__}")
    if isinstance(exc, kz.ZookeeperError):
        return ZkError(f"ZooKeeper error {type(exc).__name__}: {exc}")
    return exc


def multi_outcome(ops: Sequence[Op], results: Sequence[Any], fence: EpochFence | None) -> list[Any]:
    """What ZooKeeper's answer to a multi means (pure): ``ops``' results, or the error to raise.

    ``results`` holds one entry per op sent, the fence's check of the epoch node first when ``fence``. When
    op *k* fails, ZooKeeper answers RolledBackError for every op before *k* (the check included), the op's
    own error for *k* and RuntimeInconsistency after it. So the transaction is fenced only when the check's
    *own* result is a failure (BadVersion: another leader bumped the epoch; NoNode: the epoch node is
    gone); when another op failed, the check reads RolledBackError and that op's error is raised
    (NodeExistsError, BadVersionError, ... naming the op), which its caller may mean to handle. Taking every
    exception of the check for fencing made a NodeExists of a fenced create look like a lost leadership,
    and the leader resigned on one bad request.
    """
    results = list(results)
    if fence is not None:
        check, results = results[0], results[1:]
        if isinstance(check, kz.BadVersionError | kz.NoNodeError):
            raise EpochFencedError(
                f"coordinator epoch {fence.epoch} (version {fence.zk_version}) is fenced: another leader took over"
            )
        if isinstance(check, Exception) and not isinstance(check, kz.RolledBackError):
            raise _translate(check)
    for op, r in zip(ops, results, strict=True):
        if isinstance(r, Exception) and not isinstance(r, kz.RolledBackError):
            err = _translate(r)
            if isinstance(err, ZkError):
                raise type(err)(f"{err.message} ({type(op).__name__} {op.path})")
            raise err
    if any(isinstance(r, Exception) for r in results):  # all rolled back, none failed: not ZooKeeper's answer
        raise ZkError(f"transaction of {len(ops)} op(s) rolled back without a failing op")
    return [_stat(r) if hasattr(r, "mzxid") else r for r in results]


async def retry_session_lost(op: Callable[[], Awaitable[T]], timeout: float, what: str, interval: float = 0.2) -> T:
    """``await op()``, again after each ``SessionLostError`` until ``timeout`` seconds have passed (then raise).

    A ZooKeeper member that dies or is cut off mid-request fails the request with ConnectionLoss while kazoo
    moves the session to another member by itself; startup steps must wait for that instead of ending the
    process. Only for operations that are safe to repeat: idempotent ones, or ones that look at their own
    earlier effect first (an ephemeral create answered by "exists, owned by this session").
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await op()
        except SessionLostError as e:
            if time.monotonic() >= deadline:
                raise
            log.warning("%s: %s; retrying once the session is reconnected", what, e)
            await asyncio.sleep(interval)


def _stat(s: Any) -> ZnodeStat:
    return ZnodeStat(s.version, s.ephemeralOwner, s.ctime, s.mtime, s.numChildren)


_EVENT_NAMES = {
    EventType.CREATED: "CREATED",
    EventType.DELETED: "DELETED",
    EventType.CHANGED: "CHANGED",
    EventType.CHILD: "CHILD",
}


# ---------------------------------------------------------------- client
class ZkClient:
    """One ZooKeeper session for one process. Owns the KazooClient, its threads and the active watchers."""

    def __init__(
        self,
        hosts: str,
        root: str,
        *,
        session_timeout: float,
        connection_timeout: float,
        epoch_path: str | None = None,
        auth: tuple[str, str] | None = None,
    ) -> None:
        self.hosts = hosts
        self.root = root.rstrip("/") or "/fluss"
        self.session_timeout = session_timeout
        self.connection_timeout = connection_timeout
        self.epoch_path = epoch_path or f"{self.root}/coordinator/epoch"
        self._private_acl: list[Any] | None = None
        default_acl = None
        auth_data = None
        if auth is not None:
            user, password = auth
            self._private_acl = [make_digest_acl(user, password, all=True)]
            default_acl = self._private_acl + list(READ_ACL_UNSAFE)
            auth_data = [("digest", f"{user}:{password}")]
        self._kazoo = KazooClient(
            hosts=hosts,
            timeout=session_timeout,
            auth_data=auth_data,
            default_acl=default_acl or OPEN_ACL_UNSAFE,
            connection_retry={"max_tries": -1, "delay": 0.1, "backoff": 2, "max_delay": 1.0},
            command_retry={"max_tries": 0},
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listeners: list[Callable[[SessionEvent], None]] = []
        self._watchers: set[_Watcher] = set()
        self._wrappers: dict[Callable[[WatchEvent], None], Callable[[Any], None]] = {}
        self._session_id = 0
        self._stopped = False

    # ---------------------------------------------------------------- lifecycle
    async def start(self) -> None:
        """Connect, logging while ZooKeeper is unreachable; ZkUnavailableError after connection_timeout."""
        self._loop = asyncio.get_running_loop()
        self._kazoo.add_listener(self._on_kazoo_state)
        live = self._kazoo.start_async()
        started = time.monotonic()
        deadline = started + self.connection_timeout
        while True:
            wait = max(0.0, min(1.0, deadline - time.monotonic()))
            if await self._loop.run_in_executor(None, live.wait, wait) and self._kazoo.connected:
                break
            elapsed = time.monotonic() - started
            if time.monotonic() >= deadline:
                await self._loop.run_in_executor(None, self._stop_kazoo)
                raise ZkUnavailableError(
                    f"could not connect to ZooKeeper at {self.hosts} within {self.connection_timeout:g}s "
                    "(zookeeper.connection-timeout)"
                )
            log.warning(
                "ZooKeeper at %s is not reachable yet (%.1fs of %gs), retrying",
                self.hosts,
                elapsed,
                self.connection_timeout,
            )
        self._session_id = self._kazoo.client_id[0] if self._kazoo.client_id else 0
        log.info("Connected to ZooKeeper at %s, session 0x%x", self.hosts, self._session_id)

    async def close(self) -> None:
        """Close the session: this process's ephemeral nodes vanish at once."""
        if self._stopped:
            return
        self._stopped = True
        for w in list(self._watchers):
            w.cancel()
        loop = self._loop or asyncio.get_running_loop()
        await loop.run_in_executor(None, self._stop_kazoo)
        log.info("Closed ZooKeeper session")

    def _stop_kazoo(self) -> None:
        try:
            self._kazoo.stop()
        finally:
            self._kazoo.close()

    # ---------------------------------------------------------------- session state
    @property
    def connected(self) -> bool:
        """True while kazoo holds a live connection (read directly from kazoo, not from hopped events)."""
        return self._kazoo.state == KazooState.CONNECTED

    @property
    def session_state(self) -> SessionState:
        """kazoo's current state (read directly, like ``connected``): LOST before start and after close."""
        state = self._kazoo.state
        if state == KazooState.CONNECTED:
            return SessionState.CONNECTED
        return SessionState.SUSPENDED if state == KazooState.SUSPENDED else SessionState.LOST

    @property
    def session_id(self) -> int:
        """The current session id (0 when not connected)."""
        cid = self._kazoo.client_id
        return cid[0] if cid and self.connected else 0

    def add_session_listener(self, fn: Callable[[SessionEvent], None]) -> None:
        self._listeners.append(fn)

    def _on_kazoo_state(self, state: str) -> None:  # kazoo thread
        if state == KazooState.CONNECTED:
            cid = self._kazoo.client_id
            sid = cid[0] if cid else 0
            event = SessionEvent(SessionState.CONNECTED, sid)
        elif state == KazooState.SUSPENDED:
            event = SessionEvent(SessionState.SUSPENDED, 0)
        else:
            event = SessionEvent(SessionState.LOST, 0)
        self._hop(self._dispatch_session, event)

    def _dispatch_session(self, event: SessionEvent) -> None:  # loop
        if event.state is SessionState.CONNECTED:
            new = event.session_id != self._session_id
            self._session_id = event.session_id
            event = SessionEvent(SessionState.CONNECTED, event.session_id, new_session=new)
            for w in list(self._watchers):
                w.rearm()
        elif event.state is SessionState.LOST:
            self._session_id = 0
        for fn in list(self._listeners):
            try:
                fn(event)
            except Exception:
                log.exception("session listener failed on %s", event)

    def _hop(self, fn: Callable[..., None], *args: Any) -> None:  # any thread
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop closed between the check and the call
            pass

    # ---------------------------------------------------------------- the bridge
    def _bridge(self, async_result: Any, convert: Callable[[Any], Any] = lambda r: r) -> asyncio.Future:
        loop = self._loop or asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()

        def settle(value: Any, exc: BaseException | None) -> None:  # loop
            if fut.cancelled():
                return
            if exc is not None:
                fut.set_exception(_translate(exc))
            else:
                try:
                    fut.set_result(convert(value))
                except Exception as e:
                    fut.set_exception(e)

        def done(result: Any) -> None:  # kazoo thread
            try:
                value, exc = result.get_nowait(), None
            except BaseException as e:
                value, exc = None, e
            self._hop(settle, value, exc)

        async_result.rawlink(done)
        return fut

    def _watch_fn(self, fn: Callable[[WatchEvent], None]) -> Callable[[Any], None]:
        # One kazoo-side wrapper per callback: kazoo keeps watchers in a set per path, so arming the same
        # callback twice on a path then calls it once, as ZooKeeper itself keeps one watch per path.
        wrapper = self._wrappers.get(fn)
        if wrapper is None:

            def wrapper(ev: Any) -> None:  # kazoo thread
                self._hop(fn, WatchEvent(_EVENT_NAMES.get(ev.type, "NONE"), ev.path or ""))

            self._wrappers[fn] = wrapper
        return wrapper

    # ---------------------------------------------------------------- reads
    async def get(self, path: str, watch: Callable[[WatchEvent], None] | None = None) -> tuple[bytes, ZnodeStat] | None:
        """Data and stat of ``path``, or None when it does not exist."""
        w = self._watch_fn(watch) if watch else None
        try:
            return await self._bridge(self._kazoo.get_async(path, watch=w), lambda r: (r[0], _stat(r[1])))
        except NoNodeError:
            return None

    async def exists(self, path: str, watch: Callable[[WatchEvent], None] | None = None) -> ZnodeStat | None:
        w = self._watch_fn(watch) if watch else None
        return await self._bridge(self._kazoo.exists_async(path, watch=w), lambda s: _stat(s) if s else None)

    async def get_children(self, path: str, watch: Callable[[WatchEvent], None] | None = None) -> list[str]:
        w = self._watch_fn(watch) if watch else None
        return await self._bridge(self._kazoo.get_children_async(path, watch=w), list)

    async def sync(self, path: str) -> None:
        """A round trip through the leader: raises SessionLostError when our session is gone."""
        await self._bridge(self._kazoo.sync_async(path))

    # ---------------------------------------------------------------- writes (unfenced: own registrations)
    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        private: bool = False,
    ) -> str:
        acl = self._private_acl if private else None
        ar = self._kazoo.create_async(path, data, acl, ephemeral=ephemeral, sequence=sequence, makepath=makepath)
        return await self._bridge(ar)

    async def ensure_path(self, path: str) -> None:
        """Create ``path`` and its parents as empty persistent nodes where missing."""
        parts = [p for p in path.split("/") if p]
        current = ""
        for part in parts:
            current += "/" + part
            if await self.exists(current) is None:
                try:
                    await self.create(current)
                except NodeExistsError:
                    pass

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        return await self._bridge(self._kazoo.set_async(path, data, version), _stat)

    async def delete(self, path: str, version: int = -1) -> None:
        await self._bridge(self._kazoo.delete_async(path, version))

    # ---------------------------------------------------------------- transactions
    async def commit(self, ops: Sequence[Op], fence: EpochFence | None = None) -> list[Any]:
        """Apply ``ops`` atomically. With ``fence``, the transaction first checks the epoch node's version.

        Returns one result per op of ``ops`` (created path, ZnodeStat, or True). Raises EpochFencedError
        when the fence check failed, else the translated error of the first failing op.
        """
        t = self._kazoo.transaction()
        if fence is not None:
            t.check(self.epoch_path, fence.zk_version)
        for op in ops:
            if isinstance(op, CreateOp):
                acl = self._private_acl if op.private else None
                t.create(op.path, op.data, acl, ephemeral=op.ephemeral, sequence=op.sequence)
            elif isinstance(op, SetOp):
                t.set_data(op.path, op.data, op.version)
            elif isinstance(op, DeleteOp):
                t.delete(op.path, op.version)
            else:
                t.check(op.path, op.version)
        results = await self._bridge(t.commit_async(), list)
        return multi_outcome(ops, results, fence)

    # ---------------------------------------------------------------- persistent watches
    def watch_children(self, path: str, on_change: Callable[[list[str] | None], None]) -> _Watcher:
        """Keep a children watch on ``path``; ``on_change(children)`` on the loop (None: node absent)."""
        w = _Watcher(self, path, on_change, children=True)
        self._watchers.add(w)
        w.rearm()
        return w

    def watch_data(self, path: str, on_change: Callable[[tuple[bytes, ZnodeStat] | None], None]) -> _Watcher:
        """Keep a data watch on ``path`` (also while it does not exist); ``on_change((data, stat) | None)``."""
        w = _Watcher(self, path, on_change, children=False)
        self._watchers.add(w)
        w.rearm()
        return w


class _Watcher:
    """A watch kept armed on one path; owned by ZkClient, cancelled by its creator. Runs on the loop."""

    def __init__(self, zk: ZkClient, path: str, on_change: Callable[[Any], None], *, children: bool) -> None:
        self._zk = zk
        self.path = path
        self._on_change = on_change
        self._children = children
        self._cancelled = False
        self._task: asyncio.Task | None = None
        self._pending = False

    def cancel(self) -> None:
        self._cancelled = True
        self._zk._watchers.discard(self)
        if self._task is not None:
            self._task.cancel()

    def rearm(self) -> None:
        if self._cancelled:
            return
        if self._task is not None and not self._task.done():
            self._pending = True
            return
        self._task = asyncio.get_running_loop().create_task(self._read(), name=f"zk-watch {self.path}")
        self._task.add_done_callback(self._surface_failure)

    def _surface_failure(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("watch on %s failed; it is not armed any more", self.path, exc_info=task.exception())

    def _fired(self, ev: WatchEvent) -> None:
        if ev.type != "NONE":  # NONE: connection change; re-armed on reconnect by ZkClient
            self.rearm()

    async def _read(self) -> None:
        while not self._cancelled:
            self._pending = False
            try:
                if self._children:
                    if await self._zk.exists(self.path, watch=self._fired) is None:
                        value: Any = None
                    else:
                        value = await self._zk.get_children(self.path, watch=self._fired)
                else:
                    value = await self._zk.get(self.path, watch=self._fired)
                    if value is None:
                        await self._zk.exists(self.path, watch=self._fired)
                        value = await self._zk.get(self.path)
            except (SessionLostError, NoNodeError) as e:
                log.debug("watch on %s not armed (%s); waiting for reconnect", self.path, e)
                return
            if self._cancelled:
                return
            try:
                self._on_change(value)
            except Exception:
                log.exception("watch callback on %s failed", self.path)
            if not self._pending:
                return
