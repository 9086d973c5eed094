"""The GPU impact of plans through the CLI against `sim serve`, with the simulator's
projects and their quotas (`POST /_sim/projects`): the block in every format, quota flags,
one quota read per project, none with --no-refresh, the same block from `show`."""

from __future__ import annotations

import json

import pytest

from tests.helpers.constants import CLUSTER
from tests.helpers.specs import TRAINING

pytestmark = pytest.mark.http

PROJECT = "/api/v1/org-unit/projects/"

# Project 12: a 2-GPU training; project 7 the e2e training of 2 workers and a master of 8.
LORA = f"""
kind: Training
name: lora
projectId: "12"
clusterId: {CLUSTER}
spec:
  image: nvcr.io/nvidia/pytorch:24.05-py3
  compute:
    gpuDevicesRequest: 2
"""


def define(sim_server, pid: str, name: str, quota: float) -> None:
    sim_server.admin.post("/_sim/projects", json={
        "id": pid, "name": name, "clusterId": CLUSTER, "gpuQuota": quota}).raise_for_status()


def quota_reads(sim_server) -> list[str]:
    return sorted(r["path"].removeprefix(PROJECT) for r in sim_server.requests()
                  if r["path"].startswith(PROJECT))


@pytest.fixture
def two_projects(ws, sim_server):
    define(sim_server, "7", "team-a", 16)
    define(sim_server, "12", "team-b", 64)
    ws.write("train.yaml", TRAINING)
    ws.write("lora.yaml", LORA)
    sim_server.clear_requests()


def test_a_project_over_its_quota_is_flagged_in_every_format(ws, sim_server, two_projects):
    res = ws.plan()
    assert res.exit_code == 0, res.output
    block = res.stdout.split("GPU impact (GPUs held while running, before -> after apply):\n")[1]
    assert block.split("\n\nPlan: ")[0].splitlines() == [
        "  DistributedTraining/7/bert-ddp: 0 -> 24 (+24)",
        "  Training/12/lora: 0 -> 2 (+2)",
        "  project 7 (team-a): 0 -> 24 (+24), quota 16: over quota by 8",
        "      node pool default: deserved 16, limit none",  # the quota per pool, as read
        "  project 12 (team-b): 0 -> 2 (+2), quota 64",
        "      node pool default: deserved 64, limit none",
        "  total: 0 -> 26 (+26)",
    ]
    # One quota read per project of the plan.
    assert quota_reads(sim_server) == ["12", "7"]

    doc = ws.plan_json()["gpu_impact"]
    assert doc["over_quota"] == ["7"] and doc["quotas_read"] is True
    assert [(p["project_id"], p["after"]["max"], p["quota"], p["over_quota"])
            for p in doc["projects"]] == [("7", 24, 16, True), ("12", 2, 64, False)]
    assert [(w["address"], w["action"], w["before"]["max"], w["after"]["max"])
            for w in doc["workloads"]] == [("DistributedTraining/7/bert-ddp", "create", 0, 24),
                                           ("Training/12/lora", "create", 0, 2)]

    md = ws.plan("--format", "markdown").stdout
    assert "| 7 (team-a) | 0 | 24 | +24 | 16 | **over quota by 8** |" in md
    assert "| 12 (team-b) | 0 | 2 | +2 | 64 |  |" in md
    assert "<b>DistributedTraining/7/bert-ddp</b> will be created · GPUs 0 → 24 (+24)" in md


def test_within_the_quota_nothing_is_flagged_and_after_apply_there_is_no_block(
        ws, sim_server, two_projects):
    define(sim_server, "7", "team-a", 24)  # exactly what it will hold
    res = ws.plan()
    assert "project 7 (team-a): 0 -> 24 (+24), quota 24\n" in res.stdout
    assert "over quota" not in res.stdout
    assert ws.apply().exit_code == 0
    # Nothing changes: no GPU block, no noise; the quotas are still read, once each.
    sim_server.clear_requests()
    res = ws.plan()
    assert res.stdout.strip() == "No changes. Live workloads match the specs."
    assert quota_reads(sim_server) == ["12", "7"]
    # A spec change that moves GPUs: before is live, after the spec.
    ws.write("lora.yaml", LORA.replace("gpuDevicesRequest: 2", "gpuDevicesRequest: 4"))
    res = ws.plan()
    assert "  Training/12/lora: 2 -> 4 (+2)\n" in res.stdout
    assert "  project 12 (team-b): 2 -> 4 (+2), quota 64\n" in res.stdout
    assert "project 7" not in res.stdout  # its GPUs do not move and it is within its quota


