"""runapy, NVIDIA's Python client, against `sim serve` over HTTP: a department, a project,
an access rule and a policy created, listed, read and deleted through its own models and
calls, as a user of runapy would."""

from __future__ import annotations

import importlib

import httpx
import pytest

from tests.helpers import simserve
from tests.helpers.constants import CLUSTER

pytestmark = pytest.mark.http


def _runai():
    # Imported when a test here runs (it takes about 2 s), not when the folder is collected.
    return importlib.import_module("runai")


@pytest.fixture
def client(served):
    runai = _runai()
    from runai.runai_client import RunaiClient

    base, _, _ = served
    with httpx.Client(base_url=base, timeout=10) as admin:
        simserve.reset(admin)
    config = runai.Configuration(client_id="runai-sim", client_secret="runai-sim-secret",
                                 runai_base_url=base, retry_enabled=False)
    with RunaiClient(runai.ApiClient(config)) as made:
        yield made


def quota(pool: str, gpus: float):
    models = _runai().models
    return models.ResourcesNullable(node_pool=models.ResourcesNodePool(id=pool),
                                    gpu=models.NonNullResource(deserved=gpus))


def test_runapy_creates_lists_reads_and_deletes_a_department_and_a_project(client):
    runai = _runai()
    models = runai.models
    org = client.organizations
    made = org.departments.create_department(models.DepartmentCreationRequest(
        name="research", cluster_id=CLUSTER, resources=[quota("2", 8)]))
    assert made.status_code == 201
    department = made.data["id"]
    listed = org.departments.get_departments(filter_by=["name==research"]).data
    assert [d["id"] for d in listed["departments"]] == [department]
    made = org.projects.create_project(models.ProjectCreationRequest(
        name="team-a", cluster_id=CLUSTER, parent_id=department,
        resources=[quota("1", 2), quota("2", 1)]))
    assert made.status_code == 201
    project = made.data["id"]
    # GetProjects200Response is tied to the wrong model in runapy 1.224.0: read the dict
    listed = org.projects.get_projects(filter_by=[f"name==team-a,clusterId=={CLUSTER}"]).data
    assert [p["id"] for p in listed["projects"]] == [project]
    got = org.projects.get_project(project).data
    assert [(r["nodePool"]["name"], r["gpu"]["deserved"]) for r in got["resources"]] == \
        [("default", 2), ("a100", 1)]
    changed = org.projects.update_project_resources(project, [quota("1", 4)]).data
    assert [r["gpu"]["deserved"] for r in changed] == [4]
    assert org.projects.delete_project(project).status_code == 202
    with pytest.raises(runai.exceptions.ApiException) as caught:
        org.projects.get_project(project)
    assert caught.value.status == 404
    assert org.departments.delete_department(department).status_code == 204
    assert org.departments.get_departments(filter_by=["name==research"]).data[
        "departments"] == []


def test_runapy_creates_lists_reads_and_deletes_an_access_rule(client):
    models = _runai().models
    auth = client.authentication_and_authorization
    roles = auth.roles.get_roles_v1().data
    editor = next(r["id"] for r in roles if r["name"] == "Editor")
    made = auth.access_rules.create_access_rule(models.AccessRuleCreationFields(
        subject_id="ada@example.com", subject_type="user", role_id=editor,
        scope_id="7", scope_type="project"))
    assert made.status_code == 201
    rule = made.data["id"]
    listed = auth.access_rules.get_access_rules(subject_type="user",
                                                subject_id_filter="ada@example.com").data
    assert [r["id"] for r in listed["accessRules"]] == [rule]
    assert auth.access_rules.get_access_rule(rule).data["roleName"] == "Editor"
    assert auth.access_rules.delete_access_rule(rule).status_code == 204
    assert auth.access_rules.get_access_rules().data["totalRecords"] == 0


def test_runapy_puts_validates_reads_and_deletes_a_policy(client):
    runai = _runai()
    models = runai.models
    policies = client.policies.policy
    body = models.TrainingPolicyOverwriteRequestV2(
        meta=models.PolicyCreationFields(name="gpu-limits", scope="project", project_id=7),
        policy=models.TrainingPolicyDefaultsAndRulesV2(
            defaults=models.TrainingPolicyDefaultsV2(
                compute=models.SupersetDefaultsAllOfCompute(gpu_devices_request=1)),
            rules=models.TrainingPolicyRulesV2(
                compute=models.SupersetRulesAllOfCompute(
                    gpu_devices_request=models.IntegerRules(min=1, max=4)))))
    checked = policies.overwrite_training_policy_v2(validate_only=True,
                                                     training_policy_overwrite_request_v2=body)
    assert checked.status_code == 200
    with pytest.raises(runai.exceptions.ApiException) as caught:
        policies.get_training_policy_v2(scope="project", project_id="7")
    assert caught.value.status == 404
    put = policies.overwrite_training_policy_v2(training_policy_overwrite_request_v2=body)
    assert put.status_code == 200
    got = policies.get_training_policy_v2(scope="project", project_id="7").data
    assert got["policy"]["rules"]["compute"]["gpuDevicesRequest"] == {"min": 1, "max": 4}
    assert policies.delete_training_policy(scope="project", project_id="7").status_code == 204
