"""The pydantic model of one spec document, per workload kind.

A document is the API's create body (`TrainingCreationRequest`,
`WorkspaceCreationRequest`, `InferenceCreationRequest`, `DistributedCreationRequest`,
`DistributedInferenceCreationRequest`) plus `kind` and the reconciler's controls
(`desiredPhase`, `lifecycle`). `MODELS` maps a kind's name to its document model; adding
a kind is one entry in `reconciler.kinds` and one model here (or `register`ed from
outside: a test's throwaway kind). Shared sub-models live in
`reconciler.desired.fields`. Caller: `reconciler.desired.loader`.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (BeforeValidator, Field, StringConstraints, ValidationError,
                      field_validator, model_validator)
from pydantic_core import InitErrorDetails

from reconciler import kinds
from reconciler.desired.fields import UUID_RE, checked_claim
from reconciler.desired.fields import (
    DIGITS_RE, DNS_LABEL_MAX, DNS_LABEL_RE, HANDLE_RE, METRIC_RE, Annotation, ClaimInfo, Compute, Container,
    EnvironmentVariable, Image, ImagePullPolicy, ImagePullSecret, Label, Name63, NonEmpty, Port, Probes,
    Toleration, ExposedUrl, InferenceSecurity,
    InferenceStorage, Int32, Int64, LeaderWorkerStorage, NonNegInt32, NonNegInt64, PortSpec,
    PosInt32, Preemptibility, RelatedUrl, Security, Storage, Strict, Uuid, rule_error,
    users_or_groups,
)


def _int_to_str(value: Any) -> Any:
    # `projectId: 7` in YAML means the project "7"; the API sends and takes a string.
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return value


ProjectId = Annotated[str, BeforeValidator(_int_to_str), StringConstraints(pattern=DIGITS_RE)]
WorkloadName = Annotated[str, StringConstraints(min_length=1, max_length=DNS_LABEL_MAX, pattern=DNS_LABEL_RE)]
# A Run:ai project's name (its namespace is runai-<name>): only the form, not existence.
ProjectName = Annotated[str, StringConstraints(min_length=1, max_length=DNS_LABEL_MAX, pattern=DNS_LABEL_RE)]

# Keys of a document that are never sent to the API.
CONTROL_KEYS = ("kind", "desiredPhase", "lifecycle", "useGivenNameAsPrefix", "project")


class Lifecycle(Strict):
    preventDestroy: bool | None = None
    ignoreChanges: list[str] | None = None
    sensitive: list[str] | None = None


# --- DistributedTraining -------------------------------------------------------------

class WorkloadContainer(Container):
    """The keys of a single-container spec that trainings, workspaces and inferences
    share beyond `Container` (placement, ports and URLs)."""
    category: str | None = None
    exposedUrls: list[ExposedUrl] | None = None
    nodePools: list[str] | None = None
    ports: list[PortSpec] | None = None
    preemptibility: Preemptibility | None = None
    priorityClass: str | None = None
    relatedUrls: list[RelatedUrl] | None = None


class MasterSpec(WorkloadContainer):
    """`MasterSpec`: the training keys without the distributed-only ones."""
    autoDeletionTimeAfterCompletionSeconds: Int64 | None = None
    backoffLimit: Int64 | None = None
    restartPolicy: Literal["Always", "Never", "OnFailure"] | None = None
    security: Security | None = None
    stdin: bool | None = None
    storage: Storage | None = None
    terminateAfterPreemption: bool | None = None
    terminationGracePeriodSeconds: NonNegInt64 | None = None
    tty: bool | None = None

    @model_validator(mode="after")
    def _tty(self):
        if self.tty and not self.stdin:
            raise rule_error("requires stdin: true", "tty")
        return self


class DistributedTrainingSpec(MasterSpec):
    """`DistributedSpecSpec`."""
    cleanPodPolicy: Literal["None", "All", "Running"] | None = None
    distributedFramework: Literal["MPI", "PyTorch", "TF", "XGBoost", "JAX"] | None = None
    maxReplicas: Int64 | None = None
    minReplicas: Int64 | None = None
    mpiLauncherCreationPolicy: Literal["AtStartup", "WaitForWorkersReady"] | None = None
    numWorkers: PosInt32 | None = None
    slotsPerWorker: PosInt32 | None = None
    sshAuthMountPath: str | None = None

    @model_validator(mode="after")
    def _framework_rules(self):
        fw = self.distributedFramework
        if fw is not None and fw != "MPI":
            mpi_only = self.given("slotsPerWorker", "sshAuthMountPath", "mpiLauncherCreationPolicy")
            if mpi_only:
                raise rule_error(f"applies to MPI only (distributedFramework is {fw})", mpi_only[0])
        if fw is not None and fw != "PyTorch":
            torch_only = self.given("minReplicas", "maxReplicas")
            if torch_only:
                raise rule_error(f"applies to PyTorch only (distributedFramework is {fw})",
                                 torch_only[0])
        if (self.minReplicas is not None and self.maxReplicas is not None
                and self.maxReplicas < self.minReplicas):
            raise rule_error(f"must not be less than minReplicas ({self.minReplicas})", "maxReplicas")
        return self


# --- DistributedInference ------------------------------------------------------------

class LeaderWorkerSpec(Container):
    """`DistributedInferenceLeaderWorkerSpec1`."""
    security: InferenceSecurity | None = None
    storage: LeaderWorkerStorage | None = None


class ServingPort(Strict):
    port: Annotated[int, Field(ge=1, le=65535)] | None = None
    protocol: Literal["http"] | None = None
    authorizationType: Literal["public", "authenticatedUsers", "authorizedUsers",
                               "authorizedGroups"] | None = None
    authorizedUsers: list[str] | None = None
    authorizedGroups: list[str] | None = None
    exposeExternally: bool | None = None
    exposedUrl: str | None = None

    @model_validator(mode="after")
    def _auth(self):
        users_or_groups(self)
        return self


class DistributedInferenceSpec(Strict):
    """`DistributedInferenceSpecSpec`."""
    category: str | None = None
    nodePools: list[str] | None = None
    preemptibility: Preemptibility | None = None
    priorityClass: str | None = None
    restartPolicy: Literal["RecreateGroupOnPodRestart", "None"] | None = None
    servingPort: ServingPort | None = None
    startupPolicy: Literal["LeaderCreated", "LeaderReady"] | None = None
    workers: Annotated[int, Field(ge=0, le=1000)] | None = None
    replicas: Annotated[int, Field(ge=0, le=1000)] | None = None
    leader: LeaderWorkerSpec
    worker: LeaderWorkerSpec | None = None

    @model_validator(mode="after")
    def _worker(self):
        if self.workers and self.worker is None:
            raise rule_error(f"is required when workers is greater than 0 (workers: {self.workers})",
                             "worker")
        return self


# --- Training and Workspace ----------------------------------------------------------

class WorkspaceSpec(MasterSpec):
    """`WorkspaceSpecSpec`: exactly the keys a training container has."""


class TrainingSpec(MasterSpec):
    """`TrainingSpecSpec`."""
    completions: NonNegInt32 | None = None
    parallelism: NonNegInt32 | None = None


# --- Inference -----------------------------------------------------------------------

Seconds3600 = Annotated[int, Field(ge=0, le=3600)]


class InferenceServingPort(Strict):
    container: Annotated[int, Field(ge=1, le=65535)] | None = None
    protocol: Literal["http", "grpc"] | None = None
    authorizationType: Literal["public", "authenticatedUsers", "authorizedUsers",
                               "authorizedGroups", "authorizedUsersOrGroups"] | None = None
    authorizedUsers: list[str] | None = None
    authorizedGroups: list[str] | None = None
    clusterLocalAccessOnly: bool | None = None

    @model_validator(mode="after")
    def _auth(self):
        if self.authorizationType != "authorizedUsersOrGroups":
            users_or_groups(self)
        return self


class Autoscaling(Strict):
    metricThresholdPercentage: Annotated[float, Field(ge=1, le=100)] | None = None
    minReplicas: NonNegInt32 | None = None
    maxReplicas: PosInt32 | None = None
    initialReplicas: NonNegInt32 | None = None
    activationReplicas: PosInt32 | None = None
    concurrencyHardLimit: NonNegInt32 | None = None
    scaleToZeroRetentionSeconds: Seconds3600 | None = None
    scaleDownDelaySeconds: Seconds3600 | None = None
    initializationTimeoutSeconds: PosInt32 | None = None  # deprecated by the API
    metric: Annotated[str, StringConstraints(pattern=METRIC_RE)] | None = None
    metricThreshold: Int32 | None = None

    @model_validator(mode="after")
    def _rules(self):
        # CONTRACT.md §5/§7: minReplicas defaults to 1, maxReplicas to minReplicas (or 1).
        low = 1 if self.minReplicas is None else self.minReplicas
        high = (low or 1) if self.maxReplicas is None else self.maxReplicas
        if low > high:
            at = "maxReplicas" if self.maxReplicas is not None else "minReplicas"
            raise rule_error(f"minReplicas ({low}) must not be greater than maxReplicas ({high})",
                             at)
        if low < high and (low, high) != (0, 1) and self.metric is None:
            raise rule_error(f"is required when minReplicas ({low}) is less than maxReplicas "
                             f"({high}), except 0 and 1", "metric")
        if self.metric is not None and self.metricThreshold is None:
            raise rule_error("is required with metric", "metricThreshold")
        if self.scaleToZeroRetentionSeconds is not None and low != 0:
            raise rule_error(f"is allowed only when minReplicas is 0 (minReplicas: {low})",
                             "scaleToZeroRetentionSeconds")
        return self


class ServingConfiguration(Strict):
    initializationTimeoutSeconds: PosInt32 | None = None
    requestTimeoutSeconds: PosInt32 | None = None


class InferenceSpec(WorkloadContainer):
    """`InferenceSpecSpec`: a container without the run-to-completion keys, served."""
    security: InferenceSecurity | None = None
    storage: InferenceStorage | None = None
    servingPort: InferenceServingPort | None = None
    autoscaling: Autoscaling | None = None
    servingConfiguration: ServingConfiguration | None = None


# --- NIMService (nim-services.yml: NimServiceSpec) ------------------------------------

class NimCompute(Compute):
    """`NimServiceSpec.compute`: `Compute` without extendedResources and largeShmRequest."""

    @model_validator(mode="before")
    @classmethod
    def _not_here(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in ("extendedResources", "largeShmRequest"):
                if key in data:
                    raise rule_error("is not a field of a NIM service's compute", key)
        return data


class NimAutoscaling(Strict):
    minReplicas: PosInt32 | None = None
    maxReplicas: PosInt32 | None = None
    metric: Annotated[str, StringConstraints(pattern=METRIC_RE)]
    metricThreshold: Int32
    scaleWindowSeconds: Annotated[int, Field(ge=60, le=3600)] | None = None

    @model_validator(mode="after")
    def _range(self):
        # "maxReplicas ... Defaults to minReplicas. Must be no less than minReplicas."
        if (self.minReplicas is not None and self.maxReplicas is not None
                and self.maxReplicas < self.minReplicas):
            raise rule_error(f"must not be less than minReplicas ({self.minReplicas})",
                             "maxReplicas")
        return self


class NimCache(Strict):
    name: NonEmpty
    profile: NonEmpty | None = None


class NimPvc(Strict):
    """`NimServicePvcFields`."""
    existingPvc: bool | None = None
    claimName: Name63 | None = None
    readOnly: bool | None = None
    claimInfo: ClaimInfo | None = None

    @model_validator(mode="after")
    def _claim(self):
        return checked_claim(self)


class NimModelStore(Strict):
    nimCache: NimCache | None = None
    pvc: NimPvc | None = None

    @model_validator(mode="after")
    def _one(self):
        if self.nimCache is not None and self.pvc is not None:
            raise rule_error("nimCache and pvc are mutually exclusive: the model is stored "
                             "in one of them", "pvc")
        if self.nimCache is None and self.pvc is None:
            raise rule_error("needs nimCache or pvc")
        return self


class NimMultiNode(Strict):
    workers: Annotated[int, Field(ge=1, le=1000)] | None = None


class NimSecurity(Strict):
    runAsUid: Int64 | None = None
    runAsGid: Int64 | None = None


class NimServingPort(Strict):
    port: Port
    grpcPort: Port | None = None
    metricsPort: Port | None = None
    serviceType: Literal["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"] | None = None
    exposeExternally: bool | None = None
    exposedUrl: str | None = None
    exposedProtocol: Literal["http", "grpc"] | None = None


class NimServiceSpec(Strict):
    """`NimServiceSpec`: every key of it, with its ranges and enums; the "mandatory"
    fields (image, autoscaling's metric and threshold, servingPort.port, a nimCache's
    name) required."""
    annotations: list[Annotation] | None = None
    autoscaling: NimAutoscaling | None = None
    category: str | None = None
    compute: NimCompute | None = None
    environmentVariables: list[EnvironmentVariable] | None = None
    image: Image
    imagePullPolicy: ImagePullPolicy | None = None
    imagePullSecrets: list[ImagePullSecret] | None = None
    labels: list[Label] | None = None
    modelStore: NimModelStore | None = None
    multiNode: NimMultiNode | None = None
    ngcAuthSecret: Annotated[str, StringConstraints(pattern=DNS_LABEL_RE)] | None = None
    nodePools: list[str] | None = None
    preemptibility: Preemptibility | None = None
    priorityClass: str | None = None
    probes: Probes | None = None
    replicas: Annotated[int, Field(ge=0, le=1000)] | None = None
    security: NimSecurity | None = None
    servingPort: NimServingPort | None = None
    tolerations: list[Toleration] | None = None

    @model_validator(mode="after")
    def _unique_names(self):
        return Container._unique_names(self)


# --- documents -----------------------------------------------------------------------

class Document(Strict):
    """The keys every kind's document has. Exactly one of `projectId` and `project` (the
    project's name, resolved to its id by plan/apply/drift): the loader checks that."""
    KIND: ClassVar[kinds.Kind]

    kind: str
    name: WorkloadName
    projectId: ProjectId | None = None
    project: ProjectName | None = None
    clusterId: Uuid
    templateId: Uuid | None = None
    useGivenNameAsPrefix: bool | None = None
    desiredPhase: Literal["Running", "Stopped"] | None = None
    lifecycle: Lifecycle | None = None

    @field_validator("projectId")
    @classmethod
    def _no_leading_zero(cls, value: str | None) -> str | None:
        # "07" and "7" would be two addresses for one project.
        if value is not None and len(value) > 1 and value.startswith("0"):
            raise rule_error(f"must not have a leading zero (another address for project "
                             f"{value.lstrip('0') or '0'}): write {(value.lstrip('0') or '0')!r}")
        return value

    @field_validator("useGivenNameAsPrefix")
    @classmethod
    def _no_prefix(cls, value: bool | None) -> bool | None:
        if value:
            raise rule_error("is not supported: a random name suffix would break the "
                             "workload's identity (remove it or set it to false)")
        return value

    @field_validator("desiredPhase")
    @classmethod
    def _phase(cls, value: str | None) -> str | None:
        if value == "Stopped" and not cls.KIND.can_suspend:
            raise rule_error(f"{cls.KIND.name} cannot be suspended: only Running is allowed")
        return value


