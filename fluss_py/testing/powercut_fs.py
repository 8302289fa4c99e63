"""A FUSE filesystem for power-cut tests: file contents live in memory and only what was fsynced survives.

Every file holds two versions of its bytes: ``data`` (what reads see: the page cache) and ``durable`` (what
the disk holds), and the set of its 4 KiB pages written since they last went to the disk (``dirty``). An
``fsync``/``fdatasync`` writes the dirty pages and the size to ``durable``. A **power cut** sets every file's
``data`` back to ``durable``, dropping every write (and size change) not synced since. The tablet servers
whose data dirs live here must be dead at that moment (kill -9 all of them first): a power cut stops every
process of the machine.

Faulty fsyncs, as Linux has them (armed from the control channel, each for the next ``count`` fsyncs of the
files or directories whose path below the mount matches a glob):

- ``fail-fsync``: the fsync fails with the given errno, and the file's dirty pages are marked clean without
  reaching ``durable`` (what Linux does since 4.13 after a failed writeback: the pages stay readable in the
  page cache, and the next fsync succeeds without writing them — "fsyncgate");
- ``lose-fsync``: the fsync reports success and does the same (a drive whose write cache lies, or a
  writeback error reported to another process's descriptor).

A later successful fsync of the file writes its size and its pages dirtied since: the lost pages then read
as zeros (or their older bytes) after a power cut, below the offset that fsync covered.

Failing writes (``fail-write``): the next ``count`` writes to files matching a glob fail with the given errno
and change nothing (a disk that is full, or failing, when the write reaches it).

What is modelled, and what is simplified (enough for the log, checkpoints and indexes; no mmap is used):

- open/create (O_APPEND and O_TRUNC honoured), read, write, ftruncate/truncate, fsync and fdatasync (the
  same here: sizes are part of the contents), flush/release, getattr, readdir, mkdir, rmdir, unlink, rename
  (replacing), chmod/utimens (accepted, ignored), statfs.
- Namespace operations (create, mkdir, rename, unlink, rmdir) are durable at once, as on a filesystem
  mounted ``dirsync``; only file contents wait for an fsync. (ext4 in its default mode is close to this for
  the log's patterns: a new segment's name survives, its bytes only if synced.)
- Mount options: ``direct_io`` (no kernel page cache: a read after a power cut sees the reverted bytes),
  attribute/entry timeouts 0, ``hard_remove`` (no ``.fuse_hidden`` files for unlinked open files, which a
  bucket dir would refuse).

Run as a process (the harness does: ``PowerCutFs`` below), controlled by lines on stdin, each answered by
one line on stdout::

    powercut                         ->  ok <files reverted> <bytes of unsynced writes dropped>
    stats                            ->  ok <files> <bytes in memory> <fsyncs>
    fail-fsync <ERRNO> <count> <glob>  ->  ok     (e.g. "fail-fsync ENOSPC 1 tablet-server-2/*/*.log")
    fail-write <ERRNO> <count> <glob>  ->  ok     (e.g. "fail-write EIO 1 tablet-server-2/*/kv/*.log")
    lose-fsync <count> <glob>        ->  ok
    pending                          ->  ok <armed faulty fsyncs and writes not yet consumed>
    (EOF)                            ->  unmounts and exits

Single-threaded FUSE loop (``-s``) plus the control thread; one lock serialises them.
"""

from __future__ import annotations

import errno
import fnmatch
import itertools
import os
import stat
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

try:  # only the filesystem process needs it; the harness checks for it before starting one
    import mfusepy
except Exception:  # pragma: no cover - reported by powercut_harness.unavailable_reason()
    mfusepy = None  # type: ignore[assignment]

_inodes = itertools.count(2)
PAGE = 4096


