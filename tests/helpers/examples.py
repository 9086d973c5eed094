"""Plans built by hand from `plans` objects, one per situation a user meets.

Each is rendered into tests/render/golden/<name>.txt and <name>.json."""

from __future__ import annotations

from reconciler import plans
from reconciler.plans import Action, FieldChange, Plan, ResourceChange

LINEAGE = "6b0c5a52-9f57-4b5b-9d3c-7c2b1a0e4d11"
CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
IDS = {
    "bert-ddp": "0b6f6a4e-1d2c-4a43-9c44-3d1d5f1c9a01",
    "llama-70b-serve": "5d9e3c1a-7f2b-4e8d-a6c4-2b1f0e9d8c72",
    "llama-ft-ddp": "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c63",
    "resnet-mpi": "3c2b1a0f-9e8d-4c7b-a6f5-e4d3c2b1a054",
    "old-sweep": "7e6d5c4b-3a2f-4e1d-9c0b-a9f8e7d6c545",
}


def training_body(name: str, image: str = "nvcr.io/nvidia/pytorch:24.05-py3",
                  workers: int = 4) -> dict:
    return {
        "name": name, "projectId": "7", "clusterId": CLUSTER,
        "masterSpecSameAsWorker": True,
        "spec": {
            "image": image,
            "distributedFramework": "PyTorch",
            "numWorkers": workers,
            "command": "torchrun",
            "args": "--nproc_per_node=8 train.py --config configs/bert.yaml",
            "compute": {"gpuDevicesRequest": 8, "cpuMemoryRequest": "64G"},
            "environmentVariables": [
                {"name": "NCCL_DEBUG", "value": "INFO"},
                {"name": "HF_TOKEN", "value": "hf_abcdefghijklmnop"},
            ],
        },
    }


def inference_body(name: str, replicas: int) -> dict:
    return {
        "name": name, "projectId": "7", "clusterId": CLUSTER,
        "spec": {
            "replicas": replicas, "workers": 1, "servingPort": {"port": 8000},
            "leader": {"image": "vllm/vllm-openai:v0.6.3", "compute": {"gpuDevicesRequest": 8}},
            "worker": {"image": "vllm/vllm-openai:v0.6.3", "compute": {"gpuDevicesRequest": 8}},
        },
    }


def training(name: str, action: Action, reason: str, **kw) -> ResourceChange:
    return ResourceChange(address=f"DistributedTraining/7/{name}", kind="DistributedTraining",
                          name=name, project_id="7", action=action, reason=reason, **kw)


def inference(name: str, action: Action, reason: str, **kw) -> ResourceChange:
    return ResourceChange(address=f"DistributedInference/7/{name}", kind="DistributedInference",
                          name=name, project_id="7", action=action, reason=reason, **kw)


def create() -> ResourceChange:
    return training("bert-ddp", Action.CREATE, plans.REASON_NEW, after=training_body("bert-ddp"),
                    desired_phase="Running")


def update_drift() -> ResourceChange:
    return inference(
        "llama-70b-serve", Action.UPDATE, plans.REASON_DRIFT,
        changes=[FieldChange("spec.replicas", 4, 2, drift=True)],
        workload_id=IDS["llama-70b-serve"], before=inference_body("llama-70b-serve", 4),
        after=inference_body("llama-70b-serve", 2), desired_phase="Running",
        live_phase="Running", patch={"spec": {"replicas": 2}},
        applied=inference_body("llama-70b-serve", 2))


def update() -> ResourceChange:
    return inference(
        "llama-70b-serve", Action.UPDATE, plans.REASON_SPEC_CHANGED,
        changes=[FieldChange("spec.replicas", 2, 4)],
        workload_id=IDS["llama-70b-serve"], before=inference_body("llama-70b-serve", 2),
        after=inference_body("llama-70b-serve", 4), desired_phase="Running",
        live_phase="Running", patch={"spec": {"replicas": 4}})


def replace() -> ResourceChange:
    new = training_body("llama-ft-ddp", image="nvcr.io/nvidia/pytorch:24.10-py3")
    new["spec"]["environmentVariables"].append({"name": "HF_HOME", "value": "/data/hf"})
    return training(
        "llama-ft-ddp", Action.REPLACE, plans.REASON_SPEC_CHANGED,
        changes=[
            FieldChange("spec.environmentVariables[HF_HOME]", None,
                        {"name": "HF_HOME", "value": "/data/hf"}, forces_replacement=True),
            FieldChange("spec.environmentVariables[HF_TOKEN].value", "hf_old", "hf_new",
                        forces_replacement=True),
            FieldChange("spec.image", "nvcr.io/nvidia/pytorch:24.05-py3",
                        "nvcr.io/nvidia/pytorch:24.10-py3", forces_replacement=True),
            FieldChange("spec.tolerations", [{"key": "gpu", "operator": "Exists"}], None,
                        forces_replacement=True),
        ],
        workload_id=IDS["llama-ft-ddp"], before=training_body("llama-ft-ddp"), after=new,
        desired_phase="Running", live_phase="Running")


def delete() -> ResourceChange:
    return training("old-sweep", Action.DELETE, plans.REASON_REMOVED,
                    workload_id=IDS["old-sweep"], before=training_body("old-sweep"),
                    live_phase="Running")


def suspend() -> ResourceChange:
    return training("bert-ddp", Action.SUSPEND, plans.REASON_PHASE, workload_id=IDS["bert-ddp"],
                    before=training_body("bert-ddp"), after=training_body("bert-ddp"),
                    desired_phase="Stopped", live_phase="Running")