class _SingleContainer(Document):
    """A kind whose `spec` is one container: the API needs its image unless a template
    gives it."""

    @model_validator(mode="after")
    def _image(self):
        if self.templateId is None and (self.spec is None or self.spec.image is None):
            raise rule_error("is required (the API needs an image unless templateId is given)",
                             "spec", "image")
        return self


class DistributedTrainingDocument(_SingleContainer):
    KIND: ClassVar[kinds.Kind] = kinds.DISTRIBUTED_TRAINING

    spec: DistributedTrainingSpec | None = None
    masterSpecSameAsWorker: bool | None = None
    masterSpec: MasterSpec | None = None

    @model_validator(mode="after")
    def _rules(self):
        if self.masterSpecSameAsWorker and self.masterSpec is not None:
            raise rule_error("must not be given when masterSpecSameAsWorker is true", "masterSpec")
        return self


class DistributedInferenceDocument(Document):
    KIND: ClassVar[kinds.Kind] = kinds.DISTRIBUTED_INFERENCE

    spec: DistributedInferenceSpec

    @model_validator(mode="after")
    def _images(self):
        if self.templateId is None:
            for part in ("leader", "worker"):
                container = getattr(self.spec, part)
                if container is not None and container.image is None:
                    raise rule_error("is required (the API needs an image unless templateId "
                                     "is given)", "spec", part, "image")
        return self


