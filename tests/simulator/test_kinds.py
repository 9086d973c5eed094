"""The simulator's table of kinds (`reconciler.simulator.kinds`) is the only place a kind
is named: every entry gets its routes, its answers and its list items from the table,
so an entry added here (a test-only copy of a kind under another path) is served like
the others; each kind's answers are checked against its own OpenAPI file; a data file
written before the table loads as it did; and the simulator imports nothing of the
engine (it must stay an independent check of the client)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest

from reconciler.simulator import SimulatorDataError, create_app
from reconciler.simulator.kinds import (DISTRIBUTED, DISTRIBUTED_INFERENCE, INFERENCE, KINDS,
                                        TRAINING, WORKSPACE, Kind)
from tests.helpers.constants import CLUSTER, ROOT
from tests.helpers.simulator import SAMPLES, PATCHES

# The v1-shaped kinds; Manifest (its own routes, `simulator/manifests.py`) is checked by
# tests/e2e/test_manifest_http.py.
KINDS = tuple(k for k in KINDS if not k.custom)


# Test-only entries: copies of the two kinds under other paths, types and a category.
COPY = dataclasses.replace(DISTRIBUTED, type="test-copy", path="/api/v1/workloads/test-copies",
                           category="Test")
SERVING_COPY = dataclasses.replace(DISTRIBUTED_INFERENCE, type="test-serving",
                                   path="/api/v1/workloads/test-servings")
_COPIED = {COPY.type: DISTRIBUTED.type, SERVING_COPY.type: DISTRIBUTED_INFERENCE.type}


def _body(kind: Kind, name: str, project: str = "7") -> dict:
    sample = SAMPLES[_COPIED.get(kind.type, kind.type)]
    if kind.envelope:  # v2: metadata without clusterId
        return {"metadata": {"name": name, "projectId": project}, **sample}
    return {"name": name, "projectId": project, "clusterId": CLUSTER, **sample}


def _id(kind: Kind, answer: dict) -> str:
    return answer["metadata"]["id"] if kind.envelope else answer["workloadId"]


def test_every_kind_in_the_table_has_a_sample_and_its_own_type_and_path():
    assert set(SAMPLES) == {k.type for k in KINDS}
    assert set(PATCHES) == {k.type for k in KINDS if k.update is not None}
    assert len({k.path for k in KINDS}) == len(KINDS)


def _scalars(node, path: str = "") -> dict:
    """Every scalar of a JSON body by its dotted path."""
    if isinstance(node, dict):
        return {p: v for k, sub in node.items() for p, v in _scalars(sub, f"{path}.{k}").items()}
    return {path: node}


def _lifecycle(sim, conforms, kind: Kind, name: str) -> str:
    """Create, read, list, (patch), (suspend, resume), delete one workload of `kind`,
    each answer checked against the OpenAPI schema the table names."""
    r = sim.post(kind.path, json=_body(kind, name))
    assert r.status_code == 202, r.text
    conforms(kind.openapi, kind.response, r.json())
    wid = _id(kind, r.json())
    got = sim.get(f"{kind.path}/{wid}")
    assert got.status_code == 200
    conforms(kind.openapi, kind.response, got.json())

    items = sim.get("/api/v1/workloads", params={"filterBy": f"type=={kind.type}"}).json()
    assert [(w["id"], w["type"], w["category"]) for w in items["workloads"]] == [
        (wid, kind.type, kind.category)]
    conforms("workloads.yml", "Workload", items["workloads"][0])

    if kind.update is not None:
        update = PATCHES[_COPIED.get(kind.type, kind.type)]
        conforms(kind.openapi, kind.update_request, update)
        r = sim.patch(f"{kind.path}/{wid}", json=update)
        assert r.status_code == 202, r.text
        conforms(kind.openapi, kind.response, r.json())
        got = sim.get(f"{kind.path}/{wid}").json()
        conforms(kind.openapi, kind.response, got)
        sent = _scalars(update)
        assert sent and {p: _scalars(got).get(p) for p in sent} == sent
    else:
        assert sim.patch(f"{kind.path}/{wid}", json={}).status_code == 405
    for action, desired in (("suspend", "Stopped"), ("resume", "Running")):
        r = sim.post(f"{kind.path}/{wid}/{action}")
        if kind.suspends:
            assert r.status_code == 202
            conforms(kind.openapi, "HttpResponse", r.json())
            assert sim.get(f"{kind.path}/{wid}").json()["desiredPhase"] == desired
        else:
            assert r.status_code in (404, 405)

    if kind.delete_path:
        assert sim.delete(f"{kind.path}/{wid}").status_code == 405
    r = sim.delete(f"{kind.delete_path or kind.path}/{wid}")
    assert r.status_code == 202
    if kind.delete_path:  # the generic v2 delete answers the WorkloadV2
        conforms("workloads-v2.yml", "WorkloadV2", r.json())
    else:
        conforms(kind.openapi, "HttpResponse", r.json())
    assert sim.get(f"{kind.path}/{wid}").status_code == 404
    return wid


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.type)
def test_each_kind_serves_its_lifecycle_as_its_openapi_says(sim, conforms, kind):
    wid = _lifecycle(sim, conforms, kind, "life")
    deleted = sim.get("/api/v1/workloads", params={"deleted": "true"}).json()["workloads"]
    assert [w["id"] for w in deleted] == [wid]


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.type)
def test_each_kind_answers_a_bad_body_with_its_error_shape(sim, conforms, kind):
    r = sim.post(kind.path, json={**_body(kind, "bad"), "bogus": 1})
    assert r.status_code == 400
    conforms(kind.openapi, kind.invalid, r.json())
    assert ("complianceIssues" in r.json()) == kind.issues_in_errors
    assert "bogus" in r.json()["message"]


def test_a_kind_added_to_the_table_is_served_like_the_others(make_sim, conforms):
    """One entry more, nothing else: its routes, answers, list type and category follow."""
    sim = make_sim(kinds=(*KINDS, COPY, SERVING_COPY))
    original = sim.post(DISTRIBUTED.path, json=_body(DISTRIBUTED, "orig")).json()
    _lifecycle(sim, conforms, COPY, "copied")
    _lifecycle(sim, conforms, SERVING_COPY, "served")

    kept = sim.post(COPY.path, json=_body(COPY, "kept")).json()
    assert sim.get(f"{DISTRIBUTED.path}/{kept['workloadId']}").status_code == 404
    assert sim.get(f"{COPY.path}/{original['workloadId']}").status_code == 404
    assert sim.post(COPY.path, json=_body(COPY, "orig")).status_code == 409  # names are shared
    listed = {w["name"]: (w["type"], w["category"])
              for w in sim.get("/api/v1/workloads").json()["workloads"]}
    assert listed == {"orig": ("distributed", "Train"), "kept": ("test-copy", "Test")}
    counts = sim.get("/_sim/requests").json()["counts"]
    assert counts[f"POST {COPY.path}"] == 3
    assert counts[f"DELETE {COPY.path}/{{workloadId}}"] == 1


def test_the_default_app_does_not_serve_a_test_kind(sim):
    assert sim.post(COPY.path, json=_body(COPY, "x")).status_code in (404, 405)


def test_a_table_with_two_kinds_on_one_path_is_refused():
    with pytest.raises(ValueError, match="path of its own"):
        create_app(kinds=(*KINDS, dataclasses.replace(COPY, path=DISTRIBUTED.path)))
    with pytest.raises(ValueError, match="not in the PATCH body"):
        dataclasses.replace(DISTRIBUTED_INFERENCE, updatable=("spec.workers",))


def test_names_are_unique_per_project_across_every_kind(sim, conforms):
    for kind in KINDS:
        assert sim.post(kind.path, json=_body(kind, f"n-{kind.type}")).status_code == 202
    for taken in KINDS:
        for kind in KINDS:
            r = sim.post(kind.path, json=_body(kind, f"n-{taken.type}"))
            assert r.status_code == 409, (taken.type, kind.type)
            conforms(kind.openapi, "Error", r.json())
            assert f"n-{taken.type}" in r.json()["message"]
    for kind in KINDS:
        r = sim.post(kind.path, json=_body(kind, f"n-{kind.type}", "8"))
        assert r.status_code == 202


@pytest.mark.parametrize("kind", [WORKSPACE, INFERENCE], ids=lambda k: k.type)
def test_a_kind_that_does_not_complete_stays_running_on_the_clock(make_sim, clock, kind):
    sim = make_sim(phase_seconds=10)
    wid = sim.post(kind.path, json=_body(kind, "long")).json()["workloadId"]
    phases = []
    for _ in range(3):
        phases.append(sim.get(f"{kind.path}/{wid}").json()["actualPhase"])
        clock.advance(10)
    assert phases == ["Creating", "Initializing", "Running"]
    clock.advance(90 * 86400)  # past any auto-deletion time
    sim.token = None  # and past the token's lifetime
    assert sim.get(f"{kind.path}/{wid}").json()["actualPhase"] == "Running"
    assert [w["phase"] for w in sim.get("/api/v1/workloads").json()["workloads"]] == ["Running"]
    if kind.suspends:
        sim.post(f"{kind.path}/{wid}/suspend")
        assert sim.get(f"{kind.path}/{wid}").json()["actualPhase"] == "Stopping"
        clock.advance(10)
        assert sim.get(f"{kind.path}/{wid}").json()["actualPhase"] == "Stopped"
    else:
        sim.patch(f"{kind.path}/{wid}", json=PATCHES[kind.type])
        assert sim.get(f"{kind.path}/{wid}").json()["actualPhase"] == "Updating"
        clock.advance(10)
        assert sim.get(f"{kind.path}/{wid}").json()["actualPhase"] == "Running"


# --- Training and Workspace (CONTRACT.md §1, §5, §7) ---------------------------------


@pytest.mark.parametrize("kind, category", [(TRAINING, "Train"), (WORKSPACE, "Build")],
                         ids=lambda v: getattr(v, "type", v))
def test_training_and_workspace_are_served_with_suspend_and_without_patch(any_sim, conforms,
                                                                          kind, category):
    body = any_sim.post(kind.path, json=_body(kind, "t")).json()
    wid = body["workloadId"]
    conforms(kind.openapi, kind.response, body)
    assert any_sim.patch(f"{kind.path}/{wid}", json={}).status_code == 405
    r = any_sim.post(f"{kind.path}/{wid}/suspend")
    assert r.status_code == 202
    conforms(kind.openapi, "HttpResponse", r.json())
    got = any_sim.get(f"{kind.path}/{wid}").json()
    conforms(kind.openapi, kind.response, got)
    assert got["desiredPhase"] == "Stopped"
    item = any_sim.get("/api/v1/workloads", params={"filterBy": f"type=={kind.type}"}).json()
    assert [(w["id"], w["type"], w["category"], w["phase"]) for w in item["workloads"]] == [
        (wid, kind.type, category, "Stopped")]
    assert "distributedFramework" not in item["workloads"][0]
    assert any_sim.get(f"{DISTRIBUTED.path}/{wid}").status_code == 404
    assert any_sim.post(f"{kind.path}/{wid}/resume").status_code == 202
    assert any_sim.get(f"{kind.path}/{wid}").json()["desiredPhase"] == "Running"


@pytest.mark.parametrize("kind, own, priority", [
    (TRAINING, {"parallelism": 2}, ("train", "preemptible", True)),
    (WORKSPACE, {}, ("build", "non-preemptible", False)),
], ids=lambda v: getattr(v, "type", None))
def test_training_and_workspace_defaults_fill_only_unsent_fields(sim, conforms, kind, own,
                                                                 priority):
    r = sim.post(kind.path, json={
        "name": "t", "projectId": "7", "clusterId": CLUSTER,
        "spec": {"image": "repo/img:latest", "backoffLimit": 2, **own,
                 "security": {"runAsNonRoot": True}, "ports": [{"container": 80}],
                 "storage": {"nfs": [{"path": "/n", "server": "s"}]},
                 "probes": {"readiness": {"handler": {"httpGet": {"port": 8080}}}}}})
    assert r.status_code == 202, r.text
    conforms(kind.openapi, kind.response, r.json())
    spec = r.json()["spec"]
    assert spec["backoffLimit"] == 2 and all(spec[k] == v for k, v in own.items())  # sent
    assert spec["autoDeletionTimeAfterCompletionSeconds"] == 2592000
    assert spec["imagePullPolicy"] == "Always"
    assert (spec["priorityClass"], spec["preemptibility"]) == priority[:2]
    assert spec["security"] == {"runAsNonRoot": True, "uidGidSource": "fromTheImage",
                                "hostIpc": False, "hostNetwork": False}
    assert spec["ports"] == [{"container": 80, "exclude": False}]
    assert spec["storage"]["nfs"] == [{"path": "/n", "server": "s", "readOnly": True,
                                       "exclude": False}]
    assert spec["probes"]["readiness"]["handler"]["httpGet"] == {"port": 8080, "path": "/",
                                                                 "scheme": "HTTP"}
    assert "slotsPerWorker" not in spec and "sshAuthMountPath" not in spec  # D only
    assert "restartPolicy" not in spec  # empty: the framework's default
    assert sim.get(f"{kind.path}/{r.json()['workloadId']}").json()["spec"] == spec
    item = sim.get("/api/v1/workloads").json()["workloads"][0]
    assert (item["priorityClassName"], item["preemptible"]) == (priority[0], priority[2])


@pytest.mark.parametrize("kind, spec, field, rule", [
    (TRAINING, {"completions": 1}, "spec.image", "required"),
    (TRAINING, {"image": "i", "completions": "one"}, "spec.completions", None),
    (TRAINING, {"image": "i", "numWorkers": 2}, "spec.numWorkers", None),  # distributed only
    (TRAINING, {"image": "i", "restartPolicy": "Sometimes"}, "spec.restartPolicy", "options"),
    (WORKSPACE, {"ports": [{"container": 8888}]}, "spec.image", "required"),
    (WORKSPACE, {"image": "i", "completions": 1}, "spec.completions", None),  # training only
    (WORKSPACE, {"image": "i", "ports": [{"container": 70000}]}, "spec.ports[0].container",
     "max"),
    (WORKSPACE, {"image": "i", "servingPort": {"container": 8888}}, "spec.servingPort", None),
], ids=lambda v: getattr(v, "type", None))
def test_invalid_training_or_workspace_create_is_400_naming_the_field(any_sim, conforms, kind,
                                                                      spec, field, rule):
    r = any_sim.post(kind.path, json={"name": "bad", "projectId": "7", "clusterId": CLUSTER,
                                      "spec": spec})
    assert r.status_code == 400, r.text
    conforms(kind.openapi, "SubmissionErrorV2", r.json())
    assert [(i["field"], i.get("rule")) for i in r.json()["complianceIssues"]] == [(field, rule)]
    assert any_sim.get("/api/v1/workloads").json()["workloads"] == []


# --- Inference (CONTRACT.md §1, §4, §5, §7) ------------------------------------------


def _inference(sim, name="llm", **spec) -> dict:
    r = sim.post(INFERENCE.path, json={
        "name": name, "projectId": "7", "clusterId": CLUSTER,
        "spec": {"image": "vllm/vllm-openai:v0.6", "servingPort": {"container": 8000}, **spec}})
    assert r.status_code == 202, r.text
    return r.json()


def test_inference_is_served_with_patch_and_without_suspend(any_sim, conforms):
    body = _inference(any_sim)
    wid = body["workloadId"]
    conforms("inferences.yml", "Inference1", body)
    for action in ("suspend", "resume"):
        assert any_sim.post(f"{INFERENCE.path}/{wid}/{action}").status_code in (404, 405)
    assert any_sim.get(f"{INFERENCE.path}/{wid}").json()["desiredPhase"] == "Running"
    item = any_sim.get("/api/v1/workloads", params={"filterBy": "type==inference"}).json()
    assert [(w["id"], w["type"], w["category"], w["preemptible"], w["priorityClassName"])
            for w in item["workloads"]] == [(wid, "inference", "Deploy", False, "inference")]
    assert any_sim.get(f"{DISTRIBUTED_INFERENCE.path}/{wid}").status_code == 404


@pytest.mark.parametrize("sent, filled", [
    (None, {"minReplicas": 1, "maxReplicas": 1, "initialReplicas": 1, "activationReplicas": 1,
            "metricThresholdPercentage": 70}),
    ({"minReplicas": 0}, {"minReplicas": 0, "maxReplicas": 1, "initialReplicas": 1,
                          "activationReplicas": 1, "metricThresholdPercentage": 70,
                          "scaleToZeroRetentionSeconds": 0}),
    ({"minReplicas": 2, "maxReplicas": 6, "metric": "concurrency", "metricThreshold": 8,
      "metricThresholdPercentage": 50},
     {"minReplicas": 2, "maxReplicas": 6, "initialReplicas": 2, "activationReplicas": 2,
      "metric": "concurrency", "metricThreshold": 8, "metricThresholdPercentage": 50}),
])
def test_inference_defaults_fill_only_unsent_fields(sim, conforms, sent, filled):
    body = _inference(sim, image="vllm/vllm-openai:latest", autoscaling=sent,
                      security={"runAsNonRoot": True}, storage={"nfs": [{"path": "/m",
                                                                         "server": "s"}]},
                      probes={"readiness": {"handler": {"httpGet": {"port": 8000}}}})
    conforms("inferences.yml", "Inference1", body)
    spec = body["spec"]
    assert spec["autoscaling"] == filled
    assert spec["servingPort"] == {"container": 8000, "protocol": "http",
                                   "authorizationType": "public",
                                   "clusterLocalAccessOnly": False}
    assert (spec["priorityClass"], spec["preemptibility"]) == ("inference", "non-preemptible")
    assert spec["imagePullPolicy"] == "Always"
    assert spec["security"] == {"runAsNonRoot": True, "uidGidSource": "fromTheImage"}  # no host*
    assert spec["storage"]["nfs"] == [{"path": "/m", "server": "s", "readOnly": True,
                                       "exclude": False}]
    assert spec["probes"]["readiness"]["handler"]["httpGet"] == {"port": 8000, "path": "/",
                                                                 "scheme": "HTTP"}
    for training_only in ("backoffLimit", "autoDeletionTimeAfterCompletionSeconds"):
        assert training_only not in spec
    assert sim.get(f"{INFERENCE.path}/{body['workloadId']}").json()["spec"] == spec


def test_inference_patch_applies_image_autoscaling_and_compute_and_get_shows_them(any_sim,
                                                                                  conforms):
    created = _inference(any_sim, compute={"cpuCoreRequest": 2, "gpuDevicesRequest": 1},
                         environmentVariables=[{"name": "A", "value": "1"}])
    wid = created["workloadId"]
    update = {"spec": {
        "image": "vllm/vllm-openai:v0.7",
        "autoscaling": {"minReplicas": 1, "maxReplicas": 4, "metric": "concurrency",
                        "metricThreshold": 8},
        "compute": {"gpuDevicesRequest": 2},
    }}
    conforms("inferences.yml", "InferenceUpdateRequest", update)
    r = any_sim.patch(f"{INFERENCE.path}/{wid}", json=update)
    assert r.status_code == 202, r.text
    conforms("inferences.yml", "Inference1", r.json())
    got = any_sim.get(f"{INFERENCE.path}/{wid}").json()
    conforms("inferences.yml", "Inference1", got)
    spec = got["spec"]
    assert spec["image"] == "vllm/vllm-openai:v0.7"
    assert spec["autoscaling"] == {**update["spec"]["autoscaling"], "initialReplicas": 1,
                                   "activationReplicas": 1, "metricThresholdPercentage": 70}
    assert spec["compute"] == {"gpuDevicesRequest": 2}  # replaced whole, as sent
    assert spec["environmentVariables"] == [{"name": "A", "value": "1"}]  # not sent: kept
    assert spec["servingPort"] == created["spec"]["servingPort"]
    assert (got["workloadId"], got["createdAt"]) == (wid, created["createdAt"])


@pytest.mark.parametrize("path, value", [
    ("servingPort", {"container": 9000}), ("ports", [{"container": 9000}]),
    ("storage", {"pvc": [{"path": "/data", "existingPvc": True, "claimName": "c"}]}),
    ("security", {"runAsNonRoot": True}), ("labels", [{"name": "team", "value": "a"}]),
    ("annotations", [{"name": "a", "value": "b"}]), ("tolerations", [{"key": "k"}]),
    ("exposedUrls", [{"container": 8000}]), ("relatedUrls", [{"url": "u", "type": "t"}]),
])
def test_inference_patch_of_a_create_only_path_is_400_and_changes_nothing(any_sim, conforms,
                                                                          path, value):
    wid = _inference(any_sim)["workloadId"]
    before = any_sim.get(f"{INFERENCE.path}/{wid}").json()
    r = any_sim.patch(f"{INFERENCE.path}/{wid}",
                      json={"spec": {"image": "vllm/vllm-openai:v0.7", path: value}})
    assert r.status_code == 400, r.text
    conforms("inferences.yml", "Error", r.json())
    assert f"spec.{path}" in r.json()["message"]
    assert any_sim.get(f"{INFERENCE.path}/{wid}").json() == before


@pytest.mark.parametrize("autoscaling, field", [
    ({"minReplicas": 1, "maxReplicas": 3}, "spec.autoscaling.metric"),
    ({"minReplicas": 4, "maxReplicas": 2, "metric": "concurrency", "metricThreshold": 1},
     "spec.autoscaling.maxReplicas"),
    ({"metric": "throughput"}, "spec.autoscaling.metricThreshold"),
    ({"minReplicas": 1, "scaleToZeroRetentionSeconds": 60},
     "spec.autoscaling.scaleToZeroRetentionSeconds"),
])
def test_inference_patch_breaking_an_autoscaling_rule_is_400(sim, conforms, autoscaling, field):
    wid = _inference(sim)["workloadId"]
    r = sim.patch(f"{INFERENCE.path}/{wid}", json={"spec": {"autoscaling": autoscaling}})
    assert r.status_code == 400, r.text
    conforms("inferences.yml", "Error", r.json())
    assert field in r.json()["message"]
    assert sim.get(f"{INFERENCE.path}/{wid}").json()["spec"]["autoscaling"]["maxReplicas"] == 1


@pytest.mark.parametrize("spec, field", [
    ({"image": None}, "spec.image"),
    ({"autoscaling": {"minReplicas": 1, "maxReplicas": 3}}, "spec.autoscaling.metric"),
    ({"autoscaling": {"maxReplicas": 2}}, "spec.autoscaling.metric"),  # minReplicas: 1
    ({"autoscaling": {"minReplicas": 0, "maxReplicas": 2}}, "spec.autoscaling.metric"),
    ({"autoscaling": {"minReplicas": 1, "maxReplicas": 3, "metric": "latency"}},
     "spec.autoscaling.metricThreshold"),
    ({"autoscaling": {"scaleToZeroRetentionSeconds": 60}},
     "spec.autoscaling.scaleToZeroRetentionSeconds"),  # minReplicas: 1
    ({"autoscaling": {"minReplicas": 3, "maxReplicas": 2}}, "spec.autoscaling.maxReplicas"),
    ({"autoscaling": {"metric": "2fast", "metricThreshold": 1}}, "spec.autoscaling.metric"),
    ({"autoscaling": {"metricThresholdPercentage": 101}},
     "spec.autoscaling.metricThresholdPercentage"),
    ({"autoscaling": {"scaleDownDelaySeconds": 3601}}, "spec.autoscaling.scaleDownDelaySeconds"),
    ({"servingPort": {"container": 8000, "protocol": "tcp"}}, "spec.servingPort.protocol"),
    ({"servingConfiguration": {"requestTimeoutSeconds": 0}},
     "spec.servingConfiguration.requestTimeoutSeconds"),
    ({"stdin": True}, "spec.stdin"),  # T, W, D only
    ({"storage": {"s3": [{"bucket": "b"}]}}, "spec.storage.s3"),
    ({"security": {"hostIpc": True}}, "spec.security.hostIpc"),
])
def test_invalid_inference_create_is_400_naming_the_field(any_sim, conforms, spec, field):
    r = any_sim.post(INFERENCE.path, json={
        "name": "bad", "projectId": "7", "clusterId": CLUSTER,
        "spec": {"image": "vllm/vllm-openai:v0.6", **spec}})
    assert r.status_code == 400, r.text
    conforms("inferences.yml", "Error", r.json())
    assert "complianceIssues" not in r.json()
    assert f"{field}:" in r.json()["message"]
    assert any_sim.get("/api/v1/workloads").json()["workloads"] == []


@pytest.mark.parametrize("autoscaling", [
    {"minReplicas": 0, "maxReplicas": 1},  # scale-to-zero on network activity: no metric
    {"minReplicas": 0, "scaleToZeroRetentionSeconds": 300},
    {"minReplicas": 2, "maxReplicas": 2},
    {"minReplicas": 1, "maxReplicas": 5, "metric": "my_custom:metric", "metricThreshold": 3},
])
def test_inference_autoscaling_the_rules_allow_is_created(sim, conforms, autoscaling):
    body = _inference(sim, autoscaling=autoscaling)
    conforms("inferences.yml", "Inference1", body)
    assert autoscaling.items() <= body["spec"]["autoscaling"].items()


# --- the data file -----------------------------------------------------------------

_OLD_FILE = {"version": 1, "workloads": [
    {"kind": "distributed", "body": {
        "workloadId": "00000000-0000-4000-8000-000000000001", "name": "old-d",
        "requestedName": "old-d", "projectId": "7", "departmentId": "1", "clusterId": CLUSTER,
        "createdBy": "runai-sim", "createdAt": "2023-11-14T22:13:20.000Z",
        "desiredPhase": "Running", "spec": {"image": "i:1", "distributedFramework": "MPI"}},
     "phases": ["Running"], "since": 1700000000.0, "created": 1700000000.0,
     "updated": 1700000000.0, "deletedAt": None},
    {"kind": "distributed-inference", "body": {
        "workloadId": "00000000-0000-4000-8000-000000000002", "name": "old-di",
        "requestedName": "old-di", "projectId": "7", "departmentId": "1", "clusterId": CLUSTER,
        "createdBy": "runai-sim", "createdAt": "2023-11-14T22:13:20.000Z",
        "desiredPhase": "Running", "spec": {"leader": {"image": "v:1"}, "replicas": 1}},
     "phases": ["Running"], "since": 1700000000.0, "created": 1700000000.0,
     "updated": 1700000000.0, "deletedAt": None},
], "deleted": []}


def test_a_data_file_from_before_the_table_loads_as_it_did(make_sim, tmp_path, conforms):
    path = tmp_path / "data.json"
    path.write_text(json.dumps(_OLD_FILE))
    sim = make_sim(data_path=path)
    d = sim.get(f"{DISTRIBUTED.path}/00000000-0000-4000-8000-000000000001")
    assert d.status_code == 200 and d.json()["name"] == "old-d"
    conforms(DISTRIBUTED.openapi, DISTRIBUTED.response, d.json())
    di = sim.patch(f"{DISTRIBUTED_INFERENCE.path}/00000000-0000-4000-8000-000000000002",
                   json={"spec": {"replicas": 2}})
    assert di.status_code == 202 and di.json()["spec"]["replicas"] == 2
    items = sim.get("/api/v1/workloads").json()["workloads"]
    assert [(w["name"], w["type"], w.get("distributedFramework")) for w in items] == [
        ("old-d", "distributed", "MPI"), ("old-di", "distributed-inference", None)]
    assert [r["kind"] for r in json.loads(path.read_text())["workloads"]] == [
        "distributed", "distributed-inference"]


def test_a_data_file_holding_a_kind_the_app_does_not_serve_is_a_clear_error(make_sim,
                                                                            tmp_path):
    path = tmp_path / "data.json"
    with_copy = make_sim(data_path=path, kinds=(*KINDS, COPY))
    with_copy.post(COPY.path, json=_body(COPY, "c"))
    assert make_sim(data_path=path, kinds=(*KINDS, COPY)).get("/api/v1/workloads").json()[
        "workloads"][0]["type"] == "test-copy"
    with pytest.raises(SimulatorDataError, match="unknown workload kind.*'test-copy'"):
        create_app(path)


# --- independence from the engine --------------------------------------------------


def test_the_simulator_imports_nothing_of_the_engine():
    # reconciler._version, the installed version the package's __init__ reads, is no engine
    code = ("import sys, reconciler.simulator, reconciler.simulator.command; "
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('reconciler.') "
            "and not m.startswith('reconciler.simulator') and m != 'reconciler._version')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.split()
    assert out == []
