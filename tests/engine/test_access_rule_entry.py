"""The AccessRule entry (offline): what it sends for a spec, how it reads the API's answer
back into the spec's shape, the handle a rule read from the server is named by, and the
plan's answer to a change (a replacement, as the API has no update) and to a rule the
server holds without the spec's handle (no change)."""

from __future__ import annotations

from reconciler import diff, kinds
from reconciler.kinds.access import handle

RULE = kinds.get("AccessRule")
CLUSTER = "00000000-0000-4000-8000-000000000001"
SPEC = {"name": "ml-team-trains", "projectId": CLUSTER, "clusterId": CLUSTER,
        "subjectType": "group", "subjectId": "ml-team", "role": "L1 researcher",
        "scopeType": "project", "scope": "team-a"}
# What the API answers for it (AccessRuleById): ids, and the names beside them.
ANSWER = {"id": 7, "subjectType": "group", "subjectId": "ml-team", "roleId": 5,
          "roleName": "L1 researcher", "scopeType": "project", "scopeId": "100",
          "scopeName": "team-a", "clusterId": CLUSTER, "tenantId": 1,
          "createdAt": "2026-01-01T00:00:00Z", "updatedAt": "2026-01-01T00:00:00Z",
          "createdBy": "someone", "deletedAt": None, "status": {"phase": "Ready"}}


def test_the_create_body_is_the_api_s_fields_with_the_names_resolved():
    refs = RULE.codec.references(RULE, SPEC)
    assert [(r.what, r.path, r.key, r.name) for r in refs] == [
        ("role", "/api/v1/authorization/roles", "", "L1 researcher"),
        ("project", "/api/v1/org-unit/projects", "projects", "team-a")]
    resolved = RULE.codec.resolve(RULE, SPEC, {refs[0]: "5", refs[1]: "100"})
    assert RULE.create_body(resolved) == {
        "subjectId": "ml-team", "subjectType": "group", "roleId": 5, "scopeId": "100",
        "scopeType": "project", "clusterId": CLUSTER}


def test_a_cluster_scope_names_nothing_to_look_up_and_its_id_is_the_cluster():
    spec = {**SPEC, "scopeType": "cluster"}
    del spec["scope"]
    [role] = RULE.codec.references(RULE, spec)
    resolved = RULE.codec.resolve(RULE, spec, {role: "3"})
    assert (resolved["scopeId"], resolved["roleId"]) == (CLUSTER, 3)


def test_an_answer_reads_back_as_the_spec_writes_it_named_by_its_identity():
    live = RULE.read(ANSWER)
    assert {k: live[k] for k in SPEC if k != "name"} == {k: v for k, v in SPEC.items()
                                                         if k != "name"}
    assert live["workloadId"] == "7" and live["name"] == "ml-team.l1-researcher.project-team-a"
    assert "actualPhase" not in live  # no phase the engine waits on


def test_the_handle_of_an_identity():
    assert handle({"subjectId": "Alice.Smith@example.com", "role": "ML engineer",
                   "scopeType": "cluster"}) == "alice-smith-example-com.ml-engineer.cluster"
    assert handle({"subjectId": "ml-team", "role": "Department administrator",
                   "scopeType": "department", "scope": "research"}) == \
        "ml-team.department-administrator.department-research"


def test_a_change_replaces_and_the_missing_handle_is_no_change():
    live = RULE.read(ANSWER)
    assert diff.diff_workload(RULE, SPEC, SPEC, live) == []
    [change] = diff.diff_workload(RULE, {**SPEC, "role": "Viewer"}, SPEC, live)
    assert (change.path, change.forces_replacement) == ("role", True)
    assert not RULE.can_update
