"""The workload list as the engine's list-first refresh relies on it: every
change of a workload moves its list item's `updatedAt` (strictly, even when the clock
stands still) and leaves the others' items alone, for each kind the simulator serves and
each kind of change; list items carry the images, pod requests and node pools the body
says, in the `Workload` shape; and the index the list is served from pages and filters
exactly as sorting and filtering every record would."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.simulator import queries
from reconciler.simulator.kinds import DISTRIBUTED_INFERENCE, Kind
from reconciler.simulator.kinds import KINDS as ALL_KINDS
from reconciler.simulator.listing import FILTER, list_item
from tests.helpers.constants import CLUSTER
from tests.helpers.simulator import PATCHES, SAMPLES

# The flat kinds (one create body shape); a Manifest's and a NIM service's listing are tested over HTTP in
# tests/e2e/test_manifest_http.py and tests/e2e/test_refresh_auto.py.
KINDS = tuple(k for k in ALL_KINDS if not k.custom and not k.envelope)

LIST = "/api/v1/workloads"


def _items(sim, **params) -> dict[str, dict]:
    r = sim.get(LIST, params={"limit": 500, **params})
    assert r.status_code == 200, r.text
    return {w["id"]: w for w in r.json()["workloads"]}


def _create(sim, kind: Kind, name: str, project: str = "7") -> str:
    r = sim.post(kind.path, json={"name": name, "projectId": project, "clusterId": CLUSTER,
                                  **SAMPLES[kind.type]})
    assert r.status_code == 202, r.text
    return r.json()["workloadId"]


def _changes(kind: Kind) -> list[tuple[str, object]]:
    """(name, do(sim, clock, wid)) for each change the simulator makes to a workload."""
    out = []
    if kind.update is not None:
        out.append(("PATCH", lambda s, c, w: s.patch(f"{kind.path}/{w}",
                                                      json=PATCHES[kind.type])))
    if kind.suspends:
        out.append(("suspend", lambda s, c, w: s.post(f"{kind.path}/{w}/suspend")))
        out.append(("suspend, then resume", lambda s, c, w: (
            s.post(f"{kind.path}/{w}/suspend"), _same_ms_list(s),
            s.post(f"{kind.path}/{w}/resume"))))
    out += [
        ("drift patch", lambda s, c, w: s.patch(f"/_sim/workloads/{w}",
                                                json={"spec": {"labels": [
                                                    {"name": "a", "value": "b"}]}})),
        ("drift patch of the phase", lambda s, c, w: s.patch(f"/_sim/workloads/{w}",
                                                             json={"actualPhase": "Failed"})),
        ("forced phase", lambda s, c, w: s.post(f"/_sim/workloads/{w}/phase",
                                                json={"phase": "Completed"})),
        ("delete (Deleting)", lambda s, c, w: s.delete(f"{kind.path}/{w}")),
    ]
    return out


def _same_ms_list(sim) -> None:
    sim.get(LIST)


CASES = [(k, name, do) for k in KINDS for name, do in _changes(k)]


@pytest.mark.parametrize("kind,change,do", CASES,
                         ids=[f"{k.type}-{name}" for k, name, _ in CASES])
def test_each_change_moves_that_items_updated_at_only(make_sim, clock, conforms, kind,
                                                      change, do):
    sim = make_sim(phase_seconds=10)  # the clock stands still: the same millisecond
    wid = _create(sim, kind, "changed")
    others = [_create(sim, k, f"other-{k.type}") for k in KINDS]
    before = _items(sim)
    r = do(sim, clock, wid)
    for resp in r if isinstance(r, tuple) else (r,):
        assert resp is None or resp.status_code < 300, resp.text
    after = _items(sim)
    assert after[wid]["updatedAt"] > before[wid]["updatedAt"], change
    assert {o: after[o] for o in others} == {o: before[o] for o in others}
    conforms("workloads.yml", "Workload", after[wid])


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.type)
def test_phases_the_clock_moves_through_move_updated_at(make_sim, clock, kind):
    """Creating -> Initializing -> Running, Stopping -> Stopped, Deleting -> gone."""
    sim = make_sim(phase_seconds=10)
    wid = _create(sim, kind, "timed")
    other = _create(sim, kind, "still")
    clock.advance(25)  # both Running
    seen = []
    for _ in range(3):
        seen.append(_items(sim)[wid]["updatedAt"])
        clock.advance(10)
    path = f"{kind.path}/{wid}"
    if kind.suspends:
        sim.post(f"{path}/suspend")
        stopping = _items(sim)[wid]
        clock.advance(10)
        stopped = _items(sim)[wid]
        assert (stopping["phase"], stopped["phase"]) == ("Stopping", "Stopped")
        assert stopped["updatedAt"] > stopping["updatedAt"] > seen[-1]
    sim.delete(path)
    deleting = _items(sim)[wid]
    clock.advance(10)
    assert wid not in _items(sim)
    gone = _items(sim, deleted="true")[wid]
    assert gone["updatedAt"] > deleting["updatedAt"]
    assert seen[0] == seen[1] == seen[2]  # nothing changed: nothing moved
    assert _items(sim)[other]["updatedAt"] < deleting["updatedAt"]

    fresh = make_sim(phase_seconds=10)
    wid = _create(fresh, kind, "new")
    stamps = []
    for phase in ("Creating", "Initializing", "Running"):
        item = _items(fresh)[wid]
        assert item["phase"] == phase
        stamps.append(item["updatedAt"])
        clock.advance(10)
    assert stamps == sorted(set(stamps))


def test_two_changes_in_one_millisecond_give_two_updated_ats(sim):
    wid = sim.create_distributed("fast")["workloadId"]
    seen = {_items(sim)[wid]["updatedAt"]}
    for n in range(5):
        sim.patch(f"/_sim/workloads/{wid}", json={"spec": {"numWorkers": n + 3}})
        seen.add(_items(sim)[wid]["updatedAt"])
    assert len(seen) == 6


def test_out_of_band_delete_and_recreate_give_a_new_item(sim):
    wid = sim.create_distributed("oob")["workloadId"]
    before = _items(sim)[wid]
    sim.delete(f"/_sim/workloads/{wid}")
    assert wid not in _items(sim)
    assert _items(sim, deleted="true")[wid]["updatedAt"] > before["updatedAt"]
    again = sim.create_distributed("oob")["workloadId"]
    assert again != wid and _items(sim)[again]["updatedAt"] > before["updatedAt"]


def test_updated_at_keeps_increasing_after_a_restart_on_the_data_file(make_sim, tmp_path):
    path = tmp_path / "data.json"
    first = make_sim(data_path=path)
    wid = first.create_distributed("kept")["workloadId"]
    for n in range(3):
        first.patch(f"/_sim/workloads/{wid}", json={"spec": {"numWorkers": n + 3}})
    before = _items(first)[wid]["updatedAt"]
    second = make_sim(data_path=path)
    assert _items(second)[wid]["updatedAt"] == before
    second.post(f"/api/v1/workloads/distributed/{wid}/suspend")
    assert _items(second)[wid]["updatedAt"] > before


def test_list_items_carry_images_requests_and_node_pools(sim, conforms):
    d = sim.create_distributed("d", nodePools=["a100", "default"], compute={
        "gpuDevicesRequest": 2, "cpuCoreRequest": 4, "cpuMemoryRequest": "8G",
        "cpuMemoryLimit": "16G"})["workloadId"]
    p = sim.create_distributed("p", compute={"gpuRequestType": "portion",
                                             "gpuPortionRequest": 0.5})["workloadId"]
    i = sim.create_di("i", worker={"image": "vllm/worker:1"}, workers=1,
                      nodePools=["h100"])["workloadId"]
    items = _items(sim)
    for item in items.values():
        conforms("workloads.yml", "Workload", item)
    assert items[d]["images"] == ["nvcr.io/nvidia/pytorch:24.05-py3"]
    assert items[d]["requestedNodePools"] == ["a100", "default"]
    assert items[d]["podsRequestedResources"] == {
        "gpu": {"request": 2}, "cpu": {"request": 4},
        "cpuMemory": {"request": "8G", "limit": "16G"}}
    assert items[p]["podsRequestedResources"] == {"gpuRequestType": "portion",
                                                  "gpu": {"request": 0.5}}
    assert items[i]["images"] == ["vllm/vllm-openai:v0.6", "vllm/worker:1"]
    assert items[i]["requestedNodePools"] == ["h100"]
    assert DISTRIBUTED_INFERENCE.containers == ("spec.leader", "spec.worker")
    # a change of what the item carries moves it, and shows
    sim.patch(f"/_sim/workloads/{d}", json={"spec": {"image": "nvcr.io/nvidia/pytorch:24.06"}})
    assert _items(sim)[d]["images"] == ["nvcr.io/nvidia/pytorch:24.06"]


def test_a_page_holding_an_integer_beyond_64_bits_is_still_listed(sim):
    """The list is written by orjson, which refuses such an integer: the page is then
    written as before, the number intact, not answered 500."""
    big = 2 ** 70
    wid = sim.create_distributed("big", compute={"gpuDevicesRequest": big})["workloadId"]
    other = sim.create_distributed("small")["workloadId"]
    items = _items(sim)
    assert items[wid]["podsRequestedResources"] == {"gpu": {"request": big}}
    assert other in items
    r = sim.get(f"/api/v1/workloads/{wid}")
    assert r.status_code == 200 and r.json()["podsRequestedResources"]["gpu"]["request"] == big


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_create_holding_what_json_cannot_is_refused_and_the_list_unharmed(sim, number):
    """NaN, Infinity and a number beyond a double are not JSON: refused with 400, as a
    server refuses them, not stored (a list page holding one could not be written)."""
    before = set(_items(sim))
    raw = ('{"name": "odd", "projectId": "7", "clusterId": "%s", "spec": {"image": "i", '
           '"compute": {"gpuDevicesRequest": %s}}}' % (CLUSTER, number))
    r = sim.post("/api/v1/workloads/distributed", content=raw,
                 headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "not valid JSON" in r.json()["message"]
    assert set(_items(sim)) == before


# --- the index against a naive oracle ------------------------------------------------

FIELDS = ["name", "projectId", "type", "phase", "clusterId", "createdAt", "submittedBy",
          "category", "projectName"]
OPS = ["==", "!=", "=@", "!@", "=^", "=$", "<=", ">="]


def _naive(sim, params: dict) -> dict:
    """What the list answered before the index: every record's item built, filtered,
    sorted by creation (then arrival), then by sortBy, cut."""
    state = sim.state
    deleted = params.get("deleted") == "true"
    source = state.store.deleted if deleted else state.store.live
    records = sorted(source.values(), key=lambda r: r.created)
    items = [list_item(state, r) for r in records]
    filters = [FILTER.match(p).groups() for p in params.get("filterBy", "").split(",") if p]
    items = [i for i in items if all(queries.match(i.get(f), op, v) for f, op, v in filters)]
    sort_by = params.get("sortBy")
    if sort_by:
        items.sort(key=lambda i: "" if i.get(sort_by) is None else str(i.get(sort_by)))
    if params.get("sortOrder") == "desc":
        items.reverse()
    start, limit = params.get("offset", 0), params.get("limit", 50)
    out: dict = {"workloads": items[start:start + limit]}
    if start + limit < len(items):
        out["next"] = start + limit
    return out


ACTIONS = st.lists(st.tuples(
    st.sampled_from(["create", "create", "create", "delete", "suspend", "drift", "tick"]),
    st.integers(0, 40), st.sampled_from(["1", "2", "3", "12"]),
    st.sampled_from([k.type for k in KINDS])), max_size=40)
QUERY = st.fixed_dictionaries({}, optional={
    "filterBy": st.lists(st.tuples(st.sampled_from(FIELDS), st.sampled_from(OPS),
                                   st.sampled_from(["1", "2", "12", "w1", "distributed",
                                                    "Running", "Stopped", "project-1",
                                                    "2023-11-14", "runai-sim", "Train"])),
                         min_size=1, max_size=2).map(
                             lambda fs: ",".join(f"{f}{o}{v}" for f, o, v in fs)),
    "sortBy": st.sampled_from(["name", "projectId", "phase", "createdAt", "type",
                               "category", "nodepool"]),
    "sortOrder": st.sampled_from(["asc", "desc"]),
    "offset": st.integers(0, 30), "limit": st.integers(1, 12),
    "deleted": st.sampled_from(["true", "false"])})


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=ACTIONS, queries_=st.lists(QUERY, min_size=1, max_size=5))
def test_pages_and_filters_answer_as_a_naive_filter_and_sort_would(make_sim, clock, actions,
                                                                  queries_):
    sim = make_sim(phase_seconds=5)
    by_type = {k.type: k for k in KINDS}
    ids: list[str] = []
    for action, n, project, kind_type in actions:
        kind = by_type[kind_type]
        if action == "create":
            r = sim.post(kind.path, json={"name": f"w{n}", "projectId": project,
                                          "clusterId": CLUSTER, **SAMPLES[kind.type]})
            if r.status_code == 202:
                ids.append(r.json()["workloadId"])
        elif action == "tick":
            clock.advance(n % 7)  # 0: the same instant (ties in creation time)
        elif ids:
            wid = ids[n % len(ids)]
            if action == "delete":
                sim.delete(f"/_sim/workloads/{wid}" if n % 2 else f"{kind.path}/{wid}")
            elif action == "suspend":
                sim.post(f"/_sim/workloads/{wid}/phase", json={"phase": "Stopped"})
            else:  # drift, the project too
                sim.patch(f"/_sim/workloads/{wid}", json={"projectId": project})
        for params in queries_:
            r = sim.get(LIST, params=params)
            assert r.status_code == 200, r.text
            assert r.json() == _naive(sim, params), params


@pytest.mark.parametrize("text", ["9" * 5000, '{"version": 1, "workloads": [' + "[" * 100_000,
                                  "{broken"])
def test_a_damaged_data_file_is_one_clear_error_naming_it(tmp_path, text):
    from click.testing import CliRunner

    from reconciler.cli import main

    path = tmp_path / "data.json"
    path.write_text(text)
    result = CliRunner().invoke(main, ["sim", "serve", "--data", str(path)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    assert str(path) in lines[0] and "damaged" in lines[0]
    assert "set_int_max_str_digits" not in result.output and "Traceback" not in result.output
