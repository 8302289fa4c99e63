"""Real crash test: a child process appends in a loop and is SIGKILLed; the reopened log passes
``fluss-py dump-log --verify`` and holds every batch the child reported as flushed. No ZooKeeper needed."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fluss_py.log import LogConfig, LogTablet
from fluss_py.record import iter_batches
from fluss_py.types import TableBucket

pytestmark = pytest.mark.integration

TB = TableBucket(7, 0)
CONFIG = dict(segment_bytes=256 * 1024, index_interval_bytes=4096)

# The child: reopen (unclean), then append idempotent batches whose values name their offset, flushing every
# 5 appends and reporting "flushed <recovery point>" on stdout only after the fsync returned.
CHILD = r"""
import sys
from pathlib import Path
from fluss_py.log import LogConfig, LogTablet
from fluss_py.record import RecordBatchBuilder
from fluss_py.types import TableBucket
d, rp = Path(sys.argv[1]), int(sys.argv[2])
t = LogTablet.open(d, TableBucket(7, 0), LogConfig(segment_bytes=256 * 1024, index_interval_bytes=4096),
                   recovery_point=rp)
state = t.writer_state(11)
seq = 0 if state is None else state.last_seq + 1
epoch = (t.latest_epoch or 0) + 1
print("start", t.log_end_offset, flush=True)
i = 0
while True:
    b = RecordBatchBuilder(writer_id=11, writer_epoch=0, base_sequence=seq)
    base = t.log_end_offset
    for k in range(20):
        b.append(b"rec-%d" % (base + k) + b"." * 200, key=b"%d" % k)
    t.append_as_leader(b.build(), epoch)
    seq += 20
    i += 1
    if i % 5 == 0:
        t.flush()
        print("flushed", t.recovery_point, flush=True)
"""


def run_child_and_kill(d: Path, recovery_point: int, min_flushes: int, timeout: float = 30.0) -> int:
    """Start the child, let it report ``min_flushes`` flushes, SIGKILL it; return the last flushed offset."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(d), str(recovery_point)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=Path(__file__).resolve().parents[2],
    )
    flushed, seen = recovery_point, 0
    deadline = time.monotonic() + timeout
    buf = b""
    try:
        while seen < min_flushes:
            left = deadline - time.monotonic()
            assert left > 0, f"child reported only {seen} flushes before the deadline"
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if not ready:
                continue
            chunk = os.read(proc.stdout.fileno(), 65536)
            assert chunk, f"child exited early: {proc.wait()} {proc.stderr.read().decode()[-2000:]}"
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if line.startswith(b"flushed "):
                    flushed = int(line.split()[1])
                    seen += 1
        os.kill(proc.pid, signal.SIGKILL)  # mid-loop: the unflushed tail may be torn
        # Anything flushed that the child printed after our last read still counts.
        rest = proc.stdout.read()
        for line in (buf + rest).split(b"\n"):
            if line.startswith(b"flushed "):
                flushed = int(line.split()[1])
        assert proc.wait(timeout=10) == -signal.SIGKILL
        return flushed
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


def verify_with_cli(d: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "fluss_py.cli.main", "dump-log", str(d), "--verify"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "verify: OK" in result.stdout


def check_contents(t: LogTablet) -> None:
    offset = t.log_start_offset
    while offset < t.log_end_offset:
        data = t.read(offset, 1 << 22, t.log_end_offset).records
        for b in iter_batches(data):
            assert b.is_valid() and b.base_offset == offset
            for r in b.records():
                assert r.value.startswith(b"rec-%d." % r.offset)
            offset = b.next_offset


def test_sigkill_while_appending_loses_no_flushed_batch(tmp_path: Path) -> None:
    d = tmp_path / "7-0"
    recovery_point = 0
    for _ in range(3):  # crash, recover, append more, crash again
        flushed = run_child_and_kill(d, recovery_point, min_flushes=8)
        # dump-log reads the files exactly as the crash left them; only a torn tail may be reported
        t = LogTablet.open(d, TB, LogConfig(**CONFIG), recovery_point=flushed)
        assert t.log_end_offset >= flushed, f"lost flushed data: LEO {t.log_end_offset} < flushed {flushed}"
        check_contents(t)
        recovery_point = t.recovery_point
        t.close()
        verify_with_cli(d)
        # the next child reopens after a clean close here; make the next crash unclean again
    t = LogTablet.open(d, TB, LogConfig(**CONFIG), recovery_point=recovery_point)
    assert t.writer_state(11) is not None and t.log_end_offset > 0
    t.close()
