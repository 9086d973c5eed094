"""The organisation as code, through the CLI against the embedded simulator (`--sim`): a
Project with quotas per node pool by the pool's name is created and then plans clean; a
quota change is an update in place; a create-only change is a replacement that
`preventDestroy` (on by default) refuses until the spec opts out; a quota changed behind
the tool's back is drift that apply puts back; export then import plans clean."""

from __future__ import annotations

import asyncio
import json

import httpx
import yaml
from click.testing import CliRunner

from reconciler.cli import main
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as CLUSTER  # its node pools

SPEC = f"""\
kind: Project
name: team-a
clusterId: {CLUSTER}
description: the A team
resources:
  default:
    gpu: {{deserved: 2, limit: 4}}
  a100:
    gpu: {{deserved: 1}}
"""
ADDRESS = f"Project/{CLUSTER}/team-a"


def _cli(*args: str, state: str = "state.json"):
    return CliRunner().invoke(main, ["--sim", "--state", state, *args],
                              env={"NO_COLOR": "1"}, catch_exceptions=False)


def _api(method: str, path: str, **kw):
    """A request to the --sim data's simulator, as someone else would send it."""
    async def send():
        app = create_app(data_path=".runai-sim/data.json")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://runai-sim") as api:
            token = (await api.post("/api/v1/token", json={
                "grantType": "client_credentials", "clientID": DEFAULT_CLIENT_ID,
                "clientSecret": DEFAULT_CLIENT_SECRET})).json()["accessToken"]
            return await api.request(method, path, headers={"Authorization": f"Bearer {token}"},
                                     **kw)

    res = asyncio.run(send())
    assert res.status_code < 300, res.text
    return res.json()


def _project() -> dict:
    [found] = [p for p in _api("GET", "/api/v1/org-unit/projects")["projects"]
               if p["name"] == "team-a"]
    return found


def _quota(project: dict) -> dict:
    return {r["nodePool"]["name"]: r["gpu"] for r in project["resources"]}


def test_a_project_is_created_updated_drifted_exported_and_imported(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "team-a.yaml"
    spec.write_text(SPEC)

    res = _cli("apply", "specs", "--auto-approve")
    assert res.exit_code == 0, res.output
    assert f"{ADDRESS}: created" in res.output
    live = _project()
    pid = live["id"]
    assert live["status"]["phase"] == "Ready"
    # The pools named in the spec, sent by id.
    assert _quota(live) == {"default": {"deserved": 2, "limit": 4}, "a100": {"deserved": 1}}
    assert live["parent"]["name"] == "default"
    res = _cli("plan", "specs", "--detailed-exitcode")
    assert res.exit_code == 0, res.output

    # A quota change: an update in place, the other fields kept.
    spec.write_text(SPEC.replace("deserved: 2, limit: 4", "deserved: 3, limit: 4"))
    res = _cli("plan", "specs", "--format", "json")
    [change] = json.loads(res.stdout)["resource_changes"]
    assert change["action"] == "update", change
    res = _cli("apply", "specs", "--auto-approve")
    assert res.exit_code == 0 and f"{ADDRESS}: updated" in res.output, res.output
    live = _project()
    assert live["id"] == pid and _quota(live)["default"]["deserved"] == 3
    assert live["description"] == "the A team"

    # Changed behind the tool's back: drift, and apply puts it back.
    _api("GET", "/api/v1/org-unit/projects")  # (the token route warms the data file)
    async def patch():
        app = create_app(data_path=".runai-sim/data.json")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://runai-sim") as api:
            return await api.patch(f"/_sim/org/projects/{pid}", json={"resources": [
                {"nodePool": {"id": "1", "name": "default"}, "gpu": {"deserved": 9}}]})
    assert asyncio.run(patch()).status_code == 200
    res = _cli("drift", "specs", "--detailed-exitcode")
    assert res.exit_code == 2, res.output
    assert ADDRESS in res.output and "deserved" in res.output
    res = _cli("apply", "specs", "--auto-approve", "--refresh", "full")
    assert res.exit_code == 0 and f"{ADDRESS}: updated" in res.output, res.output
    assert _quota(_project()) == {"default": {"deserved": 3, "limit": 4},
                                  "a100": {"deserved": 1}}

    # A create-only field: a replacement, refused by preventDestroy (on by default).
    spec.write_text(SPEC + "requestedNamespace: team-a-ns\n")
    res = _cli("plan", "specs")
    assert res.exit_code == 1, res.output
    assert "preventDestroy" in res.output and ADDRESS in res.output
    spec.write_text(SPEC + "requestedNamespace: team-a-ns\nlifecycle: {preventDestroy: false}\n")
    res = _cli("plan", "specs", "--format", "json")
    [change] = json.loads(res.stdout)["resource_changes"]
    assert change["action"] == "replace", change
    res = _cli("plan", "specs")
    assert "forces replacement" in res.output, res.output
    spec.write_text(SPEC)

    # Export writes it as a spec (asked for by --kind); import adopts it; a clean plan.
    res = _cli("export", "--kind", "Project", "--out", "exported", state="other.json")
    assert res.exit_code == 0, res.output
    written = [p for p in (tmp_path / "exported").rglob("*.yaml")
               if yaml.safe_load(p.read_text()).get("name") == "team-a"]
    [doc] = [yaml.safe_load(p.read_text()) for p in written]
    assert doc["resources"]["default"]["gpu"] == {"deserved": 3, "limit": 4}
    assert "projectId" not in doc and "status" not in doc
    res = _cli("import", "--all", "exported", state="other.json")
    assert res.exit_code == 0, res.output
    state = json.loads((tmp_path / "other.json").read_text())
    assert state["resources"][ADDRESS]["workload_id"] == pid
    res = _cli("plan", "exported", "--detailed-exitcode", state="other.json")
    assert res.exit_code == 0, res.output
