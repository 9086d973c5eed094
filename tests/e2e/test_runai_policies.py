"""Run:ai's own policies (`kind: Policy`, not this tool's --policy rules), through the
CLI against `sim serve` over HTTP: a project's training policy is created after the
project the same plan creates, by a PUT of the owned policy with a valid body, and plans
clean; each plan of a write sends the server's dry run (`validateOnly=true`, nothing
stored) and shows its verdict; a refusal fails the plan naming the rule, and apply writes
nothing; a saved plan applied does not dry-run again; a policy changed or deleted behind
the tool's back is drift that apply, and watch in heal mode, put back; export then
import plans clean; removing the spec deletes it."""

from __future__ import annotations

import json

import yaml

from reconciler.simulator import policies as sim_policies
from reconciler.simulator import validator
from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER
from tests.helpers import organisation
from tests.helpers.organisation import other_state as _other_state
from tests.helpers.organisation import project_id as _project_id
from tests.helpers.watchproc import Watch, wait_until

PROJECT = organisation.project(destroyable=True)
POLICY = organisation.policy("training", """\
defaults:
  compute: {gpuDevicesRequest: 1}
  imagePullPolicy: IfNotPresent
rules:
  compute:
    gpuDevicesRequest: {min: 1, max: 4}
  image:
    required: true
""")
CLUSTER_POLICY = organisation.policy("workspace", """\
rules:
  compute:
    gpuDevicesRequest: {min: 1, max: 2}
""", scope="cluster")
POLICY_AT = "Policy/project:team-a/training"
CLUSTER_POLICY_AT = f"Policy/cluster:{CLUSTER}/workspace"
TRAININGS = "/api/v2/policy/trainings"
WORKSPACES = "/api/v2/policy/workspaces"
PUT_BODY = {k.path: k.put for k in sim_policies.POLICY_KINDS}


def _live(sim_server, pid: str) -> dict:
    res = sim_server.api("GET", TRAININGS, params={"scope": "project", "projectId": pid})
    res.raise_for_status()
    return res.json()


def _policy_writes(sim_server) -> list[tuple[str, str, str]]:
    return [(r["method"], r["path"], r["query"]) for r in sim_server.writes()
            if r["path"].startswith("/api/v2/policy")]


