"""A message round trip on a gRPC bidirectional stream between two processes, per I/O engine.

``python -m tests.bench.grpc_rtt [PAIRS] [ROUND_TRIPS]`` (default 4 pairs of 3000): for each pair, in
alternating order, a server process and a client process are started with ``GRPC_EXPERIMENTS`` set to
``fluss_py.grpc_env.CLASSIC_IO`` ("classic", what importing fluss_py picks) and to the empty string ("default",
gRPC's EventEngine); the client writes a 100 B message on one open stream, waits for its echo, and repeats.
Printed per run: the round trip's p50 / p99 and each process's CPU time per round trip (``time.process_time``
in either process, read over the measured round trips; the server reports its own when asked on the
stream). The plain-asyncio row (``--raw``) is the floor: the same ping-pong over a TCP socket with
``asyncio.start_server``. Both sides run uvloop, as the servers and the CLI do.

This is the measurement behind ``fluss_py/grpc_env.py`` (docs/performance.md "gRPC's I/O engine"). Not a
``make bench`` module: the cluster rows show what the engine does to the system; this shows why.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from fluss_py.grpc_env import CLASSIC_IO, ENV

PAYLOAD = b"x" * 100
ASK_CPU = b"cpu?"
MODES = {"classic": CLASSIC_IO, "default": ""}
CLIENT_TIMEOUT_S = 300.0


async def _serve_grpc() -> None:
    import grpc
    import grpc.aio

    async def echo(requests, context):
        async for request in requests:
            yield str(time.process_time()).encode() if request == ASK_CPU else request

    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(echo)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("bench.Echo", {"S": handler}),))
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    print(port, flush=True)
    await server.wait_for_termination()


async def _serve_raw() -> None:
    import asyncio

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readexactly(len(PAYLOAD))
                writer.write(f"{time.process_time():<100.6f}".encode() if request[:4] == ASK_CPU else request)
        except asyncio.IncompleteReadError:
            writer.close()  # the client is done

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    await server.serve_forever()


def _summary(rtts: list[float], client_cpu: float, server_cpu: float) -> str:
    rtts.sort()
    n = len(rtts)
    return (
        f"p50 {rtts[n // 2] * 1e6:6.1f} us  p99 {rtts[int(n * 0.99)] * 1e6:6.1f} us  "
        f"CPU per round trip: client {client_cpu / n * 1e6:5.1f} us, server {server_cpu / n * 1e6:5.1f} us"
    )


async def _client_grpc(port: int, n: int) -> str:
    import grpc.aio

    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        call = channel.stream_stream("/bench.Echo/S")()
        for _ in range(200):  # warm-up
            await call.write(PAYLOAD)
            await call.read()
        await call.write(ASK_CPU)
        server_before, client_before = float(await call.read()), time.process_time()
        rtts = []
        for _ in range(n):
            t = time.perf_counter()
            await call.write(PAYLOAD)
            await call.read()
            rtts.append(time.perf_counter() - t)
        client_cpu = time.process_time() - client_before
        await call.write(ASK_CPU)
        server_cpu = float(await call.read()) - server_before
        await call.done_writing()
    return _summary(rtts, client_cpu, server_cpu)


async def _client_raw(port: int, n: int) -> str:
    import asyncio

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    ask = ASK_CPU.ljust(len(PAYLOAD))
    for _ in range(200):
        writer.write(PAYLOAD)
        await reader.readexactly(len(PAYLOAD))
    writer.write(ask)
    server_before, client_before = float(await reader.readexactly(len(PAYLOAD))), time.process_time()
    rtts = []
    for _ in range(n):
        t = time.perf_counter()
        writer.write(PAYLOAD)
        await reader.readexactly(len(PAYLOAD))
        rtts.append(time.perf_counter() - t)
    client_cpu = time.process_time() - client_before
    writer.write(ask)
    server_cpu = float(await reader.readexactly(len(PAYLOAD))) - server_before
    writer.close()
    return _summary(rtts, client_cpu, server_cpu)


def _run(mode: str, n: int) -> str:
    env = {**os.environ}
    if mode in MODES:
        env[ENV] = MODES[mode]
    kind = "raw" if mode == "raw" else "grpc"
    cmd = [sys.executable, "-m", "tests.bench.grpc_rtt"]
    server = subprocess.Popen([*cmd, f"--serve-{kind}"], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = server.stdout.readline().strip()
        client = [*cmd, f"--client-{kind}", port, str(n)]
        done = subprocess.run(client, env=env, capture_output=True, text=True, check=True, timeout=CLIENT_TIMEOUT_S)
        return done.stdout.strip()
    finally:
        server.kill()  # the server this run started, by its PID
        server.wait()


def main(argv: list[str]) -> None:
    import uvloop

    if argv and argv[0].startswith("--serve-"):
        uvloop.run(_serve_grpc() if argv[0] == "--serve-grpc" else _serve_raw())
        return
    if argv and argv[0].startswith("--client-"):
        client = _client_grpc if argv[0] == "--client-grpc" else _client_raw
        print(uvloop.run(client(int(argv[1]), int(argv[2]))))
        return
    raw = "--raw" in argv
    numbers = [int(a) for a in argv if not a.startswith("--")]
    pairs, n = (numbers + [4, 3000][len(numbers) :])[:2]
    load = os.getloadavg()[0]
    print(f"{pairs} pairs of {n} round trips, 100 B, load average {load:.1f}")
    for pair in range(pairs):
        order = ["classic", "default"] if pair % 2 == 0 else ["default", "classic"]
        for mode in order + (["raw"] if raw else []):
            print(f"pair {pair + 1}  {mode:8s} {_run(mode, n)}", flush=True)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
