"""Specs that name their project (`project: team-a`) through the CLI against `sim serve`:
bad input, one lookup per name and cluster, the address by id, the name beside it, drift
and saved plans."""

from __future__ import annotations

import json
import urllib.parse

import pytest

from tests.helpers.constants import CLUSTER
from tests.helpers.projects import serve, define

pytestmark = pytest.mark.http

OTHER_CLUSTER = "2b8e4c1a-9f3d-4e7b-8a6c-5d4e3f2a1b0c"
PROJECTS = "/api/v1/org-unit/projects"


def project_lookups(sim_server) -> list[dict[str, str]]:
    """The query of each projects lookup, decoded, in a stable order."""
    found = [dict(urllib.parse.parse_qsl(r["query"])) for r in sim_server.requests()
             if r["path"] == PROJECTS]
    return sorted(found, key=lambda q: sorted(q.items()))


# --- bad input ----------------------------------------------------------------------

OFFLINE = [  # (case, spec, where, what the message says)
    ("both", serve(project='project: team-a\nprojectId: "12"'), "bad.yaml:3: project:",
     "not both"),
    ("neither", serve(project=None), "bad.yaml:1: projectId:", "required field is missing"),
    ("bad-form", serve(project="project: Team_A"), "bad.yaml:3: project:", '"Team_A"'),
    ("not-a-string", serve(project="project: [team-a]"), "bad.yaml:3: project:",
     "must be a string"),
]


@pytest.mark.parametrize("case,text,where,word", OFFLINE, ids=[c[0] for c in OFFLINE])
def test_a_bad_project_field_exits_1_offline(ws, sim_server, case, text, where, word):
    ws.write("good.yaml", serve(name="fine", project='projectId: "7"'))
    ws.write("team-a/bad.yaml", text)
    for command in (("validate", str(ws.specs)), ("plan", str(ws.specs)),
                    ("apply", str(ws.specs), "--auto-approve")):
        res = ws.cli(*command)
        assert res.exit_code == 1, res.output
        assert "Traceback" not in res.output
        assert where in res.stderr and word in res.stderr, res.stderr
    assert sim_server.requests(api_only=False) == []
    assert not ws.state_path.exists()


def _unknown(sim_server):
    define(sim_server, "12", "team-b")


def _ambiguous(sim_server):
    define(sim_server, "12", "team-a")
    define(sim_server, "13", "team-a")


def _other_cluster(sim_server):
    define(sim_server, "12", "team-a", cluster=OTHER_CLUSTER)


UNRESOLVED = [
    ("unknown", _unknown, "no project of that name"),
    ("ambiguous", _ambiguous, "2 projects of that name (ids 12, 13)"),
    ("other-cluster", _other_cluster, "no project of that name"),
]


@pytest.mark.parametrize("case,setup,why", UNRESOLVED, ids=[c[0] for c in UNRESOLVED])
def test_a_project_name_that_does_not_resolve_once_exits_1_before_any_write(
        ws, sim_server, case, setup, why):
    setup(sim_server)
    ws.write("good.yaml", serve(name="fine", project='projectId: "7"'))
    ws.write("team-a/bad.yaml", serve())
    assert ws.cli("validate", str(ws.specs)).exit_code == 0  # the form is fine: offline
    assert sim_server.requests(api_only=False) == []
    for command in (("plan", str(ws.specs)), ("plan", str(ws.specs), "--no-refresh"),
                    ("apply", str(ws.specs), "--auto-approve")):
        res = ws.cli(*command)
        assert res.exit_code == 1, res.output
        assert "Traceback" not in res.output
        assert "bad.yaml:1" in res.stderr and "'team-a'" in res.stderr and why in res.stderr, \
            res.stderr
        assert CLUSTER in res.stderr
    assert sim_server.writes() == []
    assert not ws.state_path.exists()


def test_a_name_and_an_id_of_one_project_are_one_address_twice(ws, sim_server):
    define(sim_server, "12", "team-a")
    ws.write("a.yaml", serve())
    ws.write("b.yaml", serve(project='projectId: "12"'))
    res = ws.plan()
    assert res.exit_code == 1
    assert "duplicate address DistributedInference/12/serve" in res.stderr
    assert "a.yaml" in res.stderr and "b.yaml" in res.stderr
    assert sim_server.writes() == []


def test_two_specs_of_one_project_name_are_a_duplicate_offline(ws, sim_server):
    ws.write("a.yaml", serve())
    ws.write("b.yaml", serve())
    res = ws.cli("validate", str(ws.specs))
    assert res.exit_code == 1 and "a.yaml:1" in res.stderr and "b.yaml:1" in res.stderr


# --- resolution ---------------------------------------------------------------------

def test_each_distinct_name_and_cluster_is_looked_up_once(ws, sim_server):
    define(sim_server, "12", "team-a")
    define(sim_server, "14", "team-a", cluster=OTHER_CLUSTER)
    ws.write("a.yaml", serve("one") + "---\n" + serve("two") + "---\n" + serve("three"))
    ws.write("b.yaml", serve("four", cluster=OTHER_CLUSTER))
    ws.write("c.yaml", serve("five", project="project: project-7"))
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    asked = sorted(q["filterBy"] for q in project_lookups(sim_server))
    assert asked == sorted(f"name=={n},clusterId=={c}" for n, c in (
        ("team-a", CLUSTER), ("team-a", OTHER_CLUSTER), ("project-7", CLUSTER)))
    created = {r["body"]["name"]: r["body"]["projectId"] for r in sim_server.writes()}
    assert created == {"one": "12", "two": "12", "three": "12", "four": "14", "five": "7"}
    assert sorted(ws.state()["resources"]) == [
        "DistributedInference/12/one", "DistributedInference/12/three",
        "DistributedInference/12/two", "DistributedInference/14/four",
        "DistributedInference/7/five"]


