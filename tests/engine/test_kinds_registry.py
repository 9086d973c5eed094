"""The registry's entries. Training, Workspace and Inference: what they say agrees with
NVIDIA's OpenAPI and with the simulator's own table, and the planner acts on them
(offline: specs + state + a live body with the server's defaults -> the action). Every
kind: its entry holds every fact the engine needs, a test that fails for
an entry lacking any of them, and the v2 kinds' shapes (a delete path of its own, an update
by PUT of the whole document) fit an entry and reach the client and the planner."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import random

import httpx
import pytest
import yaml

from reconciler import diff, kinds, planner
from reconciler.api.client import RunaiClient
from reconciler.desired import models
from reconciler.plans import Action
from reconciler.simulator import access as sim_access
from reconciler.simulator import defaults
from reconciler.simulator import kinds as sim_kinds
from reconciler.simulator import org as sim_org

from tests.helpers.builders import CLUSTER, desired, live_of, rstate, set_path, state_of

NEW = {"Training": ("trainings.yml", sim_kinds.TRAINING),
       "Workspace": ("workspaces.yml", sim_kinds.WORKSPACE),
       "Inference": ("inferences.yml", sim_kinds.INFERENCE)}


def test_every_kind_has_a_model_and_every_model_a_kind():
    assert set(models.MODELS) == set(kinds.KINDS)
    assert all(m.KIND is kinds.KINDS[name] for name, m in models.MODELS.items())


@pytest.mark.parametrize("name", sorted(NEW))
def test_the_entry_agrees_with_the_openapi_and_the_simulator(shared_api_dir, name):
    file, sim = NEW[name]
    kind = kinds.get(name)
    api = yaml.safe_load((shared_api_dir / file).read_text())
    assert kind.api_path in api["paths"] and kind.api_path == sim.path
    assert kind.can_suspend == sim.suspends == (f"{kind.api_path}/{{workloadId}}/suspend" in api["paths"])
    patch = api["paths"][f"{kind.api_path}/{{workloadId}}"].get("patch")
    assert kind.can_update == (patch is not None)
    assert kind.updatable_paths == frozenset(sim.updatable)
    assert kind.body_keys == sim.body_keys


def test_inference_updatable_paths_are_the_update_schema_s_spec_keys(shared_api_dir):
    schemas = yaml.safe_load((shared_api_dir / "inferences.yml").read_text())["components"]["schemas"]
    spec = schemas["InferenceUpdateSpec"]["properties"]["spec"]
    keys = set()
    for part in spec["allOf"]:
        part = schemas[part["$ref"].rsplit("/", 1)[1]] if "$ref" in part else part
        keys |= set(part["properties"])
    assert kinds.INFERENCE.updatable_paths == {f"spec.{k}" for k in keys}


# --- the planner on an Inference --------------------------------------------------------

BODY = {
    "name": "mistral-chat", "projectId": "7", "clusterId": CLUSTER,
    "spec": {
        "image": "vllm/vllm-openai:v0.6.3",
        "command": "python3 -m vllm.entrypoints.openai.api_server",
        "compute": {"gpuDevicesRequest": 1, "cpuMemoryRequest": "48Gi"},
        "environmentVariables": [{"name": "HF_HOME", "value": "/models/hf"}],
        "servingPort": {"container": 8000},
        "autoscaling": {"minReplicas": 1, "maxReplicas": 4, "metric": "concurrency",
                        "metricThreshold": 16},
        "storage": {"pvc": [{"name": "weights", "path": "/models", "existingPvc": True,
                             "claimName": "mistral-weights"}]},
    },
}


def _live(body: dict) -> dict:
    """What the server answers: the simulator's defaults for an Inference filled in."""
    live = live_of(body, defaults=False)
    defaults.fill_inference(live, random.Random(1))
    return live


def plan_inference(new: dict, applied: dict = BODY, live: dict | None = None):
    p = planner.make_plan([desired(new, "Inference")], state_of(rstate(applied, "Inference")),
                          {"Inference/7/mistral-chat": live or _live(applied)})
    return p.changes[0]


