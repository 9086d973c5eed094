"""The simulator's API routes: tokens, auth, create/get/delete/suspend/resume/PATCH, list,
errors and server-side defaults, each response checked against the OpenAPI schemas.
Tests taking `any_sim` run in process and over real HTTP against `sim serve`."""

from __future__ import annotations

import base64
import json

import pytest

from tests.helpers.constants import CLUSTER

D = "/api/v1/workloads/distributed"
DI = "/api/v1/workloads/distributed-inferences"


def _claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


# --- tokens and auth ---------------------------------------------------------------


def test_client_credentials_token_is_a_jwt_with_expiry(sim, clock, conforms):
    r = sim.post("/api/v1/token", json={"grantType": "client_credentials",
                                        "clientID": "runai-sim", "clientSecret": "runai-sim-secret"})
    assert r.status_code == 200
    conforms("tokens.yml", "TokenResponse", r.json())
    assert r.json()["expiresIn"] == 3600
    assert _claims(r.json()["accessToken"])["exp"] == int(clock.now) + 3600


def test_app_token_keys_match_case_insensitively(any_sim):
    r = any_sim.post("/api/v1/token", json={"grantType": "app_token", "AppId": "runai-sim",
                                            "AppSecret": "runai-sim-secret"})
    assert r.status_code == 200
    assert any_sim.get("/api/v1/workloads",
                       headers={"Authorization": "Bearer " + r.json()["accessToken"]}
                       ).status_code == 200


@pytest.mark.parametrize("body, status", [
    ({"grantType": "client_credentials", "clientID": "runai-sim", "clientSecret": "nope"}, 401),
    ({"grantType": "app_token", "appID": "other", "appSecret": "runai-sim-secret"}, 401),
    ({"clientID": "runai-sim", "clientSecret": "runai-sim-secret"}, 400),
    ({"grantType": "password", "username": "u", "password": "p"}, 400),
    (["not", "an", "object"], 400),
])
def test_bad_token_requests(any_sim, conforms, body, status):
    r = any_sim.post("/api/v1/token", json=body)
    assert r.status_code == status
    conforms("tokens.yml", "Error", r.json())


def test_custom_credentials(make_sim):
    s = make_sim(client_id="ci", client_secret="s3cret")
    assert s.post("/api/v1/token", json={"grantType": "client_credentials", "clientID": "ci",
                                         "clientSecret": "s3cret"}).status_code == 200
    assert s.post("/api/v1/token", json={"grantType": "client_credentials",
                                         "clientID": "runai-sim",
                                         "clientSecret": "runai-sim-secret"}).status_code == 401


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer abc.def.ghi", "Basic xyz"])
def test_api_needs_a_valid_bearer_token(any_sim, conforms, header):
    headers = {} if header is None else {"Authorization": header}
    for method, path in [("GET", "/api/v1/workloads"), ("POST", D), ("GET", D + "/x"),
                         ("DELETE", DI + "/x"), ("POST", D + "/x/suspend")]:
        r = any_sim.request(method, path, auth=False, headers=dict(headers), json={})
        assert r.status_code == 401, (method, path)
        conforms("distributed.yml", "Error", r.json())
        if header:
            assert header.split(" ")[-1] not in r.json()["message"] or header == "Bearer"


def test_token_from_another_secret_is_refused(make_sim):
    other = make_sim(client_secret="different")
    token = other.post("/api/v1/token", json={"grantType": "client_credentials",
                                              "clientID": "runai-sim",
                                              "clientSecret": "different"}).json()["accessToken"]
    sim = make_sim()
    r = sim.get("/api/v1/workloads", headers={"Authorization": f"Bearer {token}"})
    assert r.status_code == 401


def test_expired_token_is_refused(sim, clock):
    sim.token = sim.login()
    assert sim.get("/api/v1/workloads").status_code == 200
    clock.advance(3600)
    r = sim.get("/api/v1/workloads")
    assert r.status_code == 401
    assert "expired" in r.json()["message"]


# --- distributed -------------------------------------------------------------------


