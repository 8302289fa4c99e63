"""The web console with 2000 buckets (docs/console.md, docs/performance.md).

A real cluster (one coordinator, three tablet servers, one table of 2000 buckets, replication factor 1):

- one sample on the coordinator: the snapshot built and encoded in-process from an equivalent ClusterView
  (what the coordinator does once a second, whatever the number of consoles);
- time to first render: headless Chromium (Debian's, through selenium) from ``get(/console)`` until the page
  has drawn its first snapshot with the bucket table filled;
- coordinator CPU per connected console: the coordinator process's CPU time (/proc) over a window with no
  console, then with ``CONSOLES`` Server-Sent-Event readers connected, the difference divided by their number.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

from fluss_py.cli.console import console_url
from fluss_py.client import SyncAdmin
from fluss_py.console.snapshot import ConsoleSource, build_snapshot
from fluss_py.coordinator.tables import ClusterView, TableRegistration
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER
from fluss_py.types import LeaderAndIsr, TableBucket, TablePath
from fluss_py.zk.codecs import TabletServerRegistration
from tests.bench.common import row

BUCKETS = 2000
CONSOLES = 4
WINDOW_S = 20.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


def _sample_ms() -> tuple[float, int]:
    view = ClusterView()
    view.add_table(TableRegistration(1, TablePath("fluss", "t"), BUCKETS, 3), {b: (1, 2, 3) for b in range(BUCKETS)})
    for tb, bucket in view.buckets.items():
        bucket.leader_and_isr = LeaderAndIsr(1 + tb.bucket % 3, 0, (1, 2, 3), 1, 0)
    servers = {s: TabletServerRegistration("127.0.0.1", 9000 + s) for s in (1, 2, 3)}
    sizes = {TableBucket(1, b): 1 << 20 for b in range(BUCKETS)}
    offsets = {s: {TableBucket(1, b): (1000, 1000) for b in range(BUCKETS) if 1 + b % 3 == s} for s in (1, 2, 3)}
    source = ConsoleSource({"id": 1, "state": "Leader"}, view, {1, 2, 3}, servers, sizes, offsets)
    t = time.perf_counter()
    for _ in range(10):
        encoded = json.dumps(build_snapshot(source, time.time()), separators=(",", ":")).encode()
    return (time.perf_counter() - t) / 10 * 1e3, len(encoded)


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def _reader(address: str, stop: threading.Event) -> None:
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("GET", "/console/events")
    response = conn.getresponse()
    while not stop.is_set():
        if not response.readline():
            break
    conn.close()


def _first_render_ms(url: str, profile: Path) -> float | None:
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver_path is None:
        return None
    from selenium import webdriver

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=driver_path))
    try:
        t = time.perf_counter()
        driver.get(url)
        script = "return document.querySelectorAll('#buckets tbody tr').length;"
        while driver.execute_script(script) == 0:
            if time.perf_counter() - t > 60:
                return None
            time.sleep(0.01)
        return (time.perf_counter() - t) * 1e3
    finally:
        driver.quit()


def _cluster_rows(directory: Path) -> list[dict]:
    cluster = LocalCluster(directory, coordinators=1, tablet_servers=3, overrides={"log.level": "WARNING"},
                           die_with_parent=True)  # fmt: skip
    try:
        cluster.start(timeout=60)
        leader = cluster.wait_for_leader(30)
        with SyncAdmin(cluster.get(f"{TABLET_SERVER}-1").rpc_address, request_timeout=120.0) as admin:
            admin.create_table("fluss.console_bench", num_buckets=BUCKETS, replication_factor=1)
        url = console_url(cluster)
        address = cluster.get(leader).http_address
        assert url is not None and leader in cluster.names(COORDINATOR)

        def led() -> bool:
            host, port = address.rsplit(":", 1)
            conn = http.client.HTTPConnection(host, int(port), timeout=10)
            conn.request("GET", "/console/snapshot")
            body = conn.getresponse().read()
            conn.close()
            return body.count(b'"leader":-1') == 0 and body.count(b'"bucket":') == BUCKETS

        cluster.wait_until(led, 300, "every bucket with a leader in the console snapshot", interval=1.0)
        render_ms = _first_render_ms(url, directory / "chromium-profile")
        pid = cluster.pid(leader)
        assert pid is not None
        idle0 = _cpu_s(pid)
        time.sleep(WINDOW_S)  # a measurement window, not a synchronisation
        idle = _cpu_s(pid) - idle0
        stop = threading.Event()
        readers = [threading.Thread(target=_reader, args=(address, stop), daemon=True) for _ in range(CONSOLES)]
        for r in readers:
            r.start()
        busy0 = _cpu_s(pid)
        time.sleep(WINDOW_S)
        busy = _cpu_s(pid) - busy0
        stop.set()
        per_console = max(0.0, busy - idle) / CONSOLES / WINDOW_S * 100
        rows = [row(f"coordinator CPU, no console ({BUCKETS} buckets)", idle / WINDOW_S * 100, "% of a core")]
        rows.append(row(f"coordinator CPU per connected console ({BUCKETS} buckets)", per_console, "% of a core",
                        "< 5 %", per_console < 5))  # fmt: skip
        if render_ms is not None:
            rows.append(row(f"console time to first render ({BUCKETS} buckets)", render_ms, "ms", "< 3000 ms",
                            render_ms < 3000))  # fmt: skip
        return rows
    finally:
        cluster.close()


def run() -> list[dict]:
    sample_ms, size = _sample_ms()
    rows = [
        row(f"console sample: snapshot + JSON ({BUCKETS} buckets)", sample_ms, "ms", "< 100 ms", sample_ms < 100),
        row(f"console snapshot size ({BUCKETS} buckets)", size / 1024, "KiB"),
    ]
    with tempfile.TemporaryDirectory(prefix="bench-console-") as d:
        return rows + _cluster_rows(Path(d))


if __name__ == "__main__":
    for r in run():
        print(r)
