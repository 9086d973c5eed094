"""`watch` as a user runs it, heard from outside: its alerts at a real HTTP receiver
(counted), its /metrics read with prometheus-client's own parser, its /api/status, while
`sim serve` plays the control plane and the test drifts it through the API and `/_sim`:
a heal is one alert per workload, a policy deny or preventDestroy one
`blocked` alert while it lasts, an API outage one `cycles_failing` alert and a backoff
that shows in the status and the metrics."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers.constants import CLUSTER
from tests.helpers.receiver import Receiver
from tests.helpers.simserve import free_port
from tests.helpers.watchproc import Watch, detail, inference, wait_until

pytestmark = pytest.mark.http

INTERVAL = 0.25  # seconds between cycles
SLACK_S = 2.0  # what a loaded CI machine may add to a cycle of tens of milliseconds


@pytest.fixture
def receiver():
    with Receiver() as r:
        yield r


def words(receiver: Receiver) -> list[tuple[str, str | None]]:
    """(event, workload address) of each alert delivered, in order."""
    return [(e["event"], (e.get("workload") or {}).get("address")) for e in receiver.delivered]


def training(name: str, *, protected: bool = False) -> str:
    lifecycle = "lifecycle:\n      preventDestroy: true\n    " if protected else ""
    return f"""
    kind: DistributedTraining
    name: {name}
    projectId: "7"
    clusterId: {CLUSTER}
    {lifecycle}spec:
      image: nvcr.io/nvidia/pytorch:24.05-py3
      distributedFramework: PyTorch
      numWorkers: 2
      compute:
        gpuDevicesRequest: 1
    masterSpecSameAsWorker: true
    """


SERVE, OTHER, TRAIN = ("DistributedInference/7/llama-serve", "DistributedInference/7/qwen-serve",
                       "DistributedTraining/7/bert-ddp")


def applied(ws, sim_server, *, protected: bool = False) -> dict[str, str]:
    """Three workloads applied and settled (Running); their ids by name."""
    ws.write("serve.yaml", inference("llama-serve"))
    ws.write("other.yaml", inference("qwen-serve"))
    ws.write("train.yaml", training("bert-ddp", protected=protected))
    res = ws.apply()
    assert res.exit_code == 0, res.output
    return running(sim_server)


def running(sim_server) -> dict[str, str]:
    """Each workload moved on to Running through /_sim, where the simulator's clock would
    take it a moment later; their ids by name."""
    for w in sim_server.live():
        assert sim_server.admin.post(f"/_sim/workloads/{w['id']}/phase",
                                     json={"phase": "Running"}).status_code == 200
    assert all(w["phase"] == "Running" for w in sim_server.live())
    return {w["name"]: w["id"] for w in sim_server.live()}


def metrics(url: str) -> dict[tuple[str, tuple], float]:
    resp = httpx.get(url + "/metrics", timeout=10)
    assert resp.status_code == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(resp.text) for s in family.samples}


def status(url: str) -> dict:
    return httpx.get(url + "/api/status", timeout=10).json()


def listening(*extra: str) -> tuple[str, tuple[str, ...]]:
    port = free_port()
    return f"http://127.0.0.1:{port}", ("--listen", f"127.0.0.1:{port}", *extra)


def test_heal_is_one_alert_per_workload_and_the_metrics_count_it(ws, sim_server, receiver):
    ids = applied(ws, sim_server)
    url, args = listening("--mode", "heal", "--interval", f"{INTERVAL}s",
                          "--notify", receiver.url)
    with Watch(ws, *args) as w:
        w.wait_cycles(2)
        before = metrics(url)
        # Out of band: a PATCH (through /_sim), a suspend and a delete (through the API).
        assert sim_server.admin.patch(f"/_sim/workloads/{ids['llama-serve']}",
                                      json={"spec": {"replicas": 5}}).status_code == 200
        assert sim_server.api("POST", f"/api/v1/workloads/distributed/{ids['bert-ddp']}"
                              "/suspend").status_code == 202
        assert sim_server.api("DELETE", "/api/v1/workloads/distributed-inferences/"
                              f"{ids['qwen-serve']}").status_code in (200, 202)
        t0 = time.monotonic()
        wait_until(lambda: healed(sim_server, ids), 2 * INTERVAL + SLACK_S, "the three healed")
        took = time.monotonic() - t0
        # Settled: every workload Synced again, then a few quiet cycles.
        wait_until(lambda: status(url)["counts"]["sync"]["Synced"] == 3, 10, "all Synced")
        w.wait_cycles(3)
        after = metrics(url)
        doc = status(url)
        assert w.stop() == 0
    assert took <= 2 * INTERVAL + SLACK_S

    # One alert per healed workload, and nothing else: not one per cycle.
    assert sorted(words(receiver)) == sorted([("healed", SERVE), ("healed", OTHER),
                                               ("healed", TRAIN)])
    by = {e["workload"]["address"]: e for e in receiver.delivered}
    assert "spec.replicas changed outside: 2 -&gt; 5 live; update sent to undo it" in by[SERVE]["text"]
    assert "suspended outside; resume sent to undo it" in by[TRAIN]["text"]
    assert "deleted outside; create sent to undo it" in by[OTHER]["text"]
    assert all(e["severity"] == "info" and e["mode"] == "heal" for e in receiver.delivered)
    assert "token-xyz" not in w.log_path.read_text()  # a webhook's path is its secret

    def moved(name: str, **labels) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert moved("runai_reconcile_drift_healed_total") == 3
    assert moved("runai_reconcile_drift_found_total") >= 3
    for action in ("update", "resume", "create"):
        assert moved("runai_reconcile_actions_total", action=action, result="ok") == 1, action
    assert moved("runai_reconcile_cycles_total", result="ok") >= 4
    assert moved("runai_reconcile_cycles_total", result="failed") == 0
    assert moved("runai_reconcile_api_requests_total", status="200") > 0
    assert moved("runai_reconcile_api_requests_total", status="202") >= 3  # the three heals
    assert moved("runai_reconcile_cycle_duration_seconds_count") >= 4
    assert moved("runai_reconcile_last_success_timestamp_seconds") > 0
    assert after[("runai_reconcile_active", ())] == 1
    assert after[("runai_reconcile_info", (("commit", ""), ("mode", "heal"),
                                          ("version", after_version(after))))] == 1
    synced = {labels: v for (name, labels), v in after.items()
              if name == "runai_reconcile_workloads" and v}
    assert sum(synced.values()) == 3 and all(("sync", "Synced") in k for k in synced)
    labels = (("project", "7"), ("project_name", "project-7"))
    # Two inferences of 2 replicas (a leader and a worker each), a training of a master
    # and 2 workers: 1 GPU a pod.
    assert after[("runai_reconcile_project_gpus_held", labels)] == 2 * 4 + 3
    assert after[("runai_reconcile_project_gpu_quota", labels)] == 1000  # the simulator's

    # The status document counted what each cycle asked of the API, by answer.
    healing = [c for c in doc["cycles"] if c["healed"]]
    assert sum(c["healed"] for c in doc["cycles"]) == 3
    assert all(c["requests_by_status"].get("202", 0) >= c["healed"] for c in healing)
    assert doc["failed_in_row"] == 0 and doc["backoff_s"] == 0


def after_version(samples: dict) -> str:
    [labels] = [dict(k) for (name, k) in samples if name == "runai_reconcile_info"]
    return labels["version"]


def healed(sim_server, ids: dict[str, str]) -> bool:
    live = {w["name"]: w for w in sim_server.live()}
    if "qwen-serve" not in live or live["qwen-serve"]["id"] == ids["qwen-serve"]:
        return False
    train = detail(sim_server, "distributed", ids["bert-ddp"])
    serve = detail(sim_server, "distributed-inferences", ids["llama-serve"])
    return serve["spec"]["replicas"] == 2 and train.get("desiredPhase") == "Running"


def test_a_policy_deny_is_one_blocked_alert_while_it_lasts(ws, sim_server, receiver):
    ids = applied(ws, sim_server)
    policy = ws.root / "policy.yaml"
    # Applied before the rule: the heal of a 4-GPU inference is what the rule denies.
    policy.write_text("rules:\n  - name: small\n    maxGpusPerWorkload: 1\n")
    url, args = listening("--mode", "heal", "--interval", f"{INTERVAL}s",
                          "--policy", str(policy), "--notify", receiver.url)
    with Watch(ws, *args) as w:
        w.wait_cycles(1)
        sim_server.clear_requests()
        assert sim_server.admin.patch(f"/_sim/workloads/{ids['llama-serve']}",
                                      json={"spec": {"replicas": 5}}).status_code == 200
        wait_until(lambda: [e for e in receiver.delivered if e["event"] == "blocked"], 10,
                   "the blocked alert")
        w.wait_cycles(4)
        doc = status(url)
        m = metrics(url)
        assert w.stop() == 0
    assert words(receiver) == [("blocked", SERVE)], receiver.delivered
    event = receiver.delivered[0]
    assert event["severity"] == "warning"
    assert event["workload"]["blocked_by"] == "policy small"
    assert "spec.replicas changed outside: 2 -&gt; 5 live" in event["text"]
    assert "blocked by policy small" in event["text"]
    [serve] = [x for x in doc["workloads"] if x["address"] == SERVE]
    assert serve["sync"] == "Drifted" and serve["blocked_by"] == "policy small"
    assert serve["action"] == "update/skipped"
    assert m[("runai_reconcile_actions_total", (("action", "update"), ("result", "skipped")))] >= 4
    assert sim_server.writes() == []  # denied: nothing sent
    assert detail(sim_server, "distributed-inferences", ids["llama-serve"])["spec"]["replicas"] == 5


def test_an_api_outage_alerts_once_backs_off_and_shows_in_status_and_metrics(
        ws, sim_server, receiver):
    applied(ws, sim_server)
    url, args = listening("--interval", "200ms", "--notify", receiver.url)
    with Watch(ws, *args, extra_args=("--timeout", "0.5")) as w:
        w.wait_cycles(1)
        sim_server.admin.put("/_sim/faults", json={"errorRate": 1.0, "tokenFaults": False})
        t0 = time.monotonic()
        wait_until(lambda: [e for e in receiver.delivered if e["event"] == "cycles_failing"], 30,
                   "the cycles_failing alert")
        # Two seconds of outage: three failed cycles or four, not the eight or more of a
        # loop that does not back off (a 0.2 s interval and a 0.5 s budget a cycle).
        time.sleep(max(0.0, 2.0 - (time.monotonic() - t0)))
        down = status(url)
        m = metrics(url)
        outage_s = time.monotonic() - t0
        failed = [c for c in w.cycles() if c["result"] == "failed"]
        sim_server.admin.delete("/_sim/faults")
        wait_until(lambda: [e for e in receiver.delivered if e["event"] == "cycles_recovered"], 30,
                   "the cycles_recovered alert")
        w.wait_cycles(2)
        assert w.stop() == 0
    # No hot loop: at a 200 ms interval, the waits doubled after each failure.
    assert 3 <= len(failed) <= 2 + outage_s / 0.5, (len(failed), outage_s)
    waits = [c["next_in_s"] for c in failed]
    assert waits[:4] == sorted(waits[:4]) and waits[2] >= 3.9 * waits[0], waits
    assert [e["event"] for e in receiver.delivered] == ["cycles_failing", "cycles_recovered"]
    failing = receiver.delivered[0]
    assert failing["severity"] == "error" and failing["failed_cycles"] == 3
    assert re.search(r"\b(500|503|429)\b|gave up", failing["text"]), failing["text"]
    assert down["failed_in_row"] >= 3 and down["backoff_s"] >= 0.8, down
    assert down["last_cycle"]["result"] == "failed" and down["last_cycle"]["error"]
    # The simulator's errors: a 500, a 503 or a 429, as its error rate draws them.
    assert sum(n for k, n in down["last_cycle"]["requests_by_status"].items()
               if k in ("500", "503", "429")) > 0, down["last_cycle"]
    assert m[("runai_reconcile_cycles_total", (("result", "failed"),))] == down["failed_in_row"]
    assert m[("runai_reconcile_backoff_seconds", ())] == down["backoff_s"]
    assert sum(v for (name, labels), v in m.items() if name == "runai_reconcile_api_requests_"
               "total" and dict(labels)["status"] in ("500", "503", "429")) > 0


def test_prevent_destroy_blocks_that_heal_alone(ws, sim_server, receiver):
    """A protected training changed outside can only be healed by a replace: that heal is
    blocked (one alert), while the same cycle heals the others."""
    ids = applied(ws, sim_server, protected=True)
    url, args = listening("--mode", "heal", "--interval", f"{INTERVAL}s",
                          "--notify", receiver.url)
    with Watch(ws, *args) as w:
        w.wait_cycles(1)
        assert sim_server.admin.patch(
            f"/_sim/workloads/{ids['bert-ddp']}",
            json={"spec": {"image": "nvcr.io/nvidia/pytorch:24.10-py3"}}).status_code == 200
        assert sim_server.admin.patch(f"/_sim/workloads/{ids['llama-serve']}",
                                      json={"spec": {"replicas": 5}}).status_code == 200
        wait_until(lambda: len(receiver.delivered) >= 2, 2 * INTERVAL + SLACK_S + 2, "2 alerts")
        w.wait_cycles(3)
        doc = status(url)
        assert w.stop() == 0
    assert sorted(words(receiver)) == sorted([("blocked", TRAIN), ("healed", SERVE)]), \
        receiver.delivered
    [train] = [x for x in doc["workloads"] if x["address"] == TRAIN]
    assert train["sync"] == "Drifted" and train["blocked_by"] == "preventDestroy"
    assert train["action"] == "replace/skipped"
    assert "protected by lifecycle.preventDestroy" in train["reason"]
    assert all(c["result"] == "ok" for c in doc["cycles"])  # not a failed cycle
    assert detail(sim_server, "distributed", ids["bert-ddp"])["spec"]["image"].endswith("24.10-py3")


def test_report_mode_alerts_each_drift_once_and_writes_nothing(ws, sim_server, receiver):
    ids = applied(ws, sim_server)
    url, args = listening("--interval", f"{INTERVAL}s", "--notify", receiver.url)
    with Watch(ws, *args) as w:
        w.wait_cycles(1)
        sim_server.clear_requests()
        sim_server.admin.patch(f"/_sim/workloads/{ids['llama-serve']}",
                               json={"spec": {"replicas": 5}})
        sim_server.api("POST", f"/api/v1/workloads/distributed/{ids['bert-ddp']}/suspend")
        sim_server.api("DELETE", f"/api/v1/workloads/distributed-inferences/{ids['qwen-serve']}")
        wait_until(lambda: len(receiver.delivered) >= 3, 2 * INTERVAL + SLACK_S, "3 alerts")
        w.wait_cycles(4)
        doc = status(url)
        assert w.stop() == 0
    assert sorted(words(receiver)) == sorted([("drifted", SERVE), ("missing", OTHER),
                                               ("drifted", TRAIN)]), receiver.delivered
    assert {x["address"]: x["sync"] for x in doc["workloads"]} == {
        SERVE: "Drifted", OTHER: "Drifted", TRAIN: "Drifted"}
    # The only writes are the test's own suspend and delete.
    assert [(r["method"], r["path"]) for r in sim_server.writes()] == [
        ("POST", f"/api/v1/workloads/distributed/{ids['bert-ddp']}/suspend"),
        ("DELETE", f"/api/v1/workloads/distributed-inferences/{ids['qwen-serve']}")]


NIM = f"""
kind: NIMService
name: llama-nim
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3
  compute:
    gpuDevicesRequest: 1
  servingPort:
    port: 8000
