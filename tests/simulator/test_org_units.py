"""The simulator's departments and projects made through the API, node pools, priorities
and ranks: each route's lifecycle, refusals and phases, every answer valid against
org-units.yml's schemas."""

from __future__ import annotations

import pytest

from tests.helpers.constants import CLUSTER
from tests.helpers.simulator import openapi_checker

OTHER_CLUSTER = "2b8e4c1a-9f3d-4e7b-8a6c-5d4e3f2a1b0c"
PROJECTS = "/api/v1/org-unit/projects"
DEPARTMENTS = "/api/v1/org-unit/departments"
ORG = "org-units.yml"
_LIST = "org-units.yml#/paths/~1api~1v1~1org-unit~1{}/get/responses/200/content/" \
        "application~1json/schema"


@pytest.fixture(scope="module")
def conforms(shared_api_dir):
    return openapi_checker(shared_api_dir, ORG)


def quota(pool="1", gpus=2, **more):
    return {"nodePool": {"id": pool}, "gpu": {"deserved": gpus}, **more}


def make_department(sim, name="research", cluster=CLUSTER, **body):
    r = sim.post(DEPARTMENTS, json={"name": name, "clusterId": cluster,
                                    "resources": [quota(gpus=8)], **body})
    assert r.status_code == 201, r.text
    return r.json()


def make_project(sim, name="team-a", cluster=CLUSTER, **body):
    body.setdefault("resources", [quota()])
    r = sim.post(PROJECTS, json={"name": name, "clusterId": cluster, **body})
    assert r.status_code == 201, r.text
    return r.json()


def test_a_project_is_created_then_becomes_ready_with_its_namespace(make_sim, clock, conforms):
    sim = make_sim(phase_seconds=10)
    department = make_department(sim)
    made = make_project(sim, parentId=department["id"], requestedNamespace="team-a-ns",
                        description="the A team")
    conforms(ORG, "Project", made)
    assert made["status"]["phase"] == "Creating" and "namespace" not in made["status"]
    assert (made["parentId"], made["parent"]["name"]) == (department["id"], "research")
    assert made["resources"] == [{"nodePool": {"id": "1", "name": "default"},
                                  "gpu": {"deserved": 2}}]
    clock.advance(10)
    got = sim.get(f"{PROJECTS}/{made['id']}").json()
    conforms(ORG, "Project", got)
    assert got["status"]["phase"] == "Ready" and got["status"]["namespace"] == "team-a-ns"
    assert got["totalResources"]["gpuQuota"] == 2
    page = sim.get(PROJECTS, params={"filterBy": f"name==team-a,clusterId=={CLUSTER}"}).json()
    conforms(ORG, _LIST.format("projects"), page)
    assert [p["id"] for p in page["projects"]] == [made["id"]]


def test_a_project_without_a_parent_is_in_the_default_department(sim, conforms):
    made = make_project(sim)
    assert made["parentId"] == "1"
    default = sim.get(f"{DEPARTMENTS}/1").json()
    conforms(ORG, "Department", default)
    assert default["children"] == [{"id": made["id"], "name": "team-a"}]


def test_a_project_name_is_unique_per_cluster(any_sim, conforms):
    make_project(any_sim)
    r = any_sim.post(PROJECTS, json={"name": "team-a", "clusterId": CLUSTER,
                                     "resources": []})
    assert r.status_code == 409
    conforms(ORG, "Error", r.json())
    make_project(any_sim, cluster=OTHER_CLUSTER)


@pytest.mark.parametrize("body, field", [
    ({"clusterId": CLUSTER, "resources": []}, "name"),
    ({"name": "x", "clusterId": "nope", "resources": []}, "clusterId"),
    ({"name": "x", "clusterId": CLUSTER, "resources": [], "color": "red"}, "color"),
    ({"name": "x", "clusterId": CLUSTER, "resources": [quota(pool="9")]}, "nodePool.id"),
    ({"name": "x", "clusterId": CLUSTER, "resources": [quota(), quota()]}, "nodePool.id"),
    ({"name": "x", "clusterId": CLUSTER,
      "resources": [quota(memory={"deserved": 1000})]}, "memory.units"),
    ({"name": "x", "clusterId": CLUSTER, "resources": [quota(priority="Urgent")]},
     "priority"),
    ({"name": "x", "clusterId": CLUSTER, "resources": [], "parentId": "999"}, "parentId"),
    ({"name": "x", "clusterId": CLUSTER, "resources": [None]}, "resources[0]"),
    ([], "body"),
])
def test_a_bad_project_is_a_400_naming_the_field_and_nothing_is_made(sim, conforms, body,
                                                                     field):
    r = sim.post(PROJECTS, json=body)
    assert r.status_code == 400, r.text
    conforms(ORG, "Error", r.json())
    assert field in r.json()["message"]
    assert sim.get("/_sim/org").json()["project"] == {}


