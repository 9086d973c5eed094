"""The simulator's roles and access rules: create, list with the spec's filters, get,
delete, and no update; every answer valid against access-rules.yml's schemas."""

from __future__ import annotations

import pytest

from tests.helpers.constants import CLUSTER
from tests.helpers.simulator import openapi_checker

RULES = "/api/v1/authorization/access-rules"
ROLES = "/api/v1/authorization/roles"
FILE = "access-rules.yml"
_LIST = ("access-rules.yml#/paths/~1api~1v1~1authorization~1access-rules/get/responses/200/"
         "content/application~1json/schema")


@pytest.fixture(scope="module")
def conforms(shared_api_dir):
    return openapi_checker(shared_api_dir, FILE)


def role_id(sim, name: str) -> int:
    return next(r["id"] for r in sim.get(ROLES).json() if r["name"] == name)


def make_rule(sim, subject="ada@example.com", role="Editor", scope=("project", "7"), **more):
    r = sim.post(RULES, json={"subjectId": subject, "subjectType": "user",
                              "roleId": role_id(sim, role), "scopeType": scope[0],
                              "scopeId": scope[1], **more})
    assert r.status_code == 201, r.text
    return r.json()


def test_roles_are_seeded_and_read_by_id(any_sim, conforms):
    roles = any_sim.get(ROLES).json()
    conforms(FILE, "RolesV1", roles)
    names = [r["name"] for r in roles]
    assert {"System administrator", "Editor", "Viewer", "L1 researcher"} <= set(names)
    one = any_sim.get(f"{ROLES}/{roles[0]['id']}").json()
    conforms(FILE, "RoleV1", one)
    assert one == roles[0]
    assert any_sim.get(f"{ROLES}/999").status_code == 404


def test_an_access_rule_is_created_read_listed_and_deleted(any_sim, conforms):
    made = make_rule(any_sim, clusterId=CLUSTER)
    conforms(FILE, "AccessRule", made)
    assert (made["roleName"], made["scopeName"]) == ("Editor", "project-7")
    got = any_sim.get(f"{RULES}/{made['id']}")
    assert got.status_code == 200
    conforms(FILE, "AccessRuleById", got.json())
    page = any_sim.get(RULES).json()
    conforms(FILE, _LIST, page)
    assert [r["id"] for r in page["accessRules"]] == [made["id"]]
    r = any_sim.delete(f"{RULES}/{made['id']}")
    assert r.status_code == 204 and r.content == b""
    assert any_sim.get(f"{RULES}/{made['id']}").status_code == 404
    assert any_sim.delete(f"{RULES}/{made['id']}").status_code == 404
    assert any_sim.get(RULES).json()["accessRules"] == []
    kept = any_sim.get(RULES, params={"includeDeleted": "true"}).json()
    conforms(FILE, _LIST, kept)
    assert [r["deletedAt"] is not None for r in kept["accessRules"]] == [True]


@pytest.mark.parametrize("method", ["PUT", "PATCH"])
def test_an_access_rule_cannot_be_updated(any_sim, conforms, method):
    made = make_rule(any_sim)
    r = any_sim.request(method, f"{RULES}/{made['id']}", json={"roleId": 1})
    assert r.status_code == 405
    conforms(FILE, "Error", r.json())
    assert any_sim.get(f"{RULES}/{made['id']}").json()["roleName"] == "Editor"


def test_the_list_filters_and_pages_as_the_spec_documents(sim, conforms):
    a = make_rule(sim, "ada@example.com", "Editor", ("project", "7"))
    b = make_rule(sim, "bob@example.com", "Viewer", ("project", "7"))
    c = make_rule(sim, "ada@example.com", "Viewer", ("cluster", CLUSTER))
    d = make_rule(sim, "ml-team", "L1 researcher", ("department", "1"), subjectType="group")

    def ids(**params):
        page = sim.get(RULES, params=params).json()
        conforms(FILE, _LIST, page)
        return [r["id"] for r in page["accessRules"]]

    assert ids(subjectIdFilter="ada@") == [a["id"], c["id"]]
    assert ids(filterBy="subjectId==bob@example.com") == [b["id"]]
    assert ids(subjectType="group") == [d["id"]]
    assert ids(subjectIds="bob@example.com,ml-team") == [b["id"], d["id"]]
    assert ids(scopeType="project", scopeId="7") == [a["id"], b["id"]]
    assert ids(roleId=role_id(sim, "Viewer")) == [b["id"], c["id"]]
    assert ids(filterBy="roleName==Viewer,scopeType==cluster") == [c["id"]]
    assert ids(limit=2, offset=1) == [b["id"], c["id"]]
    page = sim.get(RULES, params={"limit": 2}).json()
    assert (page["totalRecords"], page["displayRecords"]) == (4, 2)
    assert sim.get(RULES, params={"filterBy": "colour==red"}).status_code == 400


@pytest.mark.parametrize("change, status, word", [
    ({"roleId": 999}, 404, "Role"),
    ({"scopeType": "project", "scopeId": "ninety"}, 404, "Project"),
    ({"scopeType": "department", "scopeId": "77"}, 404, "Department"),
    ({"scopeType": "cluster", "scopeId": "not-a-uuid"}, 400, "scopeId"),
    ({"subjectType": "robot"}, 400, "subjectType"),
    ({"roleId": "3"}, 400, "roleId"),
    ({"expiresAt": "tomorrow"}, 400, "expiresAt"),
])
def test_a_bad_access_rule_is_refused_and_nothing_is_made(sim, conforms, change, status,
                                                          word):
    body = {"subjectId": "ada@example.com", "subjectType": "user", "roleId": 3,
            "scopeType": "project", "scopeId": "7", **change}
    r = sim.post(RULES, json=body)
    assert r.status_code == status, r.text
    conforms(FILE, "Error", r.json())
    assert word in r.json()["message"]
    assert sim.get(RULES).json()["totalRecords"] == 0


def test_the_same_rule_twice_is_refused(sim):
    make_rule(sim)
    r = sim.post(RULES, json={"subjectId": "ada@example.com", "subjectType": "user",
                              "roleId": role_id(sim, "Editor"), "scopeType": "project",
                              "scopeId": "7"})
    assert r.status_code == 400 and "already exists" in r.json()["message"]


def test_a_rule_deleted_out_of_band_is_gone(sim):
    made = make_rule(sim)
    assert sim.delete(f"/_sim/org/access-rules/{made['id']}").status_code == 200
    assert sim.get(f"{RULES}/{made['id']}").status_code == 404
    assert sim.delete(f"/_sim/org/access-rules/{made['id']}").status_code == 404


def test_the_access_routes_need_a_bearer_token(sim):
    for method, path in (("GET", ROLES), ("GET", RULES), ("POST", RULES),
                         ("GET", f"{RULES}/1"), ("DELETE", f"{RULES}/1")):
        assert sim.request(method, path, auth=False, json={}).status_code == 401
