"""common/http_input.py and common/gc_guard.py: a refused HTTP head leaves no reference cycle; the guard's
decisions (when to collect, which generation) and its round with fake RSS readings."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket

import pytest
import uvloop

from fluss_py.common import gc_guard
from fluss_py.common.gc_guard import GcGuard, due, young_generation
from fluss_py.common.http import HttpServer, json_response
from fluss_py.common.http_input import _OncePerInterval

pytestmark = pytest.mark.unit

HELD = {"frame", "traceback", "RequestHandler", "BadHttpMessage", "LineTooLong", "_ErrInfo", "BoundedInput"}
BIG_HEAD = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"


def _send(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        try:
            s.sendall(data)
            return s.recv(64)
        except OSError:
            return b""


def test_a_refused_head_leaves_no_cycle_and_the_next_request_is_served() -> None:
    async def run() -> tuple[list[bytes], list[str], bytes]:
        async def health():
            return json_response({"ok": True})

        server = HttpServer("127.0.0.1", 0, {"/health": health})
        await server.start()
        gc.collect()
        gc.disable()  # only what this test leaves behind is found below
        try:
            answers = [await asyncio.to_thread(_send, server.port, BIG_HEAD) for _ in range(3)]
            await asyncio.sleep(0.3)  # the handlers answer 400 and close
            gc.set_debug(gc.DEBUG_SAVEALL)
            gc.collect()
            left = sorted({type(o).__name__ for o in gc.garbage} & HELD)
            ok = await asyncio.to_thread(_send, server.port, b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
            await server.close()
        return answers, left, ok

    answers, left, ok = uvloop.run(run())  # the servers' loop
    assert all(a.startswith(b"HTTP/1.0 400") or a == b"" for a in answers), answers
    assert any(a.startswith(b"HTTP/1.0 400") for a in answers), answers
    assert left == [], f"unreachable objects left by refused requests: {left}"
    assert ok.startswith(b"HTTP/1.1 200"), ok


def test_refusals_are_logged_once_a_minute_with_a_count() -> None:
    f = _OncePerInterval(60.0)
    records = [logging.LogRecord("x", logging.ERROR, "", 0, "Error handling request", (), None) for _ in range(4)]
    assert [f.filter(r) for r in records] == [True, False, False, False]
    f._last -= 61  # a minute later
    late = logging.LogRecord("x", logging.ERROR, "", 0, "Error handling request", (), None)
    assert f.filter(late) and "and 3 more refused" in late.getMessage()


def test_the_guard_collects_only_after_a_step_of_growth_and_follows_memory_down() -> None:
    assert not due(100, 90, 32) and due(122, 90, 32)
    readings = iter([100, 140, 104, 200, 120, 50, 81, 83, 83])
    collected: list[int] = []
    guard = GcGuard(step=32, rss=lambda: next(readings), collect=lambda g: collected.append(g) or 7,
                    trim=lambda pad: 0)  # fmt: skip
    assert guard.check(100) == 100  # no growth
    assert guard.check(100) == 104  # 140: collected; the RSS after it is the new baseline
    assert guard.check(104) == 120  # 200 -> 120
    assert guard.check(120) == 50  # went down: counted from there
    assert guard.check(50) == 50 and guard.check(50) == 83  # 81: not yet; 83 >= 50 + 32: collect (83 after)
    assert (len(collected), guard.collections, guard.freed) == (3, 3, 21)


def test_the_guard_takes_generation_1_when_cpython_would() -> None:
    assert young_generation((10, 3, 0), (50_000, 20, 10)) == 0
    assert young_generation((10, 20, 0), (50_000, 20, 10)) == 1
    assert young_generation((10, 99, 99), (50_000, 20, 10)) == 1  # never 2


def test_without_proc_the_guard_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gc_guard, "resident_bytes", lambda: None)
    asyncio.run(asyncio.wait_for(GcGuard(rss=lambda: None).run(), 5))  # returns at once
    assert gc_guard.resident_bytes() is None
