"""Export of a Manifest writes it as a person would: Kubernetes' key order
(apiVersion, kind, metadata, spec; a list item led by its name), nothing the server added
(`workloadManifest`'s scheduler name, labels, uid, container defaults, `status`), no
default, a secret-looking `env` value withheld; then import of the exported file into a
new state plans clean. The CLI against `sim serve` over HTTP."""

from __future__ import annotations

import pytest
import yaml

pytestmark = pytest.mark.http

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
# Written in an order no one writes: spec first, a container's name last.
JOB = f"""
kind: Manifest
name: sweep
projectId: "7"
clusterId: {CLUSTER}
category: Train
manifest:
  spec:
    parallelism: 2
    template:
      spec:
        restartPolicy: Never
        containers:
          - image: nvcr.io/nvidia/pytorch:24.05-py3
            resources:
              limits:
                nvidia.com/gpu: 4
            env:
              - value: hf-very-secret
                name: HF_TOKEN
              - value: "1"
                name: SWEEP_ID
            name: trainer
  metadata:
    labels:
      team: ml
    name: sweep
  kind: Job
  apiVersion: batch/v1
"""


def _export(ws, out, *flags) -> tuple[str, dict]:
    res = ws.cli("export", "--out", str(out), "--kind", "Manifest", *flags)
    assert res.exit_code == 0, res.output
    [path] = out.rglob("*.yaml")
    text = path.read_text()
    return text, yaml.safe_load(text)


def test_export_writes_a_manifest_as_a_person_would_and_it_round_trips(
        ws, sim_server, tmp_path):
    ws.write("sweep.yaml", JOB)
    assert ws.apply().exit_code == 0
    [item] = [w for w in sim_server.live() if w["name"] == "sweep"]
    running = sim_server.api("GET", f"/api/v2/workloads/{item['id']}").json()["workload"]
    assert running["workloadManifest"]["spec"]["template"]["spec"]["schedulerName"]

    text, doc = _export(ws, tmp_path / "withheld")
    manifest = doc["manifest"]
    assert list(manifest) == ["apiVersion", "kind", "metadata", "spec"]
    assert list(manifest["metadata"]) == ["name", "labels"]
    [container] = manifest["spec"]["template"]["spec"]["containers"]
    assert list(container)[0] == "name"
    assert [list(v)[0] for v in container["env"]] == ["name", "name"]
    assert "            - name: trainer\n" in text or "- name: trainer\n" in text
    for added in ("schedulerName", "uid", "runai/queue", "terminationMessagePath",
                  "imagePullPolicy", "status", "hf-very-secret"):
        assert added not in text, added
    assert container["env"][0]["value"].startswith("<secret not exported")

    # With the secret: a new project folder, the exported file alone, a new state.
    text, _ = _export(ws, tmp_path / "whole", "--include-secrets")
    (ws.specs / "sweep.yaml").write_text(text)
    ws.state_path.unlink()
    res = ws.cli("import", "--all", str(ws.specs))
    assert res.exit_code == 0, res.output
    assert "Manifest/7/sweep" in ws.state_path.read_text()
    res = ws.plan("--detailed-exitcode")
    assert res.exit_code == 0, res.output
    sim_server.clear_requests()
    assert ws.apply().exit_code == 0
    assert sim_server.writes() == []
