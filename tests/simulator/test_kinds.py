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
from reconciler.simulator.kinds import DISTRIBUTED, DISTRIBUTED_INFERENCE, KINDS, TRAINING, Kind
from tests.simulator.conftest import CLUSTER, ROOT

# A valid create body per kind (a kind added to the table needs one here) and, for kinds
# with PATCH, a valid update body with the value it should leave at its path.
SAMPLES = {
    "distributed": {"spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3",
                             "distributedFramework": "PyTorch", "numWorkers": 2}},
    "distributed-inference": {"spec": {"leader": {"image": "vllm/vllm-openai:v0.6"}}},
    "training": {"spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "completions": 1}},
}
PATCHES = {"distributed-inference": ({"spec": {"replicas": 3}}, 3)}

# Test-only entries: copies of the two kinds under other paths, types and a category.
COPY = dataclasses.replace(DISTRIBUTED, type="test-copy", path="/api/v1/workloads/test-copies",
                           category="Test")
SERVING_COPY = dataclasses.replace(DISTRIBUTED_INFERENCE, type="test-serving",
                                   path="/api/v1/workloads/test-servings")
_COPIED = {COPY.type: DISTRIBUTED.type, SERVING_COPY.type: DISTRIBUTED_INFERENCE.type}


def _body(kind: Kind, name: str) -> dict:
    sample = SAMPLES[_COPIED.get(kind.type, kind.type)]
    return {"name": name, "projectId": "7", "clusterId": CLUSTER, **sample}


def test_every_kind_in_the_table_has_a_sample_and_its_own_type_and_path():
    assert set(SAMPLES) == {k.type for k in KINDS}
    assert set(PATCHES) == {k.type for k in KINDS if k.update is not None}
    assert len({k.path for k in KINDS}) == len(KINDS)


def _lifecycle(sim, conforms, kind: Kind, name: str) -> str:
    """Create, read, list, (patch), (suspend, resume), delete one workload of `kind`,
    each answer checked against the OpenAPI schema the table names."""
    r = sim.post(kind.path, json=_body(kind, name))
    assert r.status_code == 202, r.text
    conforms(kind.openapi, kind.response, r.json())
    wid = r.json()["workloadId"]
    got = sim.get(f"{kind.path}/{wid}")
    assert got.status_code == 200
    conforms(kind.openapi, kind.response, got.json())

    items = sim.get("/api/v1/workloads", params={"filterBy": f"type=={kind.type}"}).json()
    assert [(w["id"], w["type"], w["category"]) for w in items["workloads"]] == [
        (wid, kind.type, kind.category)]
    conforms("workloads.yml", "Workload", items["workloads"][0])

    if kind.update is not None:
        update, value = PATCHES[_COPIED.get(kind.type, kind.type)]
        r = sim.patch(f"{kind.path}/{wid}", json=update)
        assert r.status_code == 202, r.text
        conforms(kind.openapi, kind.response, r.json())
        node = sim.get(f"{kind.path}/{wid}").json()
        for key in kind.updatable[0].split("."):
            node = node[key]
        assert node == value
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

    r = sim.delete(f"{kind.path}/{wid}")
    assert r.status_code == 202
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


# --- Training (CONTRACT.md §1, §5, §7) -----------------------------------------------


def test_training_is_served_with_suspend_and_without_patch(any_sim, conforms):
    body = any_sim.post(TRAINING.path, json=_body(TRAINING, "t")).json()
    wid = body["workloadId"]
    conforms("trainings.yml", "Training1", body)
    assert any_sim.patch(f"{TRAINING.path}/{wid}", json={}).status_code == 405
    r = any_sim.post(f"{TRAINING.path}/{wid}/suspend")
    assert r.status_code == 202
    conforms("trainings.yml", "HttpResponse", r.json())
    got = any_sim.get(f"{TRAINING.path}/{wid}").json()
    conforms("trainings.yml", "Training1", got)
    assert got["desiredPhase"] == "Stopped"
    item = any_sim.get("/api/v1/workloads", params={"filterBy": "type==training"}).json()
    assert [(w["id"], w["type"], w["category"], w["phase"]) for w in item["workloads"]] == [
        (wid, "training", "Train", "Stopped")]
    assert "distributedFramework" not in item["workloads"][0]
    assert any_sim.get(f"{DISTRIBUTED.path}/{wid}").status_code == 404


def test_training_defaults_fill_only_unsent_fields(sim, conforms):
    r = sim.post(TRAINING.path, json={
        "name": "t", "projectId": "7", "clusterId": CLUSTER,
        "spec": {"image": "repo/img:latest", "backoffLimit": 2, "parallelism": 2,
                 "security": {"runAsNonRoot": True}, "ports": [{"container": 80}],
                 "storage": {"nfs": [{"path": "/n", "server": "s"}]},
                 "probes": {"readiness": {"handler": {"httpGet": {"port": 8080}}}}}})
    assert r.status_code == 202, r.text
    conforms("trainings.yml", "Training1", r.json())
    spec = r.json()["spec"]
    assert spec["backoffLimit"] == 2 and spec["parallelism"] == 2  # sent: untouched
    assert spec["autoDeletionTimeAfterCompletionSeconds"] == 2592000
    assert spec["imagePullPolicy"] == "Always"
    assert (spec["priorityClass"], spec["preemptibility"]) == ("train", "preemptible")
    assert spec["security"] == {"runAsNonRoot": True, "uidGidSource": "fromTheImage",
                                "hostIpc": False, "hostNetwork": False}
    assert spec["ports"] == [{"container": 80, "exclude": False}]
    assert spec["storage"]["nfs"] == [{"path": "/n", "server": "s", "readOnly": True,
                                       "exclude": False}]
    assert spec["probes"]["readiness"]["handler"]["httpGet"] == {"port": 8080, "path": "/",
                                                                 "scheme": "HTTP"}
    assert "slotsPerWorker" not in spec and "sshAuthMountPath" not in spec  # D only
    assert "restartPolicy" not in spec  # empty: the framework's default
    assert sim.get(f"{TRAINING.path}/{r.json()['workloadId']}").json()["spec"] == spec


@pytest.mark.parametrize("spec, field, rule", [
    ({"completions": 1}, "spec.image", "required"),
    ({"image": "i", "completions": "one"}, "spec.completions", None),
    ({"image": "i", "numWorkers": 2}, "spec.numWorkers", None),  # distributed only
    ({"image": "i", "restartPolicy": "Sometimes"}, "spec.restartPolicy", "options"),
])
def test_invalid_training_create_is_400_naming_the_field(any_sim, conforms, spec, field, rule):
    r = any_sim.post(TRAINING.path, json={"name": "bad", "projectId": "7", "clusterId": CLUSTER,
                                          "spec": spec})
    assert r.status_code == 400, r.text
    conforms("trainings.yml", "SubmissionErrorV2", r.json())
    assert [(i["field"], i.get("rule")) for i in r.json()["complianceIssues"]] == [(field, rule)]
    assert any_sim.get("/api/v1/workloads").json()["workloads"] == []


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
    code = ("import sys, reconciler.simulator, reconciler.simulator.command; "
            "print('\\n'.join(sorted(m for m in sys.modules if m.startswith('reconciler.') "
            "and not m.startswith('reconciler.simulator'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, check=True).stdout.split()
    assert out == []
