"""``PowerCutFs``: mounts the filesystem of ``powercut_fs.py`` in a child process and cuts its power.

    with PowerCutFs(tmp_path / "mnt") as fs:          # unmounted by path on exit, even when the test fails
        ...servers write under fs.mountpoint...
        kill -9 every process writing there
        files, dropped = fs.power_cut()               # every unsynced write is gone
        ...restart them...

    fs.fail_fsync("ENOSPC", "tablet-server-2/*.log")   # its next fsync of a segment fails (fsyncgate)
    fs.lose_fsync("tablet-server-2/*.log")             # ... or succeeds without writing anything
    fs.fail_write("EIO", "tablet-server-2/*/kv/*.log")  # its next write of a KV's WAL fails

``unavailable_reason()`` says why FUSE cannot be used here (no /dev/fuse, no fusermount3 or libfuse3, no
mfusepy), or None; tests skip with that reason. Install: ``deploy/install-fuse.sh`` (Debian's fuse3) and
the ``dev`` extra (mfusepy). Who may call: the test's thread.
"""

from __future__ import annotations

import contextlib
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from fluss_py.testing.procs import wait_until

_PR_SET_PDEATHSIG = 1


def _unmount_when_parent_dies() -> None:  # runs in the child between fork and exec
    """SIGTERM when the test process dies: libfuse then unmounts and exits (no mount is left behind)."""
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


def unavailable_reason() -> str | None:
    """Why a FUSE filesystem cannot be mounted on this machine, or None when it can."""
    if not os.path.exists("/dev/fuse"):
        return "/dev/fuse does not exist (no FUSE in this kernel or container)"
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        return "/dev/fuse is not readable and writable by this user"
    if shutil.which("fusermount3") is None:
        return "fusermount3 is missing (run deploy/install-fuse.sh)"
    if ctypes.util.find_library("fuse3") is None:
        return "libfuse3 is missing (run deploy/install-fuse.sh)"
    try:
        import mfusepy  # noqa: F401
    except Exception as e:
        return f"mfusepy cannot be imported ({e}); install the dev extra"
    return None


class PowerCutFs:
    """Owns one mount and its filesystem process (started by ``mount``, ended by ``close``)."""

    def __init__(self, mountpoint: Path, log_file: Path | None = None) -> None:
        self.mountpoint = Path(mountpoint).absolute()
        self.log_file = log_file or self.mountpoint.with_name(self.mountpoint.name + "-fs.log")
        self._proc: subprocess.Popen[str] | None = None

    def mount(self, timeout: float = 15.0) -> PowerCutFs:
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        log = open(self.log_file, "a")  # noqa: SIM115 - the child keeps it
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "fluss_py.testing.powercut_fs", str(self.mountpoint)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
                bufsize=1,
                preexec_fn=_unmount_when_parent_dies,  # prctl only, before exec
            )
        finally:
            log.close()
        try:
            wait_until(
                lambda: os.path.ismount(self.mountpoint) or self._proc.poll() is not None,
                timeout,
                message=f"FUSE mount at {self.mountpoint}",
            )
            if not os.path.ismount(self.mountpoint):
                raise RuntimeError(f"the power-cut filesystem did not mount: {self.log_file.read_text()[-2000:]}")
        except BaseException:
            self.close()
            raise
        return self

    def _command(self, cmd: str) -> list[int]:
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise RuntimeError("the power-cut filesystem is not mounted")
        proc.stdin.write(cmd + "\n")
        proc.stdin.flush()
        reply = proc.stdout.readline().split()
        if not reply or reply[0] != "ok":
            raise RuntimeError(f"power-cut filesystem: {cmd!r} answered {reply!r}")
        return [int(x) for x in reply[1:]]

    def power_cut(self) -> tuple[int, int]:
        """Drop every write not fsynced: returns (files reverted, bytes dropped). Every process writing under
        the mount must be dead already."""
        files, dropped = self._command("powercut")
        return files, dropped

    def stats(self) -> tuple[int, int, int]:
        """(files, bytes held, fsyncs so far)."""
        files, size, fsyncs = self._command("stats")
        return files, size, fsyncs

    def hold(self, data_dir: Path | str, name: str) -> Path:
        """Make ``data_dir`` (a server's data directory, not created yet) a link to a new directory ``name``
        under the mount: that server writes here, the others stay on the real disk."""
        target = self.mountpoint / name
        target.mkdir()
        link = Path(data_dir)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=True)
        return target

    def fail_fsync(self, error: str, glob: str, count: int = 1) -> None:
        """The next ``count`` fsyncs of paths below the mount matching ``glob`` (``fnmatch``: ``*`` crosses
        ``/``) fail with ``error`` (an errno name: "ENOSPC", "EIO"), their dirty pages marked clean unwritten."""
        self._command(f"fail-fsync {error} {count} {glob}")

    def lose_fsync(self, glob: str, count: int = 1) -> None:
        """The next ``count`` fsyncs of matching paths report success and write nothing (a lying disk)."""
        self._command(f"lose-fsync {count} {glob}")

    def fail_write(self, error: str, glob: str, count: int = 1) -> None:
        """The next ``count`` writes to files matching ``glob`` fail with ``error`` and change nothing."""
        self._command(f"fail-write {error} {count} {glob}")

    def pending(self) -> int:
        """Faulty fsyncs and writes armed and not yet consumed."""
        (n,) = self._command("pending")
        return n

    def close(self, timeout: float = 10.0) -> None:
        """Unmount by path (lazily: works while something still has a file open), then end the process by
        its PID if it has not exited on its own."""
        subprocess.run(["fusermount3", "-u", "-z", str(self.mountpoint)], capture_output=True, check=False)
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(Exception):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> PowerCutFs:
        return self.mount()

    def __exit__(self, *exc: object) -> None:
        self.close()