def test_create_distributed_returns_full_workload(any_sim, conforms):
    body = any_sim.create_distributed("bert-ddp", compute={"gpuDevicesRequest": 8})
    conforms("distributed.yml", "DistributedWorkload", body)
    assert body["name"] == body["requestedName"] == "bert-ddp"
    assert body["projectId"] == "7" and body["clusterId"] == CLUSTER
    assert body["desiredPhase"] == "Running" and body["actualPhase"] == "Creating"
    assert body["createdBy"] == "runai-sim" and body["departmentId"]
    assert body["spec"]["compute"] == {"gpuDevicesRequest": 8}
    got = any_sim.get(f"{D}/{body['workloadId']}")
    assert got.status_code == 200
    conforms("distributed.yml", "DistributedWorkload", got.json())
    assert got.json()["actualPhase"] == "Running"
    assert got.json()["spec"] == body["spec"]


def test_distributed_defaults_fill_only_unsent_fields(sim, conforms):
    body = sim.create_distributed(
        "a", image="repo/img:latest", backoffLimit=2,
        annotations=[{"name": "a", "value": "b"}],
        storage={"pvc": [{"path": "/data", "claimInfo": {"size": "10G"}},
                         {"path": "/old", "existingPvc": True, "claimName": "mine"}],
                 "hostPath": [{"path": "/h", "mountPath": "/m"}]},
        security={"runAsNonRoot": True},
        probes={"readiness": {"handler": {"httpGet": {"port": 80}}}})
    conforms("distributed.yml", "DistributedWorkload", body)
    spec = body["spec"]
    assert spec["backoffLimit"] == 2  # sent: untouched
    assert spec["autoDeletionTimeAfterCompletionSeconds"] == 2592000
    assert spec["slotsPerWorker"] == 1 and spec["sshAuthMountPath"] == "/root/.ssh"
    assert spec["imagePullPolicy"] == "Always"
    assert spec["annotations"] == [{"name": "a", "value": "b", "exclude": False}]
    new, old = spec["storage"]["pvc"]
    assert new["claimName"].startswith("a-") and new["existingPvc"] is False
    assert new["claimInfo"]["accessModes"] == {"readWriteOnce": True, "readOnlyMany": False,
                                               "readWriteMany": False}
    assert new["claimInfo"]["volumeMode"] == "Filesystem"
    assert old["claimName"] == "mine" and "claimInfo" not in old
    assert spec["storage"]["hostPath"][0]["readOnly"] is True
    assert spec["security"] == {"runAsNonRoot": True, "uidGidSource": "fromTheImage",
                                "hostIpc": False, "hostNetwork": False}
    assert spec["probes"]["readiness"]["handler"]["httpGet"] == {"port": 80, "path": "/",
                                                                 "scheme": "HTTP"}


@pytest.mark.parametrize("image, policy", [("img:1.0", "IfNotPresent"), ("img", "IfNotPresent"),
                                           ("reg:5000/img:latest", "Always"),
                                           ("reg:5000/img", "IfNotPresent")])
def test_image_pull_policy_default_follows_the_tag(sim, image, policy):
    assert sim.create_distributed("x", image=image)["spec"]["imagePullPolicy"] == policy


def test_sent_image_pull_policy_is_kept(sim):
    body = sim.create_distributed("x", image="i:latest", imagePullPolicy="Never")
    assert body["spec"]["imagePullPolicy"] == "Never"


def test_master_spec_gets_container_defaults(sim, conforms):
    r = sim.post(D, json={"name": "m", "projectId": "7", "clusterId": CLUSTER,
                          "masterSpecSameAsWorker": False,
                          "spec": {"image": "w:1", "numWorkers": 1},
                          "masterSpec": {"image": "m:latest"}})
    assert r.status_code == 202
    conforms("distributed.yml", "DistributedWorkload", r.json())
    master = r.json()["masterSpec"]
    assert master["imagePullPolicy"] == "Always" and master["backoffLimit"] == 6


def test_use_given_name_as_prefix_appends_a_suffix(any_sim):
    r = any_sim.post(D, json={"name": "job", "useGivenNameAsPrefix": True, "projectId": "7",
                              "clusterId": CLUSTER, "spec": {"image": "i:1"}})
    assert r.status_code == 202
    body = r.json()
    assert body["requestedName"] == "job"
    assert body["name"].startswith("job-") and len(body["name"]) > len("job-")
    assert "useGivenNameAsPrefix" not in body


