"""GPU accounting: worked examples for every kind (the rules of docs/gpu-accounting.md),
checked on create bodies, on the same bodies as the simulator returns them (its server
defaults filled in) and against the spec models (every example is a body a user could
write)."""

from __future__ import annotations

import copy
import dataclasses
import random

import pytest

from reconciler import gpus, kinds, planner
from reconciler.desired import models
from reconciler.gpus import Gpus
from reconciler.plans import Action
from reconciler.simulator import kinds as sim_kinds

from tests.helpers.builders import (CLUSTER, addr, desired, di_body, dt_body, live_of, rstate,
                                    state_of)

GI = 2**30
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def single(compute=None, **spec):
    """A Training/Workspace/Inference body with this compute."""
    return {"spec": {"image": IMAGE, **({"compute": compute} if compute else {}), **spec}}


def dt(num_workers=None, compute=None, same=None, master=None):
    spec = {"image": IMAGE, "distributedFramework": "PyTorch", "compute": compute}
    if num_workers is not None:
        spec["numWorkers"] = num_workers
    body = {"spec": spec}
    if same is not None:
        body["masterSpecSameAsWorker"] = same
    if master is not None:
        body["masterSpec"] = {"image": IMAGE, "compute": master}
    return body


def di(leader, worker=None, workers=None, replicas=None):
    spec = {"leader": {"image": IMAGE, "compute": leader}}
    if worker is not None:
        spec["worker"] = {"image": IMAGE, "compute": worker}
    if workers is not None:
        spec["workers"] = workers
    if replicas is not None:
        spec["replicas"] = replicas
    return {"spec": spec}


HALF = {"gpuRequestType": "portion", "gpuPortionRequest": 0.5}
MEM_20G = {"gpuRequestType": "memory", "gpuMemoryRequest": "20Gi"}

# (id, kind, body, phases, expected)
def nim(**spec):
    return {"spec": {"image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3", **spec}}


