"""The simulator's workload policies: PUT and PATCH (with `validateOnly`), GET and DELETE
by scope, refusals; every answer valid against policies.yml's schemas."""

from __future__ import annotations

import pytest

from reconciler.simulator.policies import POLICY_KINDS
from tests.helpers.constants import CLUSTER
from tests.helpers.simulator import openapi_checker

FILE = "policies.yml"
TRAININGS = "/api/v2/policy/trainings"
AT_PROJECT = {"scope": "project", "projectId": "7"}


@pytest.fixture(scope="module")
def conforms(shared_api_dir):
    return openapi_checker(shared_api_dir, FILE)


def training_policy(**rules):
    return {"meta": {"name": "gpu-limits", "scope": "project", "projectId": 7},
            "policy": {"defaults": {"compute": {"gpuDevicesRequest": 1},
                                    "environmentVariables": {"instances": [
                                        {"name": "HOME", "value": "/home/me"}]}},
                       "rules": {"compute": {"gpuDevicesRequest": {"min": 1, "max": 4,
                                                                   **rules}},
                                 "image": {"options": [{"value": "pytorch:24"}]}}}}


def test_a_policy_is_put_read_and_deleted_at_its_scope(any_sim, conforms):
    r = any_sim.put(TRAININGS, json=training_policy())
    assert r.status_code == 200, r.text
    conforms(FILE, "TrainingPolicyV2", r.json())
    got = any_sim.get(TRAININGS, params=AT_PROJECT)
    assert got.status_code == 200
    conforms(FILE, "TrainingPolicyV2", got.json())
    assert got.json()["policy"]["rules"]["compute"]["gpuDevicesRequest"] == {"min": 1,
                                                                            "max": 4}
    assert got.json()["meta"]["projectId"] == 7
    # another scope, another kind: none
    assert any_sim.get(TRAININGS, params={"scope": "project", "projectId": "8"}
                       ).status_code == 404
    assert any_sim.get("/api/v2/policy/workspaces", params=AT_PROJECT).status_code == 404
    r = any_sim.delete(TRAININGS, params=AT_PROJECT)
    assert r.status_code == 204 and r.content == b""
    r = any_sim.get(TRAININGS, params=AT_PROJECT)
    assert r.status_code == 404
    conforms(FILE, "Error", r.json())
    assert any_sim.delete(TRAININGS, params=AT_PROJECT).status_code == 404


def test_a_put_replaces_the_policy_and_keeps_when_it_was_made(sim, clock):
    first = sim.put(TRAININGS, json=training_policy()).json()
    clock.advance(60)
    body = training_policy()
    del body["policy"]["defaults"]
    second = sim.put(TRAININGS, json=body).json()
    assert "defaults" not in second["policy"]
    assert second["meta"]["id"] == first["meta"]["id"]
    assert second["meta"]["createdAt"] == first["meta"]["createdAt"]
    assert second["meta"]["updatedAt"] > first["meta"]["updatedAt"]


def test_validate_only_answers_the_verdict_and_stores_nothing(any_sim, conforms):
    r = any_sim.put(TRAININGS, params={"validateOnly": "true"}, json=training_policy())
    assert r.status_code == 200, r.text
    conforms(FILE, "TrainingPolicyV2", r.json())
    assert any_sim.get(TRAININGS, params=AT_PROJECT).status_code == 404
    r = any_sim.put(TRAININGS, params={"validateOnly": "true"},
                    json=training_policy(min=5))
    assert r.status_code == 400
    conforms(FILE, "Error", r.json())
    r = any_sim.patch(TRAININGS, params={"validateOnly": "true"}, json=training_policy())
    assert r.status_code == 200
    assert any_sim.get(TRAININGS, params=AT_PROJECT).status_code == 404


def test_a_patch_merges_and_resets_fields(any_sim, conforms):
    any_sim.put(TRAININGS, json=training_policy())
    r = any_sim.patch(TRAININGS, json={
        "meta": {"name": "gpu-limits", "scope": "project", "projectId": 7},
        "policy": {"rules": {"compute": {"gpuDevicesRequest": {"max": 8}}}},
        "reset": ["image"]})
    assert r.status_code == 200, r.text
    conforms(FILE, "TrainingPolicyV2", r.json())
    rules = any_sim.get(TRAININGS, params=AT_PROJECT).json()["policy"]["rules"]
    assert rules == {"compute": {"gpuDevicesRequest": {"min": 1, "max": 8}}}


