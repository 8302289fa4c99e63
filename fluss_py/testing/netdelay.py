"""Added latency without ``sch_netem``: a process that holds a test host's packets in an NFQUEUE and releases each
one ``delay ± jitter`` ms later.

    ip netns exec <ns> python -m fluss_py.testing.netdelay --queue 7 --delay-ms 100 --jitter-ms 50

HostNetwork.netem starts it (one per delayed host, in that host's namespace) after the host's iptables send
every packet of eth0, both ways, to queue 7 (``-j NFQUEUE --queue-bypass``: while no process holds the queue,
packets pass untouched). Kernels with ``sch_netem`` use ``tc netem`` instead; this is the fallback for kernels
built without it (nftables' own ``queue`` statement needs NFT_QUEUE, so the rule is an iptables one).

Protocol: nfnetlink_queue over a raw NETLINK_NETFILTER socket — bind the queue (config command BIND, copy
mode META: only packet ids, the payload stays in the kernel), then for each NFQNL_MSG_PACKET send an
NFQNL_MSG_VERDICT (NF_ACCEPT, packet id) when its release time comes. Verdicts may be given out of order.
Fixed-layout structs of the queue attributes are big-endian; netlink headers are host order.

Who runs it: a process of its own, started and SIGKILLed by PID by HostNetwork (owner: the test or the CLI).
"""

from __future__ import annotations

import argparse
import heapq
import random
import select
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from fluss_py.testing.procs import ProcessHandle, wait_until

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN = 1, 2, 3
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NFQNL_CFG_CMD_BIND = 1
NFQNL_COPY_META = 1
NF_ACCEPT = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4
NLMSG_ERROR = 2
QUEUE_MAXLEN = 8192
QUEUE = 7  # queues are per network namespace: every delayed host can use the same number


def _attr(kind: int, payload: bytes) -> bytes:
    raw = struct.pack("=HH", 4 + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def _message(msg: int, queue: int, attrs: bytes, seq: int, flags: int = NLM_F_REQUEST) -> bytes:
    body = struct.pack("=BBH", socket.AF_UNSPEC, 0, socket.htons(queue)) + attrs
    return struct.pack("=IHHII", 16 + len(body), (NFNL_SUBSYS_QUEUE << 8) | msg, flags, seq, 0) + body


def config_messages(queue: int) -> list[bytes]:
    """Bind ``queue``, copy only metadata, allow QUEUE_MAXLEN held packets."""
    bind = _attr(NFQA_CFG_CMD, struct.pack(">BxH", NFQNL_CFG_CMD_BIND, 0))
    params = _attr(NFQA_CFG_PARAMS, struct.pack(">IB", 0, NFQNL_COPY_META))
    maxlen = _attr(NFQA_CFG_QUEUE_MAXLEN, struct.pack(">I", QUEUE_MAXLEN))
    flags = NLM_F_REQUEST | NLM_F_ACK
    return [
        _message(NFQNL_MSG_CONFIG, queue, bind, 1, flags),
        _message(NFQNL_MSG_CONFIG, queue, params + maxlen, 2, flags),
    ]


def verdict_message(queue: int, packet_id: int) -> bytes:
    return _message(NFQNL_MSG_VERDICT, queue, _attr(NFQA_VERDICT_HDR, struct.pack(">II", NF_ACCEPT, packet_id)), 0)


def packet_ids(data: bytes) -> tuple[list[int], list[int]]:
    """Packet ids of the NFQNL_MSG_PACKET messages in one datagram, and the error codes of NLMSG_ERRORs."""
    ids, errors = [], []
    pos = 0
    while pos + 16 <= len(data):
        length, kind = struct.unpack_from("=IH", data, pos)
        if length < 16:
            break
        if kind == NLMSG_ERROR:
            errors.append(-struct.unpack_from("=i", data, pos + 16)[0])
        elif kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
            a = pos + 20  # nlmsghdr + nfgenmsg
            while a + 4 <= pos + length:
                alen, akind = struct.unpack_from("=HH", data, a)
                if alen < 4:
                    break
                if akind & 0x7FFF == NFQA_PACKET_HDR:
                    ids.append(struct.unpack_from(">I", data, a + 4)[0])
                a += (alen + 3) & ~3
        pos += (length + 3) & ~3
    return ids, errors


def run(queue: int, delay_ms: float, jitter_ms: float, seed: int | None = None) -> None:
    rng = random.Random(seed)
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind((0, 0))
    for msg in config_messages(queue):
        sock.send(msg)
        _, errors = packet_ids(sock.recv(65536))
        if any(errors):
            raise OSError(max(errors), f"nfqueue config of queue {queue} refused")
    print(f"netdelay: queue {queue}, {delay_ms:g} ms ± {jitter_ms:g} ms", flush=True)
    held: list[tuple[float, int]] = []
    while True:
        now = time.monotonic()
        while held and held[0][0] <= now:
            sock.send(verdict_message(queue, heapq.heappop(held)[1]))
        timeout = max(0.0, held[0][0] - now) if held else None
        ready, _, _ = select.select([sock], [], [], timeout)
        if ready:
            ids, _ = packet_ids(sock.recv(1 << 16))
            arrived = time.monotonic()
            for pid in ids:
                wait = max(0.0, delay_ms + rng.uniform(-jitter_ms, jitter_ms)) / 1000.0
                heapq.heappush(held, (arrived + wait, pid))


def start_delayer(exec_prefix: list[str], delay_ms: float, jitter_ms: float, log_file: Path) -> tuple[int, int | None]:
    """In the host of ``exec_prefix``: send eth0's packets (both ways) to queue QUEUE and start the delayer;
    returns its ``(pid, start_ticks)`` once it holds the queue."""
    for chain, flag in (("OUTPUT", "-o"), ("INPUT", "-i")):
        rule = [chain, flag, "eth0", "-j", "NFQUEUE", "--queue-num", str(QUEUE), "--queue-bypass"]
        subprocess.run([*exec_prefix, "iptables", "-A", *rule], check=True, capture_output=True, timeout=30)
    log_file.parent.mkdir(parents=True, exist_ok=True)
    log_file.write_text("")
    argv = [*exec_prefix, sys.executable, "-m", "fluss_py.testing.netdelay", "--queue", str(QUEUE)]
    argv += ["--delay-ms", f"{delay_ms:g}", "--jitter-ms", f"{jitter_ms:g}"]
    handle = ProcessHandle.spawn(argv, log_file=log_file)
    try:
        wait_until(
            lambda: "netdelay: queue" in log_file.read_text() or not handle.alive(), 15, message="netdelay to bind"
        )
    except BaseException:
        handle.kill()
        raise
    if not handle.alive():
        raise RuntimeError(f"netdelay exited: {log_file.read_text()[-1000:]}")
    return handle.pid, handle.start_ticks


def stop_delayer(exec_prefix: list[str] | None, pid: int | None, start_ticks: int | None) -> None:
    """SIGKILL the delayer by PID (if it is still that process) and remove the host's queue rules."""
    if pid is not None:
        handle = ProcessHandle.attach(pid, start_ticks)
        if handle.kill():
            handle.wait_exit(10.0)
    if exec_prefix is not None:
        for chain in ("OUTPUT", "INPUT"):
            subprocess.run([*exec_prefix, "iptables", "-F", chain], capture_output=True, timeout=30)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="fluss_py.testing.netdelay")
    p.add_argument("--queue", type=int, required=True)
    p.add_argument("--delay-ms", type=float, required=True)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    args = p.parse_args(argv)
    run(args.queue, args.delay_ms, args.jitter_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
