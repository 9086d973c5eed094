"""Small builders of realistic create bodies, live GET bodies, specs and state entries
for the engine tests (diff and planner). Shapes follow distributed.yml and
distributed-inferences.yml."""

from __future__ import annotations

import copy
import random
from typing import Any

from reconciler import kinds
from reconciler.simulator import kinds as sim_kinds
from reconciler.desired.types import DesiredWorkload, Lifecycle
from reconciler.state.model import ResourceState, State

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
DT = kinds.get("DistributedTraining")
DI = kinds.get("DistributedInference")


def dt_body(name: str = "bert-ddp", project: str = "7") -> dict[str, Any]:
    """A PyTorch distributed training's create body."""
    return {
        "name": name,
        "projectId": project,
        "clusterId": CLUSTER,
        "spec": {
            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "distributedFramework": "PyTorch",
            "numWorkers": 4,
            "command": "torchrun",
            "args": "--nproc_per_node=8 train.py --config configs/bert-large.yaml",
            "compute": {"gpuDevicesRequest": 8, "cpuCoreRequest": 16,
                        "cpuMemoryRequest": "64G", "largeShmRequest": True},
            "environmentVariables": [
                {"name": "HF_HOME", "value": "/data/hf"},
                {"name": "NCCL_DEBUG", "value": "INFO"},
                {"name": "WANDB_API_KEY", "secret": {"name": "wandb", "key": "api-key"}},
            ],
            "labels": [{"name": "team", "value": "nlp"}],
            "nodePools": ["h100", "a100"],
            "security": {"capabilities": ["SYS_PTRACE", "IPC_LOCK"]},
            "storage": {"pvc": [{"name": "datasets", "path": "/data", "existingPvc": True,
                                 "claimName": "datasets-pvc"}]},
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                             "effect": "NoSchedule"}],
            "nodeAffinityRequired": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "nvidia.com/gpu.product", "operator": "In",
                 "values": ["H100-SXM", "A100-SXM"]}]}]},
            "ports": [{"container": 29500, "serviceType": "ClusterIP"}],
        },
        "masterSpecSameAsWorker": True,
    }


def di_body(name: str = "llama-70b-serve", project: str = "7") -> dict[str, Any]:
    """A vLLM-style distributed inference's create body (leader + worker)."""
    container = {
        "image": "vllm/vllm-openai:v0.6.3",
        "command": "python3 -m vllm.entrypoints.openai.api_server",
        "args": "--model meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 8 "
                "--pipeline-parallel-size 2",
        "compute": {"gpuDevicesRequest": 8, "cpuMemoryRequest": "200G"},
        "environmentVariables": [
            {"name": "HF_TOKEN", "secret": {"name": "hf-token", "key": "token"}},
            {"name": "VLLM_PORT", "value": "8000"},
        ],
    }
    return {
        "name": name,
        "projectId": project,
        "clusterId": CLUSTER,
        "spec": {
            "replicas": 2,
            "workers": 1,
            "servingPort": {"port": 8000},
            "nodePools": ["h100"],
            "leader": copy.deepcopy(container),
            "worker": copy.deepcopy(container),
        },
    }


