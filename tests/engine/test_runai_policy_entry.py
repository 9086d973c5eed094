"""The Run:ai policy entry's wire form (`kinds.workload_policies`): the PUT bodies it makes
per scope take NVIDIA's schema (the simulator's description of policies.yml); a read
keeps the policy the spec owns (`policy`), never `effective`, and drops what the server
owns in it (`status`, every rule's `sourceOfRule`), naming the scope's unit by the name
its lookup found."""

from __future__ import annotations

import pytest

from reconciler import kinds
from reconciler.kinds import workload_policies
from reconciler.simulator import policies as sim_policies
from reconciler.simulator import validator

CLUSTER = "00000000-0000-4000-8000-000000000001"
POLICY = kinds.POLICY
PUT = {k.path: k.put for k in sim_policies.POLICY_KINDS}
RULES = {"compute": {"gpuDevicesRequest": {"min": 1, "max": 4}}}


def _body(scope_key: str, type_name: str = "training", **more) -> dict:
    return {"name": type_name, "projectId": scope_key,
            "clusterId": None if scope_key == "tenant" else CLUSTER, "rules": RULES, **more}


@pytest.mark.parametrize("scope_key,scope_id,meta", [
    ("tenant", None, {"scope": "tenant"}),
    (f"cluster:{CLUSTER}", None, {"scope": "cluster", "clusterId": CLUSTER}),
    ("department:research", "4", {"scope": "department", "clusterId": CLUSTER,
                                  "departmentId": "4"}),
    ("project:team-a", "7", {"scope": "project", "clusterId": CLUSTER, "projectId": 7}),
])
def test_the_put_body_per_scope_takes_nvidias_schema(scope_key, scope_id, meta):
    body = _body(scope_key)
    refs = POLICY.codec.references(POLICY, body)
    assert [r.name for r in refs] == ([] if scope_id is None else [scope_key.split(":")[1]])
    resolved = POLICY.codec.resolve(POLICY, body, {r: scope_id for r in refs})
    method, path, sent = POLICY.codec.create_request(POLICY, resolved)
    assert (method, path) == ("PUT", "/api/v2/policy/trainings")
    assert validator.validate(PUT["trainings"], sent) == []
    assert {k: v for k, v in sent["meta"].items() if k != "name"} == meta
    assert sent["policy"] == {"rules": RULES}
    assert POLICY.codec.dry_run_request(POLICY, resolved)[1] == \
        "/api/v2/policy/trainings?validateOnly=true"


def test_a_read_keeps_the_owned_policy_not_the_effective_one():
    answer = {
        "meta": {"scope": "project", "projectId": 7, "clusterId": CLUSTER, "name": "p",
                 "id": "x", "createdAt": "2025-01-01T00:00:00Z",
                 "updatedAt": "2025-01-02T00:00:00Z"},
        "policy": {"rules": {"compute": {"gpuDevicesRequest": {
                       "min": 1, "max": 4, "sourceOfRule": {"scope": "project"}}}},
                   "status": {"validation": {"errorMessage": None}}},
        # Merged down from the cluster's policy: not this spec's.
        "effective": {"rules": {"compute": {"gpuDevicesRequest": {"min": 1, "max": 4}},
                                "image": {"required": True}},
                      "defaults": {"imagePullPolicy": "Always"}},
    }
    path = "/api/v2/policy/trainings?scope=project&projectId=7"
    assert POLICY.codec.lookups(POLICY, answer) == ("/api/v1/org-unit/projects/7",)
    read = POLICY.codec.read_at(POLICY, answer, path,
                                {"/api/v1/org-unit/projects/7": {"id": "7", "name": "team-a"}})
    assert read == {"workloadId": "trainings?scope=project&projectId=7", "name": "training",
                    "projectId": "project:team-a", "clusterId": CLUSTER,
                    "createdAt": "2025-01-01T00:00:00Z", "updatedAt": "2025-01-02T00:00:00Z",
                    "rules": RULES}
    assert kinds.address(POLICY.name, read["projectId"], read["name"]) == \
        "Policy/project:team-a/training"


def test_a_list_entry_reads_by_its_type_and_a_tenant_has_no_cluster():
    entry = {"type": "distributedInference", "meta": {"scope": "tenant", "name": "p"}}
    read = POLICY.codec.read_at(POLICY, entry, POLICY.api_path, {})
    assert read["workloadId"] == "distributed-inferences?scope=tenant"
    assert (read["name"], read["projectId"], read["clusterId"]) == \
        ("distributedInference", "tenant", None)


def test_export_writes_a_spec_beside_its_scope():
    doc = POLICY.export_shape({"kind": "Policy", "name": "training",
                               "projectId": "project:team-a", "clusterId": CLUSTER,
                               "rules": RULES})
    assert doc == {"kind": "Policy", "workloadType": "training", "scope": "project",
                   "project": "team-a", "clusterId": CLUSTER, "rules": RULES}
    assert POLICY.hooks.export_path(POLICY, doc, {("project", "team-a"): "organisation/ml"}) \
        == "organisation/ml/team-a.policy-training.yaml"
    tenant = POLICY.export_shape({"kind": "Policy", "name": "workspace",
                                  "projectId": "tenant", "clusterId": None})
    assert POLICY.hooks.export_path(POLICY, tenant) == "organisation/tenant.policy-workspace.yaml"
    assert workload_policies.parse_scope_key(f"cluster:{CLUSTER}") == ("cluster", CLUSTER)
