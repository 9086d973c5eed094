"""A platform engineer's review of the GPU impact and the policy rules through the CLI
against `sim serve`: workloads apply leaves alone move no GPUs, project names the plan
read match policy rules, and a plan shows only the projects it touches."""

from __future__ import annotations

import json
import os
import textwrap

import pytest

from tests.helpers.constants import CLUSTER

pytestmark = pytest.mark.http

GPU_BLOCK = "GPU impact (GPUs held while running, before -> after apply):\n"


def spec(kind: str, name: str, project: str = "7", *, gpus: int = 2, extra: str = "",
         spec_extra: str = "") -> str:
    return textwrap.dedent(f"""\
        kind: {kind}
        name: {name}
        projectId: "{project}"
        clusterId: {CLUSTER}
        {extra}
        spec:
          image: nvcr.io/nvidia/pytorch:24.05-py3
          compute: {{gpuDevicesRequest: {gpus}}}
        """) + textwrap.indent(textwrap.dedent(spec_extra), "  ")


def gpu_block(stdout: str) -> list[str]:
    assert GPU_BLOCK in stdout, stdout
    return stdout.split(GPU_BLOCK)[1].split("\n\nPlan: ")[0].splitlines()


def workload_id(ws, address: str) -> str:
    return ws.state()["resources"][address]["workload_id"]


def test_a_workload_apply_leaves_alone_moves_no_gpus(ws, sim_server):
    # An autoscaled Inference whose maxReplicas someone else owns (ignoreChanges), and a
    # workspace kept suspended: neither is touched by a plan that grows the training.
    ws.write("serve.yaml", spec("Inference", "serve", gpus=1,
                                extra="lifecycle: {ignoreChanges: [spec.autoscaling.maxReplicas]}",
                                spec_extra="""\
                                    servingPort: {container: 8000}
                                    autoscaling: {minReplicas: 1, maxReplicas: 2, metric: concurrency, metricThreshold: 10}
                                    """))
    ws.write("notebook.yaml", spec("Workspace", "notebook", gpus=4,
                                   extra="desiredPhase: Stopped"))
    ws.write("train.yaml", spec("Training", "train", gpus=2))
    assert ws.apply().exit_code == 0
    sim_server.admin.patch(f"/_sim/workloads/{workload_id(ws, 'Inference/7/serve')}",
                           json={"spec": {"autoscaling": {"maxReplicas": 6}}}).raise_for_status()
    ws.write("train.yaml", spec("Training", "train", gpus=3))

    res = ws.plan()
    assert res.exit_code == 0, res.output
    # The Inference runs 1..6 replicas before and after: apply does not touch it.
    assert gpu_block(res.stdout) == [
        "  Training/7/train: 2 -> 3 (+1)",
        "  project 7 (project-7): 3..8 -> 4..9 (+1), quota 1000",
        "      node pool default: deserved 1000, limit none",
    ]
    serve = [w for w in ws.plan_json()["gpu_impact"]["workloads"]
             if w["address"] == "Inference/7/serve"]
    assert serve == []  # a no-op whose GPUs do not move is not a changed workload

    # Without a refresh the state says the notebook is suspended: it holds nothing, before
    # as after (the state's last seen phase is from before it was suspended).
    res = ws.plan("--no-refresh")
    assert res.exit_code == 0, res.output
    assert gpu_block(res.stdout) == [
        "  Training/7/train: 2 -> 3 (+1)",
        "  project 7: 3..4 -> 4..5 (+1), quota not read",
    ]
    doc = json.loads(ws.plan("--no-refresh", "--format", "json").stdout)["gpu_impact"]
    assert [(p["before"]["max"], p["after"]["max"]) for p in doc["projects"]] == [(4, 5)]


def write_policy(ws, text: str) -> str:
    path = ws.root / "policy.yaml"
    path.write_text(textwrap.dedent(text).lstrip())
    return str(path)


def test_rules_match_a_project_by_the_name_the_plan_read(ws, sim_server):
    # The specs give project 7 by id; its name is what the plan's quota read says.
    sim_server.admin.post("/_sim/projects", json={
        "id": "7", "name": "team-a", "clusterId": CLUSTER, "gpuQuota": 100}).raise_for_status()
    ws.write("train.yaml", spec("Training", "train", gpus=8))
    policy = write_policy(ws, """
        rules:
          - name: team-a-cap
            maxGpusPerWorkload: 4
            match: {projects: [team-a]}
          - name: per-project
            maxGpusPerProject: {team-a: 6, "*": 100}
        """)
    res = ws.plan("--policy", policy)
    assert res.exit_code == 1, res.output
    assert "  project 7 (team-a): 0 -> 8 (+8), quota 100\n" in res.stdout
    assert "  FAIL Training/7/train: rule team-a-cap (maxGpusPerWorkload 4): 8 GPUs\n" in res.stdout
    assert ("  FAIL project 7 (team-a): rule per-project (maxGpusPerProject team-a: 6, *: 100): "
            "8 GPUs planned (now 0), limit 6\n") in res.stdout
    assert "team-a-cap, per-project" in res.stderr
    # In the JSON a project's violation is addressed by its id alone (docs/plan-format.md).
    doc = json.loads(ws.plan("--policy", policy, "--format", "json").stdout)["policy"]
    assert [(v["address"], v["message"].split(": rule")[0])
            for r in doc["rules"] for v in r["violations"]] == [
        ("Training/7/train", "Training/7/train"), ("project 7", "project 7 (team-a)")]

    # A saved plan keeps the names: `show` and the check of `apply PLANFILE --policy`.
    path = str(ws.root / "plan.json")
    assert ws.plan("--out", path).exit_code == 0  # no policy given: saved as it is
    assert "  project 7 (team-a): 0 -> 8 (+8), quota 100\n" in ws.cli("show", path).stdout
    sim_server.clear_requests()
    res = ws.cli("apply", path, "--policy", policy)
    assert res.exit_code == 1 and "team-a-cap, per-project" in res.stderr, res.output
    assert sim_server.writes() == []


