"""Quotas in the review, through the CLI against `sim serve` over HTTP: a plan lowering a
project's quota below the GPUs its running training holds shows the quota per node pool
before and after in the GPU impact and warns (exit 0: a warning, not an error; in JSON
and in the PR comment's quota table too); with a policy file whose `quotaNotBelowHeld`
rule denies it, the plan fails and apply writes nothing."""

from __future__ import annotations

from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER  # its node pools
from tests.helpers import organisation
from tests.helpers.policy import write_policy

PROJECT = organisation.project(pools={
    "default": "gpu: {deserved: 16, limit: 24}", "a100": "gpu: {deserved: 4}"})
TRAINING = organisation.training("finetune", gpus=8)
PROJECT_AT = f"Project/{CLUSTER}/team-a"


def test_lowering_a_quota_below_held_gpus_warns_and_a_deny_rule_fails_the_plan(ws, sim_server):
    spec = ws.write("team-a.yaml", PROJECT)
    assert ws.apply().exit_code == 0
    ws.write("finetune.yaml", TRAINING)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    [project] = [u for u in sim_server.api("GET", "/api/v1/org-unit/projects").json()["projects"]
                 if u["name"] == "team-a"]
    pid = project["id"]

    # 16 + 4 deserved -> 2 + 4: below the 8 GPUs the training holds.
    spec.write_text(PROJECT.replace("deserved: 16, limit: 24", "deserved: 2, limit: 24"))
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 2, res.output  # changes, and no error
    assert (f"  project {pid} (team-a): 8 -> 8 (0), quota 20 -> 6: over quota by 2\n"
            "      node pool a100: deserved 4, limit none\n"
            "      node pool default: deserved 16 -> 2, limit 24\n") in res.output, res.output
    below = (f"project {pid} (team-a): quota lowered from 20 to 6 GPUs, below the 8 GPUs its "
             "workloads hold after apply")
    assert f"Warning: {below}" in res.output
    doc = ws.plan_json()
    assert doc["warnings"] == [{"code": "quota_below_held", "address": PROJECT_AT,
                                "message": below}]
    res = ws.plan("--format", "markdown")
    assert "| Project `team-a` | default | 16 → 2 | 24 |" in res.output, res.output
    # A saved plan shows the same.
    saved = str(ws.root / "quota.plan")
    assert ws.plan("--out", saved).exit_code == 0
    res = ws.cli("show", saved)
    assert "      node pool default: deserved 16 -> 2, limit 24\n" in res.output, res.output
    assert f"Warning: {below}" in res.output

    # A policy that denies it: the plan fails, naming the rule; apply writes nothing.
    policy = write_policy(ws, """
        rules:
          - name: keep-held
            quotaNotBelowHeld: true
        """)
    res = ws.plan("--policy", policy)
    assert res.exit_code == 1, res.output
    assert (f"FAIL project {pid} (team-a): rule keep-held (quotaNotBelowHeld): quota lowered "
            "from 20 to 6 GPUs, below the 8 GPUs its workloads hold") in res.output, res.output
    sim_server.clear_requests()
    res = ws.apply("--policy", policy)
    assert res.exit_code == 1 and "keep-held" in res.output, res.output
    assert sim_server.writes() == []

    # A quota that still covers what the training holds passes the same policy.
    spec.write_text(PROJECT.replace("deserved: 16, limit: 24", "deserved: 4, limit: 24"))
    res = ws.plan("--policy", policy)
    assert res.exit_code == 0 and "Warning:" not in res.output, res.output

    # Without the project's spec (another state, the training alone, made smaller), its
    # quota per node pool is the one read, the same before and after.
    (ws.specs / "team-a.yaml").unlink()
    ws.write("finetune.yaml", TRAINING.replace("gpuDevicesRequest: 8", "gpuDevicesRequest: 4"))
    other = ("--state", str(ws.root / "other.json"))
    res = ws.cli(*other, "plan", str(ws.specs), "--out", saved)
    read = (f"  project {pid} (team-a): 8 -> 4 (-4), quota 20\n"
            "      node pool a100: deserved 4, limit none\n"
            "      node pool default: deserved 16, limit 24\n")
    assert read in res.output, res.output
    assert read in ws.cli(*other, "show", saved).output  # kept in the saved plan


DEPARTMENT = organisation.department(deserved=16)

def test_a_department_whose_projects_deserve_more_than_it_does_is_a_warning(ws, sim_server):
    dept = ws.write("research.yaml", DEPARTMENT)
    ws.write("team-a.yaml", PROJECT.replace("resources:", "department: research\nresources:"))
    res = ws.apply()
    assert res.exit_code == 0, res.output
    [did] = [d["id"] for d in sim_server.api("GET", "/api/v1/org-unit/departments")
             .json()["departments"] if d["name"] == "research"]
    # A project in the department that is no spec: made in the UI.
    sim_server.api("POST", "/api/v1/org-unit/projects", json={
        "name": "team-z", "clusterId": CLUSTER, "parentId": did,
        "resources": [{"nodePool": {"id": "1"}, "gpu": {"deserved": 3}}]}).raise_for_status()

    # The department raised to 18, still short of team-a's 16 and team-z's 3 in pool default.
    dept.write_text(DEPARTMENT.replace("deserved: 16", "deserved: 18"))
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 2, res.output  # a warning is no error
    over = ("department research: its projects' deserved GPUs in node pool default sum to 19 "
            "(team-a 16, team-z 3), past the department's 18")
    assert f"Warning: {over}" in res.output, res.output
    assert ws.plan_json()["warnings"] == [{"code": "department_quota_exceeded",
                                           "address": f"Department/{CLUSTER}/research",
                                           "message": over}]
    assert f"> **Warning:** {over}" in ws.plan("--format", "markdown").output
    dept.write_text(DEPARTMENT.replace("deserved: 16", "deserved: 20"))
    assert "Warning:" not in ws.plan().output


def test_a_project_the_plan_creates_is_judged_by_the_quota_its_spec_plans_or_fails_unknown(
        ws, sim_server):
    """Its training is judged against the quota its spec plans, the project named by its
    name (it has no id yet); a spec that plans no quota leaves the quota unknown, which a
    deny rule fails, saying why (not as a project without a limit)."""
    policy = write_policy(ws, """
        rules:
          - name: quota
            withinProjectQuota: true
        """)
    spec = ws.write("team-a.yaml", PROJECT.replace("deserved: 16, limit: 24", "deserved: 2"))
    ws.write("finetune.yaml", TRAINING)
    res = ws.plan("--policy", policy)
    assert res.exit_code == 1, res.output
    assert ("FAIL project team-a (new): rule quota (withinProjectQuota): 8 GPUs planned "
            "(now 0), quota 6") in res.output, res.output

    spec.write_text(PROJECT.split("resources:")[0])
    res = ws.plan("--policy", policy)
    assert res.exit_code == 1, res.output
    assert "no GPU quota limit" not in res.output
    assert (f"FAIL project team-a (new): rule quota (withinProjectQuota): could not be "
            f"checked: its GPU quota is "
            f"unknown ({PROJECT_AT} is created by this plan: its quota is read once it "
            "exists); 8 GPUs planned (now 0)") in res.output, res.output
    assert sim_server.writes() == []
