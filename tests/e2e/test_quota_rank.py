"""A quota's `rank` (Run:ai 3.0's word, in the place of `priority`), through the CLI
against `sim serve --control-plane 3.0` over HTTP: sent as `rank` in the quota entry (the
simulator takes no unknown key), checked at plan time against the ranks, read back so
that the next plan is empty, changed by a PUT of the unit's `resources` alone, put back
when changed outside, and exported; a `priority` there fails the plan saying to write
`rank`. On a 2.24 control plane, whose quota has no rank, the server's refusal is shown."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import main
from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER
from tests.helpers import organisation, simserve
from tests.helpers.constants import CLIENT_ID, CLIENT_SECRET
from tests.helpers.workspace import SimServer, Workspace

PROJECT = organisation.project("team-r", pools={"default": "gpu: {deserved: 2}\nrank: High"},
                               destroyable=True)
AT = f"Project/{CLUSTER}/team-r"
PROJECTS = "/api/v1/org-unit/projects"


@pytest.fixture(scope="module")
def sim_3_0(tmp_path_factory):
    with simserve.sim_serve(tmp_path_factory.mktemp("sim30"), "--control-plane",
                            "3.0") as served:
        server = SimServer(served.url, served.proc)
        yield server
        server.admin.close()


def _ws(root, sim: SimServer) -> Workspace:
    return Workspace(root, {"RUNAI_URL": sim.url, "RUNAI_CLIENT_ID": CLIENT_ID,
                            "RUNAI_CLIENT_SECRET": CLIENT_SECRET, "RUNAI_TOKEN": None,
                            "NO_COLOR": "1"})


def _unit(sim: SimServer) -> dict:
    return organisation.unit(sim, "projects", "team-r")


def test_a_rank_is_sent_read_back_updated_healed_and_exported(tmp_path, sim_3_0):
    ws = _ws(tmp_path / "project", sim_3_0)
    spec = ws.write("team-r.yaml", PROJECT)
    res = ws.apply()
    assert res.exit_code == 0 and f"{AT}: created" in res.output, res.output
    live = _unit(sim_3_0)
    assert live["resources"][0]["rank"] == "High" and "priority" not in live["resources"][0]
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output

    # A new rank: the quota list alone, by a PUT of the resources sub-route.
    spec.write_text(PROJECT.replace("rank: High", "rank: VeryHigh"))
    res = ws.plan()
    assert 'resources.default.rank: "High" -> "VeryHigh"' in res.output, res.output
    sim_3_0.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0 and f"{AT}: updated" in res.output, res.output
    assert [(r["method"], r["path"]) for r in sim_3_0.writes()] == [
        ("PUT", f"{PROJECTS}/{live['id']}/resources")]
    assert _unit(sim_3_0)["resources"][0]["rank"] == "VeryHigh"

    # Changed outside: drift, put back by apply.
    sim_3_0.admin.patch(f"/_sim/org/projects/{live['id']}", json={"resources": [
        {"nodePool": {"id": "1", "name": "default"}, "gpu": {"deserved": 2},
         "rank": "Low"}]}).raise_for_status()
    res = ws.cli("drift", str(ws.specs), "--detailed-exitcode")
    assert res.exit_code == 2 and "rank" in res.output, res.output
    assert ws.apply().exit_code == 0
    assert _unit(sim_3_0)["resources"][0]["rank"] == "VeryHigh"

    # Exported with its rank; adopted; the next plan is empty.
    out = ws.root / "exported"
    other = ["--state", str(ws.root / "other.json")]
    res = CliRunner().invoke(main, [*other, "export", "--kind", "Project", "--out", str(out)],
                             env=ws.env, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    [doc] = [d for d in (yaml.safe_load(p.read_text()) for p in out.rglob("*.yaml"))
             if d["name"] == "team-r"]
    assert doc["resources"] == {"default": {"gpu": {"deserved": 2}, "rank": "VeryHigh"}}
    for args in (["import", "--all", str(out)], ["plan", str(out), "--detailed-exitcode"]):
        res = CliRunner().invoke(main, [*other, *args], env=ws.env, catch_exceptions=False)
        assert res.exit_code == 0, res.output
    assert AT in json.loads((ws.root / "other.json").read_text())["resources"]

    assert ws.apply("--destroy").exit_code == 0


def test_a_rank_that_names_no_rank_and_a_priority_fail_the_plan(tmp_path, sim_3_0):
    ws = _ws(tmp_path / "project", sim_3_0)
    sim_3_0.clear_requests()
    spec = ws.write("team-r.yaml", PROJECT.replace("rank: High", "rank: Urgent"))
    res = ws.plan()
    assert res.exit_code == 1, res.output
    assert (f"{spec}:7: resources.default.rank: no rank is named 'Urgent' (there are: "
            "High, Low, Medium, MediumHigh, MediumLow, VeryHigh, VeryLow)") in res.output
    spec.write_text(PROJECT.replace("rank: High", "priority: High"))
    res = ws.plan()
    assert res.exit_code == 1, res.output
    assert (f"{spec}:7: resources.default.priority: the control plane serves no priority "
            "(GET /api/v1/org-unit/priorities answers 404): a Run:ai 3.0 control plane "
            "ranks its units instead: write `rank`") in res.output
    assert "Traceback" not in res.output
    assert sim_3_0.writes() == []


def test_a_rank_on_a_2_24_control_plane_shows_the_servers_refusal(ws, sim_server):
    ws.write("team-r.yaml", PROJECT)
    res = ws.apply()
    assert res.exit_code == 1, res.output
    assert ("create failed: POST /api/v1/org-unit/projects: 400 Bad Request: The project "
            "request is invalid: resources[0].rank: unknown field") in res.output, res.output
    assert "Traceback" not in res.output
