"""Access rules as code, through the CLI against `sim serve` over HTTP: a rule binding a
group to a project (the role and the project by name; a department scope alike) is
created after the project the same plan creates, with a body NVIDIA's schema takes, and
then plans clean; a create whose answer is lost takes the rule it made; a change of
its role is a replacement (the API has no update), shown with the reason; a rule deleted
behind the tool's back is drift that apply, and watch in heal mode, create again; export
then import plans clean, and a rule is found live by its subject, role and scope whatever
handle its spec gives it; its delete goes before its project's; a role that names nothing
fails the create, naming it."""

from __future__ import annotations

import json

import yaml

from reconciler.simulator import access, schema, validator
from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER
from tests.helpers import organisation
from tests.helpers.organisation import RULES
from tests.helpers.organisation import access_rules as _rules
from tests.helpers.organisation import other_state as _other_state
from tests.helpers.organisation import project_id as _project_id
from tests.helpers.organisation import writes as _writes
from tests.helpers.watchproc import Watch, wait_until

PROJECT = organisation.project(destroyable=True)
RULE = organisation.access_rule()
RULE_AT = f"AccessRule/{CLUSTER}/ml-team-trains"
ROLE_ID = {r["name"]: r["id"] for r in access.ROLES}


def test_a_rule_is_created_replaced_drifted_exported_and_imported(ws, sim_server):
    ws.write("team-a.yaml", PROJECT)
    spec = ws.write("ml-team.yaml", RULE)
    res = ws.plan()
    assert res.exit_code == 0, res.output
    assert f"+ AccessRule ml-team-trains (cluster {CLUSTER})" in res.output, res.output
    res = ws.apply()
    assert res.exit_code == 0 and f"{RULE_AT}: created" in res.output, res.output
    # The project first (the rule's scope is looked up by its name), then the rule.
    assert [m + " " + p.rsplit("/", 1)[-1] for m, p in _writes(sim_server)] == [
        "POST projects", "POST access-rules"]
    [sent] = [r["body"] for r in sim_server.writes() if r["path"] == RULES]
    assert validator.validate(schema.ACCESS_RULE_CREATE, sent) == []
    assert sent == {"subjectId": "ml-team", "subjectType": "group",
                    "roleId": ROLE_ID["L1 researcher"], "scopeType": "project",
                    "scopeId": _project_id(sim_server), "clusterId": CLUSTER}
    [live] = _rules(sim_server)
    assert ws.state()["resources"][RULE_AT]["workload_id"] == str(live["id"])
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    # Read by GET, the rule (which the server holds without the handle) is unchanged too.
    res = ws.plan("--refresh=full", "--detailed-exitcode")
    assert res.exit_code == 0, res.output
    res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert res.exit_code == 0, res.output

    # The API has no update of a rule: a new role replaces it, and the plan says why.
    spec.write_text(RULE.replace("L1 researcher", "L2 researcher"))
    [change] = [c for c in ws.plan_json()["resource_changes"] if c["address"] == RULE_AT]
    assert change["action"] == "replace", change
    # The server keeps no handle: the rule it holds shows under the address's.
    assert change["change"]["before"]["name"] == "ml-team-trains"
    assert [op["path"] for op in change["change"]["patch"]] == ["/role"], change
    res = ws.plan()
    assert '"L1 researcher" -> "L2 researcher"' in res.output, res.output
    assert "forces replacement" in res.output, res.output
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert [m for m, p in _writes(sim_server) if p.startswith(RULES)] == ["DELETE", "POST"]
    [live] = _rules(sim_server)
    assert live["roleName"] == "L2 researcher"
    assert ws.state()["resources"][RULE_AT]["workload_id"] == str(live["id"])
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output

    # Deleted behind the tool's back: drift, and apply creates it again.
    sim_server.admin.delete(f"/_sim/org/access-rules/{live['id']}").raise_for_status()
    res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert res.exit_code == 2 and RULE_AT in res.output, res.output
    # A rule is no workload: the report counts resources.
    assert "Drift: 1 resource changed outside runai-reconcile." in res.output
    assert f"- resource {live['id']} is in the state, gone from live" in res.output
    md = ws.cli("drift", str(ws.specs), "--format", "markdown")
    assert "**Drift:** 1 resource changed outside runai-reconcile." in md.output, md.output
    res = ws.apply()
    assert res.exit_code == 0 and f"{RULE_AT}: created" in res.output, res.output
    [live] = _rules(sim_server)
    assert (live["subjectId"], live["roleName"], live["scopeName"]) == (
        "ml-team", "L2 researcher", "team-a")
    assert ws.plan("--detailed-exitcode").exit_code == 0

    # Export writes it as a spec named by its identity, without server-owned fields;
    # import adopts it by that address; the next plan is empty.
    out = ws.root / "exported"
    res = _other_state(ws, "export", "--kind", "AccessRule", "--out", str(out))
    assert res.exit_code == 0, res.output
    # Beside the project it scopes (in the folder of its department, "default").
    [path] = out.rglob("*.yaml")
    assert path.relative_to(out).as_posix() == \
        "organisation/default/team-a.access-ml-team.l2-researcher.yaml"
    doc = yaml.safe_load(path.read_text())
    assert doc == {"kind": "AccessRule", "name": "ml-team.l2-researcher.project-team-a",
                   "clusterId": CLUSTER, "subjectType": "group", "subjectId": "ml-team",
                   "role": "L2 researcher", "scopeType": "project", "scope": "team-a"}, doc
    res = _other_state(ws, "import", "--all", str(out))
    assert res.exit_code == 0, res.output
    state = json.loads((ws.root / "other.json").read_text())
    assert state["resources"][f"AccessRule/{CLUSTER}/{doc['name']}"]["workload_id"] == \
        str(live["id"])
    res = _other_state(ws, "plan", str(out), "--detailed-exitcode")
    assert res.exit_code == 0, res.output
    # A plain export (no --kind) writes workloads only.
    res = _other_state(ws, "export", "--out", str(ws.root / "workloads"))
    assert res.exit_code == 0, res.output
    assert not list((ws.root / "workloads").rglob("*.yaml"))

    # Destroyed with its project: the rule's delete goes first.
    sim_server.clear_requests()
    res = ws.apply("--destroy")
    assert res.exit_code == 0, res.output
    deletes = [p.rsplit("/", 2)[-2] for m, p in _writes(sim_server) if m == "DELETE"]
    assert deletes == ["access-rules", "projects"], deletes
    assert _rules(sim_server) == []


