"""The status page in a real browser: Debian's headless Chromium through its chromedriver
(Selenium), reading what a person reads: with JavaScript switched off (the page works
without it), and with it on, audited by axe-core 4 (from npm, under tests/watch/axe/,
injected into the page) at desktop width and at a phone's 375 px, and updating itself
until the reader pauses it. The screenshot is kept under artifacts/ at the project's root
(named in the test's output)."""

from __future__ import annotations

import json
import pathlib
import shutil
import time
from dataclasses import replace

import pytest

from reconciler.watch import server
from reconciler.watch import status as st
from tests.helpers import snapshots as b

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
AXE = pathlib.Path(__file__).resolve().parent / "axe" / "node_modules" / "axe-core" / "axe.min.js"
PHONE = 375  # CSS pixels: a small phone's width


def _chrome(*, javascript: bool):
    webdriver = pytest.importorskip("selenium.webdriver")
    if not (pathlib.Path(CHROMIUM).exists() and pathlib.Path(DRIVER).exists()):
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1280,1000"):
        options.add_argument(arg)
    if not javascript:
        options.add_experimental_option(
            "prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
    driver.set_page_load_timeout(30)
    return driver


@pytest.fixture
def browser():
    """The page must work without JavaScript: this browser runs none."""
    driver = _chrome(javascript=False)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def scripted():
    """A browser that runs the page's script (one for the module's tests: Chromium's start
    is the slow part); each test sets the viewport it needs."""
    driver = _chrome(javascript=True)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def axe_source() -> str:
    if not AXE.exists():
        pytest.skip("axe-core is not installed: npm ci --prefix tests/watch/axe (.ci/run does)")
    return AXE.read_text()


def _viewport(driver, width: int, height: int = 900, *, phone: bool = False) -> None:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": width, "height": height, "deviceScaleFactor": 1, "mobile": phone})


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
        # Without scripts nothing updates it: the Reload link does, and no dead button shows.
        assert browser.find_elements(By.CSS_SELECTOR, 'meta[http-equiv="refresh" i]') == []
        assert browser.find_element(By.ID, "reload").is_displayed()
        assert not browser.find_element(By.ID, "pause").is_displayed()

        out = ROOT / "artifacts"
        out.mkdir(exist_ok=True)
        shot = out / "watch-status-page.png"
        assert browser.save_screenshot(str(shot))
        assert shot.stat().st_size > 10_000
        with capsys.disabled():
            print(f"\nstatus page screenshot: {shot}")
    finally:
        handle.close()


def _troubled() -> st.Snapshot:
    """A fleet in trouble, as a reader meets it on a bad day: a drifted workload, a failed
    one (its action's error) held back by a policy, one Missing, a project over its quota,
    the last cycle failed (a banner), tiles at zero beside tiles that are not, and a long
    address a phone must not be widened by."""
    fleet = list(b.fleet(6))
    fleet[1] = replace(fleet[1], sync=st.DRIFTED, changed_at=b.T0 + 20,
                       reason="spec.compute.gpuDevicesRequest changed outside: 2 -> 4 live")
    fleet[2] = replace(fleet[2], sync=st.FAILED, changed_at=b.T0 + 40,
                       blocked_by="policy no-friday-deploys",
                       error="PATCH /api/v1/workloads/inferences/1f2e: answered 422 for "
                             "spec.environmentVariables[HF_TOKEN].value (sensitive)")
    fleet[3] = replace(fleet[3], health=st.MISSING, phase=None, changed_at=b.T0 + 60,
                       reason="deleted outside the reconciler")
    fleet.append(b.workload("a-distributed-inference-with-a-very-long-name-for-a-phone",
                            kind="DistributedInference", sync=st.OUT_OF_SYNC,
                            health=st.PROGRESSING, phase="Creating"))
    snap = b.snapshot(workloads=fleet, projects=(
        st.ProjectStatus("7", "team-a", gpus_held=18, gpus_planned=16, quota=24),
        st.ProjectStatus("9", "research", gpus_held=40, gpus_planned=36, quota=32),
        st.ProjectStatus("11", None, gpus_held=0, gpus_planned=4, quota=None,
                         quota_why="the project's quota could not be read")))
    snap = b.next_cycle(snap, actions={"update/ok": 1, "delete/deferred": 2})
    snap = b.next_cycle(snap, actions={"update/failed": 1}, drift_found=1)
    return b.next_cycle(snap, result="failed",
                        error="GET /api/v1/workloads: the --timeout of 60 s ran out")


def _audit(driver, axe: str) -> dict:
    driver.execute_script(axe)
    raw = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {resultTypes: ['violations']})"
        ".then(r => done(JSON.stringify(r)), e => done(JSON.stringify({error: String(e)})));")
    result = json.loads(raw)
    assert "error" not in result, result
    return result


