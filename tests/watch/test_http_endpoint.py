"""The watch's HTTP endpoint over real HTTP (uvicorn on a free loopback port): /metrics
read with prometheus-client's own parser, the probes, /api/status, the page's HTML."""

from __future__ import annotations

import socket

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from reconciler import errors
from reconciler.watch import server
from reconciler.watch import status as st
from tests.helpers import snapshots as b

SECRET = "s3cr3t-from-the-environment"


@pytest.fixture
def clock():
    return b.Clock()


@pytest.fixture
def board(clock):
    return st.StatusBoard(b.snapshot(), clock=clock)


@pytest.fixture
def http(board):
    handle = server.serve(board, "127.0.0.1:0", version="9.9.9")
    with httpx.Client(base_url=handle.url, timeout=10) as client:
        yield client
    handle.close()


def _metrics(http) -> dict[tuple[str, tuple], float]:
    resp = http.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(resp.text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_metrics_counters_move_as_the_cycles_say_and_gauges_follow_the_latest(board, http):
    first = b.next_cycle(board.snapshot, actions={"update/ok": 2, "resume/failed": 1},
                         drift_found=3, healed=2, requests_by_status={"200": 10, "429": 1})
    board.publish(first)
    m = _metrics(http)
    assert m[("runai_reconcile_cycles_total", (("result", "ok"),))] == 1
    assert m[("runai_reconcile_cycles_total", (("result", "failed"),))] == 0
    assert m[("runai_reconcile_actions_total", (("action", "update"), ("result", "ok")))] == 2
    assert m[("runai_reconcile_actions_total", (("action", "resume"), ("result", "failed")))] == 1
    assert m[("runai_reconcile_drift_found_total", ())] == 3
    assert m[("runai_reconcile_drift_healed_total", ())] == 2
    assert m[("runai_reconcile_api_requests_total", (("status", "200"),))] == 10
    assert m[("runai_reconcile_cycle_duration_seconds_count", ())] == 1
    assert m[("runai_reconcile_workloads", (("health", "Healthy"), ("kind", "Training"),
                                            ("project", "7"), ("sync", "Synced")))] == 4
    assert m[("runai_reconcile_active", ())] == 1
    assert m[("runai_reconcile_info", (("commit", "0123456789abcdef0123"), ("mode", "heal"),
                                       ("version", "9.9.9")))] == 1
    labels = (("project", "7"), ("project_name", "team-a"))
    assert m[("runai_reconcile_project_gpus_held", labels)] == 8
    assert m[("runai_reconcile_project_gpu_quota", labels)] == 16
    assert m[("runai_reconcile_last_success_timestamp_seconds", ())] == b.T0 + 1.5
    assert not any(name.endswith("_created") for name, _ in m)

    assert _metrics(http) == m  # a scrape counts nothing again

    second = b.next_cycle(first, result="failed", error="no answer",
                          requests_by_status={"200": 3, "error": 2},
                          workloads=b.changed(first, "Training/7/job-0", sync=st.DRIFTED))
    board.publish(second)
    m = _metrics(http)
    assert m[("runai_reconcile_cycles_total", (("result", "ok"),))] == 1
    assert m[("runai_reconcile_cycles_total", (("result", "failed"),))] == 1
    assert m[("runai_reconcile_api_requests_total", (("status", "200"),))] == 13
    assert m[("runai_reconcile_api_requests_total", (("status", "error"),))] == 2
    assert m[("runai_reconcile_cycle_duration_seconds_count", ())] == 2
    assert m[("runai_reconcile_workloads", (("health", "Healthy"), ("kind", "Training"),
                                            ("project", "7"), ("sync", "Synced")))] == 3
    assert m[("runai_reconcile_workloads", (("health", "Healthy"), ("kind", "Training"),
                                            ("project", "7"), ("sync", "Drifted")))] == 1
    assert m[("runai_reconcile_last_success_timestamp_seconds", ())] == b.T0 + 1.5


def test_metrics_count_cycles_the_bounded_history_dropped_between_scrapes(board, http):
    snap = board.snapshot
    for _ in range(7):  # the snapshot keeps only the last 2 cycles
        snap = b.next_cycle(snap, keep=2, actions={"update/ok": 1})
        board.publish(snap)
    m = _metrics(http)
    assert m[("runai_reconcile_cycles_total", (("result", "ok"),))] == 7
    assert m[("runai_reconcile_actions_total", (("action", "update"), ("result", "ok")))] == 7


def test_two_servers_in_one_process_keep_their_own_counts(board, http, clock):
    other_board = st.StatusBoard(b.snapshot(), clock=clock)
    other = server.serve(other_board, "127.0.0.1:0")
    try:
        board.publish(b.next_cycle(board.snapshot))
        with httpx.Client(base_url=other.url) as client:
            theirs = _metrics(client)
        assert _metrics(http)[("runai_reconcile_cycles_total", (("result", "ok"),))] == 1
        assert theirs[("runai_reconcile_cycles_total", (("result", "ok"),))] == 0
    finally:
        other.close()


def test_a_standby_says_so(board, http):
    board.publish(b.next_cycle(b.snapshot(role=st.STANDBY, workloads=()), result="standby"))
    m = _metrics(http)
    assert m[("runai_reconcile_active", ())] == 0
    assert m[("runai_reconcile_cycles_total", (("result", "standby"),))] == 1


def test_healthz_fails_when_the_loop_stops_beating_and_when_stopping(board, http, clock):
    assert http.get("/healthz").status_code == 200
    clock.advance(30 * 3 + 1)  # three intervals of 30 s without a beat
    resp = http.get("/healthz")
    assert resp.status_code == 503 and "stalled" in resp.text and "91 s ago" in resp.text
    board.beat()
    assert http.get("/healthz").status_code == 200
    board.stop()
    resp = http.get("/healthz")
    assert resp.status_code == 503 and resp.text.strip() == "stopping"


def test_readyz_waits_for_the_first_cycle(board, http):
    resp = http.get("/readyz")
    assert resp.status_code == 503 and "first cycle" in resp.text
    board.publish(b.next_cycle(board.snapshot))
    assert http.get("/readyz").status_code == 200
    board.stop()
    assert http.get("/readyz").status_code == 503


def test_api_status_is_the_last_cycle_per_workload_and_project(board, http):
    snap = b.next_cycle(board.snapshot)
    snap = b.next_cycle(snap, workloads=b.changed(
        snap, "Training/7/job-2", sync=st.DRIFTED, reason="spec.image changed outside",
        changed_at=b.T0 + 31, blocked_by="gpu-cap"))
    board.publish(snap)
    doc = http.get("/api/status").json()
    assert doc["mode"] == "heal" and doc["commit"] == "0123456789abcdef0123"
    assert doc["ready"] is True and doc["role"] == "active"
    assert doc["counts"]["sync"] == {"Synced": 3, "OutOfSync": 0, "Drifted": 1, "Healing": 0,
                                     "Failed": 0}
    job = next(w for w in doc["workloads"] if w["address"] == "Training/7/job-2")
    assert job == {"address": "Training/7/job-2", "kind": "Training", "project": "7",
                   "name": "job-2", "sync": "Drifted", "health": "Healthy", "phase": "Running",
                   "gpus": "2", "reason": "spec.image changed outside", "error": None,
                   "blocked_by": "gpu-cap", "action": None,
                   "changed_at": "2026-09-21T14:13:51Z"}
    assert doc["projects"] == [{"project": "7", "name": "team-a", "gpus_held": 8,
                                "gpus_planned": 8, "quota": 16, "quota_why": None}]
    assert doc["last_cycle"]["number"] == 2 and len(doc["cycles"]) == 2


def test_no_answer_carries_anything_but_the_snapshot(board, http, monkeypatch):
    """The loop masks what it publishes; the server must add nothing of its own process:
    a secret in its environment (as a token or a sensitive env value would be) is in no
    route's answer, while the masked reason the loop gave is."""
    monkeypatch.setenv("RUNAI_CLIENT_SECRET", SECRET)
    monkeypatch.setenv("HF_TOKEN", SECRET)
    snap = b.next_cycle(board.snapshot, workloads=b.changed(
        board.snapshot, "Training/7/job-1", sync=st.FAILED,
        reason="spec.environmentVariables[HF_TOKEN].value changed outside",
        error="PATCH: answered 422 for spec.environmentVariables[HF_TOKEN].value (sensitive)"))
    board.publish(snap)
    for route in ("/", "/api/status", "/metrics", "/healthz", "/readyz"):
        resp = http.get(route)
        assert resp.status_code == 200, route
        assert SECRET not in resp.text, route
    assert "(sensitive)" in http.get("/api/status").text
    assert http.post("/api/status").status_code == 405  # read-only


def test_the_page_escapes_what_it_shows_and_runs_only_its_own_script(board, http):
    board.publish(b.next_cycle(board.snapshot, workloads=b.changed(
        board.snapshot, "Training/7/job-3", sync=st.DRIFTED,
        reason='label <script>alert("x")</script> & more')))
    page = http.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'alert("x")' not in page.text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; more" in page.text
    # No forced reload: its script updates it in place, every 15 s (half the interval).
    assert 'http-equiv="refresh"' not in page.text
    assert '<html lang="en" data-refresh="15">' in page.text
    assert page.text.count("<script") == 1 and '<script src="status.js" defer>' in page.text
    csp = page.headers["content-security-policy"]
    assert "script-src 'self';" in csp and "default-src 'none'" in csp
    script = http.get("/status.js")
    assert script.status_code == 200
    assert script.headers["content-type"].startswith("text/javascript")
    assert "Pause updates" in script.text


def test_a_port_in_use_is_one_clear_error(board):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(errors.ReconcileError) as caught:
            server.serve(board, f"127.0.0.1:{port}")
    assert str(caught.value) == (
        f"--listen 127.0.0.1:{port}: port {port} is in use (another watch, or another "
        "program, listens there); give another with --listen HOST:PORT")


@pytest.mark.parametrize("listen, message", [
    ("9090", "give HOST:PORT"),
    ("127.0.0.1:http", "the port must be a number"),
    ("127.0.0.1:70000", "the port must be a number"),
    ("::1:9090", "IPv6 address in brackets"),
])
def test_a_bad_listen_is_one_clear_error(listen, message):
    with pytest.raises(errors.ReconcileError, match=message):
        server.parse_listen(listen)


def test_listen_forms():
    assert server.parse_listen(server.DEFAULT_LISTEN) == ("127.0.0.1", 9090)
    assert server.parse_listen(":9090") == ("0.0.0.0", 9090)
    assert server.parse_listen("[::1]:9091") == ("::1", 9091)
