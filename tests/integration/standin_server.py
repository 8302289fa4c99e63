"""A stand-in for `fluss-py coordinator|tablet-server` used to test the harness itself.

It speaks only the process contract's HTTP side: GET /health (coordinator-1 is Leader with epoch 1, the
others Standby; tablet servers registered) and GET /metrics; SIGTERM exits 0. It is NOT a server.
"""

import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main(argv: list[str]) -> int:
    role = argv[0]
    settings = {}
    it = iter(argv[1:])
    for arg in it:
        if arg == "-D":
            key, _, value = next(it).partition("=")
            settings[key] = value
        elif arg == "--config":
            next(it)
    if role == "coordinator":
        sid = int(settings["coordinator.id"])
        health = {
            "role": role,
            "server_id": sid,
            "state": "Leader" if sid == 1 else "Standby",
            "coordinator_epoch": 1,
            "leader_id": 1,
            "zk_connected": True,
        }
    else:
        sid = int(settings["tablet-server.id"])
        health = {"role": role, "server_id": sid, "state": "Running", "registered": True, "zk_connected": True}
    body = json.dumps(health).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):
            payload = body if self.path == "/health" else b"standin_up 1\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", int(settings["http.port"])), Handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    print(f"standin {role} {sid} up", flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
