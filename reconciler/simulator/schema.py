"""The request bodies of the simulated kinds: each kind's create body, and its PATCH body
if it has one, written in `validator`'s description language; then the organisation's:
projects', departments' and quotas' bodies, access rules', and the policies', derived
from each kind's spec (`policy_request`).

Callers: `kinds` (each kind's entry names its bodies); `org`, `access` and `policies`.
The shapes are written out by hand from NVIDIA's OpenAPI files (the installed package
must not need them); the simulator's tests walk those files and check that this
description has the same fields, types, enums, ranges and patterns. The shared parts (compute, storage, environment variables,
...) come first, then each kind's spec and bodies; a new kind's bodies go at the end.
"""

from __future__ import annotations

from reconciler.simulator.validator import ANY, Arr, Map, Obj, Scalar
from reconciler.simulator.validator import integer as _i
from reconciler.simulator.validator import number as _n
from reconciler.simulator.validator import text as _s

_B = Scalar("boolean")
QUANTITY = r"^([+]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
DNS_LABEL = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
_STR = _s(ANY)
_STR1 = _s(ANY, 1)
_MODE = _s("0[0-7]{3}", 4, 4)

CAPABILITIES = (
    "AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "CHOWN", "DAC_OVERRIDE",
    "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER", "KILL", "LEASE",
    "LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN", "NET_BIND_SERVICE",
    "NET_BROADCAST", "NET_RAW", "SETGID", "SETFCAP", "SETPCAP", "SETUID", "SYS_ADMIN",
    "SYS_BOOT", "SYS_CHROOT", "SYS_MODULE", "SYS_NICE", "SYS_PACCT", "SYS_PTRACE",
    "SYS_RAWIO", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "SYSLOG", "WAKE_ALARM",
)

_NAME_VALUE = {"name": _s(ANY, 1, 63), "value": _STR}
ANNOTATIONS = Arr(Obj({**_NAME_VALUE, "exclude": _B}))
LABELS = Arr(Obj({**_NAME_VALUE, "exclude": _B}))

COMPUTE = Obj({
    "cpuCoreLimit": _n(0), "cpuCoreRequest": _n(0),
    "cpuMemoryLimit": _s(QUANTITY), "cpuMemoryRequest": _s(QUANTITY),
    "extendedResources": Arr(Obj({
        "resource": _STR1, "quantity": _s(QUANTITY, 1), "exclude": _B})),
    "gpuDevicesRequest": _i(0),
    "gpuMemoryLimit": _s(QUANTITY), "gpuMemoryRequest": _s(QUANTITY),
    "gpuPortionLimit": _n(0), "gpuPortionRequest": _n(0),
    "gpuRequestType": _s(min_length=1, enum=("portion", "memory")),
    "largeShmRequest": _B,
})

_KEY_REF = Obj({"name": _s(DNS_LABEL, 1), "key": _STR1})
ENVIRONMENT_VARIABLES = Arr(Obj({
    "name": _STR1, "value": _STR,
    "secret": _KEY_REF, "configMap": _KEY_REF,
    "podFieldRef": Obj({"path": _STR1}),
    "userCredential": Obj({"name": _s(min_length=1), "key": _s(min_length=1)}),
    "exclude": _B, "description": _STR,
}))

_STRINGS = Arr(_s(ANY, nullable=False))
EXPOSED_URLS = Arr(Obj({
    "container": _i(), "url": _STR,
    "authorizationType": _s(enum=("authenticatedUsers", "authorizedUsers", "authorizedGroups")),
    "authorizedUsers": _STRINGS, "authorizedGroups": _STRINGS,
    "toolType": _STR, "toolName": _STR, "name": _STR1, "exclude": _B,
}))

IMAGE_PULL_SECRETS = Arr(Obj({
    "name": _s(DNS_LABEL, nullable=False), "userCredential": _B, "exclude": _B}))