def test_switching_between_project_and_project_id_is_no_change(ws, sim_server):
    define(sim_server, "12", "team-a")
    ws.write("a.yaml", serve(project='projectId: "12"'))
    assert ws.apply().exit_code == 0
    ws.write("a.yaml", serve())
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    assert "No changes" in res.stdout
    ws.write("a.yaml", serve(project='projectId: "12"'))
    assert ws.apply().exit_code == 0
    ws.write("a.yaml", serve())
    assert ws.plan("--detailed-exitcode").exit_code == 0
    assert [r["method"] for r in sim_server.writes()] == ["POST"]


def test_the_name_is_shown_beside_the_id_and_kept_in_the_state(ws, sim_server):
    define(sim_server, "12", "team-a")
    ws.write("a.yaml", serve())
    res = ws.plan()
    assert "+ DistributedInference serve (project 12, team-a)" in res.stdout
    md = ws.cli("plan", str(ws.specs), "--format", "markdown").stdout
    assert "<b>DistributedInference/12/serve</b> (project team-a) will be created" in md
    assert ws.apply().exit_code == 0
    assert ws.state()["resources"]["DistributedInference/12/serve"]["project_name"] == "team-a"
    assert ws.cli("state", "list").stdout == "DistributedInference/12/serve (project team-a)\n"
    # A change later: the name comes from the spec, and with projectId from the state.
    ws.write("a.yaml", serve(project='projectId: "12"', replicas=2))
    assert "~ DistributedInference serve (project 12, team-a)" in ws.plan().stdout


def test_a_state_without_project_names_reads_and_lists_addresses_alone(ws, sim_server):
    ws.write("a.yaml", serve(project='projectId: "7"'))
    assert ws.apply().exit_code == 0
    record = ws.state()["resources"]["DistributedInference/7/serve"]
    assert "project_name" not in record  # as older versions wrote it
    assert ws.cli("state", "list").stdout == "DistributedInference/7/serve\n"
    assert ws.plan("--detailed-exitcode").exit_code == 0


# --- drift and saved plans ----------------------------------------------------------

def test_drift_resolves_names_and_reports_a_change_outside(ws, sim_server):
    define(sim_server, "12", "team-a")
    ws.write("a.yaml", serve())
    assert ws.apply().exit_code == 0
    wid = ws.state()["resources"]["DistributedInference/12/serve"]["workload_id"]
    sim_server.admin.patch(f"/_sim/workloads/{wid}", json={"spec": {"replicas": 3}})
    sim_server.clear_requests()
    res = ws.cli("drift", str(ws.specs), "--format", "json", "--detailed-exitcode")
    assert res.exit_code == 2, res.output
    doc = json.loads(res.stdout)
    assert [d["address"] for d in doc["drift"]] == ["DistributedInference/12/serve"]
    assert len(project_lookups(sim_server)) == 1
    assert sim_server.writes() == []


def test_drift_with_an_unknown_project_name_exits_1(ws, sim_server):
    define(sim_server, "12", "team-a")
    ws.write("a.yaml", serve())
    assert ws.apply().exit_code == 0
    sim_server.admin.delete("/_sim/workloads")  # forgets team-a too
    res = ws.cli("drift", str(ws.specs))
    assert res.exit_code == 1 and "a.yaml:1" in res.stderr and "'team-a'" in res.stderr


def test_a_saved_plan_keeps_the_resolved_id_and_the_name(ws, sim_server, tmp_path):
    define(sim_server, "12", "team-a")
    ws.write("a.yaml", serve())
    plan_file = tmp_path / "plan.bin"
    assert ws.cli("plan", str(ws.specs), "--out", str(plan_file)).exit_code == 0
    shown = ws.cli("show", str(plan_file))
    assert "(project 12, team-a)" in shown.stdout
    sim_server.clear_requests()
    res = ws.cli("apply", str(plan_file))
    assert res.exit_code == 0, res.output
    assert project_lookups(sim_server) == []  # the plan holds the id
    (post,) = sim_server.writes()
    assert post["body"]["projectId"] == "12" and "project" not in post["body"]
    assert ws.state()["resources"]["DistributedInference/12/serve"]["project_name"] == "team-a"
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_names_resolve_once_when_the_specs_load_in_child_processes(ws, sim_server):
    """From 100 spec files on, the specs load in forked children (the address of a
    `project:` spec is provisional there): one lookup still serves them all, and a name
    and an id of one project still collide."""
    define(sim_server, "12", "team-a")
    for i in range(110):
        ws.write(f"many/serve-{i:03}.yaml", serve(f"serve-{i:03}"))
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert len(project_lookups(sim_server)) == 1
    assert len(ws.state()["resources"]) == 110
    assert all(a.startswith("DistributedInference/12/") for a in ws.state()["resources"])
    ws.write("many/same.yaml", serve("serve-042", project='projectId: "12"'))
    res = ws.plan()
    assert res.exit_code == 1
    assert "serve-042.yaml" in res.stderr and "same.yaml" in res.stderr
