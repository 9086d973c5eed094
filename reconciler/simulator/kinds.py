"""The simulator's table of workload kinds: what each kind's routes take and answer, and
the cross-field rules a server checks beyond a kind's body schema.

Callers: `app` builds every kind's routes from `KINDS` (`workloads.routes`) and the
handlers read the entry; `store` keeps a record under its kind's `type`; tests read the
OpenAPI names to check responses. This table is the simulator's own, written from
NVIDIA's OpenAPI files and CONTRACT.md, not the engine's `reconciler.kinds`: the fake
stays an independent check of the client.

An entry says: its API path; its create body (`schema`) and the cross-field rules
a server checks beyond it (below); whether a 400 carries `complianceIssues` (OpenAPI
`SubmissionErrorV2`) or is a plain `Error`; the body keys a create stores (the create
schema's own keys, after the metadata every kind shares); its PATCH body, the paths a
PATCH changes (no PATCH route without them; each is replaced whole by the value sent)
and the rules a PATCH body must also meet; whether it suspends; the list endpoint's
`type` for it (also the key its records are stored under) and the `category` a list item
shows when the spec names none; the spec keys a list item repeats; and the function
that fills the server-side defaults into a created body (`defaults`); where its
containers sit in a body (their images and compute are a list item's). The package's
docstring says how to add a kind.
"""
from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

from reconciler.simulator import defaults, manifests, schema
from reconciler.simulator.validator import Issue, Obj, at

SUBMISSION_ERROR = "SubmissionErrorV2"
PLAIN_ERROR = "Error"


def _no_rules(body: dict) -> list[Issue]:
    return []


# --- cross-field rules a server checks beyond the schema ---------------------------


def image_rules(body: dict) -> list[Issue]:
    """A single-container kind's (T, W, I): its image, unless a template may give it."""
    if not body.get("templateId") and not (body.get("spec") or {}).get("image"):
        return [Issue("spec.image", "the image name is mandatory", "required")]
    return []


def distributed_rules(body: dict) -> list[Issue]:
    issues = image_rules(body)
    if body.get("masterSpecSameAsWorker") is True and body.get("masterSpec") is not None:
        issues.append(Issue("masterSpec",
                            "must not be specified when masterSpecSameAsWorker is true"))
    return issues


def distributed_inference_rules(body: dict) -> list[Issue]:
    issues = []
    spec = body.get("spec") or {}
    leader = spec.get("leader")
    if leader is None:
        issues.append(Issue("spec.leader", "must always be provided", "required"))
    elif not body.get("templateId") and not leader.get("image"):
        issues.append(Issue("spec.leader.image", "the image name is mandatory", "required"))
    if (spec.get("workers") or 0) > 0:
        worker = spec.get("worker")
        if worker is None:
            issues.append(Issue("spec.worker", "is required when workers is greater than 0",
                                "required"))
        elif not body.get("templateId") and not worker.get("image"):
            issues.append(Issue("spec.worker.image", "the image name is mandatory", "required"))
    return issues


def _autoscaling_rules(body: dict) -> list[Issue]:
    """CONTRACT.md §7's autoscaling rules on `spec.autoscaling` of a create or PATCH body
    (a PATCH replaces the whole of it), a replica count not sent taken at its default."""
    scaling = (body.get("spec") or {}).get("autoscaling") or {}
    low = scaling.get("minReplicas")
    low = 1 if low is None else low
    high = scaling.get("maxReplicas")
    high = (low or 1) if high is None else high
    issues = []
    if low > high:
        issues.append(Issue("spec.autoscaling.maxReplicas", "must be no less than minReplicas",
                            "min"))
    elif low < high and (low, high) != (0, 1) and scaling.get("metric") is None:
        issues.append(Issue("spec.autoscaling.metric", "is required when minReplicas is less "
                            "than maxReplicas (except 0 and 1)", "required"))
    if scaling.get("metric") is not None and scaling.get("metricThreshold") is None:
        issues.append(Issue("spec.autoscaling.metricThreshold", "is required with metric",
                            "required"))
    if scaling.get("scaleToZeroRetentionSeconds") is not None and low != 0:
        issues.append(Issue("spec.autoscaling.scaleToZeroRetentionSeconds",
                            "is available only when minReplicas is 0"))
    return issues


def inference_rules(body: dict) -> list[Issue]:
    return image_rules(body) + _autoscaling_rules(body)


def inference_update_rules(body: dict) -> list[Issue]:
    return _autoscaling_rules(body)


# --- the table -------------------------------------------------------------------