def resume_phase_drift() -> ResourceChange:
    return training("resnet-mpi", Action.RESUME, plans.REASON_PHASE_DRIFT,
                    workload_id=IDS["resnet-mpi"], before=training_body("resnet-mpi"),
                    after=training_body("resnet-mpi"), desired_phase="Running",
                    live_phase="Stopped", applied=training_body("resnet-mpi"))


def recreate() -> ResourceChange:
    return training("resnet-mpi", Action.CREATE, plans.REASON_DELETED_OUTSIDE,
                    before=None, after=training_body("resnet-mpi", workers=2),
                    desired_phase="Running", applied=training_body("resnet-mpi", workers=2))


def noop(name: str = "steady") -> ResourceChange:
    return training(name, Action.NOOP, plans.REASON_UNCHANGED, workload_id=IDS["bert-ddp"],
                    before=training_body(name), after=training_body(name),
                    desired_phase="Running", live_phase="Running")


def completed() -> ResourceChange:
    return training("finished-run", Action.NOOP, plans.REASON_COMPLETED,
                    workload_id=IDS["old-sweep"], before=training_body("finished-run"),
                    after=training_body("finished-run"), desired_phase="Running",
                    live_phase="Completed")


def state_only() -> list[ResourceChange]:
    """An adoption with no action, and a lifecycle flag only the state records."""
    adopted = noop("found-live")
    adopted.adopted = True
    flagged = noop("protected")
    flagged.state_changes = ["lifecycle.preventDestroy"]
    return [adopted, flagged]


def plan(*changes: ResourceChange, targets: list[str] | None = None) -> Plan:
    return Plan(changes=sorted(changes, key=lambda c: c.address), lineage=LINEAGE, serial=3,
                targets=targets or [])


def _change(kind: str, project: str, name: str, action: Action, reason: str,
            **kw) -> ResourceChange:
    return ResourceChange(address=f"{kind}/{project}/{name}", kind=kind, name=name,
                          project_id=project, action=action, reason=reason, **kw)


def _single_body(name: str, project: str, compute: dict, **spec) -> dict:
    return {"name": name, "projectId": project, "clusterId": CLUSTER,
            "spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "compute": compute, **spec}}


def gpu_kinds() -> Plan:
    """Every kind moving GPUs, in three projects: team-a (7) over its quota of 64, team-b
    (12) within its 16, and 9, whose quota is unknown (its project could not be read)."""
    wide = training_body("llama-ft-ddp", workers=8)
    serve = _single_body("chat", "9", {"gpuDevicesRequest": 1}, autoscaling={
        "minReplicas": 1, "maxReplicas": 2, "metric": "concurrency", "metricThreshold": 8})
    wider = {**serve, "spec": {**serve["spec"], "autoscaling": {
        **serve["spec"]["autoscaling"], "maxReplicas": 6}}}
    lora = _single_body("lora", "12", {"gpuRequestType": "portion", "gpuPortionRequest": 0.5})
    notebook = _single_body("notebook", "12", {"gpuRequestType": "memory",
                                               "gpuMemoryRequest": "20Gi"})
    changes = [
        training("llama-ft-ddp", Action.REPLACE, plans.REASON_SPEC_CHANGED,
                 changes=[FieldChange("spec.numWorkers", 4, 8, forces_replacement=True)],
                 workload_id=IDS["llama-ft-ddp"], before=training_body("llama-ft-ddp"),
                 after=wide, desired_phase="Running", live_phase="Running",
                 project_name="team-a"),
        update(),
        _change("Inference", "9", "chat", Action.UPDATE, plans.REASON_SPEC_CHANGED,
                changes=[FieldChange("spec.autoscaling.maxReplicas", 2, 6)],
                workload_id=IDS["resnet-mpi"], before=serve, after=wider,
                desired_phase="Running", live_phase="Running",
                patch={"spec": {"autoscaling": wider["spec"]["autoscaling"]}}),
        _change("Training", "12", "lora", Action.CREATE, plans.REASON_NEW, after=lora,
                desired_phase="Running", project_name="team-b"),
        _change("Workspace", "12", "notebook", Action.SUSPEND, plans.REASON_PHASE,
                workload_id=IDS["old-sweep"], before=notebook, after=notebook,
                desired_phase="Stopped", live_phase="Running", project_name="team-b"),
    ]
    changes[1].project_name = "team-a"
    the_plan = plan(*changes)
    the_plan.gpu_quotas = {"7": 64, "12": 16, "9": None}
    return the_plan


PLANS = {
    "create": lambda: plan(create()),
    "update": lambda: plan(update(), noop()),
    "update_drift": lambda: plan(update_drift()),
    "replace": lambda: plan(replace()),
    "delete": lambda: plan(delete()),
    "suspend": lambda: plan(suspend()),
    "resume_phase_drift": lambda: plan(resume_phase_drift()),
    "deleted_outside": lambda: plan(recreate()),
    "no_changes": lambda: plan(noop(), completed()),
    "empty": lambda: Plan(changes=[]),
    "mixed": lambda: plan(delete(), update(), replace(), resume_phase_drift(), noop(),
                          completed(), training("new-job", Action.CREATE, plans.REASON_NEW,
                                                after=training_body("new-job"))),
    "state_only": lambda: plan(*state_only(), noop()),
    "targeted": lambda: plan(update(), targets=["DistributedInference/7/llama-70b-serve"]),
    "gpu_kinds": gpu_kinds,
}
