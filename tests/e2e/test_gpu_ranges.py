"""The difference of two GPU ranges (an autoscaled Inference's fewest and
most pods) is said at each end, `min +16, max +11`, never as a range (`+16..+11` read as
one going down), the same in text, markdown, drift's text and markdown, and its JSON sums
each end (docs/plan-format.md). Through the CLI against `sim serve`."""

from __future__ import annotations

import json

import pytest

from tests.helpers.constants import CLUSTER

pytestmark = pytest.mark.http

CHAT = f"""
kind: Inference
name: chat
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: vllm/vllm-openai:v0.6.3
  compute:
    gpuDevicesRequest: 1
  servingPort:
    container: 8000
  autoscaling:
    minReplicas: {{low}}
    maxReplicas: {{high}}
    metric: concurrency
    metricThreshold: 16
"""
ADDR = "Inference/7/chat"


def _chat(low: int, high: int) -> str:
    return CHAT.replace("{low}", str(low)).replace("{high}", str(high))


def test_a_plan_says_the_change_of_a_range_at_each_end(ws, sim_server):
    ws.write("chat.yaml", _chat(90, 100))
    res = ws.apply()
    assert res.exit_code == 0, res.output
    ws.write("chat.yaml", _chat(106, 111))

    text = ws.plan()
    assert text.exit_code == 0, text.output
    assert f"  {ADDR}: 90..100 -> 106..111 (min +16, max +11)" in text.stdout
    assert "+16..+11" not in text.stdout
    md = ws.plan("--format", "markdown").stdout
    assert "· GPUs 90..100 → 106..111 (min +16, max +11)" in md
    assert "| 90..100 | 106..111 | min +16, max +11 |" in md
    doc = ws.plan_json()
    w, = doc["gpu_impact"]["workloads"]
    assert (w["before"]["min"], w["before"]["max"], w["after"]["min"], w["after"]["max"]) == (
        90, 100, 106, 111)

    # The same change, equal at both ends, is one number.
    ws.write("chat.yaml", _chat(92, 102))
    assert f"  {ADDR}: 90..100 -> 92..102 (+2)" in ws.plan().stdout


def test_drift_of_a_range_adds_up_at_each_end(ws, sim_server):
    ws.write("chat.yaml", _chat(1, 6))
    assert ws.apply().exit_code == 0
    wid = ws.state()["resources"][ADDR]["workload_id"]
    assert sim_server.admin.patch(f"/_sim/workloads/{wid}", json={
        "spec": {"autoscaling": {"minReplicas": 2, "maxReplicas": 12}}}).status_code == 200

    res = ws.cli("drift", str(ws.specs))
    assert res.exit_code == 0, res.output
    assert "GPUs: state 1..6, live 2..12 (min +1, max +6)" in res.stdout
    assert "GPUs: drift took (min 1, max 6) and freed 0 (live against the state)." in res.stdout
    md = ws.cli("drift", str(ws.specs), "--format", "markdown").stdout
    assert "**GPUs:** drift took (min 1, max 6) and freed 0 (live against the state)." in md
    doc = json.loads(ws.cli("drift", str(ws.specs), "--format", "json").stdout)
    summary = doc["summary"]
    assert (summary["gpus_taken_min"], summary["gpus_taken"], summary["gpus_freed_min"],
            summary["gpus_freed"]) == (1, 6, 0, 0)