@dataclass(frozen=True)
class Kind:
    type: str  # the list endpoint's `type`; the key a record of this kind is stored under
    path: str  # POST here; GET, DELETE (and PATCH) on path/{workloadId}; suspend/resume below
    category: str  # a list item's `category` when the spec names none
    create: Obj  # the create body
    fill: Callable[[dict, random.Random], None]  # fills server-side defaults in place
    # Where NVIDIA's OpenAPI describes it: the file, and the component schemas of the
    # create body and of the workload answered (tests check against them).
    openapi: str
    request: str
    response: str
    rules: Callable[[dict], list[Issue]] = _no_rules  # checked once the schema passes
    invalid: str = PLAIN_ERROR  # the 400 body: SUBMISSION_ERROR or PLAIN_ERROR
    suspends: bool = False
    update: Obj | None = None  # the PATCH body; None: no PATCH route
    updatable: tuple[str, ...] = ()  # the dotted paths of it that a PATCH changes
    update_request: str | None = None  # its OpenAPI component
    update_rules: Callable[[dict], list[Issue]] = _no_rules  # on a valid PATCH body
    list_fields: tuple[str, ...] = ()  # spec keys a list item repeats when set
    # The dotted paths of the body's containers (each may hold `image` and `compute`):
    # a list item's `images` are theirs, its `podsRequestedResources` the first's compute.
    containers: tuple[str, ...] = ("spec",)
    # Routes of their own instead of `workloads.routes`: "manifest" (`manifests.routes`),
    # or a function (sim, kind) -> routes, for a type `register`ed from outside that is
    # served apart from the workloads (a test's resource that is no workload).
    custom: str | Callable[..., list] = ""
    # The v2 NIM shape: the create body's name and projectId in `metadata` (no clusterId:
    # the project's), answers `{metadata, desiredPhase, spec}` (`workloads.render`).
    envelope: bool = False
    # Where DELETE is when not under `path` (DELETE /api/v2/workloads/{id}).
    delete_path: str = ""
    gvk: tuple[str, str, str] = ("", "", "")  # an enveloped answer's metadata.gvk
    body_keys: tuple[str, ...] = field(init=False)  # the create-body keys a record keeps

    def __post_init__(self) -> None:
        if self.invalid not in (SUBMISSION_ERROR, PLAIN_ERROR):
            raise ValueError(f"{self.type}: invalid must be {SUBMISSION_ERROR} or {PLAIN_ERROR}")
        if len({self.update is None, not self.updatable, self.update_request is None}) > 1:
            raise ValueError(f"{self.type}: a PATCH needs its body, paths and OpenAPI name")
        for path in self.updatable:
            try:
                at(self.update, path)
            except (KeyError, AttributeError):
                raise ValueError(f"{self.type}: {path} is not in the PATCH body") from None
        object.__setattr__(self, "body_keys", tuple(
            k for k in self.create.properties if k not in schema.META and k != "metadata"))

    @property
    def issues_in_errors(self) -> bool:
        """Whether a 400 lists `complianceIssues`."""
        return self.invalid == SUBMISSION_ERROR


DISTRIBUTED = Kind(
    type="distributed", path="/api/v1/workloads/distributed",
    create=schema.DISTRIBUTED_CREATE, rules=distributed_rules,
    invalid=SUBMISSION_ERROR, fill=defaults.fill_distributed, suspends=True,
    category="Train", list_fields=("distributedFramework",), containers=("spec", "masterSpec"),
    openapi="distributed.yml", request="DistributedCreationRequest",
    response="DistributedWorkload",
)

DISTRIBUTED_INFERENCE = Kind(
    type="distributed-inference", path="/api/v1/workloads/distributed-inferences",
    create=schema.DI_CREATE, rules=distributed_inference_rules,
    fill=defaults.fill_distributed_inference,
    update=schema.DI_UPDATE, updatable=("spec.replicas",), update_request="UpdateRequest",
    category="Deploy", containers=("spec.leader", "spec.worker"),
    openapi="distributed-inferences.yml", request="DistributedInferenceCreationRequest",
    response="DistributedInference",
)

TRAINING = Kind(
    type="training", path="/api/v1/workloads/trainings",
    create=schema.TRAINING_CREATE, rules=image_rules,
    invalid=SUBMISSION_ERROR, fill=defaults.fill_training, suspends=True,
    category="Train",
    openapi="trainings.yml", request="TrainingCreationRequest", response="Training1",
)