def test_put_replaces_the_updatable_fields_and_refuses_a_create_only_one(any_sim, conforms):
    made = make_project(any_sim, description="old", defaultNodePools=["a100"])
    r = any_sim.put(f"{PROJECTS}/{made['id']}", json={
        "resources": [quota(pool="2", gpus=4)], "schedulingRules": {
            "trainingJobTimeLimitSeconds": 3600}})
    assert r.status_code == 200, r.text
    conforms(ORG, "Project", r.json())
    got = any_sim.get(f"{PROJECTS}/{made['id']}").json()
    assert got["description"] == "" and "defaultNodePools" not in got
    assert got["schedulingRules"] == {"trainingJobTimeLimitSeconds": 3600}
    assert got["resources"] == [{"nodePool": {"id": "2", "name": "a100"},
                                 "gpu": {"deserved": 4}}]
    assert got["enforceRunaiScheduler"] is True
    for key, value in (("name", "team-b"), ("parentId", "1"), ("requestedNamespace", "x"),
                       ("clusterId", OTHER_CLUSTER)):
        r = any_sim.put(f"{PROJECTS}/{made['id']}", json={"resources": [], key: value})
        assert r.status_code == 400 and key in r.json()["message"], r.text
        conforms(ORG, "Error", r.json())
    assert any_sim.get(f"{PROJECTS}/{made['id']}").json()["name"] == "team-a"


def test_quotas_by_node_pool_put_replaces_and_patch_merges_by_pool_id(any_sim, conforms):
    made = make_project(any_sim, resources=[quota(gpus=2)])
    path = f"{PROJECTS}/{made['id']}/resources"
    r = any_sim.patch(path, json=[quota(pool="2", gpus=1, priority="High")])
    assert r.status_code == 200, r.text
    for entry in r.json():
        conforms(ORG, "Resources", entry)
    assert [(e["nodePool"]["name"], e["gpu"]["deserved"]) for e in r.json()] == \
        [("default", 2), ("a100", 1)]
    r = any_sim.patch(path, json=[quota(pool="1", gpus=5)])
    assert [(e["nodePool"]["id"], e["gpu"]["deserved"]) for e in r.json()] == \
        [("1", 5), ("2", 1)]
    r = any_sim.put(path, json=[{"nodePool": {"id": "2"},
                                 "cpu": {"deserved": 1000, "limit": None},
                                 "memory": {"deserved": 2, "units": "GB"}}])
    assert r.status_code == 200, r.text
    (entry,) = r.json()
    conforms(ORG, "Resources", entry)
    assert entry["gpu"] == {"deserved": 0}  # the API's default
    got = any_sim.get(f"{PROJECTS}/{made['id']}").json()
    assert got["totalResources"] == {"gpuQuota": 0, "cpuQuota": 1000, "memoryQuota": 2000}
    assert any_sim.put(path, json=[quota(pool="7")]).status_code == 400
    assert any_sim.put(path, json={"nodePool": {"id": "1"}}).status_code == 400
    assert any_sim.put(path, json=[None]).status_code == 400


def test_a_project_delete_is_accepted_then_removes_the_project_and_its_workloads(
        make_sim, clock, conforms):
    sim = make_sim(phase_seconds=10)
    made = make_project(sim)
    clock.advance(10)
    sim.create_distributed("in-it", project=made["id"])
    sim.create_distributed("elsewhere", project="7")
    r = sim.delete(f"{PROJECTS}/{made['id']}")
    assert r.status_code == 202 and r.content == b""
    got = sim.get(f"{PROJECTS}/{made['id']}").json()
    assert got["status"]["phase"] == "Deleting"
    assert sim.post(PROJECTS, json={"name": "team-a", "clusterId": CLUSTER,
                                    "resources": []}).status_code == 409
    clock.advance(10)
    r = sim.get(f"{PROJECTS}/{made['id']}")
    assert r.status_code == 404
    conforms(ORG, "Error", r.json())
    names = [w["name"] for w in sim.get("/api/v1/workloads").json()["workloads"]]
    assert names == ["elsewhere"]
    assert made["id"] not in [p["id"] for p in sim.get(PROJECTS).json()["projects"]]
    make_project(sim)  # the name is free again


