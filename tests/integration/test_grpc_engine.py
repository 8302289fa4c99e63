"""Importing fluss_py makes gRPC read its sockets on the completion-queue thread (``fluss_py/grpc_env.py``).

A child process with a clean environment imports ``fluss_py`` and then ``grpc``, runs a bidirectional stream
between a real grpc.aio server and channel of its own over loopback, and reports the CPU time of its threads
by name (``/proc/self/task``). With gRPC's EventEngine the socket work runs on threads named
``event_engine``; with the classic engine those threads do nothing. The control run, ``GRPC_EXPERIMENTS=``
(the user's choice of gRPC's defaults), must show EventEngine work, or the test could not tell the two apart.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import asyncio, collections, json, os, sys
import fluss_py  # first: picks the engine
import grpc, grpc.aio

ROUND_TRIPS = 6000

def ticks():
    out = collections.Counter()
    for task in os.listdir("/proc/self/task"):
        stat = open(f"/proc/self/task/{task}/stat").read()
        name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
        out[name] += int(rest[11]) + int(rest[12])  # utime + stime
    return out

async def echo_stream(requests, context):
    async for request in requests:
        yield request

async def main():
    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(echo_stream)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("t.Echo", {"S": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream("/t.Echo/S")()
        await call.write(b"warm"); await call.read()
        before = ticks()
        for _ in range(ROUND_TRIPS):
            await call.write(b"x" * 100)
            await call.read()
        after = ticks()
        await call.done_writing()
    await server.stop(None)
    after.subtract(before)
    print(json.dumps({"env": os.environ.get("GRPC_EXPERIMENTS"), "ticks": dict(after)}))

asyncio.run(main())
"""


def _run(env_value: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "GRPC_EXPERIMENTS"}
    if env_value is not None:
        env["GRPC_EXPERIMENTS"] = env_value
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_fluss_py_processes_read_sockets_on_the_completion_queue_thread() -> None:
    classic = _run(None)
    default = _run("")
    assert classic["env"] and "-event_engine_client" in classic["env"]
    assert default["env"] == ""
    # 6000 round trips cost ~1 s of CPU; on the EventEngine a quarter of it is on its threads
    assert default["ticks"].get("event_engine", 0) >= 5, default
    assert classic["ticks"].get("event_engine", 0) <= 1, classic
    assert classic["ticks"].get("python", 0) >= 20, classic
