"""`export.spec_from_live`: a workload created through the simulator (which fills the
server's defaults and generated values in) comes back as exactly the spec that was
POSTed, less the values equal to a server default; secrets are withheld."""

from __future__ import annotations

import asyncio
import copy

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler import export, kinds, masking
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
from tests.helpers.export_bodies import CLUSTER, EXAMPLES, KIND_NAMES, bodies, split


class _Sim:
    """An in-process simulator (httpx's ASGI transport) with a token."""

    def __init__(self):
        self.runner = asyncio.Runner()
        self.client = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(seed=1)),
                                        base_url="http://sim")
        token = self.send("POST", "/api/v1/token", json={
            "grantType": "client_credentials", "clientID": DEFAULT_CLIENT_ID,
            "clientSecret": DEFAULT_CLIENT_SECRET}).json()["accessToken"]
        self.client.headers["Authorization"] = f"Bearer {token}"

    def send(self, method: str, path: str, **kw) -> httpx.Response:
        return self.runner.run(self.client.request(method, path, **kw))

    def live(self, kind: str, body: dict, *, suspend: bool = False) -> dict:
        """The GET answer for `body` once POSTed (and suspended)."""
        path = kinds.get(kind).api_path
        created = self.send("POST", path, json=body)
        assert created.status_code == 202, created.text
        wid = created.json()["workloadId"]
        if suspend:
            assert self.send("POST", f"{path}/{wid}/suspend").status_code == 202
        got = self.send("GET", f"{path}/{wid}")
        assert got.status_code == 200, got.text
        self.send("DELETE", f"/_sim/workloads/{wid}")
        return got.json()

    def close(self) -> None:
        self.runner.run(self.client.aclose())
        self.runner.close()


@pytest.fixture(scope="module")
def sim():
    s = _Sim()
    yield s
    s.close()


def _expected(kind: str, marked: dict, suspend: bool) -> tuple[dict, dict]:
    posted, expected = split(marked)
    doc = {"kind": kind, "name": expected["name"], "projectId": expected["projectId"],
           "clusterId": expected["clusterId"]}
    if suspend:
        doc["desiredPhase"] = "Stopped"
    doc.update({k: expected[k] for k in kinds.get(kind).body_keys if k in expected})
    return posted, doc


def _assert_same(got, want, path="") -> None:
    """Equal, lists and the document's keys in the same order (the API's)."""
    assert got == want, path
    if isinstance(want, dict):
        assert list(got) == list(want), path
        for key in want:
            _assert_same(got[key], want[key], f"{path}.{key}")
    elif isinstance(want, list):
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same(g, w, f"{path}[{i}]")


