"""The watch's /metrics as the tools that read it judge it, over a real scrape (uvicorn on
a free loopback port) of a fleet with every closed label set in use: each HELP text lists
every value its labels take (so a reader learns `deferred` before one shows), and
Prometheus' own `promtool check metrics` (Debian's prometheus package) finds nothing to
say."""

from __future__ import annotations

import shutil
import subprocess

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler import kinds
from reconciler.watch import server
from reconciler.watch import status as st
from tests.helpers import snapshots as b

# Labels whose values are a closed set; the others (project, commit, status, ...) are not.
CLOSED = {"result", "action", "kind", "sync", "health", "mode"}


def _every_state() -> st.Snapshot:
    """Every kind, sync status and health in use, and cycles that acted in every way."""
    workloads = [b.workload(f"w{i}", kind=kind, sync=sync, health=health)
                 for i, (kind, sync, health) in enumerate(
                     zip(list(kinds.KINDS) * 2, st.SYNCS * 3, st.HEALTHS * 3))]
    snap = b.snapshot(workloads=workloads, mode="sync")
    snap = b.next_cycle(snap, actions={f"{a}/{r}": 1 for a in server.ACTIONS
                                       for r in server.ACTION_RESULTS},
                        requests_by_status={"200": 40, "429": 2, "error": 1})
    snap = b.next_cycle(snap, result="failed", error="the API did not answer")
    return b.next_cycle(snap, result="standby")


@pytest.fixture(scope="module")
def scrape() -> str:
    board = st.StatusBoard(_every_state(), clock=b.Clock(b.T0 + 120))
    with server.serve(board, "127.0.0.1:0", version="1.2.3") as handle:
        resp = httpx.get(handle.url + "/metrics", timeout=10)
    assert resp.status_code == 200
    return resp.text


def test_each_help_text_lists_every_value_its_labels_take(scrape):
    seen = 0
    for family in text_string_to_metric_families(scrape):
        for sample in family.samples:
            for label, value in sample.labels.items():
                if label in CLOSED:
                    seen += 1
                    assert value in family.documentation, (family.name, label, value)
    assert seen > 50  # the fleet used them all
    actions = next(f for f in text_string_to_metric_families(scrape)
                   if f.name == "runai_reconcile_actions")
    for word in (*server.ACTIONS, *server.ACTION_RESULTS):
        assert word in actions.documentation


def test_promtool_check_metrics_finds_nothing(scrape):
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package; .ci/run installs it)")
    done = subprocess.run([promtool, "check", "metrics"], input=scrape, capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
