"""Constrained field types and the sub-models that every workload kind shares.

Hand-written from the API's OpenAPI schemas (Annotation, Label, EnvironmentVariable,
Compute, Security, Storage and its volume instances, Probes, Tolerations, affinity,
Ports, ExposedUrls, RelatedUrls) with their enums, ranges and patterns, plus the
conditional rules of CONTRACT.md §7 that a single sub-object can check on its own.
Callers: `reconciler.desired.models` (the per-kind models) and `reconciler.desired.loader`
(which reads `PATTERN_HINTS` to turn regex failures into readable messages).

Every model is strict (YAML `8` is not the string "8", `"8"` is not the integer 8) and
forbids unknown keys. Null values never reach these models: the loader drops them first,
so "optional" means "may be absent".
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, StringConstraints,
                      model_validator)
from pydantic_core import PydanticCustomError

from reconciler import masking, quantities
from reconciler.desired import values
from reconciler.desired.types import DNS_LABEL_MAX, DNS_LABEL_RE
from reconciler.quantities import parse_quantity

QUANTITY_RE = r"^([+]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
UUID_RE = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
# A handle a spec gives a resource the API keeps no name for (an access rule).
HANDLE_RE = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
DIGITS_RE = r"^[0-9]+$"
DEFAULT_MODE_RE = r"^0[0-7]{3}$"
ATTR_KEY_RE = r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$"
HTTP_PATH_RE = r"^(/[a-zA-Z0-9\-_./]*)?$"
METRIC_RE = r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"
HOSTNAME_RE = r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$"

# Not a regex: the name of the OCI image reference grammar (`values.is_image_reference`)
# in a failed "pattern" error.
IMAGE_REFERENCE = "OCI image reference"

# What a failed pattern means, in words a user can act on.
PATTERN_HINTS = {
    QUANTITY_RE: values.QUANTITY_HINT,
    IMAGE_REFERENCE: values.IMAGE_HINT,
    DNS_LABEL_RE: "must be a DNS-1123 label: lowercase letters, digits and '-', "
                  "starting and ending with a letter or digit",
    UUID_RE: "must be a UUID such as 71f69d83-ba66-4822-adf5-55ce55efd210",
    HANDLE_RE: "must be lowercase letters, digits, '-' and '.', starting and ending with "
               "a letter or digit",
    DIGITS_RE: 'must be a project id: a string of digits such as "7"',
    DEFAULT_MODE_RE: 'must be an octal file mode of 4 digits such as "0644"',
    ATTR_KEY_RE: "must be letters, digits, '-', '_' or '.', starting and ending with a "
                 "letter or digit",
    HTTP_PATH_RE: "must be an absolute HTTP path such as /healthz",
    HOSTNAME_RE: "must be a host name",
    METRIC_RE: "must be a metric name: letters, digits, '_' or ':', not starting with a "
               "digit (such as concurrency or throughput)",
}

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1



def _kubernetes_quantity(text: str) -> str:
    # The API's pattern lets `1.5.5Gi` and `1Gii` by; Kubernetes, which gets the value in
    # the end, reads neither.
    if not quantities.is_quantity(text):
        raise PydanticCustomError("string_pattern_mismatch", "not a quantity",
                                  {"pattern": QUANTITY_RE})
    return text


def _image_reference(text: str) -> str:
    if not values.is_image_reference(text):
        raise PydanticCustomError("string_pattern_mismatch", "not an image reference",
                                  {"pattern": IMAGE_REFERENCE})
    return text


NonEmpty = Annotated[str, StringConstraints(min_length=1)]
Quantity = Annotated[str, StringConstraints(pattern=QUANTITY_RE),
                     AfterValidator(_kubernetes_quantity)]
NonEmptyQuantity = Annotated[str, StringConstraints(min_length=1, pattern=QUANTITY_RE),
                             AfterValidator(_kubernetes_quantity)]
Image = Annotated[str, StringConstraints(min_length=1), AfterValidator(_image_reference)]
DnsLabel = Annotated[str, StringConstraints(min_length=1, pattern=DNS_LABEL_RE)]
Uuid = Annotated[str, StringConstraints(pattern=UUID_RE)]
Name63 = Annotated[str, StringConstraints(min_length=1, max_length=63)]
DefaultMode = Annotated[str, StringConstraints(min_length=4, max_length=4, pattern=DEFAULT_MODE_RE)]
Int32 = Annotated[int, Field(ge=-(2**31), le=INT32_MAX)]
Int64 = Annotated[int, Field(ge=-(2**63), le=INT64_MAX)]
NonNegInt32 = Annotated[int, Field(ge=0, le=INT32_MAX)]
PosInt32 = Annotated[int, Field(ge=1, le=INT32_MAX)]
NonNegInt64 = Annotated[int, Field(ge=0, le=INT64_MAX)]
PosInt64 = Annotated[int, Field(ge=1, le=INT64_MAX)]
Port = Annotated[int, Field(ge=1, le=65535)]
NonNegNumber = Annotated[float, Field(ge=0)]

Capability = Literal[
    "AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "CHOWN", "DAC_OVERRIDE",
    "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER", "KILL", "LEASE",
    "LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE",
    "NET_BROADCAST", "NET_RAW", "SETGID", "SETFCAP", "SETPCAP", "SETUID", "SYS_ADMIN",
    "SYS_BOOT", "SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE",
    "SYS_RAWIO", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "SYSLOG", "WAKE_ALARM",
]
ImagePullPolicy = Literal["Always", "Never", "IfNotPresent"]
Preemptibility = Literal["preemptible", "non-preemptible"]


def rule_error(message: str, *at: str | int) -> PydanticCustomError:
    """A broken conditional rule, located at the sub-path `at` of the model raising it."""
    return PydanticCustomError("rule", "{message}", {"message": message, "at": at})


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    def given(self, *names: str) -> list[str]:
        return [n for n in names if getattr(self, n) is not None]


def _limit_not_below(limit: Any, request: Any, at: str, what: str, quantity: bool) -> None:
    if limit is None or request is None:
        return
    lv, rv = (parse_quantity(limit), parse_quantity(request)) if quantity else (limit, request)
    if lv is not None and rv is not None and lv < rv:
        raise rule_error(f"must not be less than {what} ({request})", at)


# --- small list items --------------------------------------------------------------

class Annotation(Strict):
    name: Name63
    value: str | None = None
    exclude: bool | None = None


class Label(Annotation):
    pass


class SecretKeyRef(Strict):
    name: DnsLabel
    key: NonEmpty


class UserCredentialRef(Strict):
    name: NonEmpty
    key: NonEmpty


class PodFieldRef(Strict):
    path: NonEmpty


class EnvironmentVariable(Strict):
    name: NonEmpty
    value: str | None = None
    secret: SecretKeyRef | None = None
    configMap: SecretKeyRef | None = None
    podFieldRef: PodFieldRef | None = None
    userCredential: UserCredentialRef | None = None
    exclude: bool | None = None
    description: str | None = None

    @model_validator(mode="after")
    def _one_source(self):
        if self.value == masking.SECRET_PLACEHOLDER:  # written by `export`
            raise rule_error("is a secret that export did not write: supply it as a reference "
                             "to a Kubernetes secret (secret: {name: SECRET, key: KEY} in place "
                             "of value), or the value itself (export --include-secrets)", "value")
        sources = self.given("value", "secret", "configMap", "podFieldRef", "userCredential")
        if len(sources) > 1:
            raise rule_error(f"{' and '.join(sources)} are mutually exclusive: give one source "
                             "for the value", sources[1])
        return self


class ImagePullSecret(Strict):
    name: DnsLabel
    userCredential: bool | None = None
    exclude: bool | None = None


class ExtendedResource(Strict):
    resource: NonEmpty
    quantity: NonEmptyQuantity | None = None
    exclude: bool | None = None

    @model_validator(mode="after")
    def _whole(self):
        # Kubernetes takes an extended resource (a device plugin's) in whole units only.
        q = quantities.value(self.quantity)
        if q is not None and q.denominator != 1 and values.is_extended_resource(self.resource):
            raise rule_error(f"must be a whole number: {self.resource} counts devices (a "
                             "fraction of a GPU is gpuPortionRequest, not a quantity)",
                             "quantity")
        return self


class Toleration(Strict):
    name: NonEmpty | None = None
    operator: Literal["Equal", "Exists"]
    key: str
    value: str | None = None
    effect: Literal["NoSchedule", "NoExecute", "PreferNoSchedule", "Any"]
    seconds: PosInt32 | None = None
    exclude: bool | None = None

    @model_validator(mode="after")
    def _rules(self):
        if self.seconds is not None and self.effect != "NoExecute":
            raise rule_error("is valid only with effect NoExecute", "seconds")
        # CONTRACT.md §7: the API text says the reverse; this is Kubernetes' rule.
        if self.operator == "Exists" and self.value:
            raise rule_error("must be empty when operator is Exists", "value")
        return self


class MatchExpression(Strict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] | None = None

    @model_validator(mode="after")
    def _values(self):
        values = self.values or []
        if self.operator in ("In", "NotIn") and not values:
            raise rule_error(f"must not be empty when operator is {self.operator}", "values")
        if self.operator in ("Exists", "DoesNotExist") and values:
            raise rule_error(f"must be empty when operator is {self.operator}", "values")
        if self.operator in ("Gt", "Lt") and (len(values) != 1 or not re.fullmatch(r"-?[0-9]+", values[0])):
            raise rule_error(f"must be a single integer when operator is {self.operator}", "values")
        return self


class NodeSelectorTerm(Strict):
    matchExpressions: list[MatchExpression] | None = None


class NodeAffinityRequired(Strict):
    nodeSelectorTerms: list[NodeSelectorTerm] | None = None


class PodAffinity(Strict):
    type: Literal["Required", "Preferred"]
    key: str


class HttpGet(Strict):
    path: Annotated[str, StringConstraints(pattern=HTTP_PATH_RE)] | None = None
    port: Port | None = None
    host: Annotated[str, StringConstraints(pattern=HOSTNAME_RE)] | None = None
    scheme: Literal["HTTP", "HTTPS"] | None = None


class ProbeHandler(Strict):
    httpGet: HttpGet | None = None


class Probe(Strict):
    initialDelaySeconds: NonNegInt32 | None = None
    periodSeconds: PosInt32 | None = None
    timeoutSeconds: PosInt32 | None = None
    successThreshold: PosInt32 | None = None
    failureThreshold: PosInt32 | None = None
    handler: ProbeHandler


class Probes(Strict):
    readiness: Probe | None = None


class PortSpec(Strict):
    container: Port
    serviceType: Literal["LoadBalancer", "NodePort", "ClusterIP"]
    external: Int32 | None = None
    toolType: str | None = None
    toolName: str | None = None
    name: NonEmpty | None = None
    exclude: bool | None = None


def users_or_groups(model: Strict) -> None:
    if model.authorizedUsers is not None and model.authorizedGroups is not None:
        raise rule_error("authorizedUsers and authorizedGroups are mutually exclusive",
                         "authorizedGroups")


class ExposedUrl(Strict):
    container: Int32
    url: str | None = None
    authorizationType: Literal["authenticatedUsers", "authorizedUsers", "authorizedGroups"] | None = None
    authorizedUsers: list[str] | None = None
    authorizedGroups: list[str] | None = None
    toolType: str | None = None
    toolName: str | None = None
    name: NonEmpty | None = None
    exclude: bool | None = None

    @model_validator(mode="after")
    def _auth(self):
        users_or_groups(self)
        return self


class RelatedUrl(Strict):
    url: str
    type: str
    name: str | None = None
    exclude: bool | None = None


# --- compute and security ------------------------------------------------------------

class Compute(Strict):
    cpuCoreLimit: NonNegNumber | None = None
    cpuCoreRequest: NonNegNumber | None = None
    cpuMemoryLimit: Quantity | None = None
    cpuMemoryRequest: Quantity | None = None
    extendedResources: list[ExtendedResource] | None = None
    gpuDevicesRequest: NonNegInt32 | None = None
    gpuMemoryLimit: Quantity | None = None
    gpuMemoryRequest: Quantity | None = None
    gpuPortionLimit: NonNegNumber | None = None
    # "the portion of the GPU to allocate ..., per GPU device, between 0 and 1".
    gpuPortionRequest: Annotated[float, Field(ge=0, le=1)] | None = None
    gpuRequestType: Literal["portion", "memory"] | None = None
    largeShmRequest: bool | None = None

    @model_validator(mode="after")
    def _gpu_rules(self):
        kind = self.gpuRequestType
        if self.gpuDevicesRequest is not None and self.gpuDevicesRequest > 1:
            fractional = self.given("gpuPortionRequest", "gpuPortionLimit",
                                    "gpuMemoryRequest", "gpuMemoryLimit")
            if fractional:
                raise rule_error("is not possible with more than one GPU device "
                                 f"(gpuDevicesRequest: {self.gpuDevicesRequest})", fractional[0])
            if kind == "memory":
                raise rule_error("must be portion (or absent) with more than one GPU device",
                                 "gpuRequestType")
        if kind == "portion" and self.gpuPortionRequest is None and self.gpuDevicesRequest in (None, 0, 1):
            raise rule_error("is required when gpuRequestType is portion", "gpuPortionRequest")
        if kind == "memory" and self.gpuMemoryRequest is None:
            raise rule_error("is required when gpuRequestType is memory", "gpuMemoryRequest")
        for field, needs in (("gpuPortionRequest", "portion"), ("gpuPortionLimit", "portion"),
                             ("gpuMemoryRequest", "memory"), ("gpuMemoryLimit", "memory")):
            if getattr(self, field) is not None and kind is not None and kind != needs:
                raise rule_error(f"is not allowed when gpuRequestType is {kind}", field)
        if self.gpuPortionRequest is not None and self.gpuMemoryRequest is not None:
            raise rule_error("gpuPortionRequest and gpuMemoryRequest are mutually exclusive",
                             "gpuMemoryRequest")
        _limit_not_below(self.gpuPortionLimit, self.gpuPortionRequest, "gpuPortionLimit",
                         "gpuPortionRequest", False)
        _limit_not_below(self.gpuMemoryLimit, self.gpuMemoryRequest, "gpuMemoryLimit",
                         "gpuMemoryRequest", True)
        _limit_not_below(self.cpuCoreLimit, self.cpuCoreRequest, "cpuCoreLimit",
                         "cpuCoreRequest", False)
        _limit_not_below(self.cpuMemoryLimit, self.cpuMemoryRequest, "cpuMemoryLimit",
                         "cpuMemoryRequest", True)
        return self


class InferenceSecurity(Strict):
    """`security` of inference containers (no privilege escalation, host IPC or network)."""
    capabilities: list[Capability] | None = None
    readOnlyRootFilesystem: bool | None = None
    runAsGid: Int64 | None = None
    runAsNonRoot: bool | None = None
    runAsUid: Int64 | None = None
    seccompProfileType: Literal["RuntimeDefault", "Unconfined", "Localhost"] | None = None
    supplementalGroups: str | None = None
    uidGidSource: Literal["fromTheImage", "fromIdpToken", "custom"] | None = None

    @model_validator(mode="after")
    def _ids(self):
        if self.uidGidSource == "fromTheImage":
            ids = self.given("runAsUid", "runAsGid", "supplementalGroups")
            if ids:
                raise rule_error("is not allowed when uidGidSource is fromTheImage "
                                 "(use custom)", ids[0])
        return self


class Security(InferenceSecurity):
    """`security` of training containers."""
    allowPrivilegeEscalation: bool | None = None
    hostIpc: bool | None = None
    hostNetwork: bool | None = None


# --- storage -------------------------------------------------------------------------

class _Instance(Strict):
    name: NonEmpty | None = None
    exclude: bool | None = None


class ConfigMapVolume(_Instance):
    configMap: DnsLabel
    mountPath: NonEmpty
    subPath: NonEmpty | None = None
    defaultMode: DefaultMode | None = None


class SecretVolume(_Instance):
    secret: NonEmpty
    mountPath: NonEmpty
    defaultMode: DefaultMode | None = None


class EmptyDirVolume(_Instance):
    path: NonEmpty
    medium: NonEmpty | None = None
    sizeLimit: Quantity | None = None


class DataVolume(Strict):
    id: Uuid
    mountPath: str
    exclude: bool | None = None


class GitSecretRef(Strict):
    name: NonEmpty
    authenticationMethod: Literal["password", "ssh-key"] | None = None
    secretKeyOfUser: NonEmpty | None = None
    secretKeyOfPassword: NonEmpty | None = None


class GitVolume(_Instance):
    repository: NonEmpty
    branch: NonEmpty | None = None
    revision: NonEmpty | None = None
    path: NonEmpty
    passwordSecret: NonEmpty | None = None
    secretKeyOfUser: NonEmpty | None = None
    secretKeyOfPassword: NonEmpty | None = None
    secretRef: GitSecretRef | None = None


class HostPathVolume(_Instance):
    path: NonEmpty
    readOnly: bool | None = None
    mountPath: NonEmpty
    mountPropagation: Literal["None", "HostToContainer"] | None = None


class NfsVolume(_Instance):
    path: NonEmpty
    readOnly: bool | None = None
    server: NonEmpty
    mountPath: NonEmpty


class S3Volume(_Instance):
    bucket: NonEmpty
    path: NonEmpty
    url: NonEmpty | None = None
    accessKeySecret: DnsLabel | None = None
    secretKeyOfAccessKeyId: NonEmpty | None = None
    secretKeyOfSecretKey: NonEmpty | None = None


class AccessModes(Strict):
    readWriteOnce: bool | None = None
    readOnlyMany: bool | None = None
    readWriteMany: bool | None = None


class AddedAttrValue(Strict):
    key: Annotated[str, StringConstraints(min_length=1, max_length=63, pattern=ATTR_KEY_RE)]
    value: str | None = None


class ClaimInfo(Strict):
    size: Quantity | None = None
    storageClass: DnsLabel | None = None
    accessModes: AccessModes | None = None
    volumeMode: Literal["Filesystem", "Block"] | None = None
    addedAttrValues: list[AddedAttrValue] | None = None


def checked_claim(pvc):
    """The PVC rules of CONTRACT.md §7, for a storage PVC and a NIM service's model store
    alike: an existing PVC names its claim and describes none; a new one gives its size."""
    if pvc.existingPvc:
        if pvc.claimInfo is not None:
            raise rule_error("must not be given for an existing PVC (existingPvc: true)",
                             "claimInfo")
        if pvc.claimName is None:
            raise rule_error("is required for an existing PVC (existingPvc: true)", "claimName")
    elif pvc.claimInfo is None or pvc.claimInfo.size is None:
        at = ("claimInfo", "size") if pvc.claimInfo is not None else ("claimInfo",)
        raise rule_error("claimInfo.size is required when a new PVC is created "
                         "(existingPvc is not true)", *at)
    return pvc


class PvcVolume(_Instance):
    path: NonEmpty
    existingPvc: bool | None = None
    claimName: Name63 | None = None
    readOnly: bool | None = None
    ephemeral: bool | None = None
    claimInfo: ClaimInfo | None = None
    dataSharing: bool | None = None

    @model_validator(mode="after")
    def _claim(self):
        return checked_claim(self)


class InferencePvcVolume(PvcVolume):
    @model_validator(mode="after")
    def _not_ephemeral(self):
        if self.ephemeral:
            raise rule_error("is not supported for inference workloads", "ephemeral")
        return self


class LeaderWorkerStorage(Strict):
    """`storage` of distributed inference containers."""
    configMapVolume: list[ConfigMapVolume] | None = None
    emptyDirVolume: list[EmptyDirVolume] | None = None
    pvc: list[InferencePvcVolume] | None = None
    secretVolume: list[SecretVolume] | None = None


class InferenceStorage(Strict):
    """`storage` of an inference: a training's without s3, no ephemeral PVC."""
    configMapVolume: list[ConfigMapVolume] | None = None
    dataVolume: list[DataVolume] | None = None
    emptyDirVolume: list[EmptyDirVolume] | None = None
    git: list[GitVolume] | None = None
    hostPath: list[HostPathVolume] | None = None
    nfs: list[NfsVolume] | None = None
    pvc: list[InferencePvcVolume] | None = None
    secretVolume: list[SecretVolume] | None = None

    @model_validator(mode="after")
    def _propagation(self):
        modes = {h.mountPropagation or "None" for h in self.hostPath or []}
        if len(modes) > 1:
            raise rule_error("every hostPath volume must use the same mountPropagation", "hostPath")
        return self


