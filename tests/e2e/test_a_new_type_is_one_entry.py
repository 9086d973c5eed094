"""A new type costs one entry: types this module defines (their registry entries, spec
models and simulator table entries, registered here, no engine file touched) are created,
updated in place, found drifted, exported and imported through the CLI against the
embedded simulator (`--sim`, in process, so the simulator serves what this module
registers), as the built-in kinds are: an eighth workload kind (`Notebook`), and a
resource that is no workload (`Widget`: no phases, no pods, in its own collection rather
than the workloads list, updated by PUT)."""

from __future__ import annotations

import asyncio
import json
import random

import httpx

import pytest
import yaml
from click.testing import CliRunner

from reconciler import kinds
from reconciler.cli import main
from reconciler.desired import models
from reconciler.desired.fields import Compute, Image, Strict
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
from reconciler.simulator import kinds as sim_kinds
from reconciler.simulator import validator as v
from reconciler.simulator.errors import ApiError
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from tests.helpers.constants import CLUSTER

# --- the kind, as a user of the registry writes it ----------------------------------

NOTEBOOK = kinds.Kind(
    name="Notebook",
    api_path="/api/v1/workloads/notebooks",
    body_keys=("spec",),
    containers=("spec",),
    defaults={"": kinds.BODY, "spec": (kinds.fixed("shell", "bash"),)},
    list_types=frozenset({"notebook"}),
    pods=kinds.pods.single,
    updatable_paths=frozenset({"spec.image", "spec.compute"}),
    quantities={"spec": ("compute.cpuMemoryRequest",)},
)


class NotebookSpec(Strict):
    image: Image
    shell: str | None = None
    compute: Compute | None = None


class NotebookDocument(models.Document):
    KIND = NOTEBOOK

    spec: NotebookSpec


_SPEC = v.Obj({"image": v.text(min_length=1), "shell": v.text(),
               "compute": v.Obj({"gpuDevicesRequest": v.integer(0),
                                 "cpuMemoryRequest": v.text()})})


def _fill(body: dict, rand: random.Random) -> None:
    body["spec"].setdefault("shell", "bash")


SIM_NOTEBOOK = sim_kinds.Kind(
    type="notebook", path="/api/v1/workloads/notebooks", category="Build",
    create=v.Obj({"name": v.text(min_length=1, nullable=False),
                  "projectId": v.text(nullable=False), "clusterId": v.text(fmt="uuid"),
                  "spec": _SPEC}, required=("name", "projectId", "clusterId"), nullable=False),
    fill=_fill, openapi="", request="NotebookCreationRequest", response="Notebook",
    update=v.Obj({"spec": _SPEC}, nullable=False), updatable=("spec.image", "spec.compute"),
    update_request="NotebookUpdateRequest",
)


@pytest.fixture
def notebook_kind():
    kinds.register(NOTEBOOK)
    models.register(NotebookDocument)
    sim_kinds.register(SIM_NOTEBOOK)
    yield
    sim_kinds.unregister(SIM_NOTEBOOK)
    models.unregister(NOTEBOOK.name)
    kinds.unregister(NOTEBOOK.name)


SPEC = f"""\
kind: Notebook
name: scratch
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: jupyter/base-notebook:2024.1
  compute:
    gpuDevicesRequest: 1
    cpuMemoryRequest: 1Gi
"""
ADDRESS = "Notebook/7/scratch"


def _cli(*args: str, state: str = "state.json"):
    res = CliRunner().invoke(main, ["--sim", "--state", state, *args], env={"NO_COLOR": "1"},
                             catch_exceptions=False)
    return res


def _api(method: str, path: str, **kw):
    """A request to the --sim data's simulator through its API, as someone else would
    send it (between two CLI commands: one owner of the data at a time)."""
    async def send():
        app = create_app(data_path=".runai-sim/data.json")
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://runai-sim") as api:
            token = (await api.post("/api/v1/token", json={
                "grantType": "client_credentials", "clientID": DEFAULT_CLIENT_ID,
                "clientSecret": DEFAULT_CLIENT_SECRET})).json()["accessToken"]
            return await api.request(method, path, headers={"Authorization": f"Bearer {token}"},
                                     **kw)

    res = asyncio.run(send())
    assert res.status_code < 300, res.text
    return res.json()


