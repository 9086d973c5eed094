"""The rest of the engine for the v2 kinds, a PyTorchJob Manifest and a NIM service,
the CLI against `sim serve` over HTTP: policy rules over every container of every pod
template (and a NIM service's image), `--target` of one of them, `show` of a saved plan
holding them, `lifecycle` (preventDestroy, ignoreChanges), and sensitive values (a
secret-looking name, a `lifecycle.sensitive` path) masked in every format and command."""

from __future__ import annotations

import json

import pytest
import yaml

pytestmark = pytest.mark.http

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
JOB, NIM = "Manifest/7/gpt-pretrain", "NIMService/7/llama-nim"
SECRETS = ("hf-job-secret", "postgres://job-secret", "nvapi-nim-secret", "postgres://nim-secret")

# A master and 2 workers of 8 GPUs (24 GPUs). The worker's pods carry the label `team`, the
# master's do not; the worker has an init container pulling busybox:latest from Docker Hub.
PYTORCHJOB = f"""
kind: Manifest
name: gpt-pretrain
projectId: "7"
clusterId: {CLUSTER}
category: Train
manifest:
  apiVersion: kubeflow.org/v1
  kind: PyTorchJob
  metadata:
    name: gpt-pretrain
  spec:
    pytorchReplicaSpecs:
      Master:
        replicas: 1
        template:
          spec:
            containers:
              - name: pytorch
                image: nvcr.io/nvidia/pytorch:24.05-py3
                resources:
                  limits:
                    nvidia.com/gpu: 8
      Worker:
        replicas: 2
        template:
          metadata:
            labels:
              team: ml
          spec:
            initContainers:
              - name: fetch
                image: busybox:latest
            containers:
              - name: pytorch
                image: nvcr.io/nvidia/pytorch:24.05-py3
                env:
                  - name: HF_TOKEN
                    value: hf-job-secret
                  - name: DB_URL
                    value: postgres://job-secret
                resources:
                  limits:
                    nvidia.com/gpu: 8
lifecycle:
  sensitive:
    - manifest.spec.pytorchReplicaSpecs.Worker.template.spec.containers[pytorch].env[DB_URL].value
"""
WORKER = ("manifest.spec.pytorchReplicaSpecs.Worker.template.spec.containers[pytorch]"
          ".env[{}].value")

NIM_SPEC = f"""
kind: NIMService
name: llama-nim
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: docker.io/someone/llama-nim:1.0
  compute:
    gpuDevicesRequest: 2
  labels:
    - name: team
      value: ml
  environmentVariables:
    - name: NGC_API_KEY
      value: nvapi-nim-secret
    - name: DB_URL
      value: postgres://nim-secret
  servingPort:
    port: 8000
lifecycle:
  sensitive:
    - spec.environmentVariables[DB_URL].value
"""

POLICY = """
rules:
  - name: registries
    allowedImages: ["nvcr.io/*"]
  - name: pinned
    forbidLatestTag: true
  - name: labelled
    requiredLabels: [team]
  - name: cap
    maxGpusPerWorkload: 16
"""


def _both(ws) -> None:
    ws.write("job.yaml", PYTORCHJOB)
    ws.write("nim.yaml", NIM_SPEC)


def _ids(sim) -> dict[str, str]:
    return {w["name"]: w["id"] for w in sim.live()}


def _no_secret(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret} in {where}"


def test_policy_rules_see_every_container_of_every_pod_template_and_a_nim_image(ws, sim_server):
    _both(ws)
    policy = ws.root / "policy.yaml"
    policy.write_text(POLICY)
    res = ws.cli("plan", str(ws.specs), "--policy", str(policy), "--format", "json")
    assert res.exit_code == 1, res.output  # the deny rules fail the plan
    rules = {r["name"]: r for r in json.loads(res.stdout)["policy"]["rules"]}
    said = {name: {v["address"]: v["message"] for v in r["violations"]}
            for name, r in rules.items()}
    init = "manifest.spec.pytorchReplicaSpecs.Worker.template.spec.initContainers[fetch]"
    # An init container of the second pod template, and the NIM service's image.
    assert set(said["registries"]) == {JOB, NIM}
    assert said["registries"][JOB].endswith(f': {init}.image "busybox:latest"')
    assert said["registries"][NIM].endswith(': spec.image "docker.io/someone/llama-nim:1.0"')
    assert list(said["pinned"]) == [JOB]
    assert said["pinned"][JOB].endswith(f': {init}.image "busybox:latest"')
    # The master's pods lack the label; the worker's carry it (their template's labels).
    assert list(said["labelled"]) == [JOB]
    assert said["labelled"][JOB].endswith(
        ": manifest.spec.pytorchReplicaSpecs.Master.template.metadata.labels lacks team")
    # 8 + 2 x 8 = 24 GPUs (every pod template, by its replicas); the NIM service's 2 pass.
    assert list(said["cap"]) == [JOB] and "24" in said["cap"][JOB]
    assert sim_server.writes() == []