CASES = [
    # Manifest: nvidia.com/gpu of each container x the replicas of its pod template.
    ("M deployment", "Manifest", {"manifest": {"apiVersion": "apps/v1", "kind": "Deployment",
     "spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "a", "resources": {
         "limits": {"nvidia.com/gpu": 2}}}]}}}}}, {}, Gpus(6, 6)),
    # Training: one pod.
    ("T whole devices", "Training", single({"gpuDevicesRequest": 2}), {}, Gpus(2, 2)),
    ("T no compute holds none", "Training", single(), {}, Gpus(0, 0)),
    ("T cpu only holds none", "Training", single({"cpuCoreRequest": 4}), {}, Gpus(0, 0)),
    ("T half a GPU, devices absent", "Training", single(HALF), {}, Gpus(0.5, 0.5)),
    ("T quarter of one device", "Training",
     single({"gpuDevicesRequest": 1, "gpuRequestType": "portion", "gpuPortionRequest": 0.25}),
     {}, Gpus(0.25, 0.25)),
    ("T portion type, 2 whole devices", "Training",
     single({"gpuDevicesRequest": 2, "gpuRequestType": "portion"}), {}, Gpus(2, 2)),
    ("T portion without its type", "Training", single({"gpuPortionRequest": 0.3}), {},
     Gpus(0.3, 0.3)),
    ("T memory request: its device, memory apart", "Training", single(MEM_20G), {},
     Gpus(1, 1, 20 * GI, 20 * GI)),
    ("T suspended (desiredPhase Stopped)", "Training", single({"gpuDevicesRequest": 2}),
     {"desired_phase": "Stopped"}, Gpus(0, 0)),
    ("T stopping", "Training", single({"gpuDevicesRequest": 2}),
     {"actual_phase": "Stopping"}, Gpus(0, 0)),
    ("T completed", "Training", single({"gpuDevicesRequest": 2}),
     {"actual_phase": "Completed"}, Gpus(0, 0)),
    ("T pending still counts", "Training", single({"gpuDevicesRequest": 2}),
     {"actual_phase": "Pending"}, Gpus(2, 2)),
    # Workspace: one pod.
    ("W one device", "Workspace", single({"gpuDevicesRequest": 1}), {}, Gpus(1, 1)),
    ("W half a GPU", "Workspace", single(HALF), {}, Gpus(0.5, 0.5)),
    ("W memory request", "Workspace", single(MEM_20G), {}, Gpus(1, 1, 20 * GI, 20 * GI)),
    ("W suspended", "Workspace", single({"gpuDevicesRequest": 1}),
     {"desired_phase": "Stopped", "actual_phase": "Stopped"}, Gpus(0, 0)),
    # Inference: one replica, or autoscaling's minReplicas..maxReplicas.
    ("I one replica without autoscaling", "Inference", single({"gpuDevicesRequest": 1}), {},
     Gpus(1, 1)),
    ("I autoscaling 2..5 of one device", "Inference",
     single({"gpuDevicesRequest": 1}, autoscaling={"minReplicas": 2, "maxReplicas": 5,
                                                   "metric": "throughput",
                                                   "metricThreshold": 100}), {}, Gpus(2, 5)),
    ("I autoscaling 2..5 of half a GPU", "Inference",
     single(HALF, autoscaling={"minReplicas": 2, "maxReplicas": 5, "metric": "throughput",
                               "metricThreshold": 100}), {}, Gpus(1, 2.5)),
    ("I scale to zero, maxReplicas defaults to 1", "Inference",
     single({"gpuDevicesRequest": 2}, autoscaling={"minReplicas": 0}), {}, Gpus(0, 2)),
    ("I minReplicas 3, maxReplicas defaults to it", "Inference",
     single({"gpuDevicesRequest": 1}, autoscaling={"minReplicas": 3}), {}, Gpus(3, 3)),
    ("I autoscaling 1..4 with memory requests", "Inference",
     single(MEM_20G, autoscaling={"maxReplicas": 4, "metric": "latency",
                                  "metricThreshold": 50}), {}, Gpus(1, 4, 20 * GI, 80 * GI)),
    # DistributedTraining: numWorkers workers plus one master.
    ("D master same as worker: 4 x 8 + 8", "DistributedTraining",
     dt(4, {"gpuDevicesRequest": 8}, same=True), {}, Gpus(40, 40)),
    ("D own master spec: 4 x 8 + 1", "DistributedTraining",
     dt(4, {"gpuDevicesRequest": 8}, same=False, master={"gpuDevicesRequest": 1}), {},
     Gpus(33, 33)),
    ("D no master spec: the master holds none", "DistributedTraining",
     dt(4, {"gpuDevicesRequest": 8}, same=False), {}, Gpus(32, 32)),
    ("D numWorkers absent: one worker", "DistributedTraining",
     dt(None, {"gpuDevicesRequest": 2}, same=True), {}, Gpus(4, 4)),
    ("D portions: 3 x 0.5 + master 0.5", "DistributedTraining",
     dt(3, HALF, same=True), {}, Gpus(2, 2)),
    ("D suspended", "DistributedTraining", dt(4, {"gpuDevicesRequest": 8}, same=True),
     {"desired_phase": "Stopped"}, Gpus(0, 0)),
    ("D completed", "DistributedTraining", dt(4, {"gpuDevicesRequest": 8}, same=True),
     {"actual_phase": "Completed"}, Gpus(0, 0)),
    ("D being deleted", "DistributedTraining", dt(4, {"gpuDevicesRequest": 8}, same=True),
     {"desired_phase": "Deleted", "actual_phase": "Deleting"}, Gpus(0, 0)),
    # DistributedInference: replicas x (leader + workers x worker).
    ("DI 2 x (8 + 3 x 8)", "DistributedInference",
     di({"gpuDevicesRequest": 8}, {"gpuDevicesRequest": 8}, workers=3, replicas=2), {},
     Gpus(64, 64)),
    ("DI defaults: one leader, no workers", "DistributedInference",
     di({"gpuDevicesRequest": 4}), {}, Gpus(4, 4)),
    ("DI zero replicas", "DistributedInference",
     di({"gpuDevicesRequest": 4}, {"gpuDevicesRequest": 4}, workers=1, replicas=0), {},
     Gpus(0, 0)),
    ("DI memory leader, whole workers: 3 x (1 + 2)", "DistributedInference",
     di({"gpuRequestType": "memory", "gpuMemoryRequest": "40Gi"}, {"gpuDevicesRequest": 1},
        workers=2, replicas=3), {}, Gpus(9, 9, 120 * GI, 120 * GI)),
    # NIMService: replicas (or autoscaling min..max) x (1 + multiNode.workers) pods.
    ("NIM default one replica", "NIMService", nim(compute={"gpuDevicesRequest": 2}),
     {}, Gpus(2, 2)),
    ("NIM 3 replicas x 2", "NIMService", nim(replicas=3, compute={"gpuDevicesRequest": 2}),
     {}, Gpus(6, 6)),
    ("NIM zero replicas", "NIMService", nim(replicas=0, compute={"gpuDevicesRequest": 2}),
     {}, Gpus(0, 0)),
    ("NIM autoscaling 2..5 x 1", "NIMService",
     nim(compute={"gpuDevicesRequest": 1},
         autoscaling={"minReplicas": 2, "maxReplicas": 5, "metric": "m", "metricThreshold": 1}),
     {}, Gpus(2, 5)),
    ("NIM autoscaling max defaults to min", "NIMService",
     nim(compute={"gpuDevicesRequest": 1},
         autoscaling={"minReplicas": 3, "metric": "m", "metricThreshold": 1}), {}, Gpus(3, 3)),
    ("NIM multi-node: 2 replicas x (1 + 3) x 8", "NIMService",
     nim(replicas=2, multiNode={"workers": 3}, compute={"gpuDevicesRequest": 8}),
     {}, Gpus(64, 64)),
    ("NIM multi-node autoscaled: 1..2 x (1 + 1) x 4", "NIMService",
     nim(multiNode={"workers": 1}, compute={"gpuDevicesRequest": 4},
         autoscaling={"minReplicas": 1, "maxReplicas": 2, "metric": "m", "metricThreshold": 1}),
     {}, Gpus(8, 16)),
]