@dataclass(eq=False)
class Node:
    """A file (``data``/``durable``, its ``dirty`` pages) or a directory (``children``)."""

    is_dir: bool
    mode: int
    ino: int = field(default_factory=lambda: next(_inodes))
    data: bytearray = field(default_factory=bytearray)
    durable: bytes = b""
    dirty: set[int] = field(default_factory=set)  # page numbers written since they last reached ``durable``
    children: dict[str, Node] = field(default_factory=dict)
    mtime_ns: int = field(default_factory=time.time_ns)

    def touch(self, start: int, end: int) -> None:
        """Bytes [start, end) of ``data`` changed."""
        if end > start:
            self.dirty.update(range(start // PAGE, (end - 1) // PAGE + 1))

    def write_back(self) -> None:
        """A successful fsync: the size and the dirty pages reach the disk."""
        durable = bytearray(self.durable[: len(self.data)])
        durable.extend(bytes(len(self.data) - len(durable)))
        for page in self.dirty:
            durable[page * PAGE : (page + 1) * PAGE] = self.data[page * PAGE : (page + 1) * PAGE]
        self.durable = bytes(durable)
        self.dirty.clear()


@dataclass
class FsyncFault:
    """The next ``count`` fsyncs of paths matching ``glob`` fail with ``error`` (0: report success) and drop
    the file's dirty pages."""

    glob: str
    count: int
    error: int


class PowerCutOperations(mfusepy.Operations if mfusepy is not None else object):  # type: ignore[misc]
    """The FUSE callbacks over an in-memory tree. Called by libfuse's loop thread and the control thread,
    serialised by ``_mutex``."""

    use_ns = True  # times in integer nanoseconds

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self.root = Node(True, stat.S_IFDIR | 0o755, ino=1)
        self.handles: dict[int, tuple[Node, int]] = {}
        self._fhs = itertools.count(1)
        self.fsyncs = 0
        self.faults: list[FsyncFault] = []
        self.write_faults: list[FsyncFault] = []  # (the same fields: the next ``count`` writes fail)

    # ------------------------------------------------------------ helpers
    def _lookup(self, path: str) -> Node:
        node = self.root
        for part in path.strip("/").split("/"):
            if not part:
                continue
            if not node.is_dir:
                raise mfusepy.FuseOSError(errno.ENOTDIR)
            child = node.children.get(part)
            if child is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
            node = child
        return node

    def _parent(self, path: str) -> tuple[Node, str]:
        head, _, name = path.rstrip("/").rpartition("/")
        parent = self._lookup(head or "/")
        if not parent.is_dir:
            raise mfusepy.FuseOSError(errno.ENOTDIR)
        return parent, name

    def _open(self, node: Node, flags: int) -> int:
        if flags & os.O_TRUNC and not node.is_dir:
            del node.data[:]
            node.dirty.clear()
        fh = next(self._fhs)
        self.handles[fh] = (node, flags)
        return fh

    def _node(self, path: str | None, fh: int | None) -> Node:
        if fh and fh in self.handles:
            return self.handles[fh][0]
        if path is None:
            raise mfusepy.FuseOSError(errno.EBADF)
        return self._lookup(path)

    # ------------------------------------------------------------ libfuse
    def init_with_config(self, conn: Any, config: Any) -> None:
        if config is not None:
            config.direct_io = 1
            config.attr_timeout = 0.0
            config.entry_timeout = 0.0
            config.negative_timeout = 0.0
            config.hard_remove = 1
            config.use_ino = 1
            config.kernel_cache = 0

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        with self._mutex:
            n = self._node(path, fh)
            size = len(n.data) if not n.is_dir else 4096
            return {
                "st_mode": n.mode,
                "st_ino": n.ino,
                "st_nlink": 2 if n.is_dir else 1,
                "st_size": size,
                "st_blocks": (size + 511) // 512,
                "st_uid": os.getuid(),
                "st_gid": os.getgid(),
                "st_atime": n.mtime_ns,
                "st_mtime": n.mtime_ns,
                "st_ctime": n.mtime_ns,
            }

    def readdir(self, path: str, fh: int) -> list[tuple[str, dict[str, int], int]]:
        with self._mutex:  # (with use_ino an entry needs its inode: glibc skips d_ino 0)
            n = self._lookup(path)
            entries = [(".", n), ("..", n), *n.children.items()]
            return [(name, {"st_mode": c.mode, "st_ino": c.ino}, 0) for name, c in entries]

    def mkdir(self, path: str, mode: int) -> int:
        with self._mutex:
            parent, name = self._parent(path)
            if name in parent.children:
                raise mfusepy.FuseOSError(errno.EEXIST)
            parent.children[name] = Node(True, stat.S_IFDIR | (mode & 0o7777))
            return 0

    def rmdir(self, path: str) -> int:
        with self._mutex:
            parent, name = self._parent(path)
            node = parent.children.get(name)
            if node is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
            if not node.is_dir:
                raise mfusepy.FuseOSError(errno.ENOTDIR)
            if node.children:
                raise mfusepy.FuseOSError(errno.ENOTEMPTY)
            del parent.children[name]
            return 0

    def create(self, path: str, mode: int, flags: int) -> int:
        with self._mutex:
            parent, name = self._parent(path)
            node = parent.children.get(name)
            if node is None:
                node = Node(False, stat.S_IFREG | (mode & 0o7777))
                parent.children[name] = node
            elif flags & os.O_EXCL:
                raise mfusepy.FuseOSError(errno.EEXIST)
            return self._open(node, flags)

    def open(self, path: str, flags: int) -> int:
        with self._mutex:
            return self._open(self._lookup(path), flags)

    def read(self, path: str | None, size: int, offset: int, fh: int) -> bytes:
        with self._mutex:
            n = self._node(path, fh)
            return bytes(n.data[offset : offset + size])

    def write(self, path: str | None, data: bytes, offset: int, fh: int) -> int:
        with self._mutex:
            n = self._node(path, fh)
            fault = self._fault_for(path, self.write_faults)
            if fault is not None:
                raise mfusepy.FuseOSError(fault.error)
            if fh in self.handles and self.handles[fh][1] & os.O_APPEND:
                offset = len(n.data)  # without writeback caching, O_APPEND is the filesystem's job
            if offset > len(n.data):
                n.touch(len(n.data), offset)
                n.data.extend(bytes(offset - len(n.data)))
            n.data[offset : offset + len(data)] = data
            n.touch(offset, offset + len(data))
            n.mtime_ns = time.time_ns()
            return len(data)

    def truncate(self, path: str | None, length: int, fh: int | None = None) -> int:
        with self._mutex:
            n = self._node(path, fh)
            if n.is_dir:
                raise mfusepy.FuseOSError(errno.EISDIR)
            if length < len(n.data):
                del n.data[length:]
                n.dirty = {p for p in n.dirty if p * PAGE < length}
                n.touch(length - 1 if length else 0, length)  # the page it now ends in
            else:
                n.touch(len(n.data), length)
                n.data.extend(bytes(length - len(n.data)))
            n.mtime_ns = time.time_ns()
            return 0

    def fsync(self, path: str | None, datasync: int, fh: int) -> int:
        with self._mutex:
            n = self._node(path, fh)
            self.fsyncs += 1
            fault = self._fault_for(path)
            if not n.is_dir:
                if fault is None:
                    n.write_back()
                else:
                    n.dirty.clear()  # marked clean, never written: readable until a power cut
            if fault is not None and fault.error:
                raise mfusepy.FuseOSError(fault.error)
            return 0

    def fsyncdir(self, path: str | None, datasync: int, fh: int) -> int:
        with self._mutex:  # namespace operations are durable at once: only a fault to inject
            fault = self._fault_for(path)
            if fault is not None and fault.error:
                raise mfusepy.FuseOSError(fault.error)
            return 0

    def _fault_for(self, path: str | None, faults: list[FsyncFault] | None = None) -> FsyncFault | None:
        """The armed fault that this fsync (or write: ``faults``) of ``path`` consumes, if any."""
        if path is None:
            return None
        for fault in self.faults if faults is None else faults:
            if fault.count > 0 and fnmatch.fnmatchcase(path.lstrip("/"), fault.glob):
                fault.count -= 1
                return fault
        return None

    def flush(self, path: str | None, fh: int) -> int:
        return 0

    def release(self, path: str | None, fh: int) -> int:
        with self._mutex:
            self.handles.pop(fh, None)
            return 0

    def unlink(self, path: str) -> int:
        with self._mutex:
            parent, name = self._parent(path)
            node = parent.children.get(name)
            if node is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
            if node.is_dir:
                raise mfusepy.FuseOSError(errno.EISDIR)
            del parent.children[name]
            return 0

    def rename(self, old: str, new: str) -> int:
        with self._mutex:
            old_parent, old_name = self._parent(old)
            node = old_parent.children.get(old_name)
            if node is None:
                raise mfusepy.FuseOSError(errno.ENOENT)
            new_parent, new_name = self._parent(new)
            target = new_parent.children.get(new_name)
            if target is not None and target.is_dir and target.children:
                raise mfusepy.FuseOSError(errno.ENOTEMPTY)
            del old_parent.children[old_name]
            new_parent.children[new_name] = node
            return 0

    def chmod(self, path: str, mode: int) -> int:
        with self._mutex:
            n = self._lookup(path)
            n.mode = (n.mode & ~0o7777) | (mode & 0o7777)
            return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        return 0

    def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
        with self._mutex:
            self._lookup(path).mtime_ns = time.time_ns() if times is None else int(times[1])
            return 0

    def statfs(self, path: str) -> dict[str, int]:
        blocks = 1 << 24  # 64 GiB of 4 KiB blocks, all free: the data lives in memory
        return {"f_bsize": 4096, "f_frsize": 4096, "f_blocks": blocks, "f_bfree": blocks, "f_bavail": blocks,
                "f_files": 1 << 20, "f_ffree": 1 << 20, "f_favail": 1 << 20, "f_namemax": 255}  # fmt: skip

    # ------------------------------------------------------------ control
    def _files(self) -> list[Node]:
        out, stack = [], [self.root]
        while stack:
            n = stack.pop()
            for c in n.children.values():
                (stack if c.is_dir else out).append(c)
        return out

    def power_cut(self) -> tuple[int, int]:
        """Every file back to its last fsynced bytes. Returns (files reverted, bytes of writes dropped)."""
        with self._mutex:
            reverted = dropped = 0
            for f in self._files():
                if f.data != f.durable:
                    reverted += 1
                    common = 0
                    limit = min(len(f.data), len(f.durable))
                    while common < limit and f.data[common] == f.durable[common]:
                        common += 1
                    dropped += max(len(f.data), len(f.durable)) - common
                    f.data = bytearray(f.durable)
                f.dirty.clear()
            self.handles.clear()
            return reverted, dropped

    def stats(self) -> tuple[int, int, int]:
        with self._mutex:
            files = self._files()
            return len(files), sum(len(f.data) for f in files), self.fsyncs

    def arm(self, glob: str, count: int, error: int, *, write: bool = False) -> None:
        with self._mutex:
            (self.write_faults if write else self.faults).append(FsyncFault(glob, count, error))

    def pending(self) -> int:
        with self._mutex:
            return sum(f.count for f in (*self.faults, *self.write_faults))


def _control(ops: PowerCutOperations, mountpoint: str) -> None:
    """Answer stdin commands; at EOF unmount (the FUSE loop then returns)."""
    for line in sys.stdin:
        cmd, *args = line.split() or [""]
        if cmd == "powercut":
            reply = "ok " + " ".join(map(str, ops.power_cut()))
        elif cmd == "stats":
            reply = "ok " + " ".join(map(str, ops.stats()))
        elif cmd == "pending":
            reply = f"ok {ops.pending()}"
        elif cmd == "fail-fsync" and len(args) == 3 and hasattr(errno, args[0]) and args[1].isdigit():
            ops.arm(args[2], int(args[1]), getattr(errno, args[0]))
            reply = "ok"
        elif cmd == "fail-write" and len(args) == 3 and hasattr(errno, args[0]) and args[1].isdigit():
            ops.arm(args[2], int(args[1]), getattr(errno, args[0]), write=True)
            reply = "ok"
        elif cmd == "lose-fsync" and len(args) == 2 and args[0].isdigit():
            ops.arm(args[1], int(args[0]), 0)
            reply = "ok"
        else:
            reply = f"error bad command {line.strip()!r}"
        print(reply, flush=True)
    os.spawnlp(os.P_WAIT, "fusermount3", "fusermount3", "-u", "-z", mountpoint)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or mfusepy is None:
        print("usage: python -m fluss_py.testing.powercut_fs MOUNTPOINT (needs mfusepy and libfuse3)", file=sys.stderr)
        return 2
    mountpoint = os.path.abspath(args[0])
    ops = PowerCutOperations()
    threading.Thread(target=_control, args=(ops, mountpoint), name="control", daemon=True).start()
    mfusepy.FUSE(ops, mountpoint, foreground=True, nothreads=True, fsname="powercut_fs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
