"""The Manifest kind (Workloads V2) end to end: the CLI against `sim serve` over HTTP.
Every v2 body the reconciler sends, and every answer, is
checked against workloads-v2.yml, with no key its metadata does not define."""

from __future__ import annotations

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.helpers.constants import CLUSTER

pytestmark = pytest.mark.http

DEPLOYMENT = f"""
kind: Manifest
name: web
projectId: "7"
clusterId: {CLUSTER}
priority: high
category: Deploy
manifest:
  apiVersion: apps/v1
  kind: Deployment
  metadata:
    name: web
  spec:
    replicas: 2
    template:
      spec:
        containers:
          - name: app
            image: nginx:1.27
            env:
              - name: MODE
                value: prod
            ports:
              - containerPort: 8080
            resources:
              limits:
                nvidia.com/gpu: 1
                memory: 1Gi
                cpu: 1500m
          - name: sidecar
            image: busybox:1.36
"""


@pytest.fixture(scope="module")
def v2(shared_api_dir):
    doc = yaml.safe_load((shared_api_dir / "workloads-v2.yml").read_text())
    registry = Registry().with_resource(
        "v2", Resource.from_contents(doc, default_specification=DRAFT202012))
    schemas = doc["components"]["schemas"]

    def check(name: str, value: dict) -> None:
        validator = jsonschema.Draft202012Validator(
            {"$ref": f"v2#/components/schemas/{name}"}, registry=registry)
        errors = [f"{list(e.path)}: {e.message}" for e in validator.iter_errors(value)]
        meta = value.get("metadata")
        if name.endswith("Request") and isinstance(meta, dict):
            ref = schemas[name]["properties"]["metadata"]["$ref"].rsplit("/", 1)[1]
            errors += [f"metadata.{k}: not defined" for k in meta
                       if k not in schemas[ref]["properties"]]
        assert not errors, f"{name}: " + "\n".join(errors[:5])
    return check


def _v2_writes(sim):
    return [r for r in sim.requests() if r["path"].startswith("/api/v2/")
            and r["method"] != "GET"]


def test_manifest_lifecycle_over_http(ws, sim_server, v2):
    sim = sim_server
    ws.write("web.yaml", DEPLOYMENT)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    [post] = _v2_writes(sim)
    assert post["method"] == "POST" and post["path"] == "/api/v2/workloads"
    v2("WorkloadV2CreateRequest", post["body"])
    assert post["body"]["manifest"]["spec"]["replicas"] == 2  # the YAML sent as JSON
    [item] = [w for w in sim.live() if w["name"] == "web"]
    assert item["type"] == "manifest"
    answer = sim.api("GET", f"/api/v2/workloads/{item['id']}").json()
    v2("WorkloadV2GetResponse", answer)
    pod = answer["workload"]["workloadManifest"]["spec"]["template"]["spec"]
    assert pod["schedulerName"] == "runai-scheduler"  # server additions: not drift
    assert "schedulerName" not in answer["workload"]["rawManifest"]["spec"]["template"]["spec"]

    # the second plan is empty; so is one that reorders containers and respells 1Gi
    assert ws.plan("--detailed-exitcode").exit_code == 0
    respelled = DEPLOYMENT.replace("memory: 1Gi", "memory: 1024Mi").replace(
        "cpu: 1500m", "cpu: \"1.5\"")
    app, sidecar = respelled.split("          - name: sidecar\n")
    head, app_container = app.split("          - name: app\n")
    ws.write("web.yaml", head + "          - name: sidecar\n" + sidecar
             + "          - name: app\n" + app_container)
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output

    # an in-place update: exactly one PUT, a valid body
    ws.write("web.yaml", DEPLOYMENT.replace("replicas: 2", "replicas: 3"))
    sim.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    [put] = _v2_writes(sim)
    assert put["method"] == "PUT" and put["path"] == f"/api/v2/workloads/{item['id']}"
    v2("WorkloadV2UpdateRequest", put["body"])
    assert put["body"]["manifest"]["spec"]["replicas"] == 3
    assert put["body"]["metadata"] == {"priority": "high", "category": "Deploy"}
    assert ws.plan("--detailed-exitcode").exit_code == 0

    # out of band: shows as drift, and apply puts it back
    live = sim.api("GET", f"/api/v2/workloads/{item['id']}").json()["workload"]["rawManifest"]
    live["spec"]["replicas"] = 7
    assert sim.admin.patch(f"/_sim/workloads/{item['id']}",
                           json={"rawManifest": live}).status_code == 200
    res = ws.cli("drift", str(ws.specs))
    assert "manifest.spec.replicas" in res.output and "7" in res.output, res.output
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert ws.plan("--detailed-exitcode").exit_code == 0

    # a replace-forcing change (preemptibility is create-only) replaces
    ws.write("web.yaml", DEPLOYMENT.replace("category: Deploy",
                                            "category: Deploy\npreemptibility: preemptible"))
    plan = ws.plan_json()
    [change] = plan["resource_changes"]
    assert change["change"]["actions"] == ["delete", "create"]
    sim.clear_requests()
    res = ws.apply()
    assert res.exit_code == 0, res.output
    assert [r["method"] for r in _v2_writes(sim)] == ["DELETE", "POST"]
    assert ws.plan("--detailed-exitcode").exit_code == 0

    # export writes what a person would; the exported spec plans clean
    out = ws.root / "exported"
    res = ws.cli("export", "--out", str(out), "--kind", "Manifest")
    assert res.exit_code == 0, res.output
    [exported] = out.rglob("*.yaml")
    text = exported.read_text()
    assert "schedulerName" not in text and "uid" not in text and "kind: Deployment" in text
    res = ws.cli("plan", str(out), "--detailed-exitcode")
    assert res.exit_code == 0, res.output


def test_unregistered_type_is_refused_and_a_duplicate_name_conflicts(sim_server):
    meta = {"name": "x", "projectId": "7", "clusterId": CLUSTER}
    bad = sim_server.api("POST", "/api/v2/workloads", json={
        "metadata": meta, "manifest": {"apiVersion": "example.com/v1", "kind": "Thing"}})
    assert bad.status_code == 400
    good = {"metadata": meta, "manifest": {"apiVersion": "batch/v1", "kind": "Job"}}
    assert sim_server.api("POST", "/api/v2/workloads", json=good).status_code == 202
    assert sim_server.api("POST", "/api/v2/workloads", json=good).status_code == 409
    types = sim_server.api("GET", "/api/v1/workload-types").json()["types"]
    assert {"PyTorchJob", "RayJob", "Deployment"} <= {t["name"] for t in types}


def test_a_sensitive_env_value_inside_a_manifest_is_masked(ws, sim_server):
    spec = DEPLOYMENT.replace("value: prod", "value: s3cr3t-one") + (
        "lifecycle:\n  sensitive:\n"
        "    - manifest.spec.template.spec.containers[app].env[MODE].value\n")
    ws.write("web.yaml", spec)
    assert ws.apply().exit_code == 0
    ws.write("web.yaml", spec.replace("s3cr3t-one", "s3cr3t-two"))
    for fmt in ("text", "json", "markdown"):
        res = ws.plan("--format", fmt)
        assert res.exit_code == 0, res.output
        assert "env[MODE]" in res.output or "MODE" in res.output
        assert "s3cr3t" not in res.output
