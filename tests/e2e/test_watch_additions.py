"""`watch` and what is added to a live workload outside runai-reconcile: an environment
variable put into an Inference through the API's back door (`/_sim`) is a drift the report
mode alerts once, naming it, without writing; the heal mode removes it in place, and the
value of a secret-looking one is in no alert and no log line."""

from __future__ import annotations

import json

import pytest

from tests.helpers.constants import CLUSTER
from tests.helpers.receiver import Receiver
from tests.helpers.watchproc import Watch, wait_until

pytestmark = pytest.mark.http

INTERVAL = 0.25  # seconds between cycles
SLACK_S = 2.0  # what a loaded machine may add to a cycle of tens of milliseconds
ADDRESS = "Inference/7/chat"
TOKEN_VALUE = "tok-93c1a7e2"
SPEC = f"""
kind: Inference
name: chat
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: vllm/vllm-openai:v0.6.3
  compute: {{gpuDevicesRequest: 1}}
  environmentVariables:
    - {{name: HF_HOME, value: /models/hf}}
  servingPort: {{container: 8000}}
"""
ADDED = [{"name": "HF_HOME", "value": "/models/hf"},
         {"name": "LD_PRELOAD", "value": "/tmp/hook.so"},
         {"name": "MY_TOKEN", "value": TOKEN_VALUE}]


@pytest.fixture
def receiver():
    with Receiver() as r:
        yield r


def _applied(ws, sim_server) -> str:
    ws.write("chat.yaml", SPEC)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    (w,) = sim_server.live()
    # Running through /_sim, where the simulator's clock would take it a moment later.
    assert sim_server.admin.post(f"/_sim/workloads/{w['id']}/phase",
                                 json={"phase": "Running"}).status_code == 200
    return w["id"]


def _env_names(sim_server, wid: str) -> list[str]:
    body = sim_server.admin.get(f"/_sim/workloads/{wid}").json()
    return [e["name"] for e in body["spec"].get("environmentVariables") or ()]


def _add(sim_server, wid: str) -> None:
    res = sim_server.admin.patch(f"/_sim/workloads/{wid}",
                                 json={"spec": {"environmentVariables": ADDED}})
    assert res.status_code == 200, res.text


def test_report_mode_alerts_an_addition_once_and_writes_nothing(ws, sim_server, receiver):
    wid = _applied(ws, sim_server)
    with Watch(ws, "--interval", f"{INTERVAL}s", "--notify", receiver.url) as w:
        w.wait_cycles(1)
        sim_server.clear_requests()
        _add(sim_server, wid)
        wait_until(lambda: receiver.delivered, 2 * INTERVAL + SLACK_S, "an alert")
        w.wait_cycles(3)
        assert w.stop() == 0
    assert [(e["event"], e["workload"]["address"]) for e in receiver.delivered] == [
        ("drifted", ADDRESS)]
    text = receiver.delivered[0]["text"]
    assert "spec.environmentVariables[LD_PRELOAD] added outside" in text, text
    assert sim_server.writes() == []
    assert "LD_PRELOAD" in _env_names(sim_server, wid)
    assert TOKEN_VALUE not in json.dumps(receiver.delivered)
    assert TOKEN_VALUE not in w.log_path.read_text()


def test_heal_mode_removes_an_addition_in_place(ws, sim_server, receiver):
    wid = _applied(ws, sim_server)
    with Watch(ws, "--mode", "heal", "--interval", f"{INTERVAL}s",
               "--notify", receiver.url) as w:
        w.wait_cycles(1)
        _add(sim_server, wid)
        wait_until(lambda: _env_names(sim_server, wid) == ["HF_HOME"],
                   2 * INTERVAL + SLACK_S, "the addition removed")
        wait_until(lambda: receiver.delivered, 2 * INTERVAL + SLACK_S, "an alert")
        w.wait_cycles(2)
        assert w.stop() == 0
    assert [(e["event"], e["workload"]["address"]) for e in receiver.delivered] == [
        ("healed", ADDRESS)]
    assert "update sent to undo it" in receiver.delivered[0]["text"]
    # In place: the same workload, no replacement.
    assert [w["id"] for w in sim_server.live()] == [wid]
    assert TOKEN_VALUE not in json.dumps(receiver.delivered)
    assert TOKEN_VALUE not in w.log_path.read_text()
