"""The simulator's table of workload kinds: what each kind's routes take and answer.

Callers: `reconciler.simulator.app` builds every kind's routes from `KINDS` and its
handlers read the entry; tests read the OpenAPI names to check responses. This table
is the simulator's own, written from NVIDIA's OpenAPI files and CONTRACT.md, not the
engine's `reconciler.kinds`: the fake stays an independent check of the client.

An entry says: its API path; its create body (`schema.Obj`) and the cross-field rules
a server checks beyond it; whether a 400 carries `complianceIssues` (OpenAPI
`SubmissionErrorV2`) or is a plain `Error`; the body keys a create stores (the create
schema's own keys, after the metadata every kind shares); its PATCH body, the paths a
PATCH changes (no PATCH route without them; each is replaced whole by the value sent)
and the rules a PATCH body must also meet; whether it suspends; the list endpoint's
`type` for it (also the key its records are stored under) and the `category` a list item
shows when the spec names none; the spec keys a list item repeats; and the function
that fills the server-side defaults into a created body.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable

from reconciler.simulator import defaults, schema

SUBMISSION_ERROR = "SubmissionErrorV2"
PLAIN_ERROR = "Error"


def _no_rules(body: dict) -> list[schema.Issue]:
    return []


@dataclass(frozen=True)
class Kind:
    type: str  # the list endpoint's `type`; the key a record of this kind is stored under
    path: str  # POST here; GET, DELETE (and PATCH) on path/{workloadId}; suspend/resume below
    category: str  # a list item's `category` when the spec names none
    create: schema.Obj  # the create body
    fill: Callable[[dict, random.Random], None]  # fills server-side defaults in place
    # Where NVIDIA's OpenAPI describes it: the file, and the component schemas of the
    # create body and of the workload answered (tests check against them).
    openapi: str
    request: str
    response: str
    rules: Callable[[dict], list[schema.Issue]] = _no_rules  # checked once the schema passes
    invalid: str = PLAIN_ERROR  # the 400 body: SUBMISSION_ERROR or PLAIN_ERROR
    suspends: bool = False
    update: schema.Obj | None = None  # the PATCH body; None: no PATCH route
    updatable: tuple[str, ...] = ()  # the dotted paths of it that a PATCH changes
    update_request: str | None = None  # its OpenAPI component
    update_rules: Callable[[dict], list[schema.Issue]] = _no_rules  # on a valid PATCH body
    list_fields: tuple[str, ...] = ()  # spec keys a list item repeats when set
    body_keys: tuple[str, ...] = field(init=False)  # the create-body keys a record keeps

    def __post_init__(self) -> None:
        if self.invalid not in (SUBMISSION_ERROR, PLAIN_ERROR):
            raise ValueError(f"{self.type}: invalid must be {SUBMISSION_ERROR} or {PLAIN_ERROR}")
        if len({self.update is None, not self.updatable, self.update_request is None}) > 1:
            raise ValueError(f"{self.type}: a PATCH needs its body, paths and OpenAPI name")
        for path in self.updatable:
            try:
                schema.at(self.update, path)
            except (KeyError, AttributeError):
                raise ValueError(f"{self.type}: {path} is not in the PATCH body") from None
        object.__setattr__(self, "body_keys", tuple(
            k for k in self.create.properties if k not in schema.META))

    @property
    def issues_in_errors(self) -> bool:
        """Whether a 400 lists `complianceIssues`."""
        return self.invalid == SUBMISSION_ERROR


DISTRIBUTED = Kind(
    type="distributed", path="/api/v1/workloads/distributed",
    create=schema.DISTRIBUTED_CREATE, rules=schema.distributed_rules,
    invalid=SUBMISSION_ERROR, fill=defaults.fill_distributed, suspends=True,
    category="Train", list_fields=("distributedFramework",),
    openapi="distributed.yml", request="DistributedCreationRequest",
    response="DistributedWorkload",
)

DISTRIBUTED_INFERENCE = Kind(
    type="distributed-inference", path="/api/v1/workloads/distributed-inferences",
    create=schema.DI_CREATE, rules=schema.distributed_inference_rules,
    fill=defaults.fill_distributed_inference,
    update=schema.DI_UPDATE, updatable=("spec.replicas",), update_request="UpdateRequest",
    category="Deploy",
    openapi="distributed-inferences.yml", request="DistributedInferenceCreationRequest",
    response="DistributedInference",
)

TRAINING = Kind(
    type="training", path="/api/v1/workloads/trainings",
    create=schema.TRAINING_CREATE, rules=schema.image_rules,
    invalid=SUBMISSION_ERROR, fill=defaults.fill_training, suspends=True,
    category="Train",
    openapi="trainings.yml", request="TrainingCreationRequest", response="Training1",
)

WORKSPACE = Kind(
    type="workspace", path="/api/v1/workloads/workspaces",
    create=schema.WORKSPACE_CREATE, rules=schema.image_rules,
    invalid=SUBMISSION_ERROR, fill=defaults.fill_workspace, suspends=True,
    category="Build",
    openapi="workspaces.yml", request="WorkspaceCreationRequest", response="Workspace1",
)

INFERENCE = Kind(
    type="inference", path="/api/v1/workloads/inferences",
    create=schema.INFERENCE_CREATE, rules=schema.inference_rules,
    fill=defaults.fill_inference,
    update=schema.INFERENCE_UPDATE, update_rules=schema.inference_update_rules,
    updatable=tuple(f"spec.{key}" for key in schema.INFERENCE_UPDATABLE),
    update_request="InferenceUpdateRequest",
    category="Deploy",
    openapi="inferences.yml", request="InferenceCreationRequest", response="Inference1",
)

KINDS: tuple[Kind, ...] = (DISTRIBUTED, DISTRIBUTED_INFERENCE, TRAINING, WORKSPACE, INFERENCE)

__all__ = ["Kind", "KINDS", "DISTRIBUTED", "DISTRIBUTED_INFERENCE", "TRAINING", "WORKSPACE",
           "INFERENCE", "SUBMISSION_ERROR", "PLAIN_ERROR"]