def test_duplicate_name_in_project_is_409(any_sim, conforms):
    any_sim.create_distributed("dup")
    body = {"name": "dup", "projectId": "7", "clusterId": CLUSTER, "spec": {"image": "i:1"}}
    r = any_sim.post(D, json=body)
    assert r.status_code == 409
    conforms("distributed.yml", "Error", r.json())
    assert "dup" in r.json()["message"]
    r = any_sim.post(DI, json={**body, "spec": {"leader": {"image": "i:1"}}})
    assert r.status_code == 409  # names are unique per project across kinds
    assert any_sim.post(D, json={**body, "projectId": "8"}).status_code == 202


@pytest.mark.parametrize("change, field, rule", [
    ({"projectId": None}, "projectId", "required"),
    ({"name": ""}, "name", "min"),
    ({"clusterId": "not-a-uuid"}, "clusterId", None),
    ({"spec": {"image": "i", "numWorkers": 0}}, "spec.numWorkers", "min"),
    ({"spec": {"image": "i", "numWorkers": "two"}}, "spec.numWorkers", None),
    ({"spec": {"image": "i", "distributedFramework": "Torch"}}, "spec.distributedFramework",
     "options"),
    ({"spec": {"image": "i", "imagePullPolcy": "Always"}}, "spec.imagePullPolcy", None),
    ({"spec": {"image": "i", "compute": {"cpuMemoryRequest": "lots"}}},
     "spec.compute.cpuMemoryRequest", None),
    ({"spec": {"image": "i", "ports": [{"container": 70000}]}}, "spec.ports[0].container", "max"),
    ({"spec": {"image": "i", "labels": [{"name": "x" * 64}]}}, "spec.labels[0].name", "max"),
    ({"spec": {"numWorkers": 1}}, "spec.image", "required"),
    ({"masterSpecSameAsWorker": True, "masterSpec": {"image": "m"}}, "masterSpec", None),
    ({"extra": 1}, "extra", None),
])
def test_invalid_distributed_create_is_400_naming_the_field(any_sim, conforms, change, field,
                                                            rule):
    body = {"name": "bad", "projectId": "7", "clusterId": CLUSTER, "spec": {"image": "i:1"}}
    body.update(change)
    body = {k: v for k, v in body.items() if v is not None}
    r = any_sim.post(D, json=body)
    assert r.status_code == 400, r.text
    conforms("distributed.yml", "SubmissionErrorV2", r.json())
    issues = r.json()["complianceIssues"]
    assert [i["field"] for i in issues] == [field]
    assert issues[0].get("rule") == rule
    assert field in r.json()["message"]
    assert any_sim.get("/api/v1/workloads").json()["workloads"] == []