def test_a_rule_is_found_by_its_identity_whatever_its_handle(ws, sim_server):
    ws.write("team-a.yaml", PROJECT)
    ws.write("ml-team.yaml", RULE)
    assert ws.apply().exit_code == 0
    [live] = _rules(sim_server)
    # `import --all` of the same specs into another state adopts the rule under the
    # spec's own handle (the server keeps none: it is found by subject, role and scope).
    res = _other_state(ws, "import", "--all", str(ws.specs))
    assert res.exit_code == 0 and f"Adopted {RULE_AT} (resource {live['id']})" in res.output, \
        res.output
    res = _other_state(ws, "plan", str(ws.specs), "--refresh=full", "--detailed-exitcode")
    assert res.exit_code == 0, res.output
    # With the state lost, the next apply adopts the rule the spec describes: no second
    # create (which the API would refuse).
    assert ws.cli("state", "rm", RULE_AT).exit_code == 0
    res = ws.plan()
    assert f"= {RULE_AT}" in res.output and "1 to adopt" in res.output, res.output
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0 and "1 adopted" in res.output, res.output
    assert _writes(sim_server) == []
    assert ws.state()["resources"][RULE_AT]["workload_id"] == str(live["id"])
    assert ws.plan("--refresh=full", "--detailed-exitcode").exit_code == 0


