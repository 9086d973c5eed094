"""The organisation as code, through the CLI against `sim serve` over HTTP (its phases
move every 0.2 s): a Department and a Project with quotas per node pool by the pool's
name are created (the project waited for until Ready) and then plan clean; a quota change
is a PUT of the unit's `resources` sub-route and nothing else, another updatable change a
PUT of the unit; a create-only change is a replacement that `preventDestroy` (on by
default) refuses until the spec opts out, as it refuses a delete; a quota changed behind
the tool's back is drift that apply, and watch in heal mode, put back; export then
import plans clean."""

from __future__ import annotations

import json

import yaml

from reconciler.simulator import schema, validator
from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER  # its node pools
from tests.helpers import organisation
from tests.helpers.organisation import UNITS
from tests.helpers.organisation import other_state as _other_state
from tests.helpers.organisation import unit as _unit
from tests.helpers.organisation import writes as _writes
from tests.helpers.policy import training, write_policy
from tests.helpers.watchproc import Watch, wait_until

PROJECT = organisation.project(description="the A team", pools={
    "default": "gpu: {deserved: 2, limit: 4}", "a100": "gpu: {deserved: 1}"})
DEPARTMENT = organisation.department()
PROJECT_AT = f"Project/{CLUSTER}/team-a"
DEPARTMENT_AT = f"Department/{CLUSTER}/research"


def _quota(unit: dict) -> dict:
    return {r["nodePool"]["name"]: r["gpu"] for r in unit["resources"]}