class Storage(InferenceStorage):
    """`storage` of training containers."""
    pvc: list[PvcVolume] | None = None
    s3: list[S3Volume] | None = None


# --- the container fields every kind has -------------------------------------------

class Container(Strict):
    """The keys common to training specs, the training master and DI leader/worker."""
    annotations: list[Annotation] | None = None
    args: NonEmpty | None = None
    command: NonEmpty | None = None
    compute: Compute | None = None
    createHomeDir: bool | None = None
    environmentVariables: list[EnvironmentVariable] | None = None
    image: Image | None = None
    imagePullPolicy: ImagePullPolicy | None = None
    imagePullSecrets: list[ImagePullSecret] | None = None
    labels: list[Label] | None = None
    nodeAffinityRequired: NodeAffinityRequired | None = None
    nodeType: NonEmpty | None = None
    podAffinity: PodAffinity | None = None
    probes: Probes | None = None
    tolerations: list[Toleration] | None = None
    workingDir: NonEmpty | None = None

    @model_validator(mode="after")
    def _unique_names(self):
        # Items of these lists are matched by name (CONTRACT.md §6): two with one name
        # would make the diff fall back to comparing the whole list, and the API's
        # behaviour with them is unspecified.
        for field in ("environmentVariables", "labels", "annotations", "imagePullSecrets"):
            seen: dict[str, int] = {}
            for i, item in enumerate(getattr(self, field) or ()):
                if item.name in seen:
                    raise rule_error(f"duplicate name {item.name!r} (also item {seen[item.name]})",
                                     field, i, "name")
                seen[item.name] = i
        return self