def live_of(body: dict[str, Any], *, workload_id: str = "3f1c1d2e-0000-4000-8000-000000000001",
            desired_phase: str = "Running", actual_phase: str | None = "Running",
            defaults: bool = True, kind: str | None = None) -> dict[str, Any]:
    """What GET returns for a workload created from `body`: read-only fields added and,
    with `defaults`, the server's defaults filled in (CONTRACT.md §5): with `kind`, what
    the simulator fills in for that kind, else a distributed training's or inference's
    (by the body's shape)."""
    if kind is not None and defaults:
        filled = copy.deepcopy(body)
        next(k for k in sim_kinds.KINDS if k.path == kinds.get(kind).api_path).fill(
            filled, random.Random(0))
        return live_of(filled, workload_id=workload_id, desired_phase=desired_phase,
                       actual_phase=actual_phase, defaults=False)
    live = copy.deepcopy(body)
    live.pop("templateId", None)
    live.update({
        "workloadId": workload_id,
        "requestedName": body["name"],
        "departmentId": "2",
        "createdBy": "ci-bot@example.com",
        "createdAt": "2024-11-30T10:09:00.000Z",
        "desiredPhase": desired_phase,
    })
    if actual_phase is not None:
        live["actualPhase"] = actual_phase
    if not defaults:
        return live
    spec = live["spec"]
    if "leader" in spec:  # distributed inference
        spec.setdefault("restartPolicy", "RecreateGroupOnPodRestart")
        spec.setdefault("startupPolicy", "LeaderCreated")
        sp = spec.setdefault("servingPort", {})
        sp.setdefault("protocol", "http")
        sp.setdefault("authorizationType", "public")
        sp.setdefault("exposeExternally", True)
        sp.setdefault("exposedUrl", f"https://{body['name']}.inference.example.com")
        containers = [spec["leader"]] + ([spec["worker"]] if "worker" in spec else [])
    else:
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("autoDeletionTimeAfterCompletionSeconds", 2592000)
        spec.setdefault("slotsPerWorker", 1)
        spec.setdefault("sshAuthMountPath", "/root/.ssh")
        sec = spec.setdefault("security", {})
        sec.setdefault("hostIpc", False)
        sec.setdefault("hostNetwork", False)
        for port in spec.get("ports", []):
            port.setdefault("external", 30500)
        for pvc in spec.get("storage", {}).get("pvc", []):
            pvc.setdefault("readOnly", False)
            pvc.setdefault("ephemeral", False)
        containers = [spec]
    for c in containers:
        c.setdefault("imagePullPolicy", "IfNotPresent")
        c.setdefault("security", {}).setdefault("uidGidSource", "fromTheImage")
    return live


def set_path(body: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of `body` with the dotted dict path set (value None removes the key)."""
    out = copy.deepcopy(body)
    node = out
    parts = path.split(".")
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = value
    return out


def edit(body: dict[str, Any], fn) -> dict[str, Any]:
    """A copy of `body` after `fn(copy)` edits it in place."""
    out = copy.deepcopy(body)
    fn(out)
    return out


def desired(body: dict[str, Any], kind: str | None = None, *, phase: str = "Running",
            prevent_destroy: bool = False, ignore: tuple[str, ...] = (),
            source: str = "specs/x.yaml") -> DesiredWorkload:
    kind = kind or ("DistributedInference" if "leader" in body.get("spec", {})
                    else "DistributedTraining")
    return DesiredWorkload(
        kind=kind, name=body["name"], project_id=body["projectId"],
        cluster_id=body["clusterId"], body=body, desired_phase=phase,
        lifecycle=Lifecycle(prevent_destroy=prevent_destroy, ignore_changes=ignore),
        source=source, line=1)


def rstate(body: dict[str, Any], kind: str | None = None, *,
           workload_id: str | None = "3f1c1d2e-0000-4000-8000-000000000001",
           desired_phase: str = "Running", last_phase: str | None = "Running",
           prevent_destroy: bool = False, completed: bool = False) -> ResourceState:
    kind = kind or ("DistributedInference" if "leader" in body.get("spec", {})
                    else "DistributedTraining")
    return ResourceState(
        kind=kind, name=body["name"], project_id=body["projectId"],
        cluster_id=body["clusterId"], workload_id=workload_id, applied=copy.deepcopy(body),
        desired_phase=desired_phase, last_phase=last_phase,
        prevent_destroy=prevent_destroy, completed=completed)


def state_of(*entries: ResourceState) -> State:
    return State(lineage="8a4e4c52-6f6e-4f0e-9d7c-2b3a1c0d9e11", serial=5,
                 resources={kinds.address(e.kind, e.project_id, e.name): e for e in entries})


def addr(body: dict[str, Any], kind: str | None = None) -> str:
    kind = kind or ("DistributedInference" if "leader" in body.get("spec", {})
                    else "DistributedTraining")
    return kinds.address(kind, body["projectId"], body["name"])