def test_a_project_is_created_updated_drifted_replaced_exported_and_imported(ws, sim_server):
    spec = ws.write("team-a.yaml", PROJECT)
    res = ws.plan()
    assert f"+ Project team-a (cluster {CLUSTER})" in res.output, res.output
    assert "resources.a100.gpu.deserved: 1" in res.output
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert f"{PROJECT_AT}: created" in res.output
    # The create answers while it is Creating: apply waits for Ready and says so.
    assert f"{PROJECT_AT}: Creating, waiting for Ready" in res.output
    live = _unit(sim_server, "projects", "team-a")
    pid = live["id"]
    assert live["status"]["phase"] == "Ready"
    assert ws.state()["resources"][PROJECT_AT]["last_phase"] == "Ready"
    # The pools named in the spec were sent by id; no department: the API's default.
    assert _quota(live) == {"default": {"deserved": 2, "limit": 4}, "a100": {"deserved": 1}}
    assert live["parent"]["name"] == "default"
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output

    # A quota change: a PUT of the resources sub-route alone, with a valid body.
    spec.write_text(PROJECT.replace("deserved: 2, limit: 4", "deserved: 3, limit: 4"))
    [change] = ws.plan_json()["resource_changes"]
    assert change["action"] == "update", change
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0 and f"{PROJECT_AT}: updated" in res.output, res.output
    assert _writes(sim_server) == [("PUT", f"{UNITS}/projects/{pid}/resources")]
    [sent] = [r["body"] for r in sim_server.writes()]
    assert validator.validate(schema.RESOURCES_UPDATE, sent) == []
    assert sorted((q["nodePool"]["id"], q["gpu"]["deserved"]) for q in sent) == \
        [("1", 3), ("2", 1)]
    live = _unit(sim_server, "projects", "team-a")
    assert live["id"] == pid and _quota(live)["default"]["deserved"] == 3
    assert live["description"] == "the A team"
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output

    # Another updatable field: a PUT of the unit, every updatable field in it.
    spec.write_text(PROJECT.replace("deserved: 2, limit: 4", "deserved: 3, limit: 4")
                    .replace("the A team", "the first team"))
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0 and f"{PROJECT_AT}: updated" in res.output, res.output
    assert _writes(sim_server) == [("PUT", f"{UNITS}/projects/{pid}")]
    [sent] = [r["body"] for r in sim_server.writes()]
    assert validator.validate(schema.PROJECT_UPDATE, sent) == []
    assert sent["description"] == "the first team" and len(sent["resources"]) == 2
    assert _unit(sim_server, "projects", "team-a")["description"] == "the first team"
    spec.write_text(PROJECT.replace("deserved: 2, limit: 4", "deserved: 3, limit: 4"))
    assert ws.apply().exit_code == 0

    # Changed behind the tool's back: drift, and apply puts it back.
    sim_server.admin.patch(f"/_sim/org/projects/{pid}", json={"resources": [
        {"nodePool": {"id": "1", "name": "default"}, "gpu": {"deserved": 9}}]}
    ).raise_for_status()
    res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert res.exit_code == 2, res.output
    assert PROJECT_AT in res.output and "deserved" in res.output
    res = ws.apply()
    assert res.exit_code == 0 and f"{PROJECT_AT}: updated" in res.output, res.output
    assert _quota(_unit(sim_server, "projects", "team-a")) == {
        "default": {"deserved": 3, "limit": 4}, "a100": {"deserved": 1}}

    # A create-only field: a replacement, refused by preventDestroy (on by default).
    spec.write_text(PROJECT + "requestedNamespace: team-a-ns\n")
    res = ws.plan()
    assert res.exit_code == 1, res.output
    assert "preventDestroy" in res.output and PROJECT_AT in res.output
    spec.write_text(PROJECT + "requestedNamespace: team-a-ns\n"
                    "lifecycle: {preventDestroy: false}\n")
    [change] = ws.plan_json()["resource_changes"]
    assert change["action"] == "replace", change
    res = ws.plan()
    assert "requestedNamespace" in res.output and "forces replacement" in res.output, \
        res.output
    spec.write_text(PROJECT.replace("deserved: 2, limit: 4", "deserved: 3, limit: 4"))

    # Export writes it as a spec (asked for by --kind); import adopts it; a clean plan.
    out = ws.root / "exported"
    res = _other_state(ws, "export", "--kind", "Project", "--out", str(out))
    assert res.exit_code == 0, res.output
    docs = [yaml.safe_load(p.read_text()) for p in out.rglob("*.yaml")]
    [doc] = [d for d in docs if d.get("name") == "team-a"]
    assert doc["resources"] == {"default": {"gpu": {"deserved": 3, "limit": 4}},
                                "a100": {"gpu": {"deserved": 1}}}
    assert not {"projectId", "status", "id", "department"} & set(doc)
    res = _other_state(ws, "import", "--all", str(out))
    assert res.exit_code == 0, res.output
    state = json.loads((ws.root / "other.json").read_text())
    assert state["resources"][PROJECT_AT]["workload_id"] == pid
    res = _other_state(ws, "plan", str(out), "--detailed-exitcode")
    assert res.exit_code == 0, res.output

    # Deleting it: refused without the opt-out; with it, the 202 is waited out.
    spec.unlink()
    res = ws.plan()
    assert res.exit_code == 1 and "preventDestroy" in res.output, res.output
    spec.write_text(PROJECT + "lifecycle: {preventDestroy: false}\n")
    assert ws.apply().exit_code == 0
    res = ws.apply("--destroy")
    assert res.exit_code == 0 and f"{PROJECT_AT}: deleted" in res.output, res.output
    assert sim_server.api("GET", f"{UNITS}/projects/{pid}").status_code == 404


def test_a_department_is_created_updated_drifted_exported_and_imported(ws, sim_server):
    spec = ws.write("research.yaml", DEPARTMENT)
    res = ws.apply()
    assert res.exit_code == 0 and f"{DEPARTMENT_AT}: created" in res.output, res.output
    live = _unit(sim_server, "departments", "research")
    did = live["id"]
    assert _quota(live) == {"default": {"deserved": 8}}
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output

    spec.write_text(DEPARTMENT.replace("deserved: 8", "deserved: 10"))
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0 and f"{DEPARTMENT_AT}: updated" in res.output, res.output
    assert _writes(sim_server) == [("PUT", f"{UNITS}/departments/{did}/resources")]
    assert _quota(_unit(sim_server, "departments", "research")) == {"default": {"deserved": 10}}

    sim_server.admin.patch(f"/_sim/org/departments/{did}", json={"resources": [
        {"nodePool": {"id": "1", "name": "default"}, "gpu": {"deserved": 1}}]}
    ).raise_for_status()
    res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert res.exit_code == 2 and DEPARTMENT_AT in res.output, res.output
    assert ws.apply().exit_code == 0
    assert _quota(_unit(sim_server, "departments", "research")) == {"default": {"deserved": 10}}

    # A create-only change (its name is its identity: a new department, the old one
    # deleted) is refused while preventDestroy holds.
    spec.write_text(DEPARTMENT.replace("research", "research-2"))
    res = ws.plan()
    assert res.exit_code == 1 and "preventDestroy" in res.output, res.output
    spec.write_text(DEPARTMENT.replace("deserved: 8", "deserved: 10"))

    out = ws.root / "exported"
    res = _other_state(ws, "export", "--kind", "Department", "--out", str(out))
    assert res.exit_code == 0, res.output
    docs = {d["name"]: d for d in (yaml.safe_load(p.read_text()) for p in out.rglob("*.yaml"))}
    assert docs["research"]["resources"] == {"default": {"gpu": {"deserved": 10}}}
    res = _other_state(ws, "import", "--all", str(out))
    assert res.exit_code == 0, res.output
    res = _other_state(ws, "plan", str(out), "--detailed-exitcode")
    assert res.exit_code == 0, res.output