def test_invalid_json_body_is_400(any_sim, conforms):
    r = any_sim.post(D, content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    conforms("distributed.yml", "SubmissionErrorV2", r.json())
    r = any_sim.post(DI, content=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status_code == 400
    conforms("distributed-inferences.yml", "Error", r.json())


def test_unknown_ids_are_404(any_sim, conforms):
    wid = "00000000-0000-4000-8000-000000000000"
    for method, path in [("GET", f"{D}/{wid}"), ("DELETE", f"{D}/{wid}"),
                         ("POST", f"{D}/{wid}/suspend"), ("POST", f"{D}/{wid}/resume"),
                         ("GET", f"{DI}/{wid}"), ("PATCH", f"{DI}/{wid}"),
                         ("DELETE", f"{DI}/{wid}"), ("GET", f"/api/v1/workloads/{wid}")]:
        r = any_sim.request(method, path, json={"spec": {"replicas": 1}})
        assert r.status_code == 404, (method, path)
        conforms("distributed.yml", "Error", r.json())


def test_a_workload_is_not_found_under_another_kind(sim):
    d = sim.create_distributed("d")
    i = sim.create_di("i")
    assert sim.get(f"{DI}/{d['workloadId']}").status_code == 404
    assert sim.get(f"{D}/{i['workloadId']}").status_code == 404


def test_distributed_inference_has_no_suspend(sim, conforms):
    i = sim.create_di("i")
    r = sim.post(f"{DI}/{i['workloadId']}/suspend")
    assert r.status_code in (404, 405)
    conforms("distributed-inferences.yml", "Error", r.json())
    r = sim.patch(f"{D}/{sim.create_distributed('d')['workloadId']}", json={})
    assert r.status_code == 405
    conforms("distributed.yml", "Error", r.json())


def test_delete_suspend_resume_answer_http_response(any_sim, conforms):
    wid = any_sim.create_distributed("s")["workloadId"]
    for action in ("suspend", "resume"):
        r = any_sim.post(f"{D}/{wid}/{action}")
        assert r.status_code == 202
        conforms("distributed.yml", "HttpResponse", r.json())
    r = any_sim.delete(f"{D}/{wid}")
    assert r.status_code == 202
    conforms("distributed.yml", "HttpResponse", r.json())
    assert any_sim.get(f"{D}/{wid}").status_code == 404


# --- distributed inference -----------------------------------------------------------


def test_create_distributed_inference_with_defaults(any_sim, conforms):
    body = any_sim.create_di("serve", workers=1, servingPort={"port": 8000},
                             worker={"image": "vllm/vllm-openai:latest"})
    conforms("distributed-inferences.yml", "DistributedInference", body)
    spec = body["spec"]
    assert spec["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert spec["startupPolicy"] == "LeaderCreated"
    assert spec["workers"] == 1 and spec["replicas"] == 1
    assert spec["servingPort"]["protocol"] == "http"
    assert spec["servingPort"]["authorizationType"] == "public"
    assert spec["servingPort"]["exposeExternally"] is True
    assert spec["servingPort"]["exposedUrl"].startswith("https://")
    assert spec["leader"]["imagePullPolicy"] == "IfNotPresent"
    assert spec["worker"]["imagePullPolicy"] == "Always"
    got = any_sim.get(f"{DI}/{body['workloadId']}")
    conforms("distributed-inferences.yml", "DistributedInference", got.json())


@pytest.mark.parametrize("spec, field", [
    ({"leader": {"image": "i"}, "replicas": 1001}, "spec.replicas"),
    ({"leader": {"image": "i"}, "workers": 2}, "spec.worker"),
    ({}, "spec.leader"),
    ({"leader": {"image": "i", "security": {"hostIpc": True}}}, "spec.leader.security.hostIpc"),
    ({"leader": {"image": "i"}, "restartPolicy": "Always"}, "spec.restartPolicy"),
    ({"leader": {"image": "i", "storage": {"nfs": []}}}, "spec.leader.storage.nfs"),
])
def test_invalid_distributed_inference_create_is_400_error(any_sim, conforms, spec, field):
    r = any_sim.post(DI, json={"name": "bad", "projectId": "7", "clusterId": CLUSTER,
                               "spec": spec})
    assert r.status_code == 400, r.text
    conforms("distributed-inferences.yml", "Error", r.json())
    assert field in r.json()["message"]
    assert "complianceIssues" not in r.json()


def test_patch_replicas(any_sim, conforms):
    wid = any_sim.create_di("p")["workloadId"]
    r = any_sim.patch(f"{DI}/{wid}", json={"spec": {"replicas": 4}})
    assert r.status_code == 202
    conforms("distributed-inferences.yml", "DistributedInference", r.json())
    assert r.json()["spec"]["replicas"] == 4 and r.json()["actualPhase"] == "Updating"
    got = any_sim.get(f"{DI}/{wid}").json()
    assert got["spec"]["replicas"] == 4 and got["actualPhase"] == "Running"


@pytest.mark.parametrize("body", [{"spec": {"replicas": -1}}, {"spec": {"image": "x"}},
                                  {"spec": {"replicas": "4"}}, [1]])
def test_patch_only_takes_valid_replicas(sim, conforms, body):
    wid = sim.create_di("p")["workloadId"]
    r = sim.patch(f"{DI}/{wid}", json=body)
    assert r.status_code == 400
    conforms("distributed-inferences.yml", "Error", r.json())
    assert sim.get(f"{DI}/{wid}").json()["spec"]["replicas"] == 1


# --- list ------------------------------------------------------------------------------


def test_list_items_have_the_workload_shape(any_sim, conforms):
    d = any_sim.create_distributed("d")
    i = any_sim.create_di("i")
    r = any_sim.get("/api/v1/workloads")
    assert r.status_code == 200
    items = r.json()["workloads"]
    for item in items:
        conforms("workloads.yml", "Workload", item)
    assert {(w["id"], w["type"], w["phase"]) for w in items} == {
        (d["workloadId"], "distributed", "Running"),
        (i["workloadId"], "distributed-inference", "Running")}
    detailed = any_sim.get(f"/api/v1/workloads/{d['workloadId']}")
    assert detailed.status_code == 200
    conforms("workloads.yml", "WorkloadDetailed", detailed.json())
    assert detailed.json()["name"] == "d"


def test_list_filters(sim):
    a = sim.create_distributed("a", project="7")
    b = sim.create_distributed("b", project="8")
    c = sim.create_di("c", project="7")
    sim.post(f"{D}/{a['workloadId']}/suspend")

    def ids(filter_by):
        r = sim.get("/api/v1/workloads", params={"filterBy": filter_by})
        assert r.status_code == 200, r.text
        return {w["name"] for w in r.json()["workloads"]}

    assert ids("name==a") == {"a"}
    assert ids("name!=a") == {"b", "c"}
    assert ids("projectId==7") == {"a", "c"}
    assert ids("projectId==7,type==distributed") == {"a"}
    assert ids("type==distributed-inference") == {"c"}
    assert ids(f"clusterId=={CLUSTER},name==b") == {"b"}
    assert ids("phase==Stopped") == {"a"}
    assert ids("phase!=Stopped") == {"b", "c"}
    assert ids("name=^a") == {"a"}
    assert ids("name==zzz") == set()
    assert b and c


def test_list_filters_on_who_and_when(sim, clock):
    sim.create_distributed("old")
    clock.advance(86400)
    sim.token = None  # a day later: a new token
    sim.create_di("new")

    def names(filter_by):
        r = sim.get("/api/v1/workloads", params={"filterBy": filter_by})
        assert r.status_code == 200, r.text
        return {w["name"] for w in r.json()["workloads"]}

    assert names("submittedBy==runai-sim") == {"old", "new"}
    assert names("submittedBy!=runai-sim") == set()
    assert names("createdAt=^2023-11-14") == {"old"}
    assert names("createdAt>=2023-11-15") == {"new"}
    assert names("createdAt>=2023-11-15,type==distributed") == set()


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 501}, {"limit": "x"},
                                    {"offset": -1}, {"filterBy": "id==1"},
                                    {"filterBy": "name~x"}, {"deleted": "maybe"}])
