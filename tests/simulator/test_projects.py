"""The simulator's projects: `GET /api/v1/org-unit/projects` (filterBy name and
clusterId, limit, offset), `GET /api/v1/org-unit/projects/{id}` and `POST /_sim/projects`,
every answer valid against projects.yml's schemas."""

from __future__ import annotations

import jsonschema
import pytest
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from tests.helpers.constants import CLUSTER

OTHER_CLUSTER = "2b8e4c1a-9f3d-4e7b-8a6c-5d4e3f2a1b0c"
LIST = "/api/v1/org-unit/projects"


# The list answer's schema is inline in the path's 200 response.
_LIST_ANSWER = ("projects.yml#/paths/~1api~1v1~1org-unit~1projects/get/responses/200/content/"
                "application~1json/schema")


@pytest.fixture(scope="module")
def projects_schema(shared_api_dir):
    doc = yaml.safe_load((shared_api_dir / "projects.yml").read_text())
    registry = Registry().with_resource(
        "projects.yml", Resource.from_contents(doc, default_specification=DRAFT202012))

    def checker(ref: str):
        validator = jsonschema.Draft202012Validator({"$ref": ref}, registry=registry)

        def check(body) -> None:
            errors = list(validator.iter_errors(body))
            assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])
        return check

    return {"list": checker(_LIST_ANSWER),
            "project": checker("projects.yml#/components/schemas/Project")}


def find(sim, *filters: str, **params):
    r = sim.get(LIST, params={"filterBy": ",".join(filters), **params} if filters else params)
    assert r.status_code == 200, r.text
    return r.json()


def define(sim, **body):
    r = sim.post("/_sim/projects", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def test_a_default_project_for_an_id_a_name_spells(any_sim, projects_schema):
    page = find(any_sim, "name==project-7", f"clusterId=={CLUSTER}")
    projects_schema["list"](page)
    (project,) = page["projects"]
    assert (project["id"], project["name"], project["clusterId"]) == ("7", "project-7", CLUSTER)
    assert find(any_sim, "name==team-a", f"clusterId=={CLUSTER}")["projects"] == []


def test_a_defined_project_is_found_by_name_in_its_cluster_only(any_sim, projects_schema):
    made = define(any_sim, id="12", name="team-a", clusterId=CLUSTER, gpuQuota=32)
    projects_schema["project"](made)
    assert made["resources"][0]["gpu"]["deserved"] == 32
    assert made["totalResources"]["gpuQuota"] == 32
    page = find(any_sim, "name==team-a", f"clusterId=={CLUSTER}")
    projects_schema["list"](page)
    assert [p["id"] for p in page["projects"]] == ["12"]
    assert find(any_sim, "name==team-a", f"clusterId=={OTHER_CLUSTER}")["projects"] == []
    # The defined project takes its id's place: project-12 no longer names it.
    assert find(any_sim, "name==project-12", f"clusterId=={CLUSTER}")["projects"] == []


def test_get_one_project_by_id(any_sim, projects_schema):
    define(any_sim, id="12", name="team-a", clusterId=CLUSTER, gpuQuota=8)
    r = any_sim.get(f"{LIST}/12")
    assert r.status_code == 200
    projects_schema["project"](r.json())
    assert r.json()["name"] == "team-a"
    r = any_sim.get(f"{LIST}/40")
    assert r.status_code == 200 and r.json()["name"] == "project-40"
    projects_schema["project"](r.json())
    assert any_sim.get(f"{LIST}/not-an-id").status_code == 404


def test_list_pages_with_limit_and_offset(sim, projects_schema):
    for i in range(5):
        define(sim, id=str(20 + i), name=f"team-{i}", clusterId=CLUSTER)
    first = find(sim, f"clusterId=={CLUSTER}", limit=2)
    projects_schema["list"](first)
    assert [p["id"] for p in first["projects"]] == ["20", "21"] and first["next"] == 2
    last = find(sim, f"clusterId=={CLUSTER}", limit=2, offset=4)
    assert [p["id"] for p in last["projects"]] == ["24"] and "next" not in last
    assert sim.get(LIST, params={"limit": 501}).status_code == 400


def test_the_projects_of_live_workloads_are_listed(sim):
    sim.create_distributed(project="9")
    names = [p["name"] for p in find(sim)["projects"]]
    assert names == ["project-9"]


def test_two_projects_of_one_name_are_both_listed(sim):
    define(sim, id="12", name="team-a", clusterId=CLUSTER)
    define(sim, id="13", name="team-a", clusterId=CLUSTER)
    ids = [p["id"] for p in find(sim, "name==team-a", f"clusterId=={CLUSTER}")["projects"]]
    assert ids == ["12", "13"]


@pytest.mark.parametrize("body,word", [
    ({"id": 12, "name": "team-a", "clusterId": CLUSTER}, "id"),
    ({"id": "12", "name": "", "clusterId": CLUSTER}, "name"),
    ({"id": "12", "name": "team-a", "clusterId": "nope"}, "clusterId"),
    ({"id": "12", "name": "team-a", "clusterId": CLUSTER, "gpuQuota": -1}, "gpuQuota"),
    ({"id": "12", "name": "team-a", "clusterId": CLUSTER, "quota": 1}, "quota"),
])
def test_defining_a_bad_project_is_a_400(sim, body, word):
    r = sim.post("/_sim/projects", json=body)
    assert r.status_code == 400 and word in r.json()["message"]


def test_a_filter_the_api_does_not_take_is_a_400(sim):
    r = sim.get(LIST, params={"filterBy": "id==7"})
    assert r.status_code == 400


def test_wiping_the_simulator_forgets_defined_projects(sim):
    define(sim, id="12", name="team-a", clusterId=CLUSTER)
    sim.delete("/_sim/workloads")
    assert find(sim, "name==team-a", f"clusterId=={CLUSTER}")["projects"] == []


def test_defined_projects_are_kept_in_the_data_file(make_sim, tmp_path):
    # So that `sim serve --data .runai-sim/data.json` defines the projects `--sim` knows.
    data = tmp_path / "data.json"
    first = make_sim(data_path=data)
    define(first, id="12", name="team-a", clusterId=CLUSTER, gpuQuota=32)
    again = make_sim(data_path=data)
    body = again.get("/api/v1/org-unit/projects/12").json()
    assert body["name"] == "team-a" and body["resources"][0]["gpu"]["deserved"] == 32
    again.delete("/_sim/workloads")
    third = make_sim(data_path=data)
    assert third.get("/api/v1/org-unit/projects/12").json()["name"] == "project-12"