@pytest.mark.parametrize("change, field", [
    ({"rules": {"compute": {"gpuDevicesRequest": {"min": 5, "max": 4}}}},
     "policy.rules.compute.gpuDevicesRequest.min"),
    ({"rules": {"compute": {"gpuDevicesRequest": {"maximum": 4}}}},
     "policy.rules.compute.gpuDevicesRequest.maximum"),
    ({"defaults": {"compute": {"gpuDevicesRequest": "one"}}},
     "policy.defaults.compute.gpuDevicesRequest"),
    ({"defaults": {"gpus": 1}}, "policy.defaults.gpus"),
    ({"defaults": {"environmentVariables": [{"name": "HOME"}]}},
     "policy.defaults.environmentVariables"),
])
def test_a_policy_the_server_refuses_is_a_400_naming_the_field(any_sim, conforms, change,
                                                               field):
    body = {"meta": {"name": "p", "scope": "project", "projectId": 7}, "policy": change}
    for method in ("PUT", "PATCH"):
        r = any_sim.request(method, TRAININGS, json=body)
        assert r.status_code == 400, r.text
        conforms(FILE, "Error", r.json())
        assert field in r.json()["message"]
    assert any_sim.get(TRAININGS, params=AT_PROJECT).status_code == 404


@pytest.mark.parametrize("meta, field", [
    ({"name": "p", "scope": "project"}, "meta.projectId"),
    ({"name": "p", "scope": "cluster"}, "meta.clusterId"),
    ({"name": "p", "scope": "galaxy"}, "meta.scope"),
    ({"scope": "tenant"}, "meta.name"),
    ({"name": "p", "scope": "project", "projectId": "7"}, "meta.projectId"),
])
def test_a_policy_needs_its_scope_and_name(sim, meta, field):
    r = sim.put(TRAININGS, json={"meta": meta, "policy": {}})
    assert r.status_code == 400 and field in r.json()["message"], r.text


@pytest.mark.parametrize("params", [{}, {"scope": "project"}, {"scope": "galaxy"},
                                    {"scope": "cluster", "projectId": "7"}])
def test_reading_a_policy_needs_a_scope_and_its_id(sim, params):
    assert sim.get(TRAININGS, params=params).status_code == 400
    assert sim.delete(TRAININGS, params=params).status_code == 400


def test_scopes_are_kept_apart(sim):
    tenant = {"meta": {"name": "t", "scope": "tenant"}, "policy": {}}
    cluster = {"meta": {"name": "c", "scope": "cluster", "clusterId": CLUSTER},
               "policy": {}}
    department = {"meta": {"name": "d", "scope": "department", "departmentId": "1"},
                  "policy": {}}
    for body in (tenant, cluster, department):
        assert sim.put(TRAININGS, json=body).status_code == 200
    assert sim.get(TRAININGS, params={"scope": "tenant"}).json()["meta"]["name"] == "t"
    assert sim.get(TRAININGS, params={"scope": "cluster", "clusterId": CLUSTER}
                   ).json()["meta"]["name"] == "c"
    assert sim.get(TRAININGS, params={"scope": "department", "departmentId": "1"}
                   ).json()["meta"]["name"] == "d"


# A valid policy per kind: defaults and rules on one of its fields.
SAMPLES = {
    "trainings": {"defaults": {"image": "pytorch:24"}, "rules": {"image": {"required": True}}},
    "workspaces": {"defaults": {"ports": {"instances": [{"container": 8888}]}},
                   "rules": {"ports": {"instances": {"canAdd": False}}}},
    "inferences": {"defaults": {"autoscaling": {"minReplicas": 1}},
                   "rules": {"autoscaling": {"maxReplicas": {"max": 4}}}},
    "distributed": {"defaults": {"worker": {"numWorkers": 2}},
                    "rules": {"master": {"compute": {"gpuDevicesRequest": {"max": 1}}}},
                    "imposedAssets": {"worker": []}},
    "distributed-inferences": {"defaults": {"replicas": 1},
                               "rules": {"leader": {"image": {"canEdit": False}}}},
    "nim-services": {"defaults": {"replicas": 1}, "rules": {"replicas": {"max": 2}}},
}


@pytest.mark.parametrize("kind", POLICY_KINDS, ids=[k.path for k in POLICY_KINDS])
def test_each_kind_serves_its_policy_as_its_openapi_says(sim, conforms, kind):
    body = {"meta": {"name": "p", "scope": "tenant"}, "policy": SAMPLES[kind.path]}
    conforms(FILE, kind.put_request, body)
    r = sim.put(f"/api/v2/policy/{kind.path}", json=body)
    assert r.status_code == 200, r.text
    conforms(FILE, kind.response, r.json())
    conforms(FILE, kind.patch_request, {**body, "reset": ["replicas"]})
    r = sim.patch(f"/api/v2/policy/{kind.path}", json={**body, "reset": ["replicas"]})
    assert r.status_code == 200, r.text
    conforms(FILE, kind.response, r.json())
    got = sim.get(f"/api/v2/policy/{kind.path}", params={"scope": "tenant"})
    conforms(FILE, kind.response, got.json())
    assert sim.delete(f"/api/v2/policy/{kind.path}", params={"scope": "tenant"}
                      ).status_code == 204


def test_the_policy_routes_need_a_bearer_token(sim):
    for method in ("GET", "PUT", "PATCH", "DELETE"):
        assert sim.request(method, TRAININGS, auth=False, params={"scope": "tenant"},
                           json={}).status_code == 401
