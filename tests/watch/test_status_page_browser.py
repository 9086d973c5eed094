"""The status page in a real browser: Debian's headless Chromium through its chromedriver
(Selenium), JavaScript switched off, reading what a person reads. The screenshot is kept
under artifacts/ at the project's root (named in the test's output)."""

from __future__ import annotations

import pathlib
import shutil
from dataclasses import replace

import pytest

from reconciler.watch import server
from reconciler.watch import status as st
from tests.helpers import snapshots as b

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (pathlib.Path(CHROMIUM).exists() and pathlib.Path(DRIVER).exists()):
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000"):
        options.add_argument(arg)
    # The page must work without JavaScript: the browser runs none.
    options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def _fleet() -> st.Snapshot:
    clockless = list(b.fleet(8))
    clockless[5] = replace(clockless[5], sync=st.DRIFTED, changed_at=b.T0 + 20,
                           reason="spec.compute.gpuDevicesRequest changed outside: 2 -> 4 live")
    snap = b.snapshot(workloads=clockless, projects=(
        st.ProjectStatus("7", "team-a", gpus_held=18, gpus_planned=16, quota=24),
        st.ProjectStatus("9", "research", gpus_held=30, gpus_planned=36, quota=32)))
    for _ in range(3):
        snap = b.next_cycle(snap, actions={"update/ok": 1})
    return snap


def test_the_page_lists_the_drifted_workload_first_with_its_reason(browser, capsys):
    from selenium.webdriver.common.by import By

    board = st.StatusBoard(_fleet(), clock=b.Clock(b.T0 + 120))
    handle = server.serve(board, "127.0.0.1:0")
    try:
        browser.get(handle.url + "/")
        assert browser.title.startswith("(1) runai-reconcile watch")
        rows = browser.find_elements(By.CSS_SELECTOR, "#attention tbody tr")
        assert len(rows) == 1
        first = rows[0]
        assert first.get_attribute("data-address") == "Training/7/job-5"
        cells = [c.text for c in first.find_elements(By.TAG_NAME, "td")]
        assert cells[:3] == ["Training/7/job-5", "Drifted", "Healthy"]
        assert cells[3] == "spec.compute.gpuDevicesRequest changed outside: 2 -> 4 live"
        drifted = browser.find_element(By.CSS_SELECTOR, '.tile[data-sync="Drifted"]')
        assert drifted.text.split() == ["1", "Drifted"]
        research = browser.find_element(By.CSS_SELECTOR, 'tr[data-project="9"]')
        assert "planned 4 over quota" in research.text
        # The healthy ones wait, folded, below the cycles.
        folded = browser.find_element(By.CSS_SELECTOR, "details summary")
        assert folded.text == "7 workloads Synced and Healthy"
        assert len(browser.find_elements(By.CSS_SELECTOR, "#cycles tbody tr")) == 3

        out = ROOT / "artifacts"
        out.mkdir(exist_ok=True)
        shot = out / "watch-status-page.png"
        assert browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        with capsys.disabled():
            print(f"\nstatus page screenshot: {shot}")
    finally:
        handle.close()