def test_a_create_whose_answer_is_lost_finds_the_rule_it_made(ws, sim_server):
    # The rule is created, but the answer is lost (500 after the write): the client
    # looks for it by subject, role and scope, and takes it instead of sending again.
    ws.write("ml-team.yaml", RULE.replace("scopeType: project\nscope: team-a\n",
                                          "scopeType: cluster\n"))
    sim_server.admin.put("/_sim/faults", json={"commitFailRate": 1.0,
                                               "commitFailMode": "500"}).raise_for_status()
    res = ws.apply()
    assert res.exit_code == 0 and f"{RULE_AT}: created" in res.output, res.output
    [live] = _rules(sim_server)
    assert [m for m, p in _writes(sim_server)] == ["POST"]
    assert ws.state()["resources"][RULE_AT]["workload_id"] == str(live["id"])


def test_a_cluster_scope_is_the_rule_s_cluster(ws, sim_server):
    ws.write("admin.yaml", f"""\
kind: AccessRule
name: alice-administers
clusterId: {CLUSTER}
subjectType: user
subjectId: alice@example.com
role: Editor
scopeType: cluster
""")
    res = ws.apply()
    assert res.exit_code == 0, res.output
    [sent] = [r["body"] for r in sim_server.writes()]
    assert validator.validate(schema.ACCESS_RULE_CREATE, sent) == []
    assert (sent["scopeType"], sent["scopeId"]) == ("cluster", CLUSTER)
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_a_department_scope_is_looked_up_by_name_after_the_plan_creates_it(ws, sim_server):
    ws.write("research.yaml", f"""\
kind: Department
name: research
clusterId: {CLUSTER}
resources:
  default:
    gpu: {{deserved: 4}}
lifecycle: {{preventDestroy: false}}
""")
    ws.write("heads.yaml", RULE.replace("ml-team-trains", "heads-manage").replace(
        "L1 researcher", "Department administrator").replace(
        "scopeType: project\nscope: team-a", "scopeType: department\nscope: research"))
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert [m + " " + p.rsplit("/", 1)[-1] for m, p in _writes(sim_server)] == [
        "POST departments", "POST access-rules"]
    [sent] = [r["body"] for r in sim_server.writes() if r["path"] == RULES]
    assert validator.validate(schema.ACCESS_RULE_CREATE, sent) == []
    [department] = [d for d in sim_server.api("GET", "/api/v1/org-unit/departments").json()[
        "departments"] if d["name"] == "research"]
    assert (sent["scopeType"], sent["scopeId"]) == ("department", str(department["id"]))
    assert ws.plan("--refresh=full", "--detailed-exitcode").exit_code == 0


def test_watch_heal_creates_again_a_rule_deleted_outside(ws, sim_server):
    ws.write("team-a.yaml", PROJECT)
    ws.write("ml-team.yaml", RULE)
    assert ws.apply().exit_code == 0
    [live] = _rules(sim_server)
    with Watch(ws, "--mode", "heal", "--interval", "0.5s") as w:
        w.wait_cycles(1)
        sim_server.admin.delete(f"/_sim/org/access-rules/{live['id']}").raise_for_status()
        wait_until(lambda: len(_rules(sim_server)) == 1, 10, "the rule created again")
        assert w.stop() == 0
    [again] = _rules(sim_server)
    assert again["id"] != live["id"] and again["roleName"] == "L1 researcher"
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_a_role_that_does_not_exist_fails_the_plan_naming_it(ws, sim_server):
    """Checked when the plan is made (`live.names`): the spec's file, line and field, and
    the roles there are; nothing is written."""
    ws.write("ml-team.yaml", f"""\
kind: AccessRule
name: ml-team-wizards
clusterId: {CLUSTER}
subjectType: group
subjectId: ml-team
role: Wizard
scopeType: cluster
""")
    for res in (ws.plan(), ws.apply()):
        assert res.exit_code == 1, res.output
        assert "ml-team.yaml:6: role:" in res.output and "Wizard" in res.output, res.output
        assert "Traceback" not in res.output
    assert _writes(sim_server) == []