def test_a_project_policy_is_created_dry_run_drifted_exported_imported_and_deleted(
        ws, sim_server):
    ws.write("team-a.yaml", PROJECT)
    spec = ws.write("team-a-training-policy.yaml", POLICY)
    # The project does not exist yet: the policy cannot be dry-run (none is sent), and
    # the plan says why.
    sim_server.clear_requests()
    res = ws.plan()
    assert res.exit_code == 0, res.output
    assert f"+ Policy training (scope project:team-a)" in res.output, res.output
    # Its workload type is in that line; the spec has no `name` (nor a projectId).
    section = res.output.split("+ Policy training", 1)[1].split("\n\n", 1)[0]
    assert "+ name:" not in section and "+ projectId:" not in section, section
    assert ("the server's dry run: unchecked: project team-a is created by this plan: the "
            "server checks this write when apply sends it") in res.output
    assert not [r for r in sim_server.requests() if "validateOnly" in str(r)]
    assert _policy_writes(sim_server) == []

    # One apply: the project first (waited for until Ready), then its policy, by a PUT of
    # the owned policy whose body NVIDIA's schema takes.
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert f"{POLICY_AT}: created" in res.output
    pid = _project_id(sim_server)
    writes = [(r["method"], r["path"]) for r in sim_server.writes()]
    assert writes == [("POST", "/api/v1/org-unit/projects"), ("PUT", TRAININGS)], writes
    [sent] = [r["body"] for r in sim_server.writes() if r["path"] == TRAININGS]
    assert validator.validate(PUT_BODY["trainings"], sent) == []
    assert sent["meta"]["scope"] == "project" and sent["meta"]["projectId"] == int(pid)
    assert sent["policy"]["rules"]["compute"]["gpuDevicesRequest"] == {"min": 1, "max": 4}
    assert _live(sim_server, pid)["policy"]["defaults"]["compute"] == {"gpuDevicesRequest": 1}
    assert ws.state()["resources"][POLICY_AT]["workload_id"] == \
        f"trainings?scope=project&projectId={pid}"
    assert ws.plan("--detailed-exitcode").exit_code == 0

    # An update: plan dry-runs it (validateOnly, nothing stored) and shows the verdict.
    spec.write_text(POLICY.replace("min: 1, max: 4", "min: 1, max: 3"))
    sim_server.clear_requests()
    res = ws.plan()
    assert res.exit_code == 0, res.output
    assert f"~ Policy training (scope project:team-a)" in res.output
    assert "# the server's dry run: accepted" in res.output
    assert "rules.compute.gpuDevicesRequest.max: 4 -> 3" in res.output
    assert _policy_writes(sim_server) == [("PUT", TRAININGS, "validateOnly=true")]
    assert _live(sim_server, pid)["policy"]["rules"]["compute"]["gpuDevicesRequest"]["max"] == 4
    [change] = [c for c in ws.plan_json()["resource_changes"] if c["address"] == POLICY_AT]
    assert change["action"] == "update" and change["dry_run"] == {
        "verdict": "accepted", "message": ""}
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0 and f"{POLICY_AT}: updated" in res.output, res.output
    # apply plans (with the dry run), then writes for real: the whole owned policy, PUT.
    assert _policy_writes(sim_server) == [("PUT", TRAININGS, "validateOnly=true"),
                                          ("PUT", TRAININGS, "")]
    [_, sent] = [r["body"] for r in sim_server.writes()]
    assert validator.validate(PUT_BODY["trainings"], sent) == []
    assert sent["policy"]["rules"]["image"] == {"required": True}
    assert _live(sim_server, pid)["policy"]["rules"]["compute"]["gpuDevicesRequest"]["max"] == 3
    assert ws.plan("--detailed-exitcode").exit_code == 0

    # A policy of the cluster, set by someone else: it shows in the project's `effective`
    # policy, which is not what the spec owns, so the plan stays empty.
    sim_server.api("PUT", TRAININGS, json={
        "meta": {"name": "cluster-wide", "scope": "cluster", "clusterId": CLUSTER},
        "policy": {"rules": {"image": {"canEdit": False}},
                   "defaults": {"imagePullPolicy": "Always"}}}).raise_for_status()
    effective = _live(sim_server, pid)["effective"]
    assert effective["rules"]["image"] == {"required": True, "canEdit": False}
    assert effective["defaults"]["imagePullPolicy"] == "IfNotPresent"  # the project's wins
    assert ws.cli("drift", str(ws.specs), "--detailed-exitcode").exit_code == 0

    # Changed behind the tool's back (another rule, a default gone; its cluster left out
    # of `meta`, as a project's policy may): drift of the rules alone; apply puts the
    # policy the spec owns back, in place.
    live = _live(sim_server, pid)
    sim_server.api("PUT", TRAININGS, json={
        "meta": {k: live["meta"][k] for k in ("name", "scope", "projectId")},
        "policy": {"rules": {"compute": {"gpuDevicesRequest": {"max": 8}}}}}
    ).raise_for_status()
    res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert res.exit_code == 2, res.output
    assert POLICY_AT in res.output and "gpuDevicesRequest" in res.output, res.output
    assert "clusterId" not in res.output, res.output
    res = ws.apply()
    assert res.exit_code == 0 and f"{POLICY_AT}: updated" in res.output, res.output
    healed = _live(sim_server, pid)["policy"]
    assert healed["rules"]["compute"]["gpuDevicesRequest"] == {"min": 1, "max": 3}
    assert healed["defaults"]["imagePullPolicy"] == "IfNotPresent"
    assert ws.plan("--detailed-exitcode").exit_code == 0

    # Export writes it as a spec (asked for by --kind); import adopts it; a clean plan.
    out = ws.root / "exported"
    res = _other_state(ws, "export", "--kind", "Policy", "--out", str(out))
    assert res.exit_code == 0, res.output
    # Each beside its scope: the project's in its department's folder (the project is
    # not exported, but read to place it: it is in no department, so in "default"), the
    # cluster's at the organisation's top.
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.yaml")) == [
        "organisation/cluster.policy-training.yaml",
        "organisation/default/team-a.policy-training.yaml"]
    doc = yaml.safe_load((out / "organisation" / "default" / "team-a.policy-training.yaml"
                          ).read_text())
    assert doc == {"kind": "Policy", "workloadType": "training", "scope": "project",
                   "project": "team-a", "clusterId": CLUSTER,
                   "defaults": {"compute": {"gpuDevicesRequest": 1},
                                "imagePullPolicy": "IfNotPresent"},
                   "rules": {"compute": {"gpuDevicesRequest": {"min": 1, "max": 3}},
                             "image": {"required": True}}}
    res = _other_state(ws, "import", "--all", str(out))
    assert res.exit_code == 0, res.output
    state = json.loads((ws.root / "other.json").read_text())
    assert state["resources"][POLICY_AT]["workload_id"] == \
        f"trainings?scope=project&projectId={pid}"
    res = _other_state(ws, "plan", str(out), "--detailed-exitcode")
    assert res.exit_code == 0, res.output

    # Its spec removed: a DELETE by the policy's query, and it is gone.
    spec.unlink()
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0 and f"{POLICY_AT}: deleted" in res.output, res.output
    assert _policy_writes(sim_server) == [("DELETE", TRAININGS,
                                           f"scope=project&projectId={pid}")]
    assert sim_server.api("GET", TRAININGS, params={"scope": "project",
                                                    "projectId": pid}).status_code == 404