def test_target_one_v2_workload(ws, sim_server):
    _both(ws)
    for address, path in ((JOB, "/api/v2/workloads"), (NIM, "/api/v2/workloads/nim-services")):
        doc = ws.plan_json("--target", address)
        assert [rc["address"] for rc in doc["resource_changes"]] == [address]
        sim_server.clear_requests()
        res = ws.apply("--target", address)
        assert res.exit_code == 0, res.output
        assert [(w["method"], w["path"]) for w in sim_server.writes()] == [("POST", path)]
    assert ws.plan("--detailed-exitcode").exit_code == 0

    ws.write("job.yaml", PYTORCHJOB.replace("category: Train", "category: Build"))
    ws.write("nim.yaml", NIM_SPEC.replace("llama-nim:1.0", "llama-nim:1.1"))
    doc = ws.plan_json("--target", NIM)
    assert [(rc["address"], rc["action"]) for rc in doc["resource_changes"]] == [(NIM, "update")]
    sim_server.clear_requests()
    assert ws.apply("--target", NIM).exit_code == 0
    assert [w["method"] for w in sim_server.writes()] == ["PATCH"]
    [rc] = [rc for rc in ws.plan_json()["resource_changes"] if rc["action"] != "no-op"]
    assert (rc["address"], rc["action"]) == (JOB, "update")  # left for later


def test_show_of_a_saved_plan_with_both(ws, sim_server):
    _both(ws)
    saved = ws.root / "plan.json"
    res = ws.plan("--out", str(saved))
    assert res.exit_code == 0, res.output
    _no_secret(saved.read_text().replace("postgres://job-secret", "").replace(
        "postgres://nim-secret", "").replace("hf-job-secret", "").replace(
        "nvapi-nim-secret", ""), "the plan file")  # it keeps values, as the state does
    text = ws.cli("show", str(saved)).output
    assert "+ Manifest gpt-pretrain (PyTorchJob, project 7)" in text
    assert "+ NIMService llama-nim (project 7)" in text
    assert "Manifest/7/gpt-pretrain: 0 -> 24 (+24)" in text
    md = ws.cli("show", str(saved), "--format", "markdown").output
    assert "<b>Manifest/7/gpt-pretrain</b> (PyTorchJob)" in md and NIM in md
    doc = json.loads(ws.cli("show", str(saved), "--format", "json").stdout)
    assert {rc["address"]: rc.get("manifest_kind") for rc in doc["resource_changes"]} == {
        JOB: "PyTorchJob", NIM: None}
    for out, where in ((text, "show"), (md, "show markdown"), (json.dumps(doc), "show json")):
        _no_secret(out, where)
    sim_server.clear_requests()
    res = ws.cli("apply", str(saved))
    assert res.exit_code == 0, res.output
    assert sorted(w["path"] for w in sim_server.writes()) == [
        "/api/v2/workloads", "/api/v2/workloads/nim-services"]
    assert ws.plan("--detailed-exitcode").exit_code == 0
    listed = ws.cli("state", "list").output
    assert f"{JOB} (PyTorchJob)\n" in listed and f"{NIM}\n" in listed


