"""``servers.exit_without_teardown``: the process ends at once with its log flushed, unless a non-daemon thread is
still alive (then the normal exit, which joins it, runs). Each case runs in its own interpreter."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import atexit, logging, sys, threading, time
    from fluss_py.cli.servers import exit_without_teardown

    log_file, thread = sys.argv[1], sys.argv[2]
    handler = logging.FileHandler(log_file)
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    atexit.register(lambda: print("teardown ran", flush=True))
    if thread == "worker":
        done = threading.Event()
        threading.Thread(target=lambda: (done.wait(0.3), print("worker joined", flush=True)), name="worker").start()
    logging.getLogger("x").info("last line before the exit")
    exit_without_teardown(0)
    print("normal exit", flush=True)
    """
)


def _run(tmp_path: Path, thread: str) -> tuple[int, str, str]:
    log_file = tmp_path / f"{thread}.log"
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(log_file), thread], capture_output=True, text=True, timeout=60
    )
    return done.returncode, done.stdout, log_file.read_text()


def test_a_process_without_other_threads_ends_at_once_with_its_log_flushed(tmp_path: Path) -> None:
    code, out, logged = _run(tmp_path, "none")
    assert code == 0
    assert "last line before the exit" in logged
    assert "normal exit" not in out and "teardown ran" not in out  # os._exit: no atexit hooks, no teardown


def test_a_live_non_daemon_thread_gets_the_normal_exit_which_joins_it(tmp_path: Path) -> None:
    code, out, logged = _run(tmp_path, "worker")
    assert code == 0
    assert "last line before the exit" in logged
    assert out.splitlines() == ["normal exit", "worker joined", "teardown ran"]
