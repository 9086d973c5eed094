"""The simulator's descriptions of the organisation's request bodies against NVIDIA's
OpenAPI: the org units', access rules' and policies' fields, types, enums, ranges and
patterns as org-units.yml, access-rules.yml and policies.yml have them."""

from __future__ import annotations

import pytest
import yaml

from reconciler.simulator import schema
from reconciler.simulator.policies import POLICY_KINDS
from tests.helpers.simulator import description_leaves, openapi_leaves

FILES = ("org-units.yml", "access-rules.yml", "policies.yml")


@pytest.fixture(scope="module")
def components(shared_api_dir):
    return {name: yaml.safe_load((shared_api_dir / name).read_text())["components"]["schemas"]
            for name in FILES}


@pytest.mark.parametrize("file, name, ours", [
    ("org-units.yml", "ProjectCreationRequest", schema.PROJECT_CREATE),
    ("org-units.yml", "ProjectUpdateRequest", schema.PROJECT_UPDATE),
    ("org-units.yml", "DepartmentCreationRequest", schema.DEPARTMENT_CREATE),
    ("org-units.yml", "DepartmentUpdateRequest", schema.DEPARTMENT_UPDATE),
    ("org-units.yml", "ResourcesUpdateRequest", schema.RESOURCES_UPDATE),
    ("access-rules.yml", "AccessRuleCreationFields", schema.ACCESS_RULE_CREATE),
])
def test_an_org_body_description_matches_the_openapi(components, file, name, ours):
    theirs = openapi_leaves(components[file][name], components[file])
    mine = description_leaves(ours)
    assert sorted(set(theirs) ^ set(mine)) == []
    assert {p: v for p, v in theirs.items() if mine[p] != v} == {}


POLICY_BODIES = [(k.put_request, k.put) for k in POLICY_KINDS] + \
                [(k.patch_request, k.patch) for k in POLICY_KINDS]


@pytest.mark.parametrize("name, ours", POLICY_BODIES, ids=[n for n, _ in POLICY_BODIES])
def test_a_policy_body_description_matches_the_openapi(components, name, ours):
    """`meta`, `defaults`, `imposedAssets`, `status` and `reset` exactly. Every rule
    policies.yml documents is taken, with its type; the simulator also takes rules on
    fields policies.yml gives none (it names a rules component per field: the simulator
    derives them from the field's type)."""
    theirs = openapi_leaves(components["policies.yml"][name], components["policies.yml"])
    mine = description_leaves(ours)

    def exact(paths):
        return {p for p in paths if not p.startswith(".policy.rules.")}

    assert sorted(exact(theirs) ^ exact(mine)) == []
    assert {p: v for p, v in theirs.items() if p in exact(theirs) and mine[p] != v} == {}
    assert sorted(set(theirs) - set(mine)) == []
    assert {p: (v[0], mine[p][0]) for p, v in theirs.items() if mine[p][0] != v[0]} == {}