@pytest.mark.parametrize("kind", KIND_NAMES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_created_workload_exports_as_what_was_posted(kind, sim, data):
    marked, suspend = data.draw(bodies(kind))
    posted, want = _expected(kind, marked, suspend)
    live = sim.live(kind, posted, suspend=suspend)
    before = copy.deepcopy(live)
    got = export.spec_from_live(kind, live)
    assert live == before  # the GET answer is not changed
    _assert_same(got, want)
    assert export.withheld(got) == []


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_the_fixed_examples_export_without_defaults_and_secrets(kind, sim):
    marked, suspend = EXAMPLES[kind]
    posted, want = _expected(kind, marked, suspend)
    got = export.spec_from_live(kind, sim.live(kind, posted, suspend=suspend))
    secrets = export.withheld(got)
    assert secrets and all("HF_TOKEN" in path for path in secrets)
    assert "hf_s3cr3t" not in repr(got)
    assert got != want  # the secret is withheld ...
    assert export.spec_from_live(kind, sim.live(kind, posted, suspend=suspend),
                                 include_secrets=True) == want  # ... unless asked for


def test_a_secret_value_becomes_the_placeholder_and_is_listed():
    live = {"name": "t", "projectId": "7", "clusterId": CLUSTER, "desiredPhase": "Running",
            "spec": {"image": "python", "environmentVariables": [
                {"name": "DB_PASSWORD", "value": "hunter2"},
                {"name": "API_KEY", "secret": {"name": "api", "key": "key"}},
                {"name": "MODE", "value": "fast"}]}}
    got = export.spec_from_live("Training", live)
    assert got["spec"]["environmentVariables"] == [
        {"name": "DB_PASSWORD", "value": masking.SECRET_PLACEHOLDER},
        {"name": "API_KEY", "secret": {"name": "api", "key": "key"}},  # a reference: kept
        {"name": "MODE", "value": "fast"}]
    assert export.withheld(got) == ["spec.environmentVariables[DB_PASSWORD].value"]


def test_a_known_project_name_is_written_instead_of_the_id():
    live = {"name": "w", "projectId": 7, "clusterId": CLUSTER, "spec": {"image": "python"}}
    assert export.spec_from_live("Workspace", live) == {
        "kind": "Workspace", "name": "w", "projectId": "7", "clusterId": CLUSTER,
        "spec": {"image": "python"}}
    named = export.spec_from_live("Workspace", live, project_name="team-a")
    assert list(named) == ["kind", "name", "project", "clusterId", "spec"]
    assert named["project"] == "team-a"
    assert export.relative_path(named) == "team-a/Workspace/w.yaml"


@pytest.mark.parametrize("kind, live, reason", [
    ("Training", {"desiredPhase": "Deleted", "actualPhase": "Deleting"}, "deleted"),
    ("Inference", {"desiredPhase": "Running", "deletedAt": "2026-01-01T00:00:00Z"}, "deleted"),
    ("Training", {"desiredPhase": "Running", "actualPhase": "Completed"}, "completed"),
    ("DistributedTraining", {"desiredPhase": "Running", "actualPhase": "Completed"},
     "completed"),
    ("Workspace", {"desiredPhase": "Stopped", "actualPhase": "Stopped"}, None),
    ("Training", {"desiredPhase": "Running", "actualPhase": "Failed"}, None),
])
def test_what_is_skipped(kind, live, reason):
    assert export.skip_reason(kind, live) == reason


def test_a_field_the_user_set_to_another_value_than_the_default_is_kept():
    live = {"name": "i", "projectId": "7", "clusterId": CLUSTER, "spec": {
        "image": "app:latest", "imagePullPolicy": "IfNotPresent",
        "autoscaling": {"minReplicas": 0, "maxReplicas": 1, "initialReplicas": 0}}}
    assert export.spec_from_live("Inference", live)["spec"] == {
        "image": "app:latest", "imagePullPolicy": "IfNotPresent",
        "autoscaling": {"minReplicas": 0, "initialReplicas": 0}}


# --- export --defaults ------------------------------------------------------------------

def _docs() -> dict[str, dict]:
    def doc(kind, name, project, **spec):
        return {"kind": kind, "name": name, "project": project, "clusterId": CLUSTER,
                "spec": {"image": "python", **spec}}

    team = {"name": "team", "value": "ml"}
    secret = {"name": "HF_TOKEN", "value": masking.SECRET_PLACEHOLDER}
    return {
        "p7/Training/a.yaml": doc("Training", "a", "p7", labels=[{"name": "x", "value": "1"}, team],
                                  nodePools=["h100", "a100"], environmentVariables=[secret]),
        "p7/Training/b.yaml": doc("Training", "b", "p7", labels=[team], nodePools=["h100", "a100"],
                                  environmentVariables=[secret, {"name": "A", "value": "1"}]),
        "p7/Workspace/c.yaml": doc("Workspace", "c", "p7", labels=[team],
                                   nodePools=["a100", "h100"]),
        "p8/Workspace/d.yaml": doc("Workspace", "d", "p8", labels=[{"name": "team", "value": "cv"}]),
    }


def _merged(path: str, doc: dict, shared: dict[str, dict]) -> dict:
    """`doc` merged over its folders' defaults, as the spec loader merges them."""
    from reconciler.desired.defaults import merge

    parts = path.split("/")[:-1]
    chain = [f"{'/'.join(parts[:n])}/_defaults.yaml" if n else "_defaults.yaml"
             for n in range(len(parts) + 1)]
    lower = None
    for name in chain:  # outermost first: each deeper file over what is above it
        if name in shared:
            lower = shared[name] if lower is None else merge(shared[name], lower, {})
    return doc if lower is None else merge(doc, lower, {})


def _by_key(doc):
    """`doc` with its keyed lists in key order (the diff compares them as maps)."""
    if isinstance(doc, dict):
        return {k: (sorted(map(_by_key, v), key=lambda i: kinds.item_key(k, i))
                    if isinstance(v, list) and v and kinds.item_key(k, v[0]) is not None
                    else _by_key(v)) for k, v in doc.items()}
    return doc


def test_folder_defaults_take_what_a_folder_shares_and_merge_back_to_each_spec():
    docs = _docs()
    left, shared = export.factor_defaults(docs)
    assert shared == {
        "_defaults.yaml": {"clusterId": CLUSTER},
        "p7/_defaults.yaml": {"project": "p7", "spec": {"labels": [{"name": "team", "value": "ml"}]}},
        "p7/Training/_defaults.yaml": {"spec": {"nodePools": ["h100", "a100"]}},
    }
    assert left["p7/Training/b.yaml"] == {"kind": "Training", "name": "b", "spec": {
        "image": "python",  # the secret stays where export lists it
        "environmentVariables": [{"name": "HF_TOKEN", "value": masking.SECRET_PLACEHOLDER},
                                 {"name": "A", "value": "1"}]}}
    assert left["p8/Workspace/d.yaml"]["project"] == "p8"  # one spec: no folder defaults
    for path, doc in left.items():
        assert _by_key(_merged(path, doc, shared)) == _by_key(docs[path]), path


def test_folder_defaults_go_only_where_allowed():
    docs = _docs()
    left, shared = export.factor_defaults(docs, folders=["p7/Training"])
    assert list(shared) == ["p7/Training/_defaults.yaml"]
    assert shared["p7/Training/_defaults.yaml"]["project"] == "p7"
    assert left["p7/Workspace/c.yaml"] == docs["p7/Workspace/c.yaml"]
    for path, doc in left.items():
        assert _by_key(_merged(path, doc, shared)) == _by_key(docs[path]), path


def test_folder_defaults_of_the_organisation_take_its_cluster_but_no_project():
    # Two Run:ai policies of one project in its department's folder: the cluster is
    # shared, the project stays in each (a project spec beside them would not take it).
    docs = {f"organisation/research/team-a.policy-{t}.yaml": {
        "kind": "Policy", "workloadType": t, "scope": "project", "project": "team-a",
        "clusterId": CLUSTER} for t in ("training", "workspace")}
    left, shared = export.factor_defaults(docs)
    assert shared == {"_defaults.yaml": {"clusterId": CLUSTER}}
    assert all(doc["project"] == "team-a" for doc in left.values())
