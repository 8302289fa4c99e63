"""The console in a real headless Chromium (Debian's chromium + chromedriver, driven by selenium) against a
real cluster: the page shows three tablet servers and a table's buckets; a kill -9 of a bucket leader shows
as a new leader and a shrunk ISR without a reload; a dry-run rebalance started from the page shows its plan;
a consumer group's member, its buckets and their lag (with a sparkline) show in the groups panel.
Screenshots of each step are saved in ``$FLUSS_PY_ARTIFACTS/console`` (default ``.artifacts/console``)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fluss_py.cli.console import console_url
from fluss_py.client import SyncAdmin, SyncConsumer
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from fluss_py.testing.faults import kill9
from tests.integration.console_support import produce_keyed

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.by import By  # noqa: E402

pytestmark = pytest.mark.fault

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
TABLE = "fluss.console_browser"
GROUP = "console-browser-readers"
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1400,1800")  # fmt: skip
ARTIFACTS = Path(os.environ.get("FLUSS_PY_ARTIFACTS", Path(__file__).parents[2] / ".artifacts")) / "console"


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[object]:
    if CHROMIUM is None or CHROMEDRIVER is None:
        pytest.fail("chromium and chromedriver are missing: run `make install` (deploy/install-test-tools.sh)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log"))
    driver = webdriver.Chrome(options=options, service=service)  # the driver ends chromium on quit
    try:
        yield driver
    finally:
        driver.quit()


def _cells(driver: object, table: str) -> list[list[str]]:
    """The texts of ``table``'s rows, read in one script run (the page redraws its rows every second, so
    element handles kept across calls would go stale)."""
    script = "return [...document.querySelectorAll(arguments[0])].map(r => [...r.cells].map(c => c.textContent));"
    return driver.execute_script(script, f"#{table} tbody tr")  # type: ignore[attr-defined]


def test_console_in_chromium_follows_a_leader_kill_and_plans_a_rebalance(cluster_factory, browser):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    cluster: LocalCluster = cluster_factory(coordinators=1, tablet_servers=3,
                                            coordinator_overrides={"coordinator.rebalance.auto": "false"})  # fmt: skip
    cluster.wait_for_leader(30)
    with SyncAdmin(cluster.get(f"{TABLET_SERVER}-1").rpc_address, request_timeout=10.0) as admin:
        admin.create_table(TABLE, num_buckets=6, replication_factor=2)  # plannable with 2 live
    url = console_url(cluster)
    assert url is not None
    browser.get(url)  # type: ignore[attr-defined]

    def buckets_with_full_isr() -> list[list[str]] | None:
        rows = _cells(browser, "buckets")
        # columns: bucket, leader, epoch, replicas, ISR, HW, LEO, size, state; HW/LEO arrive with the leaders'
        # next size report (every 2 s)
        full = [r for r in rows if len(r) == 9 and r[1] != "-1" and len(r[4].split(",")) == 2 and r[5] != "—"]
        return rows if len(full) == 6 else None

    def servers_with_disk_use() -> list[list[str]] | None:
        rows = _cells(browser, "servers")  # the last two columns: bytes held, "<free> free of <total> (<n>% used)"
        return rows if len(rows) == 3 and all(r[-1].endswith("% used)") and r[-2] != "—" for r in rows) else None

    cluster.wait_until(servers_with_disk_use, 30, "three tablet servers with their disk use on the page")
    rows = cluster.wait_until(buckets_with_full_isr, 30, "six buckets with a leader and a full ISR on the page")
    assert [r[0] for r in _cells(browser, "tables")] == [TABLE]
    coordinators = cluster.wait_until(lambda: [r for r in _cells(browser, "coordinators") if r[2] == "Leader"] or None,
                                      30, "the coordinators panel shows the leader")  # fmt: skip
    assert len(coordinators) == 1 and coordinators[0][3] not in ("", "—"), coordinators  # with its epoch
    browser.save_screenshot(str(ARTIFACTS / "1-cluster.png"))  # type: ignore[attr-defined]
    renders = int(browser.find_element(By.TAG_NAME, "body").get_attribute("data-renders"))  # type: ignore[attr-defined]

    victim = rows[0][1]  # the leader of bucket 0
    kill9(cluster, f"{TABLET_SERVER}-{victim}")

    def bucket0_moved() -> bool:
        row = next(r for r in _cells(browser, "buckets") if r[0] == "0")
        return row[1] not in (victim, "-1") and victim not in row[4].split(",")

    cluster.wait_until(bucket0_moved, 60, "bucket 0 shows a new leader and an ISR without the killed server")
    # the page was updated in place: the render counter kept growing (a reload would have reset it)
    assert int(browser.find_element(By.TAG_NAME, "body").get_attribute("data-renders")) > renders  # type: ignore[attr-defined]
    dead = [r for r in _cells(browser, "servers") if r[0] == victim]
    assert dead and dead[0][3] == "NO"
    assert any(r[3] == "leader" for r in _cells(browser, "events"))
    browser.save_screenshot(str(ARTIFACTS / "2-after-leader-kill.png"))  # type: ignore[attr-defined]

    # a rebalance needs every replica's server up: the page shows the coordinator's refusal
    plan = _dry_run(cluster, browser)
    assert plan.startswith("400: INVALID_REBALANCE_PLAN"), plan
    cluster.start_process(f"{TABLET_SERVER}-{victim}", wait=True, timeout=60)
    cluster.wait_until(lambda: all(r[3] == "yes" for r in _cells(browser, "servers")), 30, "all servers alive again")
    cluster.wait_until(buckets_with_full_isr, 60, "every bucket's ISR full again on the page")
    plan = _dry_run(cluster, browser)
    assert plan.split()[0] in ("PLANNED", "BALANCED"), plan
    assert browser.find_element(By.ID, "rebalance-plan").get_attribute("class") != "error"  # type: ignore[attr-defined]
    browser.save_screenshot(str(ARTIFACTS / "3-dry-run.png"))  # type: ignore[attr-defined]

    # a consumer group reads and commits 30 records, then 30 more arrive: its member and a lag of 30 in total
    bootstrap = cluster.get(f"{TABLET_SERVER}-1").rpc_address
    produce_keyed(bootstrap, 0, 30, TABLE)
    with SyncConsumer(bootstrap, group=GROUP, subscribe=[TABLE]) as consumer:
        seen: list[object] = []
        cluster.wait_until(lambda: seen.extend(consumer.poll(1.0)) or len(seen) >= 30, 60, "the member read 30")
        consumer.commit()
        produce_keyed(bootstrap, 30, 30, TABLE)

        def lag_shown() -> list[list[str]] | None:
            # columns: group, table, bucket, committed, HW, lag, sparkline
            rows = [r for r in _cells(browser, "group-offsets") if r[0] == GROUP]
            lags = [int(r[5]) for r in rows if r[5] != "—"]
            return rows if len(rows) == 6 and len(lags) == 6 and sum(lags) == 30 else None

        cluster.wait_until(lag_shown, 60, "the groups panel shows a lag of 30 over the 6 buckets")
        (member,) = [r for r in _cells(browser, "group-members") if r[0] == GROUP]
        assert member[1] == "STABLE" and member[2] not in ("", "—") and len(member[4].split(", ")) == 6, member
        lines = "return document.querySelectorAll('#group-offsets svg.sparkline polyline').length;"
        cluster.wait_until(lambda: browser.execute_script(lines) == 6, 30, "a lag sparkline per bucket")  # type: ignore[attr-defined]
        browser.save_screenshot(str(ARTIFACTS / "4-consumer-group.png"))  # type: ignore[attr-defined]


def _dry_run(cluster: LocalCluster, driver: object) -> str:
    """Click *Plan (dry run)* and return the text the page shows for the answer."""
    driver.execute_script("document.getElementById('rebalance-plan').textContent = '';")  # type: ignore[attr-defined]
    driver.find_element(By.ID, "rebalance-dry-run").click()  # type: ignore[attr-defined]
    text = "return document.getElementById('rebalance-plan').textContent;"
    return str(cluster.wait_until(lambda: driver.execute_script(text).strip(), 30, "the dry-run answer on the page"))  # type: ignore[attr-defined]