def test_without_refresh_no_quota_is_read_and_the_state_is_before(ws, sim_server, two_projects):
    assert ws.apply().exit_code == 0
    ws.write("lora.yaml", LORA.replace("gpuDevicesRequest: 2", "gpuDevicesRequest: 1"))
    sim_server.clear_requests()
    res = ws.plan("--no-refresh")
    assert res.exit_code == 0, res.output
    assert "  Training/12/lora: 2 -> 1 (-1)\n" in res.stdout
    assert "  project 12: 2 -> 1 (-1), quota not read\n" in res.stdout
    assert sim_server.requests() == []
    doc = json.loads(ws.plan("--no-refresh", "--format", "json").stdout)["gpu_impact"]
    assert doc["quotas_read"] is False and [p["quota"] for p in doc["projects"]] == [None, None]


def test_show_renders_the_saved_plan_s_gpu_impact_with_the_quotas_it_read(
        ws, sim_server, two_projects):
    path = ws.root / "plan.json"
    planned = {fmt: ws.plan("--out", str(path), "--format", fmt).stdout
               for fmt in ("json", "text")}
    sim_server.clear_requests()
    define(sim_server, "7", "team-a", 100)  # a quota changed since does not change the plan
    shown = {fmt: ws.cli("show", str(path), "--format", fmt).stdout for fmt in ("json", "text")}
    assert json.loads(shown["json"])["gpu_impact"] == json.loads(planned["json"])["gpu_impact"]
    assert "project 7 (team-a): 0 -> 24 (+24), quota 16: over quota by 8" in shown["text"]
    assert quota_reads(sim_server) == []


def test_a_project_only_the_specs_name_has_its_quota_read_too_once(ws, sim_server, two_projects):
    assert ws.apply().exit_code == 0
    define(sim_server, "13", "team-c", 1)
    ws.write("new.yaml", LORA.replace('"12"', '"13"').replace("lora", "fresh"))
    sim_server.clear_requests()
    res = ws.plan()
    assert "  project 13 (team-c): 0 -> 2 (+2), quota 1: over quota by 1\n" in res.stdout
    # The state's projects read during the refresh, the new one after the plan: once each.
    assert quota_reads(sim_server) == ["12", "13", "7"]
    # --target: only the targeted workload's project.
    sim_server.clear_requests()
    res = ws.plan("--target", "Training/12/lora")
    assert res.exit_code == 0, res.output
    assert quota_reads(sim_server) == ["12"]


def test_a_new_fleet_s_quotas_are_read_beside_the_list_pages_not_after_the_plan(
        ws, sim_server, two_projects):
    # Nothing in the state yet: the specs' projects are known once they are resolved, and
    # their quotas are asked for then, while the refresh's list pages are in flight: no
    # round trip of its own between the plan and its display.
    sim_server.admin.put("/_sim/faults", json={"latencyMs": 200}).raise_for_status()
    res = ws.plan()
    assert res.exit_code == 0, res.output
    assert "  project 7 (team-a): 0 -> 24 (+24), quota 16: over quota by 8\n" in res.stdout
    log = sim_server.requests()
    lists = [r for r in log if r["path"] == "/api/v1/workloads"]
    reads = [r for r in log if r["path"].startswith(PROJECT)]
    assert lists and sorted(r["path"].removeprefix(PROJECT) for r in reads) == ["12", "7"]
    last_list_answered = max(r["done"] for r in lists)
    assert all(r["time"] < last_list_answered for r in reads), (reads, lists)