WORKSPACE = Kind(
    type="workspace", path="/api/v1/workloads/workspaces",
    create=schema.WORKSPACE_CREATE, rules=image_rules,
    invalid=SUBMISSION_ERROR, fill=defaults.fill_workspace, suspends=True,
    category="Build",
    openapi="workspaces.yml", request="WorkspaceCreationRequest", response="Workspace1",
)

INFERENCE = Kind(
    type="inference", path="/api/v1/workloads/inferences",
    create=schema.INFERENCE_CREATE, rules=inference_rules,
    fill=defaults.fill_inference,
    update=schema.INFERENCE_UPDATE, update_rules=inference_update_rules,
    updatable=tuple(f"spec.{key}" for key in schema.INFERENCE_UPDATABLE),
    update_request="InferenceUpdateRequest",
    category="Deploy",
    openapi="inferences.yml", request="InferenceCreationRequest", response="Inference1",
)

# --- Workloads V2 (CONTRACT.md §12): routes, bodies and answers in `manifests` ---------

MANIFEST = Kind(
    type="manifest", path="/api/v2/workloads",
    create=manifests.CREATE, fill=lambda body, rand: None, custom="manifest",
    update=manifests.UPDATE, updatable=("metadata",), update_request="WorkloadV2UpdateRequest",
    category="Train",
    openapi="workloads-v2.yml", request="WorkloadV2CreateRequest", response="WorkloadV2",
)


def nim_rules(body: dict) -> list[Issue]:
    """The "mandatory" fields of a NIM spec (create and update: both send it whole)."""
    spec = body.get("spec") or {}
    issues = []
    if not spec.get("image"):
        issues.append(Issue("spec.image", "the image name is mandatory", "required"))
    scaling = spec.get("autoscaling")
    if isinstance(scaling, dict):
        for key in ("metric", "metricThreshold"):
            if scaling.get(key) is None:
                issues.append(Issue(f"spec.autoscaling.{key}", "is mandatory", "required"))
        low, high = scaling.get("minReplicas"), scaling.get("maxReplicas")
        if low is not None and high is not None and high < low:
            issues.append(Issue("spec.autoscaling.maxReplicas",
                                "must be no less than minReplicas", "min"))
    serving = spec.get("servingPort")
    if isinstance(serving, dict) and serving.get("port") is None:
        issues.append(Issue("spec.servingPort.port", "is mandatory", "required"))
    cache = (spec.get("modelStore") or {}).get("nimCache")
    if isinstance(cache, dict) and not cache.get("name"):
        issues.append(Issue("spec.modelStore.nimCache.name", "is mandatory", "required"))
    return issues


NIM_SERVICE = Kind(
    type="nim-service", path="/api/v2/workloads/nim-services",
    create=schema.NIM_CREATE, rules=nim_rules, invalid=SUBMISSION_ERROR,
    fill=defaults.fill_nim_service,
    update=schema.NIM_UPDATE, updatable=("spec",), update_request="NimServiceUpdateRequest",
    update_rules=nim_rules,
    category="Deploy",
    openapi="nim-services.yml", request="NimServiceCreateRequest", response="NimServiceResponse",
    envelope=True, delete_path="/api/v2/workloads",
    gvk=("apps.nvidia.com", "v1alpha1", "NIMService"),
)

# Every kind the simulator serves: `create_app` builds the routes of those listed when it
# is called. A list, so that `register` can add one (a test's throwaway kind).
KINDS: list[Kind] = [DISTRIBUTED, DISTRIBUTED_INFERENCE, TRAINING, WORKSPACE, INFERENCE,
                     NIM_SERVICE, MANIFEST]


def register(kind: Kind) -> Kind:
    """Serve `kind` too, in every simulator made from now on (`create_app`, `sim serve`
    in this process); returns it. ValueError when its `type` or `path` is taken. How a
    test adds a kind of its own without editing this table (docs/kinds.md)."""
    if any(k.type == kind.type or k.path == kind.path for k in KINDS):
        raise ValueError(f"a simulator kind with type {kind.type} or path {kind.path} exists")
    KINDS.append(kind)
    return kind


def unregister(kind: Kind) -> None:
    """Stop serving `kind` (added by `register`) in simulators made from now on."""
    KINDS.remove(kind)

__all__ = ["Kind", "KINDS", "register", "unregister", "DISTRIBUTED", "DISTRIBUTED_INFERENCE", "TRAINING", "WORKSPACE",
           "INFERENCE", "NIM_SERVICE", "MANIFEST", "SUBMISSION_ERROR", "PLAIN_ERROR", "image_rules", "distributed_rules",
           "distributed_inference_rules", "inference_rules", "inference_update_rules"]