def test_lifecycle_prevent_destroy_and_ignore_changes(ws, sim_server):
    job = PYTORCHJOB.replace("lifecycle:\n", (
        "lifecycle:\n  preventDestroy: true\n"
        "  ignoreChanges: [manifest.spec.pytorchReplicaSpecs.Worker.replicas]\n"))
    nim = NIM_SPEC.replace("lifecycle:\n", (
        "lifecycle:\n  preventDestroy: true\n  ignoreChanges: [spec.replicas]\n"))
    ws.write("job.yaml", job)
    ws.write("nim.yaml", nim)
    assert ws.apply().exit_code == 0
    ids = _ids(sim_server)

    # Changed outside, at an ignored path (an elastic job's workers, a NIM scaled by hand):
    # not drift, no action.
    raw = sim_server.api("GET", f"/api/v2/workloads/{ids['gpt-pretrain']}").json()[
        "workload"]["rawManifest"]
    raw["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 4
    sim_server.admin.patch(f"/_sim/workloads/{ids['gpt-pretrain']}",
                           json={"rawManifest": raw}).raise_for_status()
    sim_server.admin.patch(f"/_sim/workloads/{ids['llama-nim']}",
                           json={"spec": {"replicas": 3}}).raise_for_status()
    assert ws.plan("--detailed-exitcode").exit_code == 0
    assert ws.cli("drift", str(ws.specs), "--detailed-exitcode").exit_code == 0
    # ... nor when the spec changes it.
    ws.write("job.yaml", job.replace("replicas: 2", "replicas: 3"))
    assert ws.plan("--detailed-exitcode").exit_code == 0

    # A change that replaces, and a removed spec: refused, nothing sent.
    ws.write("job.yaml", job.replace("replicas: 1", "replicas: 2"))  # the master's
    ws.write("nim.yaml", nim.replace('projectId: "7"', 'projectId: "8"'))
    sim_server.clear_requests()
    res = ws.plan()
    assert res.exit_code == 1
    assert f"{JOB} (replace): protected by lifecycle.preventDestroy" in res.stderr
    assert f"{NIM} (delete): protected by preventDestroy recorded in the state" in res.stderr
    assert ws.apply().exit_code == 1
    (ws.specs / "job.yaml").unlink()
    (ws.specs / "nim.yaml").unlink()
    res = ws.apply()
    assert res.exit_code == 1 and "preventDestroy" in res.stderr
    assert sim_server.writes() == []


def test_sensitive_values_in_a_manifest_and_a_nim_service_are_masked_everywhere(
        ws, sim_server, tmp_path):
    _both(ws)
    res = ws.apply()
    assert res.exit_code == 0
    _no_secret(res.output, "apply")

    # New values in the specs: every plan format, and show of the saved plan.
    ws.write("job.yaml", PYTORCHJOB.replace("hf-job-secret", "hf-job-secret-2").replace(
        "postgres://job-secret", "postgres://job-secret-2"))
    ws.write("nim.yaml", NIM_SPEC.replace("nvapi-nim-secret", "nvapi-nim-secret-2").replace(
        "postgres://nim-secret", "postgres://nim-secret-2"))
    saved = ws.root / "plan.json"
    assert ws.plan("--out", str(saved)).exit_code == 0
    for fmt in ("text", "json", "markdown"):
        out = ws.plan("--format", fmt).output
        _no_secret(out, f"plan {fmt}")
        assert WORKER.format("HF_TOKEN") in out and WORKER.format("DB_URL") in out, fmt
        assert "spec.environmentVariables[NGC_API_KEY].value" in out, fmt
        _no_secret(ws.cli("show", str(saved), "--format", fmt).output, f"show {fmt}")
    res = ws.cli("apply", str(saved), "--format", "json")
    assert res.exit_code == 0, res.output
    _no_secret(res.output, "apply json")
    ids = _ids(sim_server)  # the job was replaced (its replica specs cannot change)
    sent = json.dumps([w["body"] for w in sim_server.writes()])
    assert "hf-job-secret-2" in sent and "nvapi-nim-secret-2" in sent  # the API gets them

    # Changed outside: drift in every format.
    raw = sim_server.api("GET", f"/api/v2/workloads/{ids['gpt-pretrain']}").json()[
        "workload"]["rawManifest"]
    env = raw["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]
    for var in env:
        var["value"] = var["value"].replace("-2", "-3")
    sim_server.admin.patch(f"/_sim/workloads/{ids['gpt-pretrain']}",
                           json={"rawManifest": raw}).raise_for_status()
    for fmt in ("text", "json", "markdown"):
        out = ws.cli("drift", str(ws.specs), "--format", fmt).output
        _no_secret(out, f"drift {fmt}")
        assert WORKER.format("HF_TOKEN") in out, fmt

    # The state commands and export.
    for address in (JOB, NIM):
        _no_secret(ws.cli("state", "show", address).output, "state show")
    res = ws.cli("export", "--out", str(tmp_path / "exported"))
    assert res.exit_code == 0, res.output
    for path in (tmp_path / "exported").rglob("*.yaml"):
        text = path.read_text()
        _no_secret(text, f"export {path.name}")
        assert yaml.safe_load(text)