def _open_page(driver, url: str) -> None:
    driver.get(url)
    # The folded list is part of the page too: open it, so that axe sees its rows.
    driver.find_element("css selector", "details summary").click()


@pytest.mark.parametrize("width", [1280, PHONE])
def test_axe_finds_no_critical_or_serious_violation(scripted, axe_source, width):
    board = st.StatusBoard(_troubled(), clock=b.Clock(b.T0 + 120))
    handle = server.serve(board, "127.0.0.1:0", refresh_s=60)
    try:
        _viewport(scripted, width, phone=width == PHONE)
        _open_page(scripted, handle.url + "/")
        assert scripted.find_element("css selector", "#attention tbody tr")  # the state shows
        result = _audit(scripted, axe_source)
    finally:
        handle.close()
    assert result["testEngine"]["version"].startswith("4.")
    ran = {r["id"] for key in ("violations", "passes", "incomplete") for r in result[key]}
    assert "color-contrast" in ran  # contrast is judged, not left out
    bad = [(v["id"], v["impact"], v["help"], [n["target"] for n in v["nodes"]][:5])
           for v in result["violations"] if v["impact"] in ("critical", "serious")]
    assert bad == []


def test_at_a_phones_width_only_the_tables_scroll(scripted):
    board = st.StatusBoard(_troubled(), clock=b.Clock(b.T0 + 120))
    handle = server.serve(board, "127.0.0.1:0", refresh_s=60)
    try:
        _viewport(scripted, PHONE, 800, phone=True)
        _open_page(scripted, handle.url + "/")
        assert scripted.execute_script("return window.innerWidth") == PHONE
        assert scripted.execute_script("return document.documentElement.scrollWidth") <= PHONE
        # The attention table is wider than the phone: its own box scrolls sideways.
        box = scripted.execute_script(
            "const t = document.getElementById('attention').parentElement;"
            "return [t.scrollWidth, t.clientWidth, getComputedStyle(t).overflowX];")
        assert box[0] > box[1] and box[2] == "auto"
        out = ROOT / "artifacts"
        out.mkdir(exist_ok=True)
        assert scripted.save_screenshot(str(out / "watch-status-page-phone.png"))
        _viewport(scripted, 1280, 1000)
        scripted.get(handle.url + "/")
        assert scripted.save_screenshot(str(out / "watch-status-page-desktop.png"))
    finally:
        handle.close()


def _tile(driver, sync: str) -> str:
    """The tile's count, read in one step (an update may swap the element meanwhile)."""
    return driver.execute_script(
        "return document.querySelector(arguments[0]).textContent",
        f'.tile[data-sync="{sync}"] .v')


def _updates(driver) -> int:
    return int(driver.execute_script("return document.documentElement.dataset.updates || 0"))


def test_the_page_updates_itself_without_a_reload_until_paused(scripted):
    from selenium.webdriver.common.by import By

    snap = b.next_cycle(b.snapshot())
    board = st.StatusBoard(snap, clock=b.Clock(b.T0 + 60))
    handle = server.serve(board, "127.0.0.1:0", refresh_s=1)
    try:
        _viewport(scripted, 1280, 1000)
        scripted.get(handle.url + "/")
        assert scripted.find_elements(By.CSS_SELECTOR, 'meta[http-equiv="refresh" i]') == []
        scripted.execute_script("window.sameDocument = true")  # gone if the page reloads
        assert _tile(scripted, "Drifted") == "0"
        pause = scripted.find_element(By.ID, "pause")
        assert pause.is_displayed() and pause.text == "Pause updates"

        board.publish(b.next_cycle(board.snapshot, workloads=b.changed(
            board.snapshot, "Training/7/job-2", sync=st.DRIFTED, reason="image changed outside")))
        _wait(lambda: _tile(scripted, "Drifted") == "1", "the drifted workload to show")
        assert scripted.title.startswith("(1) ")
        assert scripted.execute_script("return window.sameDocument") is True

        pause.click()
        assert pause.text == "Resume updates"
        assert "Paused" in scripted.find_element(By.ID, "updates").text
        seen = _updates(scripted)
        board.publish(b.next_cycle(board.snapshot, workloads=b.changed(
            board.snapshot, "Training/7/job-3", sync=st.DRIFTED, reason="image changed outside")))
        time.sleep(2.5)  # more than two refresh intervals
        assert _updates(scripted) == seen
        assert _tile(scripted, "Drifted") == "1"

        pause.click()  # resume: it updates at once
        _wait(lambda: _tile(scripted, "Drifted") == "2", "the update after resuming")
        assert _updates(scripted) > seen
        assert scripted.execute_script("return window.sameDocument") is True
    finally:
        handle.close()


def _wait(predicate, what: str, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")