def test_unchanged_inference_with_the_server_s_defaults_is_a_noop():
    live = _live(BODY)
    assert live["spec"]["autoscaling"]["metricThresholdPercentage"] == 70
    assert plan_inference(BODY, live=live).action is Action.NOOP


def test_image_and_autoscaling_change_is_one_patch_of_both_whole():
    new = set_path(set_path(BODY, "spec.image", "vllm/vllm-openai:v0.6.4"),
                   "spec.autoscaling.maxReplicas", 8)
    rc = plan_inference(new)
    assert rc.action is Action.UPDATE
    assert rc.patch == {"spec": {"image": "vllm/vllm-openai:v0.6.4",
                                 "autoscaling": new["spec"]["autoscaling"]}}


def test_an_added_environment_variable_patches_the_whole_list():
    new = copy.deepcopy(BODY)
    new["spec"]["environmentVariables"].append({"name": "VLLM_LOGGING_LEVEL", "value": "INFO"})
    rc = plan_inference(new)
    assert rc.action is Action.UPDATE
    assert rc.patch == {"spec": {"environmentVariables": new["spec"]["environmentVariables"]}}


def _claim(body: dict) -> None:
    body["spec"]["storage"]["pvc"][0]["claimName"] = "mistral-weights-v2"


@pytest.mark.parametrize("path,change", [
    ("spec.servingPort.container", lambda b: b["spec"]["servingPort"].update(container=8080)),
    ("spec.storage.pvc[weights].claimName", _claim),
    ("spec.labels", lambda b: b["spec"].update(labels=[{"name": "team", "value": "serving"}])),
    ("spec.security", lambda b: b["spec"].update(security={"runAsNonRoot": True})),
])
def test_a_create_only_change_replaces_naming_only_the_paths_that_force_it(path, change):
    new = set_path(BODY, "spec.image", "vllm/vllm-openai:v0.6.4")
    change(new)
    rc = plan_inference(new)
    assert rc.action is Action.REPLACE and rc.patch is None
    assert rc.replace_paths == [path]
    assert "spec.image" in [c.path for c in rc.changes]