def test_a_policy_the_server_refuses_fails_the_plan_naming_the_rule(ws, sim_server):
    ws.write("workspaces.yaml", CLUSTER_POLICY.replace("min: 1, max: 2", "min: 3, max: 2"))
    res = ws.plan()
    assert res.exit_code == 1, res.output
    assert "# the server's dry run: refused" in res.output
    assert "policy.rules.compute.gpuDevicesRequest.min: must be no more than max (2)" \
        in res.output
    assert f"the server's dry run refused {CLUSTER_POLICY_AT}" in res.output
    assert "Traceback" not in res.output
    # The markdown comment says it too.
    res = ws.plan("--format", "markdown")
    assert res.exit_code == 1 and "dry run: **refused**" in res.output, res.output
    # apply refuses before writing anything (the dry runs are the only writes sent).
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 1 and "nothing was applied" in res.output, res.output
    assert {(m, q) for m, _, q in _policy_writes(sim_server)} == {("PUT", "validateOnly=true")}
    assert sim_server.api("GET", WORKSPACES, params={"scope": "cluster",
                                                     "clusterId": CLUSTER}).status_code == 404
    assert not ws.state_path.exists()  # nothing recorded either


def test_a_saved_plan_is_applied_without_a_second_dry_run(ws, sim_server):
    ws.write("workspaces.yaml", CLUSTER_POLICY)
    plan_file = ws.root / "policy.plan"
    res = ws.cli("plan", str(ws.specs), "--out", str(plan_file))
    assert res.exit_code == 0 and "dry run: accepted" in res.output, res.output
    sim_server.clear_requests()
    res = ws.cli("apply", str(plan_file))
    assert res.exit_code == 0 and f"{CLUSTER_POLICY_AT}: created" in res.output, res.output
    assert _policy_writes(sim_server) == [("PUT", WORKSPACES, "")]
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_watch_heal_puts_back_a_policy_deleted_outside(ws, sim_server):
    ws.write("workspaces.yaml", CLUSTER_POLICY)
    assert ws.apply().exit_code == 0
    where = {"scope": "cluster", "clusterId": CLUSTER}
    with Watch(ws, "--mode", "heal", "--interval", "0.5s") as w:
        w.wait_cycles(1)
        sim_server.api("DELETE", WORKSPACES, params=where).raise_for_status()
        wait_until(lambda: sim_server.api("GET", WORKSPACES, params=where).status_code == 200,
                   10, "the policy put back")
        assert w.stop() == 0
    rules = sim_server.api("GET", WORKSPACES, params=where).json()["policy"]["rules"]
    assert rules == {"compute": {"gpuDevicesRequest": {"min": 1, "max": 2}}}
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_a_tenant_policy_is_in_no_cluster_and_still_recorded_exported_and_imported(
        ws, sim_server):
    """A tenant's policy has no cluster: the state records it with none (a state that
    required one was written and then refused by every later command)."""
    ws.write("tenant-training-policy.yaml", organisation.policy(
        "training", "rules:\n  compute:\n    gpuDevicesRequest: {max: 16}\n",
        scope="tenant"))
    res = ws.apply()
    assert res.exit_code == 0 and "Policy/tenant/training: created" in res.output, res.output
    assert ws.state()["resources"]["Policy/tenant/training"]["cluster_id"] is None
    assert ws.plan("--detailed-exitcode").exit_code == 0

    out = ws.root / "exported"
    assert _other_state(ws, "export", "--kind", "Policy", "--out", str(out)).exit_code == 0
    assert (out / "organisation" / "tenant.policy-training.yaml").is_file()
    res = _other_state(ws, "import", "--all", str(out))
    assert res.exit_code == 0 and "Adopted Policy/tenant/training" in res.output, res.output
    res = _other_state(ws, "plan", str(out), "--detailed-exitcode")
    assert res.exit_code == 0, res.output