"""


def test_a_nim_service_is_healthy_in_full_and_auto_cycles_alike(ws, sim_server, receiver):
    """A NIM service's GET answer has no phase (CONTRACT §12): health reads the workloads
    API's, so a full refresh (every second cycle here) and a list-first one agree: the
    NIM service is Healthy in every cycle, no health change is logged, nothing alerted."""
    ws.write("nim.yaml", NIM)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    running(sim_server)
    url, args = listening("--interval", "200ms", "--full-refresh-every", "2",
                          "--notify", receiver.url)
    with Watch(ws, *args) as w:
        w.wait_cycles(2)
        seen = []
        for _ in range(4):
            w.wait_cycles(1)
            [nim] = status(url)["workloads"]
            seen.append(nim["health"])
        cycles = w.cycles()
        assert w.stop() == 0
    assert {c["refresh"] for c in cycles} == {"full", "auto"}
    assert seen == ["Healthy"] * 4, seen
    assert w.events("workload") == []  # no change of health (or sync) in any cycle
    assert receiver.delivered == []


def test_workloads_the_watch_creates_itself_send_no_recovered(ws, sim_server, receiver):
    """`watch --mode sync --max-actions 1` creates one new spec a cycle: none of them
    'recovers' (they were never there to be lost). A spec kept Stopped is suspended as
    asked: in sync, no alarm, not counted as needing attention."""
    for name in ("job-a", "job-b", "job-c"):
        ws.write(f"{name}.yaml", training(name))
    ws.write("kept.yaml", training("job-kept").replace("spec:", "desiredPhase: Stopped\n    spec:"))
    url, args = listening("--mode", "sync", "--max-actions", "1", "--interval", "200ms",
                          "--notify", receiver.url)
    with Watch(ws, *args) as w:
        wait_until(lambda: len(sim_server.live()) == 4, 20, "the four created")
        wait_until(lambda: status(url)["counts"]["sync"]["Synced"] == 4, 20, "all Synced")
        w.wait_cycles(2)
        doc = status(url)
        page = httpx.get(url + "/", timeout=10).text
        assert w.stop() == 0
    assert [e for e in words(receiver) if e[0] == "recovered"] == [], words(receiver)
    by = {x["address"]: x for x in doc["workloads"]}
    assert by["DistributedTraining/7/job-kept"]["health"] == "Suspended"
    assert re.search(r"<title>runai-reconcile watch", page), page[:300]  # nothing counted