def test_bad_list_parameters_are_400(any_sim, conforms, params):
    r = any_sim.get("/api/v1/workloads", params=params)
    assert r.status_code == 400
    conforms("workloads.yml", "Error", r.json())


def test_list_pages_with_limit_offset_and_next(sim):
    for n in range(7):
        sim.create_distributed(f"w{n}")
    seen, offset = [], 0
    while True:
        body = sim.get("/api/v1/workloads", params={"limit": 3, "offset": offset}).json()
        seen += [w["name"] for w in body["workloads"]]
        if "next" not in body:
            break
        offset = body["next"]
    assert seen == [f"w{n}" for n in range(7)]
    assert len(sim.get("/api/v1/workloads").json()["workloads"]) == 7
    assert [w["name"] for w in sim.get("/api/v1/workloads", params={
        "sortBy": "name", "sortOrder": "desc", "limit": 2}).json()["workloads"]] == ["w6", "w5"]


def test_default_limit_is_50_and_500_is_allowed(sim):
    for n in range(51):
        sim.create_distributed(f"w{n}", image="i:1")
    assert len(sim.get("/api/v1/workloads").json()["workloads"]) == 50
    assert len(sim.get("/api/v1/workloads", params={"limit": 500}).json()["workloads"]) == 51


def test_deleted_workloads_are_listed_only_with_deleted_true(any_sim, conforms):
    gone = any_sim.create_distributed("gone")
    any_sim.create_distributed("kept")
    any_sim.delete(f"{D}/{gone['workloadId']}")
    live = any_sim.get("/api/v1/workloads").json()["workloads"]
    assert [w["name"] for w in live] == ["kept"]
    deleted = any_sim.get("/api/v1/workloads", params={"deleted": "true"}).json()["workloads"]
    assert [w["id"] for w in deleted] == [gone["workloadId"]]
    conforms("workloads.yml", "Workload", deleted[0])
    assert deleted[0]["deletedAt"]
    assert any_sim.get(f"/api/v1/workloads/{gone['workloadId']}").status_code == 404
    # its name is free again
    assert any_sim.create_distributed("gone")["workloadId"] != gone["workloadId"]