class TrainingDocument(_SingleContainer):
    KIND: ClassVar[kinds.Kind] = kinds.TRAINING

    spec: TrainingSpec | None = None


class WorkspaceDocument(_SingleContainer):
    KIND: ClassVar[kinds.Kind] = kinds.WORKSPACE

    spec: WorkspaceSpec | None = None


class InferenceDocument(_SingleContainer):
    KIND: ClassVar[kinds.Kind] = kinds.INFERENCE

    spec: InferenceSpec | None = None


# --- Manifest (Workloads V2) ------------------------------------------------------------

class ManifestDocument(Document):
    """A Kubernetes manifest of a registered workload type (CONTRACT.md §12): the
    metadata of `WorkloadV2MetadataCreateParams` and the manifest, written as YAML and sent
    as JSON."""
    KIND: ClassVar[kinds.Kind] = kinds.MANIFEST

    priority: Literal["very-low", "low", "medium-low", "medium", "medium-high", "high",
                      "very-high"] | None = None
    category: str | None = None
    preemptibility: Preemptibility | None = None
    manifest: dict[str, Any]

    @field_validator("manifest")
    @classmethod
    def _manifest(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in ("apiVersion", "kind"):
            if not isinstance(value.get(key), str) or not value[key]:
                raise rule_error("is required (the manifest's workload type)", key)
        return value


class NIMServiceDocument(Document):
    """A NIM service. Its create body has no clusterId (CONTRACT.md §12): `clusterId`
    names the cluster in which `project:` is looked up, and is compared with the
    cluster the answer names; the API client leaves it out of what it sends."""
    KIND: ClassVar[kinds.Kind] = kinds.NIM_SERVICE

    spec: NimServiceSpec

    @field_validator("templateId")
    @classmethod
    def _no_template(cls, value: str | None) -> str | None:
        if value is not None:
            raise rule_error("is not taken by a NIM service (its create body has no "
                             "templateId)")
        return value


# --- the organisation: Department, Project (org-units.yml) ------------------------------

NonNegNumber = Annotated[float, Field(ge=0)]


class GpuQuota(Strict):
    """A node pool's GPUs (`ResourcesNullable.gpu`): `deserved` is required (the API fills
    in 0 where it is left out, which would read as a change)."""
    deserved: NonNegNumber
    limit: float | None = None  # -1: no limit
    overQuotaWeight: NonNegNumber | None = None


class CpuQuota(Strict):
    deserved: NonNegNumber | None = None
    limit: float | None = None
    overQuotaWeight: NonNegNumber | None = None


class MemoryQuota(CpuQuota):
    units: Literal["Mib", "MB", "GB"]


class NodePoolQuota(Strict):
    """One node pool's quota (`Resources`, its `nodePool` the key it is written under).
    Its order among the units is a `priority` (Run:ai 2.x) or a `rank` (3.0, in the place
    of the priority): one of the two."""
    gpu: GpuQuota
    cpu: CpuQuota | None = None
    memory: MemoryQuota | None = None
    priority: NonEmpty | None = None
    rank: NonEmpty | None = None

    @model_validator(mode="after")
    def _priority_or_rank(self):
        if self.priority is not None and self.rank is not None:
            raise rule_error("is not taken with priority: a quota has a priority (Run:ai "
                             "2.x) or a rank (3.0), not both", "rank")
        return self


class SchedulingRules(Strict):
    interactiveJobTimeLimitSeconds: PosInt32 | None = None
    interactiveJobMaxIdleDurationSeconds: PosInt32 | None = None
    interactiveJobPreemptIdleDurationSeconds: PosInt32 | None = None
    trainingJobMaxIdleDurationSeconds: PosInt32 | None = None
    trainingJobTimeLimitSeconds: PosInt32 | None = None


class NodeTypes(Strict):
    training: list[NonEmpty] | None = None
    workspace: list[NonEmpty] | None = None
    names: dict[str, str] | None = None


class InNoProject(Strict):
    """A document of a type in no project (an organisation unit, an access rule, a Run:ai
    policy): what the loader reads of every document, where a workload's says its project,
    says where it is (`projectId`: by default its cluster, the middle of its address), and
    it has no project, template or phase."""
    KIND: ClassVar[kinds.Kind]
    IN_PROJECT: ClassVar[bool] = False
    project: ClassVar[None] = None
    templateId: ClassVar[None] = None
    desiredPhase: ClassVar[None] = None

    kind: str

    @property
    def projectId(self) -> str:
        return self.clusterId


class OrgDocument(InNoProject):
    """An organisation unit's document: in no project (its address is
    `<kind>/<clusterId>/<name>`), with its quotas per node pool by the pool's name.
    `lifecycle.preventDestroy` is on unless it says `false` (`Kind.prevent_destroy`)."""
    name: WorkloadName
    clusterId: Uuid
    description: str | None = None
    resources: dict[NonEmpty, NodePoolQuota] | None = None
    defaultNodePools: list[NonEmpty] | None = None
    schedulingRules: SchedulingRules | None = None
    lifecycle: Lifecycle | None = None



class DepartmentDocument(OrgDocument):
    KIND: ClassVar[kinds.Kind] = kinds.DEPARTMENT


class ProjectDocument(OrgDocument):
    KIND: ClassVar[kinds.Kind] = kinds.PROJECT

    department: ProjectName | None = None  # its parent's name; none: "default"
    requestedNamespace: WorkloadName | None = None
    nodeTypes: NodeTypes | None = None


# --- AccessRule (access-rules.yml) ------------------------------------------------------

# A rule's handle (`export` names a rule read from the server so: `kinds.access.handle`).
RuleHandle = Annotated[str, StringConstraints(min_length=1, max_length=253, pattern=HANDLE_RE)]


class AccessRuleDocument(InNoProject):
    """An access rule (`AccessRuleCreationFields`, with the role and the scope by name): in
    no project (its address is `AccessRule/<clusterId>/<name>`, `name` a handle of the
    user's choosing, as the API keeps none). A project or department scope names it
    (`scope:`); a cluster scope is the rule's cluster and names nothing."""
    KIND: ClassVar[kinds.Kind] = kinds.ACCESS_RULE

    name: RuleHandle
    clusterId: Uuid
    subjectType: Literal["user", "group", "service-account", "app"]
    subjectId: NonEmpty
    role: NonEmpty
    scopeType: Literal["project", "department", "cluster"]
    scope: ProjectName | None = None
    lifecycle: Lifecycle | None = None

    @model_validator(mode="after")
    def _scope(self):
        if self.scopeType == "cluster" and self.scope is not None:
            raise rule_error("is not taken by a cluster scope (the scope is the rule's "
                             "clusterId)", "scope")
        if self.scopeType != "cluster" and self.scope is None:
            raise rule_error(f"is required: the name of the {self.scopeType}", "scope")
        return self



# --- Run:ai policies (not this tool's --policy rules) ----------------------------------

# The fields a policy's `defaults` and `rules` set, per workload type, from the workload
# spec it governs (policies.yml: `<K>PolicyDefaultsAndRulesV2`): a distributed training's
# split into `master` and `worker`, a distributed inference's `leader` and `worker` within
# its own. The values below a field are left to the server's dry run.
_POLICY_FIELDS: dict[str, dict[str, Any]] = {
    "training": {k: None for k in TrainingSpec.model_fields},
    "workspace": {k: None for k in WorkspaceSpec.model_fields},
    "inference": {k: None for k in InferenceSpec.model_fields},
    "distributed": {"master": {k: None for k in MasterSpec.model_fields},
                    "worker": {k: None for k in DistributedTrainingSpec.model_fields}},
    "distributedInference": {**{k: None for k in DistributedInferenceSpec.model_fields},
                             "leader": {k: None for k in LeaderWorkerSpec.model_fields},
                             "worker": {k: None for k in LeaderWorkerSpec.model_fields}},
    "nimService": {k: None for k in NimServiceSpec.model_fields},
}
# How `imposedAssets` is keyed per workload type (None: a list; absent: the type has none).
_IMPOSED_BY = {"training": None, "workspace": None, "inference": None,
               "distributed": ("master", "worker"), "distributedInference": ("leader", "worker")}
PolicyWorkloadType = Literal["training", "workspace", "inference", "distributed",
                             "distributedInference", "nimService"]


def _unknown_keys(value: Any, known: dict[str, Any], at: tuple) -> list[tuple[tuple, str]]:
    """(where, message) of each key of `value` (and below, where `known` goes on) that
    `known` does not hold, with a did-you-mean."""
    import difflib

    if not isinstance(value, dict):
        return [(at, "must be a mapping of the workload's fields")]
    out = []
    for key, sub in value.items():
        if key not in known:
            close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            out.append(((*at, key), f"is not a field this workload type's policy sets{hint}"))
        elif isinstance(known[key], dict) and sub is not None:
            out += _unknown_keys(sub, known[key], (*at, key))
    return out


def _rule_problems(rules: Any, known: dict[str, Any], at: tuple) -> list[tuple[tuple, str]]:
    """`_unknown_keys` of `rules`, and each known field whose rules are no mapping."""
    out = _unknown_keys(rules, known, at)
    for key, sub in rules.items() if isinstance(rules, dict) else ():
        if key in known and sub is not None and not isinstance(sub, dict):
            out.append(((*at, key), "must be a mapping of rules (required, canEdit, min, "
                                    "max, ...)"))
    return out


def _problems(found: list[tuple[tuple, str]]) -> ValidationError:
    """One validation error holding every (where, message) of `found`, each a broken rule
    (`rule_error`) located at its place in the document."""
    return ValidationError.from_exception_data("Policy", [
        InitErrorDetails(type=rule_error(message, *at), loc=(), input=None)
        for at, message in found])


class PolicyDocument(InNoProject):
    """A Run:ai policy (`Policy`): the defaults and rules of the workloads of one type at
    one scope, and the data sources imposed on them. Not this tool's `--policy` rules.
    Its address is `Policy/<scope>/<workloadType>` (`kinds.workload_policies`); its
    department or project is named by name, and its cluster by id."""
    KIND: ClassVar[kinds.Kind] = kinds.POLICY

    workloadType: PolicyWorkloadType
    scope: Literal["tenant", "cluster", "department", "project"]
    department: ProjectName | None = None
    scopeProject: ProjectName | None = Field(None, alias="project")
    clusterId: Uuid | None = None
    defaults: dict[str, Any] | None = None
    rules: dict[str, Any] | None = None
    # Data source ids: a list, or lists by replica (checked by `_fields`, per type).
    imposedAssets: list[Any] | dict[str, Any] | None = None
    lifecycle: Lifecycle | None = None

    @model_validator(mode="after")
    def _scope(self):
        named = {"department": self.department, "project": self.scopeProject}
        for scope, value in named.items():
            if self.scope == scope and value is None:
                raise rule_error(f"is required with scope {scope} (the {scope}'s name)", scope)
            if self.scope != scope and value is not None:
                raise rule_error(f"is only for scope {scope}, not {self.scope}", scope)
        if self.scope != "tenant" and self.clusterId is None:
            raise rule_error(f"is required with scope {self.scope}", "clusterId")
        if self.scope == "tenant" and self.clusterId is not None:
            raise rule_error("is not for scope tenant (a tenant's policy is in no cluster)",
                             "clusterId")
        return self

    @model_validator(mode="after")
    def _fields(self):
        known = _POLICY_FIELDS[self.workloadType]
        found = []
        for part, check in (("defaults", _unknown_keys), ("rules", _rule_problems)):
            value = getattr(self, part)
            if value is not None:
                found += check(value, known, (part,))
        if found:
            raise _problems(found)
        imposed = self.imposedAssets
        if imposed is not None:
            if self.workloadType not in _IMPOSED_BY:
                raise rule_error(f"is not set by a {self.workloadType} policy", "imposedAssets")
            by = _IMPOSED_BY[self.workloadType]
            if by is None and isinstance(imposed, dict):
                raise rule_error("must be a list of data source ids", "imposedAssets")
            if by is not None and not isinstance(imposed, dict):
                raise rule_error(f"must be keyed by {' and '.join(by)}", "imposedAssets")
            lists = imposed.items() if isinstance(imposed, dict) else [((), imposed)]
            for key, ids in lists:
                at = ("imposedAssets", *((key,) if key != () else ()))
                if key != () and key not in by:
                    raise rule_error(f"must be one of {', '.join(by)}", *at)
                if not isinstance(ids, list):
                    raise rule_error("must be a list of data source ids", *at)
                for i, found in enumerate(ids):
                    if not (isinstance(found, str) and re.fullmatch(UUID_RE, found)):
                        raise rule_error(f"must be a data source's id (a UUID), got "
                                         f"{found!r}", *at, i)
        return self

    # What the loader reads of every document: the address is Policy/<scope>/<type>.
    @property
    def name(self) -> str:
        return self.workloadType

    @property
    def projectId(self) -> str:
        return kinds.workload_policies.scope_key(
            self.scope, self.department or self.scopeProject, self.clusterId)


MODELS: dict[str, type[Document]] = {
    m.KIND.name: m for m in (TrainingDocument, WorkspaceDocument, InferenceDocument,
                             DistributedTrainingDocument, DistributedInferenceDocument,
                             ManifestDocument, NIMServiceDocument, DepartmentDocument,
                             ProjectDocument, PolicyDocument)
}
MODELS[AccessRuleDocument.KIND.name] = AccessRuleDocument


def register(model: type[Document]) -> type[Document]:
    """Validate documents of `model.KIND` (a kind in the registry, `kinds.register`) with
    `model` from now on; returns it. ValueError when its kind has a model already."""
    if model.KIND.name in MODELS:
        raise ValueError(f"{model.KIND.name} has a document model already")
    MODELS[model.KIND.name] = model
    return model


def unregister(name: str) -> None:
    """Stop validating documents of the kind named `name` (a test's throwaway kind)."""
    del MODELS[name]