def test_a_kind_defined_here_is_created_updated_drifted_exported_and_imported(
        notebook_kind, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "scratch.yaml"
    spec.write_text(SPEC)

    res = _cli("apply", "specs", "--auto-approve")
    assert res.exit_code == 0, res.output
    assert f"{ADDRESS}: created" in res.output
    [item] = _api("GET", "/api/v1/workloads")["workloads"]
    assert item["type"] == "notebook" and item["name"] == "scratch"
    wid = item["id"]
    live = _api("GET", f"/api/v1/workloads/notebooks/{wid}")
    assert live["spec"]["shell"] == "bash"  # the server's default: no change to plan
    res = _cli("plan", "specs", "--detailed-exitcode")
    assert res.exit_code == 0, res.output

    # An update the kind takes in place: the same workload, the new image.
    spec.write_text(SPEC.replace("2024.1", "2024.2"))
    res = _cli("plan", "specs", "--format", "json")
    [change] = json.loads(res.stdout)["resource_changes"]
    assert change["action"] == "update", change
    res = _cli("apply", "specs", "--auto-approve")
    assert res.exit_code == 0 and f"{ADDRESS}: updated" in res.output, res.output
    live = _api("GET", f"/api/v1/workloads/notebooks/{wid}")
    assert live["spec"]["image"] == "jupyter/base-notebook:2024.2"

    # Changed outside runai-reconcile: drift names the field, apply puts it back.
    _api("PATCH", f"/api/v1/workloads/notebooks/{wid}",
         json={"spec": {"compute": {"gpuDevicesRequest": 3, "cpuMemoryRequest": "1024Mi"}}})
    res = _cli("drift", "specs", "--detailed-exitcode")
    assert res.exit_code == 2, res.output
    assert ADDRESS in res.output and "gpuDevicesRequest" in res.output
    assert "cpuMemoryRequest" not in res.output  # 1024Mi is 1Gi: a quantity by value
    res = _cli("apply", "specs", "--auto-approve")
    assert res.exit_code == 0, res.output
    live = _api("GET", f"/api/v1/workloads/notebooks/{wid}")
    assert live["spec"]["compute"]["gpuDevicesRequest"] == 1

    # Export writes the spec a person writes (no server default); import adopts it into
    # a new state, and the plan of the exported folder is then empty.
    res = _cli("export", "--out", "exported", state="other.json")
    assert res.exit_code == 0, res.output
    [written] = list((tmp_path / "exported").rglob("*.yaml"))
    doc = yaml.safe_load(written.read_text())
    assert doc["kind"] == "Notebook" and doc["name"] == "scratch"
    assert doc["spec"]["image"] == "jupyter/base-notebook:2024.2"
    assert "shell" not in doc["spec"]
    res = _cli("import", "--all", "exported", state="other.json")
    assert res.exit_code == 0, res.output
    state = json.loads((tmp_path / "other.json").read_text())
    assert state["resources"][ADDRESS]["workload_id"] == wid
    res = _cli("plan", "exported", "--detailed-exitcode", state="other.json")
    assert res.exit_code == 0, res.output


# --- a resource that is no workload ------------------------------------------------------


class WidgetCodec(kinds.Codec):
    """A widget's answers name its id `id`; the engine's flat body calls it `workloadId`."""

    def read(self, kind, answer):
        if not isinstance(answer, dict) or "id" not in answer:
            return answer
        return {("workloadId" if k == "id" else k): val for k, val in answer.items()}


WIDGET = kinds.Kind(
    name="Widget",
    api_path="/api/v1/widgets",
    body_keys=("spec",),
    containers=(),
    defaults={},
    list_types=frozenset({"widget"}),
    pods=kinds.pods.none,
    updatable_paths=frozenset({"spec"}),
    update_method="PUT",
    listed=False,
    codec=WidgetCodec(),
)


class WidgetSpec(Strict):
    color: str
    size: int


class WidgetDocument(models.Document):
    KIND = WIDGET

    spec: WidgetSpec


def widget_routes(sim, kind) -> list[Route]:
    """The widgets API: POST and GET the collection (`{"widgets": [...]}`), GET, PUT and
    DELETE one; no phase anywhere. Kept in `WIDGETS` (the process's, as long as the test
    runs), each write moving `updatedAt`."""
    def now() -> str:
        WIDGETS["clock"] = WIDGETS.get("clock", 0) + 1
        return f"2026-01-01T00:00:{WIDGETS['clock']:02d}Z"

    def one(request: Request) -> dict:
        sim.auth(request)
        found = WIDGETS["items"].get(request.path_params["wid"])
        if found is None:
            raise ApiError(404, "widget not found")
        return found

    async def collection(request: Request):
        sim.auth(request)
        if request.method == "GET":
            offset = int(request.query_params.get("offset", 0))
            limit = int(request.query_params.get("limit", 500))
            items = sorted(WIDGETS["items"].values(), key=lambda w: w["id"])
            return JSONResponse({"widgets": items[offset:offset + limit]})
        body = await request.json()
        issues = v.validate(kind.create, body)
        if issues:
            raise ApiError(400, "; ".join(i.message for i in issues))
        wid = f"w-{len(WIDGETS['items']) + 1}"
        stamp = now()
        WIDGETS["items"][wid] = {"id": wid, **body, "createdAt": stamp, "updatedAt": stamp}
        return JSONResponse(WIDGETS["items"][wid], status_code=201)

    async def item(request: Request):
        found = one(request)
        if request.method == "PUT":
            found["spec"] = (await request.json())["spec"]
            found["updatedAt"] = now()
        elif request.method == "DELETE":
            del WIDGETS["items"][found["id"]]
        return JSONResponse(found)

    return [Route(kind.path, collection, methods=["GET", "POST"]),
            Route(kind.path + "/{wid}", item, methods=["GET", "PUT", "DELETE"])]


WIDGETS: dict = {}
_WIDGET_SPEC = v.Obj({"color": v.text(), "size": v.integer(0)})
SIM_WIDGET = sim_kinds.Kind(
    type="widget", path="/api/v1/widgets", category="",
    create=v.Obj({"name": v.text(min_length=1, nullable=False),
                  "projectId": v.text(nullable=False), "clusterId": v.text(fmt="uuid"),
                  "spec": _WIDGET_SPEC}, required=("name", "projectId", "clusterId", "spec"),
                 nullable=False),
    fill=lambda body, rand: None, openapi="", request="WidgetCreationRequest",
    response="Widget", custom=widget_routes,
)


@pytest.fixture
def widget_type():
    WIDGETS.clear()
    WIDGETS["items"] = {}
    kinds.register(WIDGET)
    models.register(WidgetDocument)
    sim_kinds.register(SIM_WIDGET)
    yield
    sim_kinds.unregister(SIM_WIDGET)
    models.unregister(WIDGET.name)
    kinds.unregister(WIDGET.name)


WIDGET_SPEC = f"""\
kind: Widget
name: blue-one
projectId: "7"
clusterId: {CLUSTER}
spec:
  color: blue
  size: 3
"""
WIDGET_ADDRESS = "Widget/7/blue-one"


def test_a_resource_with_no_phases_is_created_updated_drifted_exported_and_imported(
        widget_type, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "specs").mkdir()
    spec = tmp_path / "specs" / "blue.yaml"
    spec.write_text(WIDGET_SPEC)

    res = _cli("apply", "specs", "--auto-approve")
    assert res.exit_code == 0, res.output
    assert f"{WIDGET_ADDRESS}: created" in res.output
    [widget] = WIDGETS["items"].values()
    assert widget["spec"] == {"color": "blue", "size": 3}
    assert _api("GET", "/api/v1/workloads")["workloads"] == []  # no workload
    for refresh in ("auto", "full"):
        res = _cli("plan", "specs", "--detailed-exitcode", "--refresh", refresh)
        assert res.exit_code == 0, (refresh, res.output)

    # An update in place: the whole spec PUT, the same widget.
    spec.write_text(WIDGET_SPEC.replace("size: 3", "size: 4"))
    res = _cli("apply", "specs", "--auto-approve")
    assert res.exit_code == 0 and f"{WIDGET_ADDRESS}: updated" in res.output, res.output
    assert list(WIDGETS["items"]) == [widget["id"]] and widget["spec"]["size"] == 4

    # Changed outside runai-reconcile: drift names it, apply puts it back.
    _api("PUT", f"/api/v1/widgets/{widget['id']}", json={"spec": {"color": "red", "size": 4}})
    res = _cli("drift", "specs", "--detailed-exitcode")
    assert res.exit_code == 2, res.output
    assert WIDGET_ADDRESS in res.output and "color" in res.output
    res = _cli("plan", "specs", "--detailed-exitcode", "--refresh", "auto")
    assert res.exit_code == 2, res.output  # the list's updatedAt moved: read, not vouched
    res = _cli("apply", "specs", "--auto-approve")
    assert res.exit_code == 0, res.output
    assert widget["spec"]["color"] == "blue"

    # Export finds it in its own collection; import adopts it into a new state.
    res = _cli("export", "--out", "exported", state="other.json")
    assert res.exit_code == 0, res.output
    [written] = list((tmp_path / "exported").rglob("*.yaml"))
    doc = yaml.safe_load(written.read_text())
    assert (doc["kind"], doc["name"], doc["spec"]) == ("Widget", "blue-one",
                                                        {"color": "blue", "size": 4})
    res = _cli("import", "--all", "exported", state="other.json")
    assert res.exit_code == 0, res.output
    state = json.loads((tmp_path / "other.json").read_text())
    assert state["resources"][WIDGET_ADDRESS]["workload_id"] == widget["id"]
    res = _cli("plan", "exported", "--detailed-exitcode", state="other.json")
    assert res.exit_code == 0, res.output

    # Destroyed: deleted from its collection.
    res = _cli("apply", "specs", "--destroy", "--auto-approve")
    assert res.exit_code == 0 and f"{WIDGET_ADDRESS}: deleted" in res.output, res.output
    assert WIDGETS["items"] == {}