NODE_AFFINITY = Obj({"nodeSelectorTerms": Arr(Obj({"matchExpressions": Arr(Obj({
    "key": _s(ANY, nullable=False),
    "operator": _s(enum=("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"), nullable=False),
    "values": _STRINGS,
}, required=("key", "operator")))}))})

POD_AFFINITY = Obj({"type": _s(enum=("Required", "Preferred")), "key": _STR})

PORTS = Arr(Obj({
    "container": _i(1, 65535),
    "serviceType": _s(enum=("LoadBalancer", "NodePort", "ClusterIP")),
    "external": _i(), "toolType": _STR, "toolName": _STR, "name": _STR1, "exclude": _B,
}))

PROBES = Obj({"readiness": Obj({
    "initialDelaySeconds": _i(0), "periodSeconds": _i(1), "timeoutSeconds": _i(1),
    "successThreshold": _i(1), "failureThreshold": _i(1),
    "handler": Obj({"httpGet": Obj({
        "path": _s(r"^(\x2F[a-zA-Z0-9\-_.\x2F]*)?$"),
        "port": _i(1, 65535),
        "host": _STR,
        "scheme": _s(enum=("HTTP", "HTTPS")),
    })}),
})})

RELATED_URLS = Arr(Obj({"url": _STR, "type": _STR, "name": _STR, "exclude": _B}))

_SECURITY_COMMON = {
    "capabilities": Arr(_s(enum=CAPABILITIES, nullable=False)),
    "readOnlyRootFilesystem": _B,
    "runAsGid": _i(), "runAsNonRoot": _B, "runAsUid": _i(),
    "seccompProfileType": _s(enum=("RuntimeDefault", "Unconfined", "Localhost")),
    "supplementalGroups": _STR,
    "uidGidSource": _s(enum=("fromTheImage", "fromIdpToken", "custom")),
}
SECURITY = Obj({**_SECURITY_COMMON, "allowPrivilegeEscalation": _B, "hostIpc": _B,
                "hostNetwork": _B})
SECURITY_INFERENCE = Obj(dict(_SECURITY_COMMON))