def test_departments_are_created_listed_in_pages_updated_and_deleted(any_sim, conforms):
    made = make_department(any_sim, description="R&D")
    conforms(ORG, "Department", made)
    for i in range(3):
        make_department(any_sim, name=f"d{i}")
    first = any_sim.get(DEPARTMENTS, params={"limit": 2}).json()
    conforms(ORG, _LIST.format("departments"), first)
    assert [d["name"] for d in first["departments"]] == ["default", "research"]
    assert first["next"] == 2
    found = any_sim.get(DEPARTMENTS, params={"filterBy": "name==research"}).json()
    assert [d["id"] for d in found["departments"]] == [made["id"]]
    r = any_sim.put(f"{DEPARTMENTS}/{made['id']}", json={"resources": [quota(gpus=16)]})
    assert r.status_code == 200
    conforms(ORG, "Department", r.json())
    assert r.json()["totalResources"]["gpuQuota"] == 16
    r = any_sim.put(f"{DEPARTMENTS}/{made['id']}", json={"resources": [], "name": "x"})
    assert r.status_code == 400 and "name" in r.json()["message"]
    r = any_sim.patch(f"{DEPARTMENTS}/{made['id']}/resources", json=[quota(pool="2")])
    assert [e["nodePool"]["id"] for e in r.json()] == ["1", "2"]
    assert any_sim.post(DEPARTMENTS, json={"name": "research", "clusterId": CLUSTER,
                                           "resources": []}).status_code == 409
    child = make_project(any_sim, parentId=made["id"])
    r = any_sim.delete(f"{DEPARTMENTS}/{made['id']}")
    assert r.status_code == 400 and "team-a" in r.json()["message"]
    any_sim.delete(f"{PROJECTS}/{child['id']}")
    r = any_sim.delete(f"{DEPARTMENTS}/{made['id']}")
    assert r.status_code == 204
    assert any_sim.get(f"{DEPARTMENTS}/{made['id']}").status_code == 404
    assert any_sim.put(f"{DEPARTMENTS}/{made['id']}", json={"resources": []}).status_code == 404


def test_node_pools_priorities_and_ranks_are_served(any_sim, conforms):
    pools = any_sim.get("/api/v1/node-pools").json()
    conforms(ORG, "org-units.yml#/paths/~1api~1v1~1node-pools/get/responses/200/content/"
                  "application~1json/schema", pools)
    assert [(p["id"], p["name"]) for p in pools["nodepools"]] == [("1", "default"),
                                                                 ("2", "a100")]
    by_name = any_sim.get("/api/v1/node-pools", params={"filterBy": "name==a100"}).json()
    assert [p["id"] for p in by_name["nodepools"]] == ["2"]
    one = any_sim.get("/api/v1/node-pools/2").json()
    conforms(ORG, "Nodepool", one)
    assert any_sim.get("/api/v1/node-pools/9").status_code == 404
    priorities = any_sim.get("/api/v1/org-unit/priorities").json()
    for p in priorities["priorities"]:
        conforms(ORG, "Priority", p)
    assert [p["name"] for p in priorities["priorities"] if p["isDefault"]] == ["Normal"]
    ranks = any_sim.get("/api/v1/org-unit/ranks").json()["ranks"]
    assert [r["name"] for r in ranks if r["isDefault"]] == ["MediumLow"]


@pytest.mark.parametrize("method, path", [
    ("POST", PROJECTS), ("POST", DEPARTMENTS), ("GET", DEPARTMENTS), ("GET", f"{DEPARTMENTS}/1"),
    ("PUT", f"{PROJECTS}/100"), ("DELETE", f"{PROJECTS}/100"),
    ("PATCH", f"{DEPARTMENTS}/1/resources"), ("GET", "/api/v1/node-pools"),
    ("GET", "/api/v1/org-unit/priorities"), ("GET", "/api/v1/org-unit/ranks"),
])
def test_the_org_routes_need_a_bearer_token(sim, conforms, method, path):
    r = sim.request(method, path, auth=False, json={})
    assert r.status_code == 401
    conforms(ORG, "Error", r.json())


def test_a_unit_changed_or_deleted_out_of_band_shows_it(sim):
    made = make_project(sim)
    r = sim.patch(f"/_sim/org/projects/{made['id']}",
                  json={"resources": [{"nodePool": {"id": "1", "name": "default"},
                                       "gpu": {"deserved": 9}}]})
    assert r.status_code == 200, r.text
    got = sim.get(f"{PROJECTS}/{made['id']}").json()
    assert got["resources"][0]["gpu"]["deserved"] == 9
    sim.create_distributed("w", project=made["id"])
    assert sim.delete(f"/_sim/org/projects/{made['id']}").status_code == 200
    assert sim.get(f"{PROJECTS}/{made['id']}").status_code == 404
    assert sim.get("/_sim/workloads").json()["workloads"] == []
    assert sim.patch("/_sim/org/teams/1", json={}).status_code == 404


def test_the_organisation_is_kept_in_the_data_file(make_sim, tmp_path):
    path = tmp_path / "data.json"
    first = make_sim(data_path=path)
    department = make_department(first)
    project = make_project(first, parentId=department["id"])
    again = make_sim(data_path=path)
    assert again.get(f"{PROJECTS}/{project['id']}").json() == \
        first.get(f"{PROJECTS}/{project['id']}").json()
    assert again.post(PROJECTS, json={"name": "team-a", "clusterId": CLUSTER,
                                      "resources": []}).status_code == 409
    assert make_project(again, name="team-b")["id"] != project["id"]
    again.delete("/_sim/workloads")  # wipes the organisation too
    assert make_sim(data_path=path).get(f"{PROJECTS}/{project['id']}").json()["name"] == \
        f"project-{project['id']}"
