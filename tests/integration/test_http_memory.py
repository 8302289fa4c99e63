"""Oversized HTTP requests against real server processes: each is refused, and the process does not grow.

A real coordinator and a real tablet server (real ZooKeeper) each receive 1,000 requests whose head carries
a 1 MB header; then 200 with a 1 MB request line and 200 with a 1 MB declared body. Each is answered 4xx (or
cut off by the server's close), the server's resident set (``VmRSS`` of ``/proc/<pid>/status``) grows by at
most 50 MB in all, ``/health`` still answers with the server's own data, and the log says so at most once a
minute instead of once per request. Before the fix a coordinator grew by ~1.1 GB under the same 1,000
requests (a reference cycle per refused chunk, kept until a young collection that the servers'
50,000-allocation threshold delays for hundreds of requests; docs/observability.md "Memory").
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER
from fluss_py.testing.health import fetch_health

pytestmark = pytest.mark.integration

MB = 1 << 20
GROWTH_LIMIT_MB = 50
HEADER = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * MB + b"\r\n\r\n"
LINE = b"GET /health?" + b"a" * MB + b" HTTP/1.1\r\nHost: x\r\n\r\n"
BODY = b"POST /nothing HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % MB + b"c" * MB


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def send(port: int, request: bytes) -> str:
    """One connection, one request: the status line's code, or the error when the server cut it off."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        try:
            s.sendall(request)
            answer = s.recv(64)
        except OSError as e:  # refused before all of it was read: the server closed its end
            return type(e).__name__
    return answer.split(b" ")[1].decode() if answer.startswith(b"HTTP/1.") else repr(answer)


def test_a_thousand_oversized_requests_leave_each_server_as_it_was(cluster_factory) -> None:
    cluster: LocalCluster = cluster_factory(coordinators=1, tablet_servers=1)
    cluster.wait_for_leader(30)
    growth: dict[str, float] = {}
    for name in (cluster.names(COORDINATOR)[0], cluster.names(TABLET_SERVER)[0]):
        record, pid = cluster.get(name), cluster.pid(name)
        assert pid is not None and record.http_address
        port = int(record.http_address.rsplit(":", 1)[1])
        health = fetch_health(record.http_url, 5.0)
        assert health is not None
        before = rss_mb(pid)
        answers: dict[str, int] = {}
        for request, count in ((HEADER, 1000), (LINE, 200), (BODY, 200)):
            for _ in range(count):
                answer = send(port, request)
                answers[answer] = answers.get(answer, 0) + 1
        after = rss_mb(pid)
        growth[name] = after - before
        print(f"{name}: VmRSS {before:.0f} MB -> {after:.0f} MB after 1,400 refused 1 MB requests; {answers}")
        assert set(answers) <= {"400", "413", "BrokenPipeError", "ConnectionResetError"}, answers
        assert answers.get("400", 0) >= 500 and answers.get("413", 0) >= 100, answers  # mostly answered
        assert after - before <= GROWTH_LIMIT_MB, f"{name} grew {after - before:.0f} MB ({before:.0f} -> {after:.0f})"
        again = fetch_health(record.http_url, 5.0)  # still serving, and still itself
        assert again is not None and again["server_id"] == health["server_id"] and again["role"] == health["role"]
        assert json.loads(json.dumps(again)) == again
        refusals = cluster.log_text(name).count("Error handling request")
        assert 1 <= refusals <= 3, f"{refusals} refusal lines in {name}'s log: at most one a minute"
    print(f"VmRSS growth (MB): {growth}")