def test_a_node_pool_that_does_not_exist_fails_the_create_naming_it(ws, sim_server):
    ws.write("team-a.yaml", PROJECT.replace("a100:", "h100:"))
    res = ws.apply()
    assert res.exit_code == 1, res.output
    assert "no node pool is named 'h100'" in res.output
    assert "Traceback" not in res.output
    assert _writes(sim_server) == []


def test_watch_heal_puts_back_a_quota_changed_outside(ws, sim_server):
    ws.write("team-a.yaml", PROJECT)
    assert ws.apply().exit_code == 0
    pid = _unit(sim_server, "projects", "team-a")["id"]
    with Watch(ws, "--mode", "heal", "--interval", "0.5s") as w:
        w.wait_cycles(1)
        sim_server.admin.patch(f"/_sim/org/projects/{pid}", json={"resources": [
            {"nodePool": {"id": "1", "name": "default"}, "gpu": {"deserved": 9}}]}
        ).raise_for_status()
        wait_until(lambda: _quota(_unit(sim_server, "projects", "team-a"))["default"]
                   == {"deserved": 2, "limit": 4}, 10, "the quota put back")
        assert w.stop() == 0
    assert sum(c.get("healed", 0) for c in w.cycles()) == 1, w.cycles()
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_one_plan_creates_a_department_then_its_project_and_deletes_them_in_reverse(
        ws, sim_server):
    opt_out = "lifecycle: {preventDestroy: false}\n"
    ws.write("research.yaml", DEPARTMENT + opt_out)
    ws.write("team-a.yaml", PROJECT + "department: research\n" + opt_out)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    creates = [(r["method"], r["path"]) for r in sim_server.writes()]
    assert creates == [("POST", f"{UNITS}/departments"), ("POST", f"{UNITS}/projects")]
    assert _unit(sim_server, "projects", "team-a")["parent"]["name"] == "research"
    assert ws.plan("--detailed-exitcode").exit_code == 0

    # The API refuses to delete a department that still has projects: the project's
    # deletion goes first, and is waited out.
    sim_server.clear_requests()
    res = ws.apply("--destroy")
    assert res.exit_code == 0, res.output
    deletes = [p for m, p in _writes(sim_server) if m == "DELETE"]
    assert [p.rsplit("/", 2)[-2] for p in deletes] == ["projects", "departments"]
    assert not [u for u in sim_server.api("GET", f"{UNITS}/departments").json()["departments"]
                if u["name"] == "research"]


def test_units_are_no_project_in_the_gpu_impact_or_a_quota_rule(ws, sim_server):
    """An organisation unit's address names its cluster, not a project: the GPU impact and
    a quota rule count a plan's workloads only, and no project is read by the cluster's
    id (which answers 404 and would be reported as an unknown quota)."""
    ws.write("research.yaml", DEPARTMENT)
    ws.write("team-a.yaml", PROJECT)
    ws.write("llama-ft.yaml", training(gpus=2))
    rules = write_policy(ws, """
        rules:
          - name: quota
            withinProjectQuota: true
    """)
    sim_server.clear_requests()
    res = ws.plan("--policy", rules)
    assert res.exit_code == 0, res.output
    assert CLUSTER not in res.output.split("GPU impact", 1)[1], res.output
    assert "project 7" in res.output
    assert not [r for r in sim_server.requests() if r["path"] == f"{UNITS}/projects/{CLUSTER}"]
