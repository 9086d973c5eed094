"""The simulator's list is served from an index: a page builds the list items
it returns, not every workload's, whatever the fleet's size; `projectId==X` reads that
project's workloads only, and with `clusterId==Y` (as a refresh lists) that project's
workloads in that cluster only, so a late page of a large project costs what an early
one does; and the index follows creates, settled deletions and drift patches that move a
workload to another project or cluster."""

from __future__ import annotations

import pytest

from reconciler.simulator import listing
from tests.helpers.constants import CLUSTER

D = "/api/v1/workloads/distributed"


@pytest.fixture
def built(monkeypatch):
    """How many list items were built since the last reset."""
    count = {"n": 0}
    real = listing.list_item

    def counted(sim, rec, *context):
        count["n"] += 1
        return real(sim, rec, *context)

    monkeypatch.setattr(listing, "list_item", counted)
    return count


def _fleet(sim, n: int, projects: int) -> list[str]:
    ids = []
    for i in range(n):
        r = sim.post(D, json={"name": f"w{i}", "projectId": str(i % projects),
                              "clusterId": CLUSTER,
                              "spec": {"image": "i:1", "distributedFramework": "PyTorch",
                                       "numWorkers": 1}})
        assert r.status_code == 202, r.text
        ids.append(r.json()["workloadId"])
    return ids


def test_a_page_builds_only_its_own_items(sim, built):
    ids = _fleet(sim, 600, 6)
    for params, expected, most in [
            ({"limit": 10, "offset": 500}, ids[500:510], 10),
            ({"limit": 10, "sortOrder": "desc"}, ids[::-1][:10], 10),
            ({"limit": 5, "sortBy": "name"}, sorted(ids, key=lambda w: f"w{ids.index(w)}")[:5], 5),
            ({"limit": 5, "filterBy": "projectId==3"}, ids[3::6][:5], 5),
            ({"limit": 5, "offset": 20, "filterBy": "projectId==3,phase==Running"},
             ids[3::6][20:25], 26)]:
        built["n"] = 0
        page = sim.get("/api/v1/workloads", params=params).json()["workloads"]
        assert [w["id"] for w in page] == expected, params
        assert built["n"] <= most, (params, built["n"])


def test_the_index_follows_deletions_and_project_drift(sim):
    ids = _fleet(sim, 30, 3)
    sim.get("/api/v1/workloads", params={"filterBy": "projectId==1"})  # index built
    sim.delete(f"{D}/{ids[1]}")
    sim.patch(f"/_sim/workloads/{ids[4]}", json={"projectId": "2"})
    sim.post(D, json={"name": "late", "projectId": "1", "clusterId": CLUSTER,
                      "spec": {"image": "i:1", "distributedFramework": "PyTorch",
                               "numWorkers": 1}})

    def names(project):
        return [w["name"] for w in sim.get("/api/v1/workloads", params={
            "filterBy": f"projectId=={project}", "limit": 500}).json()["workloads"]]

    assert names("1") == [f"w{i}" for i in range(7, 30, 3)] + ["late"]
    assert names("2") == sorted([f"w{i}" for i in range(2, 30, 3)] + ["w4"],
                                key=lambda n: int(n[1:]))
    deleted = sim.get("/api/v1/workloads", params={"deleted": "true",
                                                   "filterBy": "projectId==1"}).json()
    assert [w["id"] for w in deleted["workloads"]] == [ids[1]]


OTHER_CLUSTER = "0d9f6d0e-5b1b-4a36-9d43-0c2b4c8f7a11"


def test_a_late_page_of_a_project_in_a_cluster_reads_no_record_before_it(sim, monkeypatch):
    ids = _fleet(sim, 1200, 2)
    other = []
    for i in range(5):
        r = sim.post(D, json={"name": f"o{i}", "projectId": "0", "clusterId": OTHER_CLUSTER,
                              "spec": {"image": "i:1", "distributedFramework": "PyTorch",
                                       "numWorkers": 1}})
        other.append(r.json()["workloadId"])
    checked = {"n": 0}
    real = listing._RECORD_FIELDS["clusterId"]

    def counted(rec):
        checked["n"] += 1
        return real(rec)

    monkeypatch.setitem(listing._RECORD_FIELDS, "clusterId", counted)
    where = f"projectId==0,clusterId=={CLUSTER}"
    page = sim.get("/api/v1/workloads", params={"filterBy": where, "limit": 50,
                                                "offset": 550}).json()
    assert [w["id"] for w in page["workloads"]] == ids[0::2][550:600]
    assert "next" not in page
    # Not one record before the page was looked at to find where it starts.
    assert checked["n"] == 0
    page = sim.get("/api/v1/workloads", params={
        "filterBy": f"clusterId=={OTHER_CLUSTER},projectId==0"}).json()
    assert [w["id"] for w in page["workloads"]] == other


def test_the_cluster_index_follows_drift_to_another_cluster(sim):
    ids = _fleet(sim, 10, 1)
    sim.get("/api/v1/workloads", params={"filterBy": f"projectId==0,clusterId=={CLUSTER}"})
    sim.patch(f"/_sim/workloads/{ids[3]}", json={"clusterId": OTHER_CLUSTER})

    def listed(cluster):
        return [w["id"] for w in sim.get("/api/v1/workloads", params={
            "filterBy": f"projectId==0,clusterId=={cluster}"}).json()["workloads"]]

    assert listed(CLUSTER) == ids[:3] + ids[4:]
    assert listed(OTHER_CLUSTER) == [ids[3]]