@pytest.mark.parametrize("kind, body, phase, expected", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_worked_example(kind, body, phase, expected):
    assert gpus.held(kind, body, **phase) == expected


@pytest.mark.parametrize("kind, body, phase, expected", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_the_same_body_as_the_simulator_returns_it(kind, body, phase, expected):
    """GET's body has the server's defaults (an Inference always has its autoscaling,
    a DistributedInference its workers and replicas) and its own phases."""
    live = _create_body(kind, body)
    next(k for k in sim_kinds.KINDS if k.path == kinds.get(kind).api_path).fill(
        live, random.Random(0))
    live = live_of(live, desired_phase=phase.get("desired_phase", "Running"),
                   actual_phase=phase.get("actual_phase", "Running"), defaults=False)
    assert gpus.held(kind, live) == expected


@pytest.mark.parametrize("kind, body", [c[1:3] for c in CASES], ids=[c[0] for c in CASES])
def test_every_example_is_a_valid_spec(kind, body):
    models.MODELS[kind].model_validate({"kind": kind, **_create_body(kind, body)})


def _create_body(kind, body):
    return {"name": "w", "projectId": "7", "clusterId": CLUSTER, **copy.deepcopy(body)}


def test_every_kind_has_a_worked_example():
    assert {c[1] for c in CASES} == set(kinds.KINDS)


def test_the_engine_s_realistic_bodies():
    # 4 workers and the master (masterSpecSameAsWorker) at 8 GPUs each.
    assert gpus.held("DistributedTraining", dt_body()) == Gpus(40, 40)
    # 2 replicas x (an 8-GPU leader + 1 worker x 8).
    assert gpus.held("DistributedInference", di_body()) == Gpus(32, 32)


def test_a_live_body_s_own_phase_counts_unless_one_is_given():
    live = live_of(single({"gpuDevicesRequest": 2}) | {"name": "w", "projectId": "7",
                                                       "clusterId": CLUSTER},
                   desired_phase="Stopped", actual_phase="Stopped")
    assert gpus.held("Training", live) == Gpus(0, 0)
    # A plan change's `after` with the spec's desiredPhase Running: resumed, it holds 2.
    assert gpus.held("Training", live, desired_phase="Running",
                     actual_phase="Running") == Gpus(2, 2)


def test_no_body_holds_nothing():
    assert gpus.held("Training", None) == Gpus(0, 0)


def test_sums_have_no_binary_noise_and_ranges_are_flagged():
    total = Gpus(0.1, 0.1) + Gpus(0.2, 0.2)
    assert total == Gpus(0.3, 0.3) and not total.is_range
    assert (total + Gpus(0, 1)).is_range


# --- a finished plan: each change before -> after, and per project ----------------------

def _body(kind, name, project, body):
    return {"name": name, "projectId": project, "clusterId": CLUSTER, **copy.deepcopy(body)}


def test_a_plan_s_gpus_before_and_after_per_change_and_per_project():
    ft = _body("DistributedTraining", "llama-ft", "7", dt(4, {"gpuDevicesRequest": 8}, same=True))
    smaller = copy.deepcopy(ft)
    smaller["spec"]["numWorkers"] = 2
    ws = _body("Workspace", "notebook", "7", single({"gpuDevicesRequest": 1}))
    scaling = {"minReplicas": 1, "maxReplicas": 2, "metric": "throughput", "metricThreshold": 9}
    serve = _body("Inference", "serve", "12", single(HALF, autoscaling=scaling))
    wider = copy.deepcopy(serve)
    wider["spec"]["autoscaling"]["maxReplicas"] = 4
    new = _body("Training", "lora", "12", single({"gpuDevicesRequest": 2}))
    done = _body("Training", "finished", "12", single({"gpuDevicesRequest": 4}))
    old = _body("DistributedInference", "old", "9", di({"gpuDevicesRequest": 8}, replicas=2))
    specs = [desired(smaller, "DistributedTraining"), desired(ws, "Workspace", phase="Stopped"),
             desired(wider, "Inference"), desired(new, "Training"), desired(done, "Training")]
    state = state_of(rstate(ft, "DistributedTraining"), rstate(ws, "Workspace"),
                     rstate(serve, "Inference"), rstate(done, "Training"),
                     rstate(old, "DistributedInference"))
    live = {addr(ft, "DistributedTraining"): live_of(ft),
            addr(ws, "Workspace"): live_of(ws, kind="Workspace"),
            addr(serve, "Inference"): live_of(serve, kind="Inference"),
            addr(done, "Training"): live_of(done, actual_phase="Completed",
                                                              kind="Training"),
            addr(old, "DistributedInference"): live_of(old)}
    plan = planner.make_plan(specs, state, live)

    expected = {  # address: (action, before, after)
        "DistributedTraining/7/llama-ft": (Action.REPLACE, Gpus(40, 40), Gpus(24, 24)),
        "Workspace/7/notebook": (Action.SUSPEND, Gpus(1, 1), Gpus(0, 0)),
        "Inference/12/serve": (Action.UPDATE, Gpus(0.5, 1), Gpus(0.5, 2)),
        "Training/12/lora": (Action.CREATE, Gpus(0, 0), Gpus(2, 2)),
        "Training/12/finished": (Action.NOOP, Gpus(0, 0), Gpus(0, 0)),
        "DistributedInference/9/old": (Action.DELETE, Gpus(16, 16), Gpus(0, 0)),
    }
    assert {c.address: (c.action, *gpus.change_gpus(c)) for c in plan.changes} == expected
    assert [(p.project_id, p.before, p.after) for p in gpus.by_project(plan)] == [
        ("7", Gpus(41, 41), Gpus(24, 24)),
        ("9", Gpus(16, 16), Gpus(0, 0)),
        ("12", Gpus(0.5, 1), Gpus(2.5, 4)),
    ]


def test_a_resumed_workload_takes_its_gpus_again_and_without_refresh_the_state_counts():
    ws = _body("Workspace", "notebook", "7", single({"gpuDevicesRequest": 1}))
    plan = planner.make_plan([desired(ws, "Workspace")],
                             state_of(rstate(ws, "Workspace", desired_phase="Stopped")),
                             {addr(ws, "Workspace"): live_of(ws, desired_phase="Stopped",
                                                             actual_phase="Stopped",
                                                             kind="Workspace")})
    (change,) = plan.changes
    assert change.action is Action.RESUME
    assert gpus.change_gpus(change) == (Gpus(0, 0), Gpus(1, 1))
    # --no-refresh: the state's applied body and last phase stand for live.
    offline = planner.make_plan(
        [dataclasses.replace(desired(ws, "Workspace"), project_name="team-a")],
        state_of(rstate(ws, "Workspace", desired_phase="Stopped", last_phase="Stopped")), {})
    assert gpus.by_project(offline) == [
        gpus.ProjectImpact("7", "team-a", Gpus(0, 0), Gpus(1, 1))]


# --- the plan's GPU impact: workloads, projects, quotas ---------------------------------

def _two_projects_plan():
    grow = _body("DistributedTraining", "llama-ft", "7", dt(2, {"gpuDevicesRequest": 8}, same=True))
    bigger = copy.deepcopy(grow)
    bigger["spec"]["numWorkers"] = 4
    lora = _body("Training", "lora", "12", single({"gpuDevicesRequest": 2}))
    idle = _body("Training", "idle", "12", single({"gpuDevicesRequest": 1}))
    specs = [desired(bigger, "DistributedTraining"), desired(lora, "Training"),
             desired(idle, "Training")]
    state = state_of(rstate(grow, "DistributedTraining"), rstate(idle, "Training"))
    live = {addr(grow, "DistributedTraining"): live_of(grow), addr(idle, "Training"): live_of(idle, kind="Training")}
    return planner.make_plan(specs, state, live)


def test_the_impact_lists_every_workload_and_flags_a_project_over_its_quota():
    plan = _two_projects_plan()
    impact = gpus.impact(plan, {"7": 32, "12": None})
    assert [(w.address, w.action, w.before, w.after, w.moves) for w in impact.workloads] == [
        ("DistributedTraining/7/llama-ft", Action.REPLACE, Gpus(24, 24), Gpus(40, 40), True),
        ("Training/12/idle", Action.NOOP, Gpus(1, 1), Gpus(1, 1), False),
        ("Training/12/lora", Action.CREATE, Gpus(0, 0), Gpus(2, 2), True),
    ]
    seven, twelve = impact.projects
    assert (seven.after, seven.quota, seven.over_quota) == (Gpus(40, 40), 32, True)
    assert (twelve.before, twelve.after, twelve.quota, twelve.over_quota) == (
        Gpus(1, 1), Gpus(3, 3), None, False)  # an unknown quota flags nothing
    assert impact.quotas_read and impact.moves
    assert impact.project("12") is twelve and impact.workload("Training/12/lora").after == Gpus(2, 2)
    # At the quota is not over it; without quotas (--no-refresh) nothing is known.
    assert not gpus.impact(plan, {"7": 40}).project("7").over_quota
    offline = gpus.impact(plan)
    assert not offline.quotas_read and [p.quota for p in offline.projects] == [None, None]


def test_an_autoscaled_inference_that_may_exceed_the_quota_at_its_most_pods_is_flagged():
    serve = _body("Inference", "serve", "7", single(
        {"gpuDevicesRequest": 1},
        autoscaling={"minReplicas": 2, "maxReplicas": 6, "metric": "throughput",
                     "metricThreshold": 9}))
    plan = planner.make_plan([desired(serve, "Inference")], state_of(), {})
    (project,) = gpus.impact(plan, {"7": 4}).projects
    assert project.after == Gpus(2, 6) and project.over_quota


def test_impact_of_makes_the_impact_with_the_plan_s_quotas_and_why_one_is_unknown():
    plan = _two_projects_plan()
    assert gpus.impact_of(plan) == gpus.impact(plan)  # no quotas read
    plan = _two_projects_plan()
    plan.gpu_quotas = {"7": 8, "12": None}
    plan.quota_unknown = {"12": "answered 403"}
    made = gpus.impact_of(plan)
    assert made == gpus.impact(plan, {"7": 8, "12": None}, unknown={"12": "answered 403"})
    assert made.project("7").over_quota and made.project("12").unknown == "answered 403"
    assert plan.gpu_impact is None  # making it is finishing's job, not a reader's


@pytest.mark.parametrize("resources, expected", [
    ([{"nodePool": {"id": "1", "name": "default"}, "gpu": {"deserved": 8}}], 8),
    ([{"gpu": {"deserved": 8}}, {"gpu": {"deserved": 2.5}}], 10.5),  # summed over node pools
    ([{"gpu": {"deserved": 0}}], 0),
    ([{"cpu": {"deserved": 1000}}], None),  # no GPU resource given
    ([{"gpu": {"deserved": -1}}], None),     # negative: no limit
    ([], None),
    (None, None),
])
def test_a_project_s_quota_is_the_deserved_gpus_of_its_node_pools(resources, expected):
    assert gpus.quota({"id": "7", "resources": resources}) == expected
