"""NIM services end to end: the CLI against `sim serve`
over HTTP. Create, then a second plan with no change; an in-place update is exactly one
PATCH whose body is the whole spec; a new project replaces (delete at the generic v2
path, create); changes made out of band are drift and are put back; export then import
round-trips clean; a secret-looking variable's value (HF_TOKEN) shows nowhere; the GPU impact counts replicas, autoscaling and multiNode workers.
Every create and PATCH body sent is checked against nim-services.yml, with no key the
schema does not define (so no clusterId in the create body)."""

from __future__ import annotations

import pytest
import yaml

from tests.helpers.constants import CLUSTER
from tests.helpers.kind_specs import undefined_keys

pytestmark = pytest.mark.http

NIM = f"""
kind: NIMService
name: llama-nim
project: project-7
clusterId: {CLUSTER}
spec:
  image: nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3
  ngcAuthSecret: ngc-api
  compute:
    gpuDevicesRequest: 2
  environmentVariables:
    - name: NIM_MAX_MODEL_LEN
      value: "8192"
    - name: HF_TOKEN
      value: hf-very-secret-value
  modelStore:
    nimCache:
      name: llama-cache
  servingPort:
    port: 8000
  autoscaling:
    minReplicas: 1
    maxReplicas: 3
    metric: num_requests_running
    metricThreshold: 8
"""
ADDRESS = "NIMService/7/llama-nim"
NIM_PATH = "/api/v2/workloads/nim-services"
SECRET = "hf-very-secret-value"


@pytest.fixture(scope="module")
def nim_schema(shared_api_dir):
    import jsonschema
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    doc = yaml.safe_load((shared_api_dir / "nim-services.yml").read_text())
    registry = Registry().with_resources(
        [("nim.yml", Resource.from_contents(doc, default_specification=DRAFT202012))])

    def check(name: str, body: dict) -> None:
        validator = jsonschema.Draft202012Validator(
            {"$ref": f"nim.yml#/components/schemas/{name}"}, registry=registry)
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(body)]
        components = doc["components"]["schemas"]
        undefined_keys(components[name], body, components, "", errors)
        assert not errors, f"{name}: " + "\n".join(errors[:5])

    return check


def _writes(sim, nim_schema) -> list[dict]:
    """The writes sent since the log was cleared, each NIM body checked against the API."""
    out = sim.writes()
    for r in out:
        if r["path"] == NIM_PATH and r["method"] == "POST":
            nim_schema("NimServiceCreateRequest", r["body"])
        elif r["path"].startswith(NIM_PATH + "/") and r["method"] == "PATCH":
            nim_schema("NimServiceUpdateRequest", r["body"])
    return out


def _create(ws, sim, nim_schema) -> str:
    ws.write("nim.yaml", NIM)
    sim.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    writes = _writes(sim, nim_schema)
    assert [(r["method"], r["path"]) for r in writes] == [("POST", NIM_PATH)]
    body = writes[0]["body"]
    assert body["metadata"] == {"name": "llama-nim", "projectId": "7"}  # no clusterId
    assert SECRET not in res.output
    [item] = [w for w in sim.live() if w["name"] == "llama-nim"]
    assert item["type"] == "nim-service"
    return item["id"]


def test_create_then_a_second_plan_is_empty_although_the_server_filled_defaults(
        ws, sim_server, nim_schema):
    wid = _create(ws, sim_server, nim_schema)
    live = sim_server.api("GET", f"{NIM_PATH}/{wid}").json()
    assert live["spec"]["servingPort"]["serviceType"] == "ClusterIP"
    assert live["spec"]["replicas"] == 1 and live["spec"]["autoscaling"]["scaleWindowSeconds"] == 300
    assert live["metadata"]["updatedAt"] and live["metadata"]["updatedBy"]
    assert ws.plan("--detailed-exitcode").exit_code == 0
    assert ws.cli("drift", "--detailed-exitcode").exit_code == 0


def test_the_next_plan_reads_it_from_the_list_though_its_project_names_another_cluster(
        ws, sim_server, nim_schema):
    """The spec's clusterId is not the cluster its project runs in (the API takes none and
    places the service in its project's): the list after the apply still vouches for it,
    so the next plan sends no GET of it."""
    wid = _create(ws, sim_server, nim_schema)
    [item] = [w for w in sim_server.live() if w["id"] == wid]
    assert item["clusterId"] != CLUSTER
    sim_server.clear_requests()
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    assert [r["path"] for r in sim_server.requests()
            if r["method"] == "GET" and r["path"].startswith(NIM_PATH)] == []