@pytest.mark.parametrize("kind", ["Training", "Workspace"])
def test_any_change_of_a_training_or_workspace_replaces(kind):
    body = {"name": "job-a", "projectId": "7", "clusterId": CLUSTER,
            "spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "compute": {"gpuDevicesRequest": 1}}}
    new = set_path(body, "spec.compute.gpuDevicesRequest", 2)
    p = planner.make_plan([desired(new, kind)], state_of(rstate(body, kind)),
                          {f"{kind}/7/job-a": live_of(body, defaults=False)})
    rc = p.changes[0]
    assert rc.action is Action.REPLACE and rc.replace_paths == ["spec.compute.gpuDevicesRequest"]


def test_removing_an_environment_variable_patches_the_remaining_list():
    new = copy.deepcopy(BODY)
    new["spec"]["environmentVariables"] = [{"name": "VLLM_LOGGING_LEVEL", "value": "INFO"}]
    rc = plan_inference(new, applied=_with_two_env(BODY))
    assert rc.action is Action.UPDATE
    assert rc.patch == {"spec": {"environmentVariables": new["spec"]["environmentVariables"]}}


def test_removing_an_autoscaling_key_patches_autoscaling_whole():
    new = set_path(BODY, "spec.autoscaling.metricThreshold", None)
    new = set_path(set_path(new, "spec.autoscaling.metric", None), "spec.autoscaling.maxReplicas", 1)
    rc = plan_inference(new)
    assert rc.action is Action.UPDATE
    assert rc.patch == {"spec": {"autoscaling": {"minReplicas": 1, "maxReplicas": 1}}}


@pytest.mark.parametrize("field", ["image", "autoscaling", "environmentVariables"])
def test_removing_a_whole_updatable_field_replaces(field):
    rc = plan_inference(set_path(BODY, f"spec.{field}", None))
    assert rc.action is Action.REPLACE and rc.replace_paths == [f"spec.{field}"]


def _with_two_env(body: dict) -> dict:
    out = copy.deepcopy(body)
    out["spec"]["environmentVariables"] = [{"name": "HF_HOME", "value": "/models/hf"},
                                           {"name": "VLLM_LOGGING_LEVEL", "value": "INFO"}]
    return out


def test_a_patch_keeps_the_prior_value_of_an_ignored_path_inside_the_field_it_sends():
    new = set_path(set_path(BODY, "spec.autoscaling.maxReplicas", 8),
                   "spec.autoscaling.metricThreshold", 32)
    p = planner.make_plan(
        [desired(new, "Inference", ignore=("spec.autoscaling.maxReplicas",))],
        state_of(rstate(BODY, "Inference")), {"Inference/7/mistral-chat": _live(BODY)})
    rc = p.changes[0]
    assert rc.action is Action.UPDATE and [c.path for c in rc.changes] == [
        "spec.autoscaling.metricThreshold"]
    assert rc.patch == {"spec": {"autoscaling": {**BODY["spec"]["autoscaling"], "metricThreshold": 32}}}


# --- one entry per kind ------------------------------------------------------------------

SIM = {"DistributedTraining": sim_kinds.DISTRIBUTED,
       "DistributedInference": sim_kinds.DISTRIBUTED_INFERENCE,
       "Training": sim_kinds.TRAINING, "Workspace": sim_kinds.WORKSPACE,
       "Inference": sim_kinds.INFERENCE, "Manifest": sim_kinds.MANIFEST,
       "NIMService": sim_kinds.NIM_SERVICE}
# The organisation's types are the simulator's org units, not entries of its kinds table.
SIM_UNITS = {"Department": sim_org.DEPARTMENT, "Project": sim_org.PROJECT}
# The types the simulator serves from a module of their own: the item's path parameter.
SIM_APART = {"AccessRule": "accessRuleId"}


def _problems(kind: kinds.Kind) -> list[str]:
    """What the entry lacks (its own checks)."""
    return kinds.missing_facts(kind)


@pytest.mark.parametrize("name", sorted(kinds.KINDS))
def test_every_entry_holds_every_fact(name):
    kind = kinds.get(name)
    assert _problems(kind) == []
    if name == kinds.POLICY.name:  # Run:ai policies: the simulator's policy routes
        from reconciler.kinds import workload_policies
        from reconciler.simulator import policies as sim_policies

        served = {k.list_type: k.path for k in sim_policies.POLICY_KINDS}
        assert workload_policies.TYPE_PATHS == served and not kind.listed
        return
    if name in SIM_UNITS:  # the simulator's org unit at the same path, listed apart
        assert kind.api_path == SIM_UNITS[name].path and not kind.listed
        assert kinds.of_list_type(SIM_UNITS[name].type) is kind
        return
    if name in SIM_APART:  # the simulator serves it at the same paths, in no table
        assert not kind.listed and not kind.can_update
        assert {kind.api_path, f"{kind.api_path}/{{{SIM_APART[name]}}}"} <= {
            r.path for r in sim_access.routes(None)}
        return
    # Its list type as the simulator spells it names it, and its paths are the simulator's.
    assert kinds.of_list_type(SIM[name].type) is kind
    assert kind.api_path == SIM[name].path
    assert kind.delete_collection == (SIM[name].delete_path or SIM[name].path)


def test_the_nim_entry_agrees_with_the_openapi_and_the_simulator(shared_api_dir):
    kind, sim = kinds.NIM_SERVICE, sim_kinds.NIM_SERVICE
    api = yaml.safe_load((shared_api_dir / "nim-services.yml").read_text())
    assert kind.api_path in api["paths"]
    item = api["paths"][f"{kind.api_path}/{{WorkloadV2Id}}"]
    # PATCH of `{spec}` (the whole spec), no delete there, no suspend anywhere.
    assert set(item) == {"get", "patch"} and not kind.can_suspend and not sim.suspends
    update = api["components"]["schemas"]["NimServiceUpdateRequest"]
    assert set(update["properties"]) == {"spec"} and kind.updatable_paths == {"spec"}
    assert kind.updatable_paths == frozenset(sim.updatable)
    assert kind.body_keys == sim.body_keys == ("spec",)
    # The create metadata has no clusterId: the client sends none.
    meta = api["components"]["schemas"]["NIMServiceMetadataCreateParams"]["properties"]
    assert "clusterId" not in meta and not kind.codec.sends_cluster


@pytest.mark.parametrize("fact,value", [
    ("api_path", ""), ("api_path", "workloads"), ("body_keys", ()), ("containers", ()),
    ("containers", ("spec", "leaderSpec")), ("defaults", {}), ("defaults", {"": ()}),
    ("list_types", frozenset()), ("list_types", frozenset({"Training"})), ("pods", None),
    ("update_method", "POST"), ("delete_path", "workloads"),
    ("updatable_paths", frozenset({"metadata.priority"})),
])
@pytest.mark.parametrize("name", sorted(kinds.KINDS))
def test_an_entry_that_lacks_a_fact_is_named(name, fact, value):
    if not kinds.get(name).containers and fact in ("containers", "defaults"):
        # A manifest's containers are its pod templates: it has no such paths to lack.
        return
    broken = dataclasses.replace(kinds.get(name), **{fact: value})
    assert any(p.startswith(fact) for p in _problems(broken)), _problems(broken)


# The next kinds (CONTRACT.md §12), as entries: a delete path apart from the create path, an
# update that is a PUT of the whole document, a GPU rule of a manifest.
NIM = kinds.Kind(
    name="NimService", api_path="/api/v2/workloads/nim-services", body_keys=("spec",),
    containers=("spec",), defaults={"spec": (kinds.fixed("replicas", 1),)},
    list_types=frozenset({"nimservice"}), pods=kinds.pods.single,
    updatable_paths=frozenset({"spec"}), delete_path="/api/v2/workloads")
MANIFEST = kinds.Kind(
    name="Manifest", api_path="/api/v2/workloads", body_keys=("metadata", "manifest"),
    containers=("manifest",), defaults={"manifest": (kinds.generated("status"),)},
    list_types=frozenset({"workloadv2"}), pods=kinds.pods.single,
    updatable_paths=frozenset({"metadata.priority", "metadata.category", "manifest"}),
    update_method="PUT")


@pytest.mark.parametrize("kind", [NIM, MANIFEST], ids=lambda k: k.name)
def test_the_v2_kinds_fit_an_entry(kind):
    assert kinds.missing_facts(kind) == []


def test_the_client_deletes_at_the_entry_s_delete_path_and_updates_with_its_method():
    seen = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.method, request.url.path))
        return httpx.Response(202, json={})

    async def run():
        async with RunaiClient("http://runai.test", token="t",
                               transport=httpx.MockTransport(handler)) as client:
            await client.delete(NIM, "abc")
            await client.patch(NIM, "abc", {"spec": {}})
            await client.patch(MANIFEST, "abc", {"manifest": {}})
            await client.delete(kinds.INFERENCE, "abc")

    asyncio.run(run())
    assert seen == [("DELETE", "/api/v2/workloads/abc"),
                    ("PATCH", "/api/v2/workloads/nim-services/abc"),
                    ("PUT", "/api/v2/workloads/abc"),
                    ("DELETE", "/api/v1/workloads/inferences/abc")]


def test_a_put_kind_s_update_body_is_the_whole_document():
    body = {"name": "m", "projectId": "7", "clusterId": CLUSTER,
            "metadata": {"priority": "high", "category": "Train"},
            "manifest": {"kind": "PyTorchJob", "spec": {"replicas": 2}}}
    new = set_path(body, "metadata.priority", "low")
    fcs = diff.diff_workload(MANIFEST, new, body, None)
    assert [c.path for c in fcs] == ["metadata.priority"]
    # PUT: every updatable field, changed or not; a PATCH kind sends the changed ones only.
    assert planner._patch(MANIFEST, new, fcs) == {
        "metadata": {"priority": "low", "category": "Train"}, "manifest": body["manifest"]}
    patch_kind = dataclasses.replace(MANIFEST, update_method="PATCH")
    assert planner._patch(patch_kind, new, fcs) == {"metadata": {"priority": "low"}}