def test_a_plan_shows_no_gpu_block_for_a_project_over_quota_that_it_does_not_touch(
        ws, sim_server):
    for pid, name, quota in (("7", "team-a", 1), ("12", "team-b", 100)):
        sim_server.admin.post("/_sim/projects", json={
            "id": pid, "name": name, "clusterId": CLUSTER, "gpuQuota": quota}).raise_for_status()
    ws.write("a.yaml", spec("Training", "a", "7", gpus=2))  # team-a: 2 GPUs of 1
    ws.write("b.yaml", spec("Training", "b", "12", gpus=2))
    assert ws.apply().exit_code == 0
    # A new image for team-b's training: a replace that moves no GPUs.
    ws.write("b.yaml", spec("Training", "b", "12", gpus=2).replace("24.05", "24.10"))
    res = ws.plan()
    assert res.exit_code == 0, res.output
    assert "GPU impact" not in res.stdout and "over quota" not in res.stdout
    md = ws.plan("--format", "markdown").stdout
    assert "GPU impact" not in md and "over quota" not in md
    # The same change in team-a's project: it is over quota, which the block says.
    ws.write("b.yaml", spec("Training", "b", "12", gpus=2))
    ws.write("a.yaml", spec("Training", "a", "7", gpus=2).replace("24.05", "24.10"))
    res = ws.plan()
    assert gpu_block(res.stdout) == ["  project 7 (team-a): 2 -> 2 (0), quota 1: over quota by 1",
                                     "      node pool default: deserved 1, limit none"]


def test_an_empty_entry_of_the_policy_variable_is_no_file(ws, sim_server):
    # As a shell writes it: RUNAI_RECONCILE_POLICY=$RUNAI_RECONCILE_POLICY:team.yaml
    ws.write("train.yaml", spec("Training", "train", gpus=8))
    policy = write_policy(ws, "rules:\n  - name: cap\n    maxGpusPerWorkload: 4\n")
    ws.env["RUNAI_RECONCILE_POLICY"] = os.pathsep + policy + os.pathsep
    res = ws.plan()
    assert res.exit_code == 1 and "no such file" not in res.stderr, res.output
    assert "  FAIL Training/7/train: rule cap (maxGpusPerWorkload 4): 8 GPUs\n" in res.stdout


def test_a_targeted_plan_counts_the_project_s_other_workloads_against_its_quota(
        ws, sim_server):
    sim_server.admin.post("/_sim/projects", json={
        "id": "12", "name": "team-b", "clusterId": CLUSTER, "gpuQuota": 10}).raise_for_status()
    ws.write("big.yaml", spec("Training", "big", "12", gpus=8))
    ws.write("nb.yaml", spec("Workspace", "nb", "12", gpus=4, extra="desiredPhase: Stopped"))
    ws.write("small.yaml", spec("Training", "small", "12", gpus=1))
    assert ws.apply().exit_code == 0
    ws.write("small.yaml", spec("Training", "small", "12", gpus=4))
    policy = write_policy(ws, "rules:\n  - name: quota\n    withinProjectQuota: true\n")
    # Only `small` is planned, but the project holds `big`'s 8 too (the notebook is
    # suspended): 9 -> 12 of a quota of 10.
    for extra in ((), ("--no-refresh",)):
        res = ws.plan("--target", "Training/12/small", "--policy", policy, *extra)
        assert "  Training/12/small: 1 -> 4 (+3)\n" in res.stdout, res.output
        assert "  project 12 (team-b): 9 -> 12 (+3), quota 10: over quota by 2\n" in res.stdout \
            or extra and "  project 12: 9 -> 12 (+3), quota not read\n" in res.stdout
    res = ws.plan("--target", "Training/12/small", "--policy", policy)
    assert res.exit_code == 1, res.output
    assert ("  FAIL project 12 (team-b): rule quota (withinProjectQuota): 12 GPUs planned "
            "(now 9), quota 10\n") in res.stdout
    # The saved plan keeps them: `show` says the same.
    path = str(ws.root / "plan.json")
    ws.plan("--target", "Training/12/small", "--out", path)
    assert "  project 12 (team-b): 9 -> 12 (+3), quota 10: over quota by 2\n" in \
        ws.cli("show", path).stdout
