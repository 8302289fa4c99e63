"""LogDirs: the data directories of one tablet server (``data.dirs``), their locks, placement and failures.

Each directory has its own ``LogManager`` (logs, offset checkpoints, clean-shutdown marker). A bucket lives in
exactly one directory; a new one goes to the online directory holding the fewest logs. A directory is
locked (``<dir>/.lock``, ``flock``) for the life of the process, so a second server started on it by mistake
refuses to start instead of writing the same files.

A directory fails when any disk operation on it fails (``OSError``: EIO, ENOSPC, EROFS, ...), reported by its
logs (``LogTablet``'s I/O hook), by its flush or by its checkpoint writes. Then, once (docs/storage.md §10)::

    Online --any OSError--> Offline(reason)          its logs are closed without flush and forgotten; the
                              |                      listeners (the replica layer) take its replicas offline
                              | ENOSPC of a write,   and have their leadership moved
                              | no fsync failed: free
                              | space >= log.dir.min-free and a probe file can be written
                              v
                            Online (logs reloaded from disk as after a crash; the listeners bring the replicas
                                    back as followers)

Other errors keep the directory offline until the process restarts (the operator replaces the disk), and so
does a failed fsync, whatever its errno, also one reported while the directory is offline for a full disk:
after it the page cache may hold pages the kernel marked clean without writing them, which a reload would
read back as good data and no later fsync would write (``disk_io.FsyncFailed``).
Who may call: the tablet server's event loop (everything here is synchronous except the flush, whose
fsyncs run in a worker thread); failure reports may come from any of its calls.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import logging
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fluss_py import config as cfg
from fluss_py.errors import FlussError, LogCorruptedError, StorageError
from fluss_py.log.config import LogConfig
from fluss_py.log.disk_io import fsync_failure_in
from fluss_py.log.manager import LogManager
from fluss_py.log.tablet import LogTablet
from fluss_py.types import TableBucket

log = logging.getLogger(__name__)

LOCK_FILE = ".lock"
PROBE_FILE = ".probe"


def data_dirs_of(config: cfg.Config) -> list[Path]:
    """``data.dirs`` if set, else ``data.dir`` (the single-directory shorthand); duplicates refused."""
    raw = list(config[cfg.DATA_DIRS]) or [config[cfg.DATA_DIR]]
    dirs = [Path(d).absolute() for d in raw]
    if len(set(dirs)) != len(dirs):
        raise StorageError(f"data.dirs names a directory twice: {raw}")
    return dirs


def _cause(error: BaseException) -> OSError | None:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError):
            return seen
        seen = seen.__cause__
    return None


@dataclass(frozen=True, slots=True)
class DirFailure:
    """Why a directory is offline: ``code`` is the errno name (ENOSPC, EIO, ...), ``reason`` its text
    ("fsync failed: ..." for a failed fsync)."""

    path: Path
    code: str
    reason: str
    since: float  # time.time()
    buckets: tuple[TableBucket, ...] = ()
    fsync_failed: bool = False

    @property
    def recoverable(self) -> bool:
        """A disk that was full when written comes back by itself once space is freed; a failing one, or any
        failed fsync (the unsynced data may be gone), needs a restart."""
        return self.code == "ENOSPC" and not self.fsync_failed

    @staticmethod
    def of(path: Path, error: BaseException, buckets: Sequence[TableBucket] = ()) -> DirFailure:
        os_error = _cause(error)
        if isinstance(error, LogCorruptedError):
            code, reason = "LOG_CORRUPTED", str(error)
        elif os_error is not None and os_error.errno is not None:
            code = errno.errorcode.get(os_error.errno, str(os_error.errno))
            reason = os_error.strerror or str(os_error)
        else:
            code, reason = "EIO", str(error)
        return DirFailure(path, code, reason, time.time(), tuple(buckets), fsync_failure_in(error))


FailureListener = Callable[[DirFailure], None]


@dataclass(eq=False)
class _Dir:
    path: Path
    manager: LogManager
    lock_fd: int = -1
    failure: DirFailure | None = None
    failures: int = 0  # since start, for /metrics
    loaded_buckets: list[TableBucket] = field(default_factory=list)


class LogDirs:
    """Owns every data directory of the server (see the module docstring). The replica layer uses it where
    it used one ``LogManager``: ``get``/``get_or_create``/``delete``/``set_aside``/``checkpoint``/
    ``online_managers``/``shutdown`` and the merged ``logs``."""

    def __init__(self, paths: Sequence[Path], config: cfg.Config) -> None:
        self.config = config
        self._dirs = [_Dir(Path(p), LogManager(Path(p), config, self.fail)) for p in paths]
        self._where: dict[TableBucket, _Dir] = {}
        self.listeners: list[FailureListener] = []
        self.had_clean_shutdown = True
        self._on_log_change: Callable[[LogTablet], None] | None = None

    @property
    def on_log_change(self) -> Callable[[LogTablet], None] | None:
        """Told after any change of a log of any directory (``LogManager.on_log_change``), also of the logs
        of a directory that came back (its new manager is told to tell it)."""
        return self._on_log_change

    @on_log_change.setter
    def on_log_change(self, hook: Callable[[LogTablet], None] | None) -> None:
        self._on_log_change = hook
        for d in self._dirs:
            d.manager.on_log_change = hook

    # ------------------------------------------------------------ start / stop
    def lock(self) -> None:
        """Take every directory's lock; raises StorageError naming the holder's pid when one is taken."""
        for d in self._dirs:
            try:
                d.path.mkdir(parents=True, exist_ok=True)
                fd = os.open(d.path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                self._mark_failed(d, e)  # an unusable disk: the others may still serve
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
                os.close(fd)
                raise StorageError(
                    f"data directory {d.path} is locked by another process (pid {holder}): two servers must not "
                    "share a data directory"
                ) from None
            d.lock_fd = fd
            with contextlib.suppress(OSError):  # the pid is a courtesy for the message above (a full disk: none)
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)

    def load_logs(self) -> dict[TableBucket, LogTablet]:
        """Lock, then recover every online directory; a directory failing to load goes offline (the others
        still serve). A bucket found in two directories is refused (LOG_CORRUPTED) rather than guessed."""
        self.lock()
        for d in self._dirs:
            if d.failure is not None:
                continue
            try:
                logs = d.manager.load_logs()
            except (OSError, StorageError, LogCorruptedError) as e:  # a full disk refusing a rebuilt checkpoint
                if d.failure is None:  # (retried), a failing disk, a file in a bucket dir that cannot be loaded
                    self._mark_failed(d, e)
                continue
            self.had_clean_shutdown &= d.manager.had_clean_shutdown
            for tb in logs:
                if tb in self._where:
                    raise StorageError(f"bucket {tb} is in both {self._where[tb].path} and {d.path}")
                self._where[tb] = d
            d.loaded_buckets = list(logs)
        return self.logs

    def shutdown(self) -> None:
        """Close every online directory cleanly (checkpoints, then its clean-shutdown marker); an offline one
        gets no marker, so the next start checks it as after a crash. Locks are released last."""
        for d in self._dirs:
            if d.failure is None:
                try:
                    d.manager.shutdown()
                except (OSError, StorageError) as e:
                    log.error("data directory %s: clean shutdown failed: %s", d.path, e)
            if d.lock_fd >= 0:
                os.close(d.lock_fd)
                d.lock_fd = -1

    # ------------------------------------------------------------ views
    @property
    def paths(self) -> list[Path]:
        return [d.path for d in self._dirs]

    @property
    def data_dir(self) -> Path:
        return self._dirs[0].path

    @property
    def logs(self) -> dict[TableBucket, LogTablet]:
        out: dict[TableBucket, LogTablet] = {}
        for d in self._dirs:
            out.update(d.manager.logs)
        return out

    @property
    def offline(self) -> dict[Path, DirFailure]:
        return {d.path: d.failure for d in self._dirs if d.failure is not None}

    @property
    def held_bytes(self) -> int:
        """Bytes of the logs of every online directory (each manager keeps its sum; a failed directory's
        logs were forgotten, so it counts 0). O(directories)."""
        return sum(d.manager.held_bytes for d in self._dirs)

    @property
    def verified_bytes(self) -> int:
        return sum(d.manager.verified_bytes for d in self._dirs)

    def failure_counts(self) -> dict[Path, int]:
        return {d.path: d.failures for d in self._dirs}

    def dir_of(self, tb: TableBucket) -> Path | None:
        d = self._where.get(tb)
        return d.path if d else None

    def log_counts(self) -> dict[Path, int]:
        return {d.path: len(d.manager.logs) for d in self._dirs}

    def default_log_config(self) -> LogConfig:
        return LogConfig.from_config(self.config)

    def get(self, tb: TableBucket) -> LogTablet | None:
        d = self._where.get(tb)
        return d.manager.get(tb) if d is not None and d.failure is None else None

    # ------------------------------------------------------------ buckets
    def get_or_create(self, tb: TableBucket, log_config: LogConfig | None = None) -> LogTablet:
        """The bucket's log; a new one in the online directory with the fewest logs. STORAGE_ERROR when its
        directory is offline or none is online."""
        d = self._where.get(tb)
        if d is not None and d.failure is not None:
            raise StorageError(f"bucket {tb}: data directory {d.path} is offline ({d.failure.reason})")
        if d is None:
            online = [x for x in self._dirs if x.failure is None]
            if not online:
                raise StorageError(f"bucket {tb}: every data directory is offline")
            d = min(online, key=lambda x: len(x.manager.logs))
        try:
            tablet = d.manager.get_or_create(tb, log_config)
        except (OSError, StorageError) as e:  # creating or opening its files failed: the disk did
            self.fail(d.path, e)
            raise StorageError(f"bucket {tb}: cannot open its log in {d.path}: {e}") from e
        self._where[tb] = d
        return tablet

    def delete(self, tb: TableBucket) -> None:
        d = self._where.pop(tb, None)
        if d is None:
            return
        if d.failure is not None:  # a full disk may still unlink (and so gain space); a broken one may not
            with contextlib.suppress(OSError):
                d.manager.delete(tb)
            return
        self._guard(d, d.manager.delete, tb)

    def set_aside(self, tb: TableBucket) -> Path | None:
        d = self._where.pop(tb, None)
        if d is None or d.failure is not None:
            return None
        return self._guard(d, d.manager.set_aside, tb)

    def checkpoint(self) -> None:
        """Write every online directory's offset checkpoints; a directory failing to fails (the others go on)."""
        for d in self._dirs:
            if d.failure is None:
                self._guard(d, d.manager.checkpoint)

    def flush_all(self) -> None:
        for d in self._dirs:
            if d.failure is None:
                self._guard(d, d.manager.flush_all)

    def online_managers(self) -> list[tuple[Path, LogManager]]:
        """Each online directory with its manager (the replica layer's flush and checkpoint off the loop walk
        them, reporting a disk error of one through ``fail``)."""
        return [(d.path, d.manager) for d in self._dirs if d.failure is None]

    def _guard(self, d: _Dir, fn: Callable[..., object], *args: object) -> object:
        try:
            return fn(*args)
        except (OSError, StorageError) as e:
            self.fail(d.path, e)
            return None

    # ------------------------------------------------------------ failure and recovery
    def fail(self, path: Path, error: BaseException) -> None:
        """A disk operation on ``path`` failed: take the directory offline (once; later reports are no-ops,
        except a failed fsync reported while it is offline for a full disk: then it stays offline for good)."""
        for d in self._dirs:
            if d.path != path:
                continue
            if d.failure is None:
                self._mark_failed(d, error)
            elif d.failure.recoverable and fsync_failure_in(error):
                was = d.failure
                d.failure = dataclasses.replace(DirFailure.of(path, error, was.buckets), since=was.since)
                log.error("data directory %s: an fsync failed while it was offline (%s: %s); it stays offline "
                          "until the process restarts", path, d.failure.code, d.failure.reason)  # fmt: skip

    def _mark_failed(self, d: _Dir, error: BaseException) -> None:
        buckets = d.manager.close_all_without_flush()
        failure = DirFailure.of(d.path, error, buckets)
        d.failure, d.failures = failure, d.failures + 1
        log.error(
            "data directory %s failed (%s: %s): %d replica(s) go offline on this server%s",
            d.path, failure.code, failure.reason, len(buckets),
            "; it comes back once space is freed" if failure.recoverable
            else "; move the named entry out of the bucket directory and restart" if failure.code == "LOG_CORRUPTED"
            else "; what it had not synced may be lost, so it stays offline until the process restarts: fix the "
            "disk, then restart the server" if failure.fsync_failed
            else "; replace the disk and restart",
        )  # fmt: skip
        for listener in self.listeners:
            listener(failure)

    def try_recover(self, min_free: int) -> list[tuple[Path, list[TableBucket]]]:
        """Bring back full directories that have ``min_free`` bytes free again and can be written: their logs
        are reloaded as after a crash. Returns (directory, its buckets) for each directory back online."""
        back: list[tuple[Path, list[TableBucket]]] = []
        for d in self._dirs:
            failure = d.failure
            if failure is None or not failure.recoverable:
                continue
            try:
                st = os.statvfs(d.path)
                if st.f_bavail * st.f_frsize < min_free:
                    continue
                probe = d.path / PROBE_FILE
                probe.write_bytes(b"\0" * 4096)
                probe.unlink()
                manager = LogManager(d.path, self.config, self.fail)
                manager.on_log_change = self._on_log_change
                logs = manager.load_logs()
            except (OSError, FlussError) as e:  # still full, failing, or a file it cannot load (LOG_CORRUPTED)
                log.info("data directory %s is still unusable: %s", d.path, e)
                continue
            d.manager, d.failure = manager, None
            for tb in logs:
                self._where[tb] = d
            log.warning(
                "data directory %s is back online (%d logs reloaded after %.0f s offline)",
                d.path, len(logs), time.time() - failure.since,
            )  # fmt: skip
            back.append((d.path, list(logs)))
        return back
