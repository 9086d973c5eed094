"""Simulator behaviour beyond single routes: phases on a controlled clock, the /_sim/
admin surface, every fault switch, persistence, the schema description's parity with
the OpenAPI files, and `sim serve` (its --help and a dropped connection over HTTP)."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

from reconciler.cli import main
from reconciler.simulator import (DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, Faults,
                                  SimulatorDataError, create_app)
from reconciler.simulator.kinds import KINDS
from tests.helpers import simserve
from tests.helpers.constants import CLUSTER
from tests.helpers.simulator import schema_scalars

D = "/api/v1/workloads/distributed"
DI = "/api/v1/workloads/distributed-inferences"


def _phase(sim, wid, path=D):
    r = sim.get(f"{path}/{wid}")
    return r.json()["actualPhase"] if r.status_code == 200 else r.status_code


# --- phases ------------------------------------------------------------------------


def test_phases_move_on_the_clock(make_sim, clock):
    sim = make_sim(phase_seconds=10)
    wid = sim.create_distributed("p")["workloadId"]
    assert _phase(sim, wid) == "Creating"
    clock.advance(10)
    assert _phase(sim, wid) == "Initializing"
    clock.advance(10)
    assert _phase(sim, wid) == "Running"

    sim.post(f"{D}/{wid}/suspend")
    got = sim.get(f"{D}/{wid}").json()
    assert (got["desiredPhase"], got["actualPhase"]) == ("Stopped", "Stopping")
    clock.advance(10)
    assert _phase(sim, wid) == "Stopped"

    sim.post(f"{D}/{wid}/resume")
    assert sim.get(f"{D}/{wid}").json()["desiredPhase"] == "Running"
    assert _phase(sim, wid) == "Resuming"
    clock.advance(10)
    assert _phase(sim, wid) == "Running"

    sim.delete(f"{D}/{wid}")
    got = sim.get(f"{D}/{wid}").json()
    assert (got["desiredPhase"], got["actualPhase"]) == ("Deleted", "Deleting")
    assert sim.post(D, json={"name": "p", "projectId": "7", "clusterId": CLUSTER,
                             "spec": {"image": "i"}}).status_code == 409
    clock.advance(10)
    assert _phase(sim, wid) == 404
    deleted = sim.get("/api/v1/workloads", params={"deleted": "true"}).json()["workloads"]
    assert deleted[0]["id"] == wid
    assert sim.create_distributed("p")["workloadId"] != wid


def test_zero_phase_seconds_shows_the_final_phase_on_the_next_read(sim):
    body = sim.create_distributed("z")
    assert body["actualPhase"] == "Creating"
    assert _phase(sim, body["workloadId"]) == "Running"


def test_suspend_resume_and_patch_of_a_deleting_workload_are_409(make_sim):
    sim = make_sim(phase_seconds=10)
    d = sim.create_distributed("d")["workloadId"]
    i = sim.create_di("i")["workloadId"]
    sim.delete(f"{D}/{d}")
    sim.delete(f"{DI}/{i}")
    assert sim.post(f"{D}/{d}/suspend").status_code == 409
    assert sim.patch(f"{DI}/{i}", json={"spec": {"replicas": 2}}).status_code == 409
    assert sim.delete(f"{D}/{d}").status_code == 202  # repeating a delete is accepted


def test_every_write_shows_in_the_next_read(make_sim, clock):
    """Reads answer from a cached serialisation of the workload: no write may leave it
    stale, whether the read came before the write or not."""
    sim = make_sim(phase_seconds=10)
    did = sim.create_distributed("w")["workloadId"]
    iid = sim.create_di("i")["workloadId"]

    def read(wid, path=D):
        return sim.get(f"{path}/{wid}").json()

    assert read(iid, DI)["spec"]["replicas"] == 1
    assert sim.patch(f"{DI}/{iid}", json={"spec": {"replicas": 3}}).json()["actualPhase"] \
        == "Updating"
    got = read(iid, DI)
    assert (got["spec"]["replicas"], got["actualPhase"]) == (3, "Updating")
    clock.advance(10)
    assert read(iid, DI)["actualPhase"] == "Running"

    assert read(did)["desiredPhase"] == "Running"
    sim.post(f"{D}/{did}/suspend")
    assert (read(did)["desiredPhase"], read(did)["actualPhase"]) == ("Stopped", "Stopping")
    sim.post(f"{D}/{did}/resume")
    assert (read(did)["desiredPhase"], read(did)["actualPhase"]) == ("Running", "Resuming")
    sim.patch(f"/_sim/workloads/{did}", json={"spec": {"numWorkers": 5}})
    assert read(did)["spec"]["numWorkers"] == 5
    sim.post(f"/_sim/workloads/{did}/phase", json={"phase": "Failed"})
    assert read(did)["actualPhase"] == "Failed"
    sim.delete(f"{D}/{did}")
    got = read(did)
    assert (got["desiredPhase"], got["actualPhase"], "deletedAt" in got) == (
        "Deleted", "Deleting", False)
    clock.advance(10)
    assert sim.get(f"{D}/{did}").status_code == 404
    gone = sim.get("/_sim/workloads").json()["deleted"]
    assert [(w["workloadId"], w["desiredPhase"], bool(w["deletedAt"])) for w in gone] == [
        (did, "Deleted", True)]


# --- admin surface -----------------------------------------------------------------


def test_request_log_records_api_requests_in_order(sim):
    sim.create_distributed("a")
    sim.get("/api/v1/workloads", params={"filterBy": "name==a"})
    sim.get("/_sim/faults")
    log = sim.get("/_sim/requests").json()
    reqs = log["requests"]
    assert [(r["method"], r["path"], r["status"]) for r in reqs] == [
        ("POST", "/api/v1/token", 200), ("POST", D, 202), ("GET", "/api/v1/workloads", 200)]
    assert reqs[0]["body"]["clientSecret"] == "***"  # secrets never land in the log
    assert reqs[1]["body"]["name"] == "a"
    assert reqs[2]["query"] == "filterBy=name%3D%3Da" and reqs[2]["body"] is None
    assert log["counts"][f"POST {D}"] == 1
    assert sim.delete("/_sim/requests").status_code == 200
    assert sim.get("/_sim/requests").json()["requests"] == []


def test_merge_patch_changes_a_workload_behind_the_clients_back(sim, conforms):
    wid = sim.create_distributed("drift", labels=[{"name": "team", "value": "a"}])["workloadId"]
    r = sim.patch(f"/_sim/workloads/{wid}", json={"spec": {"numWorkers": 9, "labels": None,
                                                           "backoffLimit": None}})
    assert r.status_code == 200
    got = sim.get(f"{D}/{wid}").json()
    conforms("distributed.yml", "DistributedWorkload", got)
    assert got["spec"]["numWorkers"] == 9
    assert "labels" not in got["spec"] and "backoffLimit" not in got["spec"]
    assert got["spec"]["image"]  # untouched
    assert sim.patch(f"/_sim/workloads/{wid}", json={"workloadId": "x"}).status_code == 400
    assert sim.patch(f"/_sim/workloads/{wid}", json=[1]).status_code == 400
    assert sim.patch("/_sim/workloads/nope", json={}).status_code == 404


def test_a_name_changed_behind_the_clients_back_moves_with_the_workload(sim):
    wid = sim.create_distributed("before")["workloadId"]
    sim.patch(f"/_sim/workloads/{wid}", json={"name": "after"})
    body = {"projectId": "7", "clusterId": CLUSTER, "spec": {"image": "i"}}
    assert sim.post(D, json={"name": "after", **body}).status_code == 409
    assert sim.post(D, json={"name": "before", **body}).status_code == 202


def test_force_a_phase(sim):
    wid = sim.create_distributed("c")["workloadId"]
    r = sim.post(f"/_sim/workloads/{wid}/phase", json={"phase": "Completed"})
    assert r.status_code == 200
    assert _phase(sim, wid) == "Completed"
    listed = sim.get("/api/v1/workloads", params={"filterBy": "phase==Completed"}).json()
    assert [w["id"] for w in listed["workloads"]] == [wid]
    sim.patch(f"/_sim/workloads/{wid}", json={"actualPhase": "Failed"})
    assert _phase(sim, wid) == "Failed"
    assert sim.post(f"/_sim/workloads/{wid}/phase", json={"phase": "Done"}).status_code == 400
    assert sim.post(f"/_sim/workloads/{wid}/phase", json={}).status_code == 400


def test_a_forced_phase_gives_way_to_suspend_and_resume(sim):
    """A forced Stopped (desiredPhase still Running) is resumed by a resume, and a forced
    Running under desiredPhase Stopped is stopped by a suspend, as the real API would."""
    wid = sim.create_distributed("f")["workloadId"]
    base = f"/api/v1/workloads/distributed/{wid}"
    sim.post(f"/_sim/workloads/{wid}/phase", json={"phase": "Stopped"})
    assert sim.get(base).json()["desiredPhase"] == "Running"
    assert sim.post(base + "/resume").status_code == 202
    assert _phase(sim, wid) == "Running"
    sim.post(base + "/suspend")
    sim.post(f"/_sim/workloads/{wid}/phase", json={"phase": "Running"})
    assert sim.post(base + "/suspend").status_code == 202
    assert _phase(sim, wid) == "Stopped"
    sim.post(base + "/resume")
    sim.post(f"/_sim/workloads/{wid}/phase", json={"phase": "Completed"})
    assert sim.post(base + "/resume").status_code == 202
    assert _phase(sim, wid) == "Completed"  # a resume of what is not stopped changes nothing


def test_out_of_band_delete_is_immediate(make_sim):
    sim = make_sim(phase_seconds=100)
    wid = sim.create_distributed("oob")["workloadId"]
    assert sim.delete(f"/_sim/workloads/{wid}").status_code == 200
    assert _phase(sim, wid) == 404
    assert [w["id"] for w in sim.get("/api/v1/workloads", params={"deleted": "true"})
            .json()["workloads"]] == [wid]
    assert sim.delete("/_sim/workloads").status_code == 200
    assert sim.get("/_sim/workloads").json() == {"workloads": [], "deleted": []}


def test_faults_can_be_read_and_set(sim):
    assert sim.get("/_sim/faults").json() == {
        "latencyMs": 0.0, "jitterMs": 0.0, "errorRate": 0.0, "commitFailRate": 0.0,
        "tokenTtl": 3600, "retryAfterSeconds": 1, "commitFailMode": "random",
        "tokenFaults": True, "errorPaths": [], "errorStatus": None}
    r = sim.put("/_sim/faults", json={"errorRate": 0.5, "tokenTtl": 60})
    assert r.status_code == 200 and r.json()["errorRate"] == 0.5
    assert sim.get("/_sim/faults").json()["tokenTtl"] == 60
    for bad in [{"errorRate": 2}, {"latencyMs": -1}, {"nope": 1}, {"tokenTtl": "x"},
                {"commitFailMode": "sometimes"}, {"errorPaths": ["/_sim/"]},
                {"errorPaths": "/api/"}, {"errorStatus": 418}, [1]]:
        r = sim.put("/_sim/faults", json=bad)
        assert r.status_code == 400, bad
        assert r.json()["message"]
    assert sim.get("/_sim/faults").json()["errorRate"] == 0.5


# --- faults ----------------------------------------------------------------------------


def test_errors_can_be_injected_on_some_paths_only_with_one_status(sim):
    """`errorPaths` and `errorStatus`: every project read answered 503, nothing else."""
    sim.put("/_sim/faults", json={"errorRate": 1.0, "errorPaths": ["/api/v1/org-unit/projects"],
                                  "errorStatus": 503}).raise_for_status()
    for _ in range(5):
        r = sim.get("/api/v1/org-unit/projects/7")
        assert r.status_code == 503 and r.headers["Retry-After"] == "1"
    assert sim.get("/api/v1/workloads").status_code == 200
    sim.put("/_sim/faults", json={"errorPaths": ["/api/v1/token"],
                                  "errorStatus": 500}).raise_for_status()
    assert sim.get("/api/v1/org-unit/projects/7").status_code == 200


def test_deleting_the_faults_puts_back_the_settings_it_started_with(make_sim):
    start = Faults(token_ttl=600, retry_after_seconds=5, latency_ms=2)
    sim = make_sim(faults=start)
    assert set(simserve.ODD_FAULTS) == set(start.to_json())  # every setting is changed
    assert sim.put("/_sim/faults", json=simserve.ODD_FAULTS).json() == simserve.ODD_FAULTS
    r = sim.delete("/_sim/faults")
    assert r.status_code == 200 and r.json() == start.to_json()
    assert sim.get("/_sim/faults").json() == start.to_json()
    sim.token = None
    assert sim.post("/api/v1/token", json={
        "grantType": "client_credentials", "clientID": DEFAULT_CLIENT_ID,
        "clientSecret": DEFAULT_CLIENT_SECRET}).json()["expiresIn"] == 600


@pytest.mark.http
@pytest.mark.parametrize("turn", ["one", "another"])
def test_no_fault_setting_leaks_from_one_test_to_the_next(http_sim, turn):
    """Whichever of the two runs second finds what the first set, if `http_sim` (and
    `simserve.reset`) left any setting behind."""
    assert http_sim.get("/_sim/faults").json() == Faults().to_json()
    token = http_sim.post("/api/v1/token", json={
        "grantType": "client_credentials", "clientID": DEFAULT_CLIENT_ID,
        "clientSecret": DEFAULT_CLIENT_SECRET})
    assert token.status_code == 200 and token.json()["expiresIn"] == 3600
    assert http_sim.put("/_sim/faults", json=simserve.ODD_FAULTS).status_code == 200


def test_latency_and_jitter_delay_api_requests_only(make_sim):
    slept = []

    async def sleep(seconds):
        slept.append(seconds)

    sim = make_sim(faults=Faults(latency_ms=200, jitter_ms=50), sleep=sleep)
    sim.get("/api/v1/workloads")  # token + list
    sim.get("/_sim/requests")
    assert len(slept) == 2
    assert all(0.2 <= s <= 0.25 for s in slept)


def test_the_request_log_says_when_each_answer_was_done(make_sim, clock):
    """`time` received and `done` answered: a client's requests span from the first
    `time` to the last `done` (what bench.py compares a refresh's requests by)."""
    async def sleep(seconds):
        clock.advance(seconds)

    sim = make_sim(faults=Faults(latency_ms=200), sleep=sleep)
    sim.get("/api/v1/workloads")  # token, then list: 200 ms each
    token, listed = sim.get("/_sim/requests").json()["requests"]
    assert token["done"] - token["time"] == pytest.approx(0.2)
    assert listed["done"] - listed["time"] == pytest.approx(0.2)
    assert listed["time"] >= token["done"]
    assert listed["done"] - token["time"] == pytest.approx(0.4)


def test_error_rate_answers_503_or_429_without_performing(make_sim, conforms):
    sim = make_sim()
    sim.token = sim.login()
    sim.put("/_sim/faults", json={"errorRate": 1.0, "retryAfterSeconds": 3})
    statuses = set()
    for n in range(20):
        r = sim.post(D, json={"name": f"e{n}", "projectId": "7", "clusterId": CLUSTER,
                              "spec": {"image": "i"}})
        statuses.add(r.status_code)
        assert r.headers["Retry-After"] == "3"
        conforms("distributed.yml", "Error", r.json())
    assert statuses == {503, 429}
    assert sim.get("/_sim/workloads").json()["workloads"] == []  # admin is never faulted
    assert [r["status"] for r in sim.get("/_sim/requests").json()["requests"]][-1] in (503, 429)
    sim.put("/_sim/faults", json={"errorRate": 0.3})
    codes = [sim.get("/api/v1/workloads").status_code for _ in range(200)]
    assert 20 < codes.count(200) < 180


def test_token_faults_can_be_switched_off(make_sim):
    sim = make_sim(faults=Faults(error_rate=1.0, token_faults=False))
    assert sim.login()
    assert sim.get("/api/v1/workloads").status_code in (503, 429)


@pytest.mark.parametrize("mode", ["500", "drop"])
def test_commit_fail_performs_the_write_then_fails(make_sim, conforms, mode):
    sim = make_sim(faults=Faults(commit_fail_rate=1.0, commit_fail_mode=mode))
    body = {"name": "cf", "projectId": "7", "clusterId": CLUSTER, "spec": {"image": "i"}}
    if mode == "500":
        r = sim.post(D, json=body)
        assert r.status_code == 500
        conforms("distributed.yml", "Error", r.json())
    else:
        with pytest.raises(httpx.RemoteProtocolError):
            sim.post(D, json=body)
    stored = sim.get("/_sim/workloads").json()["workloads"]
    assert [w["name"] for w in stored] == ["cf"]
    wid = stored[0]["workloadId"]
    reads = sim.get(f"{D}/{wid}")
    assert reads.status_code == 200  # reads are not writes
    if mode == "500":
        assert sim.delete(f"{D}/{wid}").status_code == 500
        assert sim.get(f"{D}/{wid}").status_code == 404  # but the delete happened
    log = sim.get("/_sim/requests").json()["requests"]
    assert log[1]["status"] == (500 if mode == "500" else None)


def test_commit_fail_random_mode_uses_both(make_sim):
    sim = make_sim(faults=Faults(commit_fail_rate=1.0))
    outcomes = set()
    for n in range(20):
        try:
            outcomes.add(sim.post(D, json={"name": f"r{n}", "projectId": "7",
                                           "clusterId": CLUSTER,
                                           "spec": {"image": "i"}}).status_code)
        except httpx.RemoteProtocolError:
            outcomes.add("drop")
    assert outcomes == {500, "drop"}
    assert len(sim.get("/_sim/workloads").json()["workloads"]) == 20


def test_token_ttl(make_sim, clock):
    sim = make_sim(faults=Faults(token_ttl=5))
    r = sim.post("/api/v1/token", json={"grantType": "client_credentials",
                                        "clientID": "runai-sim",
                                        "clientSecret": "runai-sim-secret"})
    assert r.json()["expiresIn"] == 5
    sim.token = r.json()["accessToken"]
    clock.advance(4)
    assert sim.get("/api/v1/workloads").status_code == 200
    clock.advance(1)
    assert sim.get("/api/v1/workloads").status_code == 401


def test_seed_makes_ids_deterministic(make_sim):
    a = make_sim(seed=42).create_distributed("x")
    b = make_sim(seed=42).create_distributed("x")
    assert a["workloadId"] == b["workloadId"]


# --- persistence -------------------------------------------------------------------


def test_data_file_survives_a_restart(make_sim, tmp_path, clock):
    path = tmp_path / "sim" / "data.json"
    first = make_sim(data_path=path)
    wid = first.create_distributed("keep")["workloadId"]
    gone = first.create_distributed("gone")["workloadId"]
    first.delete(f"{D}/{gone}")
    first.get("/api/v1/workloads")
    assert json.loads(path.read_text())["version"] == 1
    assert [p.name for p in path.parent.iterdir()] == ["data.json"]  # no temp files left
    second = make_sim(data_path=path)
    assert second.get(f"{D}/{wid}").json()["name"] == "keep"
    assert second.post(D, json={"name": "keep", "projectId": "7", "clusterId": CLUSTER,
                                "spec": {"image": "i"}}).status_code == 409
    deleted = second.get("/api/v1/workloads", params={"deleted": "true"}).json()["workloads"]
    assert [w["id"] for w in deleted] == [gone]


def test_the_data_file_keeps_every_kind_of_write(make_sim, tmp_path, clock):
    path = tmp_path / "data.json"
    first = make_sim(data_path=path, phase_seconds=10)
    iid = first.create_di("i")["workloadId"]
    did = first.create_distributed("d")["workloadId"]
    gone = first.create_distributed("gone")["workloadId"]
    first.get("/_sim/workloads")  # the store's JSON made before the writes below
    first.patch(f"{DI}/{iid}", json={"spec": {"replicas": 4}})
    first.post(f"{D}/{did}/suspend")
    first.patch(f"/_sim/workloads/{did}", json={"spec": {"numWorkers": 7}})
    first.delete(f"{D}/{gone}")
    clock.advance(5)
    assert make_sim(data_path=path, phase_seconds=10).get("/_sim/workloads").json() == \
        first.get("/_sim/workloads").json()
    clock.advance(10)
    first.get("/_sim/workloads")  # settles the deletion, which is written too
    assert make_sim(data_path=path, phase_seconds=10).get("/_sim/workloads").json() == \
        first.get("/_sim/workloads").json()
    assert [w["workloadId"] for w in first.get("/_sim/workloads").json()["deleted"]] == [gone]


def test_unreadable_data_file_is_a_clear_error(tmp_path):
    path = tmp_path / "data.json"
    path.write_text("{broken")
    with pytest.raises(SimulatorDataError, match="data.json"):
        create_app(path)
    result = CliRunner().invoke(main, ["sim", "serve", "--data", str(path)])
    assert result.exit_code == 1
    assert "cannot read simulator data" in result.output
    assert "Traceback" not in result.output


# --- the schema description matches the OpenAPI ------------------------------------


def _openapi_leaves(schema, components, path, out):
    if "$ref" in schema:
        return _openapi_leaves(components[schema["$ref"].split("/")[-1]], components, path, out)
    for sub in schema.get("allOf", ()):
        _openapi_leaves(sub, components, path, out)
    t = schema.get("type")
    if "properties" in schema or t in ("object", ["object", "null"]):
        for key, sub in schema.get("properties", {}).items():
            _openapi_leaves(sub, components, f"{path}.{key}", out)
    elif t in ("array", ["array", "null"]):
        _openapi_leaves(schema["items"], components, path + "[]", out)
    elif "allOf" not in schema:
        base = [x for x in (t if isinstance(t, list) else [t]) if x != "null"]
        out[path] = (base[0] if base else None, tuple(schema["enum"]) if "enum" in schema
                     else None, schema.get("minimum"), schema.get("maximum"),
                     schema.get("pattern", ".*"), schema.get("minLength"),
                     schema.get("maxLength"))


@pytest.mark.parametrize("file, name, ours", [
    # (Manifest's bodies hold a free-form manifest: tests/e2e/test_manifest_http.py checks
    # what is sent and answered against workloads-v2.yml.)
    *((k.openapi, k.request, k.create) for k in KINDS if not k.custom),
    *((k.openapi, k.update_request, k.update) for k in KINDS
      if k.update is not None and not k.custom),
])
def test_schema_description_matches_the_openapi(openapi, file, name, ours):
    components = openapi[file]["components"]["schemas"]
    theirs: dict = {}
    _openapi_leaves(components[name], components, "", theirs)
    mine = {p: (n.type, n.enum, n.minimum, n.maximum, n.pattern or ".*", n.min_length,
                n.max_length) for p, n in schema_scalars(ours).items()}
    assert sorted(set(theirs) ^ set(mine)) == []
    assert {p: v for p, v in theirs.items() if mine[p] != v} == {}


# --- sim serve -------------------------------------------------------------------------


def test_serve_help_documents_flags_and_default_credentials():
    result = CliRunner().invoke(main, ["sim", "serve", "--help"])
    assert result.exit_code == 0
    for flag in ("--host", "--port", "--client-id", "--client-secret", "--data",
                 "--latency-ms", "--jitter-ms", "--error-rate", "--commit-fail-rate",
                 "--token-ttl", "--phase-seconds"):
        assert flag in result.output
    assert "runai-sim" in result.output and "runai-sim-secret" in result.output


@pytest.mark.http
def test_served_drop_closes_the_connection_and_logs_each_request(http_sim, served):
    _, log_path, data_path = served
    http_sim.put("/_sim/faults", json={"commitFailRate": 1.0, "commitFailMode": "drop"})
    try:
        with pytest.raises(httpx.RemoteProtocolError):
            http_sim.post(D, json={"name": "dropped", "projectId": "7", "clusterId": CLUSTER,
                                   "spec": {"image": "i"}})
    finally:
        http_sim.put("/_sim/faults", json={"commitFailRate": 0, "commitFailMode": "random"})
    names = [w["name"] for w in http_sim.get("/_sim/workloads").json()["workloads"]]
    assert names == ["dropped"]
    assert "dropped" in data_path.read_text()
    log = log_path.read_text()
    assert f'"POST {D} HTTP/1.1"' in log
    assert "injected commit failure: connection dropped" in log
    assert "Traceback" not in log