_NAME1 = _s(min_length=1)
_PVC = Arr(Obj({
    "name": _NAME1, "path": _STR1, "existingPvc": _B, "claimName": _s(ANY, 1, 63),
    "readOnly": _B, "ephemeral": _B,
    "claimInfo": Obj({
        "size": _s(QUANTITY), "storageClass": _s(DNS_LABEL, 1),
        "accessModes": Obj({"readWriteOnce": _B, "readOnlyMany": _B, "readWriteMany": _B}),
        "volumeMode": _s(enum=("Filesystem", "Block")),
        "addedAttrValues": Arr(Obj({
            "key": _s(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$", 1, 63, nullable=False),
            "value": _s(ANY, nullable=False),
        }, required=("key",))),
    }),
    "dataSharing": _B, "exclude": _B,
}))
_STORAGE_INFERENCE = {
    "configMapVolume": Arr(Obj({
        "name": _NAME1, "configMap": _s(DNS_LABEL, 1), "mountPath": _STR1, "subPath": _STR1,
        "defaultMode": _MODE, "exclude": _B})),
    "emptyDirVolume": Arr(Obj({
        "name": _NAME1, "path": _STR1, "medium": _STR1, "sizeLimit": _s(QUANTITY),
        "exclude": _B})),
    "pvc": _PVC,
    "secretVolume": Arr(Obj({
        "name": _NAME1, "mountPath": _NAME1, "defaultMode": _MODE, "secret": _NAME1,
        "exclude": _B})),
}
STORAGE = Obj({
    **_STORAGE_INFERENCE,
    "dataVolume": Arr(Obj({"id": _s(fmt="uuid"), "mountPath": _STR, "exclude": _B})),
    "git": Arr(Obj({
        "name": _NAME1, "repository": _NAME1, "branch": _NAME1, "revision": _NAME1,
        "path": _NAME1, "passwordSecret": _NAME1, "secretKeyOfUser": _NAME1,
        "secretKeyOfPassword": _NAME1, "exclude": _B,
        "secretRef": Obj({
            "name": _s(min_length=1, nullable=False),
            "authenticationMethod": _s(min_length=1, enum=("password", "ssh-key"),
                                       nullable=False),
            "secretKeyOfUser": _NAME1, "secretKeyOfPassword": _NAME1,
        }),
    })),
    "hostPath": Arr(Obj({
        "name": _NAME1, "path": _STR1, "readOnly": _B, "mountPath": _STR1,
        "mountPropagation": _s(enum=("None", "HostToContainer")), "exclude": _B})),
    "nfs": Arr(Obj({
        "name": _NAME1, "path": _STR1, "readOnly": _B, "server": _STR1, "mountPath": _STR1,
        "exclude": _B})),
    "s3": Arr(Obj({
        "name": _NAME1, "bucket": _NAME1, "path": _NAME1, "url": _NAME1,
        "accessKeySecret": _s(DNS_LABEL, 1), "secretKeyOfAccessKeyId": _STR1,
        "secretKeyOfSecretKey": _STR1, "exclude": _B})),
})
STORAGE_INFERENCE = Obj(dict(_STORAGE_INFERENCE))  # DI's; an Inference's is STORAGE minus s3

TOLERATIONS = Arr(Obj({
    "name": _STR1, "operator": _s(enum=("Equal", "Exists")), "key": _STR, "value": _STR,
    "effect": _s(enum=("NoSchedule", "NoExecute", "PreferNoSchedule", "Any")),
    "seconds": _i(1), "exclude": _B,
}))

PREEMPTIBILITY = _s(min_length=1, enum=("preemptible", "non-preemptible"))

# Keys of a training container: the body of MasterSpec and of WorkspaceSpecSpec,
# TrainingSpecSpec minus completions and parallelism, and DistributedSpecSpec minus the
# distributed-only keys.
_TRAINING_CONTAINER = {
    "annotations": ANNOTATIONS, "args": _STR1,
    "autoDeletionTimeAfterCompletionSeconds": _i(), "backoffLimit": _i(),
    "category": _STR, "command": _STR1, "compute": COMPUTE, "createHomeDir": _B,
    "environmentVariables": ENVIRONMENT_VARIABLES, "exposedUrls": EXPOSED_URLS,
    "image": _STR1, "imagePullPolicy": _s(min_length=1, enum=("Always", "Never", "IfNotPresent")),
    "imagePullSecrets": IMAGE_PULL_SECRETS, "labels": LABELS,
    "nodeAffinityRequired": NODE_AFFINITY, "nodePools": _STRINGS, "nodeType": _STR1,
    "podAffinity": POD_AFFINITY, "ports": PORTS, "preemptibility": PREEMPTIBILITY,
    "priorityClass": _STR, "probes": PROBES, "relatedUrls": RELATED_URLS,
    "restartPolicy": _s(min_length=1, enum=("Always", "Never", "OnFailure")),
    "security": SECURITY, "stdin": _B, "storage": STORAGE,
    "terminateAfterPreemption": _B, "terminationGracePeriodSeconds": _i(0),
    "tolerations": TOLERATIONS, "tty": _B, "workingDir": _STR1,
}

DISTRIBUTED_SPEC = Obj({
    **_TRAINING_CONTAINER,
    "cleanPodPolicy": _s(enum=("None", "All", "Running")),
    "distributedFramework": _s(enum=("MPI", "PyTorch", "TF", "XGBoost", "JAX")),
    "maxReplicas": _i(), "minReplicas": _i(),
    "mpiLauncherCreationPolicy": _s(enum=("AtStartup", "WaitForWorkersReady")),
    "numWorkers": _i(1), "slotsPerWorker": _i(1), "sshAuthMountPath": _STR,
})
MASTER_SPEC = Obj(dict(_TRAINING_CONTAINER))
TRAINING_SPEC = Obj({**_TRAINING_CONTAINER, "completions": _i(), "parallelism": _i()})
WORKSPACE_SPEC = Obj(dict(_TRAINING_CONTAINER))

AUTOSCALING = Obj({
    "metricThresholdPercentage": _n(1, 100), "minReplicas": _i(0), "maxReplicas": _i(1),
    "initialReplicas": _i(0), "activationReplicas": _i(1), "concurrencyHardLimit": _i(0),
    "scaleToZeroRetentionSeconds": _i(0, 3600), "scaleDownDelaySeconds": _i(0, 3600),
    "initializationTimeoutSeconds": _i(1),
    "metric": _s(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"), "metricThreshold": _i(),
})
SERVING_CONFIGURATION = Obj({"initializationTimeoutSeconds": _i(1),
                             "requestTimeoutSeconds": _i(1)})
_TRAINING_ONLY = ("autoDeletionTimeAfterCompletionSeconds", "backoffLimit",
                            "restartPolicy", "stdin", "tty", "terminateAfterPreemption",
                            "terminationGracePeriodSeconds")
INFERENCE_SPEC = Obj({
    **{k: v for k, v in _TRAINING_CONTAINER.items() if k not in _TRAINING_ONLY},
    "security": SECURITY_INFERENCE,
    "storage": Obj({k: v for k, v in STORAGE.properties.items() if k != "s3"}),
    "servingPort": Obj({
        "container": _i(1, 65535), "protocol": _s(enum=("http", "grpc")),
        "authorizationType": _s(enum=("public", "authenticatedUsers", "authorizedUsers",
                                      "authorizedGroups", "authorizedUsersOrGroups")),
        "authorizedUsers": _STRINGS, "authorizedGroups": _STRINGS,
        "clusterLocalAccessOnly": _B,
    }),
    "autoscaling": AUTOSCALING, "servingConfiguration": SERVING_CONFIGURATION,
})
# The top-level spec keys an inference PATCH changes (InferenceUpdateSpec, CONTRACT.md §4).
INFERENCE_UPDATABLE = (
    "args", "category", "command", "compute", "createHomeDir", "environmentVariables",
    "image", "imagePullPolicy", "imagePullSecrets", "nodeAffinityRequired", "nodePools",
    "nodeType", "podAffinity", "preemptibility", "priorityClass", "probes", "workingDir",
    "autoscaling", "servingConfiguration",
)

_META = {
    "name": _s(ANY, 1, nullable=False),
    "useGivenNameAsPrefix": Scalar("boolean", nullable=False),
    "projectId": _s(ANY, nullable=False),
    "clusterId": _s(fmt="uuid", nullable=False),
    "templateId": _s(fmt="uuid"),
}
_REQUIRED_META = ("name", "projectId", "clusterId")
META = tuple(_META)  # the create-body keys every kind shares; a record keeps the rest

DISTRIBUTED_CREATE = Obj({
    **_META, "spec": DISTRIBUTED_SPEC, "masterSpecSameAsWorker": _B, "masterSpec": MASTER_SPEC,
}, required=_REQUIRED_META, nullable=False)

TRAINING_CREATE = Obj({**_META, "spec": TRAINING_SPEC}, required=_REQUIRED_META,
                      nullable=False)
WORKSPACE_CREATE = Obj({**_META, "spec": WORKSPACE_SPEC}, required=_REQUIRED_META,
                       nullable=False)
INFERENCE_CREATE = Obj({**_META, "spec": INFERENCE_SPEC}, required=_REQUIRED_META,
                       nullable=False)
INFERENCE_UPDATE = Obj({"spec": Obj({k: INFERENCE_SPEC.properties[k]
                                     for k in INFERENCE_UPDATABLE})}, nullable=False)

DI_CONTAINER = Obj({
    "annotations": ANNOTATIONS, "args": _STR1, "command": _STR1, "compute": COMPUTE,
    "createHomeDir": _B, "environmentVariables": ENVIRONMENT_VARIABLES, "image": _STR1,
    "imagePullPolicy": _s(min_length=1, enum=("Always", "Never", "IfNotPresent")),
    "imagePullSecrets": IMAGE_PULL_SECRETS, "labels": LABELS,
    "nodeAffinityRequired": NODE_AFFINITY, "nodeType": _STR1, "podAffinity": POD_AFFINITY,
    "probes": PROBES, "security": SECURITY_INFERENCE, "storage": STORAGE_INFERENCE,
    "tolerations": TOLERATIONS, "workingDir": _STR1,
})

DI_SPEC = Obj({
    "category": _STR, "nodePools": _STRINGS, "preemptibility": PREEMPTIBILITY,
    "priorityClass": _STR,
    "restartPolicy": _s(enum=("RecreateGroupOnPodRestart", "None")),
    "servingPort": Obj({
        "port": _i(1, 65535), "protocol": _s(enum=("http",)),
        "authorizationType": _s(enum=("public", "authenticatedUsers", "authorizedUsers",
                                      "authorizedGroups")),
        "authorizedUsers": _STRINGS, "authorizedGroups": _STRINGS,
        "exposeExternally": _B, "exposedUrl": _STR,
    }),
    "startupPolicy": _s(enum=("LeaderCreated", "LeaderReady")),
    "workers": _i(0, 1000), "replicas": _i(0, 1000),
    "leader": DI_CONTAINER, "worker": DI_CONTAINER,
})

DI_CREATE = Obj({**_META, "spec": DI_SPEC}, required=_REQUIRED_META, nullable=False)

DI_UPDATE = Obj({"spec": Obj({"replicas": _i(0, 1000)})}, nullable=False)

# --- NIM services (nim-services.yml) --------------------------------------------------

_SCHEME_PORT = _i(1, 65535)
NIM_SPEC = Obj({
    "annotations": ANNOTATIONS,
    "autoscaling": Obj({
        "maxReplicas": _i(1), "metric": _s(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"),
        "metricThreshold": _i(), "minReplicas": _i(1), "scaleWindowSeconds": _i(60, 3600),
    }),
    "category": _STR,
    "compute": Obj({k: v for k, v in COMPUTE.properties.items()
                    if k not in ("extendedResources", "largeShmRequest")}),
    "environmentVariables": ENVIRONMENT_VARIABLES,
    "image": _STR1,
    "imagePullPolicy": _s(min_length=1, enum=("Always", "Never", "IfNotPresent")),
    "imagePullSecrets": IMAGE_PULL_SECRETS,
    "labels": LABELS,
    "modelStore": Obj({
        "nimCache": Obj({"name": _s(min_length=1), "profile": _s(min_length=1)}),
        "pvc": Obj({
            "existingPvc": _B, "claimName": _s(ANY, 1, 63), "readOnly": _B,
            "claimInfo": _PVC.items.properties["claimInfo"],
        }),
    }),
    "multiNode": Obj({"workers": _i(1, 1000)}),
    "ngcAuthSecret": _s(DNS_LABEL),
    "nodePools": _STRINGS,
    "preemptibility": PREEMPTIBILITY,
    "priorityClass": _STR,
    "probes": PROBES,
    "replicas": _i(0, 1000),
    "security": Obj({"runAsGid": _i(), "runAsUid": _i()}),
    "servingPort": Obj({
        "serviceType": _s(enum=("ClusterIP", "NodePort", "LoadBalancer", "ExternalName")),
        "port": _SCHEME_PORT, "grpcPort": _SCHEME_PORT, "metricsPort": _SCHEME_PORT,
        "exposeExternally": _B, "exposedUrl": _STR, "exposedProtocol": _s(enum=("http", "grpc")),
    }),
    "tolerations": TOLERATIONS,
})
NIM_CREATE = Obj({
    "metadata": Obj({
        "name": _s(ANY, 1, nullable=False),
        "useGivenNameAsPrefix": Scalar("boolean", nullable=False),
        "projectId": _s(ANY, nullable=False),
    }, required=("name", "projectId"), nullable=False),
    "spec": NIM_SPEC,
}, required=("metadata", "spec"), nullable=False)
# NimServiceUpdateRequest: the whole spec.
NIM_UPDATE = Obj({"spec": NIM_SPEC}, required=("spec",), nullable=False)


# --- the organisation (org-units.yml, access-rules.yml, policies.yml) ------------------

# ResourcesNullable: one node pool's quota in a request (nothing required; ids are strings).
_RESOURCE = Obj({"deserved": _n(), "limit": _n(), "overQuotaWeight": _n()})
QUOTA = Obj({
    "nodePool": Obj({"id": _STR, "name": _STR}, required=("id",)),
    "gpu": Obj({"deserved": _n(nullable=False), "limit": _n(), "overQuotaWeight": _n()}),
    "cpu": _RESOURCE,
    "memory": Obj({**_RESOURCE.properties, "units": _s(enum=("Mib", "MB", "GB"))},
                  required=("units",)),
    "priority": _STR,
}, nullable=False)  # (an entry of the list is never null; its fields may be)
RESOURCES_UPDATE = Arr(QUOTA, nullable=False)  # ResourcesUpdateRequest
# Run:ai 3.0's quota entry (NVIDIA's 3.0 REST reference, CONTRACT.md §13; the 2.24 files
# hold none): `rank` in the place of `priority`.
QUOTA_RANKED = Obj({**{k: v for k, v in QUOTA.properties.items() if k != "priority"},
                    "rank": _STR}, nullable=False)
RESOURCES_UPDATE_RANKED = Arr(QUOTA_RANKED, nullable=False)


def ranked(unit: Obj) -> Obj:
    """A unit's create or update schema (`PROJECT_CREATE`, ...) as a 3.0 control plane
    takes it: its quota entries `QUOTA_RANKED`."""
    return Obj({**unit.properties, "resources": RESOURCES_UPDATE_RANKED},
               required=unit.required, nullable=unit.nullable)
_UNIT_UPDATABLE = {  # DataUpdatableFields
    "description": _STR,
    "schedulingRules": Obj({key: _i(1) for key in (
        "interactiveJobTimeLimitSeconds", "interactiveJobMaxIdleDurationSeconds",
        "interactiveJobPreemptIdleDurationSeconds", "trainingJobMaxIdleDurationSeconds",
        "trainingJobTimeLimitSeconds")}),
    "defaultNodePools": Arr(_STR),
    "nodeTypes": Obj({"training": Arr(_STR), "workspace": Arr(_STR), "names": Map(_STR)}),
}
_CLUSTER = _s(fmt="uuid", nullable=False)
PROJECT_CREATE = Obj({
    **_UNIT_UPDATABLE, "name": _s(nullable=False), "clusterId": _CLUSTER,
    "requestedNamespace": _STR, "enforceRunaiScheduler": _B, "parentId": _STR,
    "resources": Arr(QUOTA, nullable=False),
}, required=("name", "clusterId", "resources"), nullable=False)
PROJECT_UPDATE = Obj({**_UNIT_UPDATABLE, "enforceRunaiScheduler": _B,
                      "resources": Arr(QUOTA, nullable=False)},
                     required=("resources",), nullable=False)
_RANGE = Obj({"averageGpuAllocation": _n(), "averageGpuUtilization": _n(),
              "averageGpuMemoryUtilization": _n(), "updatedAt": _STR})
DEPARTMENT_CREATE = Obj({
    **_UNIT_UPDATABLE, "name": _s(nullable=False), "clusterId": _CLUSTER,
    # metrics that leak into the create schema (CONTRACT.md §13): taken, never kept
    "overtimeData": Obj({"range24hData": _RANGE, "range7dData": _RANGE,
                         "range30dData": _RANGE}),
    "resources": Arr(QUOTA, nullable=False),
}, required=("name", "clusterId", "resources"), nullable=False)
DEPARTMENT_UPDATE = Obj({**_UNIT_UPDATABLE, "resources": Arr(QUOTA, nullable=False)},
                        required=("resources",), nullable=False)

SCOPE_TYPES = ("system", "tenant", "cluster", "department", "project")
ACCESS_RULE_CREATE = Obj({
    "subjectId": _s(nullable=False),
    "subjectType": _s(enum=("user", "app", "service-account", "group"), nullable=False),
    "roleId": _i(nullable=False), "scopeId": _s(nullable=False),
    "scopeType": _s(enum=SCOPE_TYPES, nullable=False), "clusterId": _s(fmt="uuid"),
}, required=("subjectId", "subjectType", "roleId", "scopeId", "scopeType"), nullable=False)

POLICY_META = Obj({  # PolicyCreationFields
    "scope": _s(enum=SCOPE_TYPES, nullable=False), "projectId": _i(),
    "departmentId": _s(ANY, 1), "clusterId": _s(fmt="uuid", min_length=1),
    "name": _s(ANY, 1, nullable=False),
}, required=("name", "scope"))
_SOURCE_OF_RULE = Obj({**{k: v for k, v in POLICY_META.properties.items() if k != "name"},
                       "isFallback": _B}, required=("scope",))
_OPTIONS = Arr(Obj({"value": _s(ANY, nullable=False), "displayed": _s(ANY)},
                   required=("value",)))
_COMMON_RULES = {"sourceOfRule": _SOURCE_OF_RULE, "required": _B, "canEdit": _B}
_DEFAULT_FROM = Obj({"field": _s(ANY), "factor": _n()})
_ITEM_RULES = Obj({"sourceOfRule": _SOURCE_OF_RULE, "canAdd": _B, "locked": Arr(_STR)})
ARRAY_RULES = Obj({**_COMMON_RULES, "options": _OPTIONS})
_SCALAR_RULES = {
    "boolean": Obj(dict(_COMMON_RULES)),
    "integer": Obj({**_COMMON_RULES, "min": _i(), "max": _i(), "step": _i(),
                    "defaultFrom": _DEFAULT_FROM}),
    "number": Obj({**_COMMON_RULES, "min": _n(), "max": _n(), "step": _n(),
                   "defaultFrom": _DEFAULT_FROM}),
    "quantity": Obj({**_COMMON_RULES, "min": _s(QUANTITY), "max": _s(QUANTITY),
                     "defaultFrom": _DEFAULT_FROM}),
    "string": Obj({**_COMMON_RULES, "options": _OPTIONS}),
}


_ARBITRARY_RULES = Obj(dict(_COMMON_RULES))  # on an object as a whole (ArbitraryRules)
# Where policies.yml departs from the pattern the functions below follow, by field name:
# the arrays of items whose defaults (and rules) hold `instances` only, no `attributes`;
# the arrays of objects that stay arrays in defaults; the objects whose rules are on the
# object as a whole; the quantities with QuantityRules (min and max; other quantities
# take StringRules); the fields whose rules name their value (`startupPolicy` ...); the
# rules a policy has beside those of the fields.
_INSTANCES_ONLY_DEFAULTS = frozenset({"annotations", "environmentVariables",
                                      "imagePullSecrets", "labels"})
_INSTANCES_ONLY_RULES = frozenset({"annotations", "environmentVariables", "labels"})
_PLAIN_ARRAYS = frozenset({"nodeSelectorTerms", "addedAttrValues"})
_ARBITRARY = frozenset({"nodeAffinityRequired"})
_SELF_VALUED = frozenset({"startupPolicy"})
_QUANTITY_RULES = frozenset({"cpuMemoryLimit", "cpuMemoryRequest", "gpuMemoryLimit",
                             "gpuMemoryRequest"})
_EXTRA_RULES = {"exposedUrls": {"customUrl": _SCALAR_RULES["boolean"]},
                "imagePullSecrets": {"userCredentials": _SCALAR_RULES["boolean"]},
                "ports": {"customExternalPort": _SCALAR_RULES["boolean"]},
                "pvc": {"path": _SCALAR_RULES["string"]}}


def policy_defaults(node, name: str = "", items: bool = True):
    """A workload spec's description as a policy's `defaults`: each array of objects
    of the spec (not those within an item) becomes `{attributes: <an item's defaults>,
    instances: [items]}`, as policies.yml has it (its tests compare the two)."""
    if isinstance(node, Obj):
        return Obj({k: policy_defaults(v, k, items) for k, v in node.properties.items()})
    if isinstance(node, Arr) and isinstance(node.items, Obj) and items \
            and name not in _PLAIN_ARRAYS:
        item = Obj(dict(node.items.properties), node.items.required)
        out = {"instances": Arr(item)}
        if name not in _INSTANCES_ONLY_DEFAULTS:
            out["attributes"] = Obj({k: policy_defaults(v, k, False)
                                     for k, v in item.properties.items()})
        return Obj(out)
    return node


def policy_rules(node, name: str = ""):
    """The `rules` a policy may set on the fields of a workload spec's description: per
    scalar its type's rules (IntegerRules, NumberRules, QuantityRules, StringRules with
    the field's values as options, BooleanRules), per array of objects `{attributes:
    rules per field of an item, instances: ItemRules}`, per array of scalars ArrayRules,
    as policies.yml has them (its tests compare the two)."""
    if name in _ARBITRARY:
        return _ARBITRARY_RULES
    if name in _SELF_VALUED:
        return Obj({**_COMMON_RULES, name: node})
    if isinstance(node, Obj):
        return Obj({**{k: policy_rules(v, k) for k, v in node.properties.items()},
                    **_EXTRA_RULES.get(name, {})})
    if isinstance(node, Arr):
        if not isinstance(node.items, Obj):
            return ARRAY_RULES
        out = {"instances": _ITEM_RULES}
        if name not in _INSTANCES_ONLY_RULES:
            out["attributes"] = Obj({
                **{k: policy_rules(v, k) for k, v in node.items.properties.items()},
                **_EXTRA_RULES.get(name, {})})
        return Obj(out)
    if isinstance(node, Map):
        return _ARBITRARY_RULES
    if node.type == "string" and name in _QUANTITY_RULES:
        return _SCALAR_RULES["quantity"]
    if node.type == "string" and node.enum is not None:
        value = Scalar("string", False, node.enum, min_length=node.min_length)
        return Obj({**_COMMON_RULES, "options": Arr(Obj({"value": value,
                                                         "displayed": _s(ANY)},
                                                        required=("value",)))})
    return _SCALAR_RULES[node.type]


IMPOSED_ASSETS = Arr(_s(fmt="uuid"))  # datasource ids


def policy_request(spec: Obj, imposed=IMPOSED_ASSETS, *, change: bool = False) -> Obj:
    """A policy's PUT body (`<K>PolicyOverwriteRequestV2`: meta and policy) over the
    workload spec `spec`, its `imposedAssets` described by `imposed` (None: it has none);
    with `change`, its PATCH body (`<K>PolicyChangeRequestV2`, plus `reset`)."""
    policy = {"defaults": policy_defaults(spec), "rules": policy_rules(spec),
              "status": Obj({"validation": Obj({"errorMessage": _s(ANY)})})}
    if imposed is not None:
        policy["imposedAssets"] = imposed
    policy = Obj(policy)
    body = {"meta": POLICY_META, "policy": policy}
    if change:
        body["reset"] = Arr(_s(ANY))
    return Obj(body, nullable=False)


__all__ = ["QUOTA", "RESOURCES_UPDATE", "QUOTA_RANKED", "RESOURCES_UPDATE_RANKED", "ranked",
           "PROJECT_CREATE", "PROJECT_UPDATE",
           "DEPARTMENT_CREATE", "DEPARTMENT_UPDATE", "ACCESS_RULE_CREATE", "POLICY_META",
           "SCOPE_TYPES", "policy_defaults", "policy_rules", "policy_request",
           "NIM_CREATE", "NIM_UPDATE", "META", "DISTRIBUTED_CREATE", "DI_CREATE",
           "DI_UPDATE", "TRAINING_CREATE", "WORKSPACE_CREATE", "INFERENCE_CREATE",
           "INFERENCE_UPDATE", "INFERENCE_UPDATABLE"]
