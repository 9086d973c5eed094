"""Fixtures for the simulator tests: a controllable clock, in-process and HTTP simulators,
and validators built from NVIDIA's OpenAPI files (../shared/runai-api)."""

from __future__ import annotations

import asyncio

import httpx
import jsonschema
import pytest

from tests.helpers import simserve
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
from reconciler.simulator.kinds import KINDS
from tests.helpers.constants import CLUSTER


class Clock:
    def __init__(self, now: float = 1_700_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Sim:
    """Synchronous access to a simulator, in process or over HTTP, with a token."""

    def __init__(self, send, app=None):
        self._send = send
        self.app = app
        self.token = None

    @property
    def state(self):
        return self.app.state.sim

    def request(self, method: str, path: str, *, auth: bool = True, **kw) -> httpx.Response:
        headers = kw.pop("headers", {})
        if auth and not path.startswith("/_sim/") and path != "/api/v1/token":
            if self.token is None:
                self.token = self.login()
            headers.setdefault("Authorization", f"Bearer {self.token}")
        return self._send(method, path, headers=headers, **kw)

    def login(self) -> str:
        r = self._send("POST", "/api/v1/token", json={
            "grantType": "client_credentials", "clientID": DEFAULT_CLIENT_ID,
            "clientSecret": DEFAULT_CLIENT_SECRET})
        assert r.status_code == 200, r.text
        return r.json()["accessToken"]

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, **kw):
        return self.request("POST", path, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def patch(self, path, **kw):
        return self.request("PATCH", path, **kw)

    def put(self, path, **kw):
        return self.request("PUT", path, **kw)

    def create_distributed(self, name="bert", project="7", **spec):
        body = {"name": name, "projectId": project, "clusterId": CLUSTER,
                "spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3",
                         "distributedFramework": "PyTorch", "numWorkers": 2, **spec}}
        r = self.post("/api/v1/workloads/distributed", json=body)
        assert r.status_code == 202, r.text
        return r.json()

    def create_di(self, name="llama", project="7", **spec):
        body = {"name": name, "projectId": project, "clusterId": CLUSTER,
                "spec": {"leader": {"image": "vllm/vllm-openai:v0.6"}, **spec}}
        r = self.post("/api/v1/workloads/distributed-inferences", json=body)
        assert r.status_code == 202, r.text
        return r.json()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def make_sim(clock):
    """make_sim(**create_app kwargs) -> Sim driven in process through httpx.ASGITransport."""
    runners = []

    def make(**kwargs) -> Sim:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("seed", 1)
        app = create_app(**kwargs)
        runner = asyncio.Runner()
        runners.append(runner)
        client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://sim")
        runners.append(client)

        def send(method, path, **kw):
            return runner.run(client.request(method, path, **kw))

        sim = Sim(send, app)
        sim.run = runner.run
        sim.client = client
        return sim

    yield make
    for runner, client in zip(runners[::2], runners[1::2]):
        runner.run(client.aclose())
        runner.close()


@pytest.fixture
def sim(make_sim) -> Sim:
    return make_sim()


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    """A `runai-reconcile sim serve` subprocess: (base_url, log_path, data_path)."""
    tmp = tmp_path_factory.mktemp("served")
    data_path = tmp / "sim.json"
    with simserve.sim_serve(tmp, "--seed", "3", "--data", str(data_path)) as server:
        yield server.url, server.log_path, data_path


@pytest.fixture
def http_sim(served):
    """The session's `sim serve` as it started (see `simserve.reset`), with a token."""
    base, _, _ = served
    with httpx.Client(base_url=base, timeout=10) as client:
        simserve.reset(client)
        sim = Sim(lambda method, path, **kw: client.request(method, path, **kw))
        yield sim


@pytest.fixture(params=["asgi", pytest.param("http", marks=pytest.mark.http)])
def any_sim(request):
    """The same test in process and over real HTTP."""
    return request.getfixturevalue("sim" if request.param == "asgi" else "http_sim")


# --- OpenAPI validation ------------------------------------------------------------

API_FILES = (*dict.fromkeys(k.openapi for k in KINDS), "workloads.yml", "workloads-v2.yml",
             "tokens.yml")


@pytest.fixture(scope="session")
def openapi(shared_api_dir):
    return {name: yaml.safe_load((shared_api_dir / name).read_text()) for name in API_FILES}


@pytest.fixture(scope="session")
def conforms(openapi):
    """conforms(file, schema_name, body): assert `body` validates against the named schema."""
    registry = Registry().with_resources(
        (name, Resource.from_contents(doc, default_specification=DRAFT202012))
        for name, doc in openapi.items())

    def check(file: str, name: str, body) -> None:
        validator = jsonschema.Draft202012Validator(
            {"$ref": f"{file}#/components/schemas/{name}"}, registry=registry)
        errors = sorted(validator.iter_errors(body), key=lambda e: list(e.path))
        assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])

    return check