def test_an_in_place_update_is_one_patch_of_the_whole_spec(ws, sim_server, nim_schema):
    wid = _create(ws, sim_server, nim_schema)
    ws.write("nim.yaml", NIM.replace("1.3.3", "1.3.4").replace("maxReplicas: 3", "maxReplicas: 4"))
    plan = ws.plan()
    assert "will be updated in place" in plan.output and "forces replacement" not in plan.output
    assert SECRET not in plan.output
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    writes = _writes(sim_server, nim_schema)
    assert [(r["method"], r["path"]) for r in writes] == [("PATCH", f"{NIM_PATH}/{wid}")]
    sent = writes[0]["body"]["spec"]
    assert sent["image"].endswith(":1.3.4") and sent["autoscaling"]["maxReplicas"] == 4
    assert sent["modelStore"] == {"nimCache": {"name": "llama-cache"}}  # the whole spec
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_a_new_project_replaces_it_deleting_at_the_v2_path(ws, sim_server, nim_schema):
    wid = _create(ws, sim_server, nim_schema)
    ws.write("nim.yaml", NIM.replace("project: project-7", "projectId: \"8\""))
    sim_server.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    writes = _writes(sim_server, nim_schema)
    assert sorted((r["method"], r["path"]) for r in writes) == [
        ("DELETE", f"/api/v2/workloads/{wid}"), ("POST", NIM_PATH)]
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_an_out_of_band_change_is_drift_and_is_put_back(ws, sim_server, nim_schema):
    wid = _create(ws, sim_server, nim_schema)
    r = sim_server.api("PATCH", f"{NIM_PATH}/{wid}", json={"spec": {
        "image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:latest", "replicas": 1,
        "servingPort": {"port": 8000}, "modelStore": {"nimCache": {"name": "llama-cache"}}}})
    assert r.status_code == 202, r.text
    doc = ws.plan_json()
    assert ADDRESS in {d["address"] for d in doc["resource_drift"]}
    assert SECRET not in ws.plan().output
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    writes = _writes(sim_server, nim_schema)
    assert [(r["method"], r["path"]) for r in writes] == [("PATCH", f"{NIM_PATH}/{wid}")]
    live = sim_server.api("GET", f"{NIM_PATH}/{wid}").json()
    assert live["spec"]["image"].endswith(":1.3.3") and live["spec"]["autoscaling"]["maxReplicas"] == 3
    assert ws.plan("--detailed-exitcode").exit_code == 0


def test_export_then_import_round_trips_clean(ws, sim_server, nim_schema, tmp_path):
    _create(ws, sim_server, nim_schema)
    out = tmp_path / "exported"
    res = ws.cli("export", "--out", str(out), "--include-secrets")
    assert res.exit_code == 0, res.output
    [path] = [p for p in out.rglob("*.yaml") if "NIMService" in str(p)]
    doc = yaml.safe_load(path.read_text())
    assert doc["kind"] == "NIMService" and doc["project"] == "project-7"
    # As a person writes it: no server-added fields, no defaults.
    assert "replicas" not in doc["spec"] and "serviceType" not in doc["spec"]["servingPort"]
    assert "scaleWindowSeconds" not in doc["spec"]["autoscaling"]
    assert not {"workloadId", "createdAt", "updatedAt", "metadata"} & set(doc)
    spec = yaml.safe_load(NIM)["spec"]
    del spec["autoscaling"]["minReplicas"]  # 1 is its default
    assert doc["spec"] == spec
    # A new project folder: the exported spec alone, no state; import, then nothing to do.
    (ws.specs / "nim.yaml").unlink()
    path.rename(ws.specs / "nim.yaml")
    ws.state_path.unlink()
    sim_server.clear_requests()
    res = ws.cli("import", "--all", str(ws.specs))
    assert res.exit_code == 0, res.output
    assert ADDRESS in ws.state_path.read_text()
    assert ws.plan("--detailed-exitcode").exit_code == 0
    assert ws.apply().exit_code == 0 and sim_server.writes() == []


def test_the_gpu_impact_counts_replicas_autoscaling_and_multinode(ws, sim_server):
    ws.write("nim.yaml", NIM)
    ws.write("multi.yaml", NIM.replace("llama-nim", "llama-multi").replace(
        "  autoscaling:\n    minReplicas: 1\n    maxReplicas: 3\n    metric: num_requests_running\n"
        "    metricThreshold: 8\n", "  replicas: 2\n  multiNode:\n    workers: 3\n"))
    doc = ws.plan_json()["gpu_impact"]
    got = {w["address"]: (w["after"]["min"], w["after"]["max"]) for w in doc["workloads"]}
    # 1..3 replicas x 2 GPUs; 2 replicas x (1 + 3 workers) x 2 GPUs.
    assert got == {ADDRESS: (2, 6), "NIMService/7/llama-multi": (16, 16)}
