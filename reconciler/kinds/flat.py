"""The flat workloads (the v1 API, CONTRACT.md §2-§7): Training, Workspace, Inference,
DistributedTraining and DistributedInference. Their bodies are flat on the wire (`name`,
`projectId`, `clusterId` beside the body keys), so they take the entry's plain codec and
hooks; what sets them apart is data: paths, body keys, containers, server defaults,
update paths and GPU rule.

Also the server values their containers share (`CONTAINER`, `TRAINING_CONTAINER`,
`SERVING_PORT`). Caller: the registry (`reconciler.kinds`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.kinds.pods import PodGroups, compute, obj, pods, single
from reconciler.kinds.entry import (
    BODY, TYPE_FILLED, Kind, ServerValue, fixed, generated, image_pull_policy,
    new_pvc_claim, same, workload_type)


def _replicas_default(scaling: Mapping, value: Any) -> bool:
    # "Defaults to minReplicas, or to 1 if minReplicas is set to 0" (minReplicas: 1).
    minimum = scaling.get("minReplicas", 1)
    return same(value, minimum if isinstance(minimum, int) and not isinstance(minimum, bool)
                and minimum > 0 else 1)


_STORAGE_KINDS = ("configMapVolume", "dataVolume", "emptyDirVolume", "git", "hostPath", "nfs",
                  "pvc", "s3", "secretVolume")

# Every container-shaped object (spec, masterSpec, leader, worker).
CONTAINER: tuple[ServerValue, ...] = (
    ServerValue("imagePullPolicy", image_pull_policy,
                means="Always for a :latest tag, else IfNotPresent"),
    *(fixed(f"{key}[].exclude", False)
      for key in ("annotations", "imagePullSecrets", "ports", "relatedUrls")),
    generated("ports[].external"),
    generated("exposedUrls[].url"),
    fixed("security.uidGidSource", "fromTheImage"),
    fixed("probes.readiness.handler.httpGet.path", "/"),
    fixed("probes.readiness.handler.httpGet.scheme", "HTTP"),
    *(fixed(f"storage.{key}[].exclude", False) for key in _STORAGE_KINDS),
    fixed("storage.hostPath[].readOnly", True),
    fixed("storage.nfs[].readOnly", True),
    *(fixed(f"storage.pvc[].{key}", False)
      for key in ("existingPvc", "readOnly", "ephemeral", "dataSharing")),
    generated("storage.pvc[].claimName", new_pvc_claim),
    fixed("storage.pvc[].claimInfo.accessModes.readWriteOnce", True),
    fixed("storage.pvc[].claimInfo.accessModes.readOnlyMany", False),
    fixed("storage.pvc[].claimInfo.accessModes.readWriteMany", False),
    fixed("storage.pvc[].claimInfo.volumeMode", "Filesystem"),
    fixed("storage.s3[].url", "https://s3.amazonaws.com"),
    fixed("storage.s3[].secretKeyOfAccessKeyId", "AccessKeyId"),
    fixed("storage.s3[].secretKeyOfSecretKey", "SecretKey"),
    fixed("storage.git[].secretKeyOfUser", "User"),
    fixed("storage.git[].secretKeyOfPassword", "Password"),
)
# Trainings, workspaces and distributed trainings: host fields in `security`, and the
# run-to-completion defaults.
TRAINING_CONTAINER: tuple[ServerValue, ...] = CONTAINER + (
    fixed("security.hostIpc", False),
    fixed("security.hostNetwork", False),
    fixed("backoffLimit", 6),
    fixed("autoDeletionTimeAfterCompletionSeconds", 2592000),  # 30 days
)


SERVING_PORT: tuple[ServerValue, ...] = (
    fixed("servingPort.protocol", "http"),
    fixed("servingPort.authorizationType", "public"),
)

# --- pods per body (`Kind.pods`) --------------------------------------------------------


def _autoscaled(body: Mapping[str, Any]) -> PodGroups:
    # 1 pod, or with `autoscaling` minReplicas..maxReplicas (defaults 1 and minReplicas,
    # or 1 when that is 0).
    scaling = obj(body.get("spec")).get("autoscaling")
    if not scaling:
        return single(body)
    low = pods(obj(scaling).get("minReplicas"), 1)
    high = pods(obj(scaling).get("maxReplicas"), low or 1)
    return [(low, high, compute(body.get("spec")))]


def _master_and_workers(body: Mapping[str, Any]) -> PodGroups:
    # `numWorkers` (1 when absent) workers of spec.compute, one master of masterSpec's
    # (the spec's when masterSpecSameAsWorker).
    spec = obj(body.get("spec"))
    workers = pods(spec.get("numWorkers"), 1)
    master = spec if body.get("masterSpecSameAsWorker") else body.get("masterSpec")
    return [(workers, workers, compute(spec)), (1, 1, compute(master))]


def _leader_and_workers(body: Mapping[str, Any]) -> PodGroups:
    # `replicas` (default 1) x (leader + `workers` (default 0) x worker).
    spec = obj(body.get("spec"))
    replicas = pods(spec.get("replicas"), 1)
    workers = pods(spec.get("workers"), 0) * replicas
    return [(replicas, replicas, compute(spec.get("leader"))),
            (workers, workers, compute(spec.get("worker")))]


DISTRIBUTED_TRAINING = Kind(
    name="DistributedTraining",
    api_path="/api/v1/workloads/distributed",
    body_keys=("spec", "masterSpec", "masterSpecSameAsWorker"),
    containers=("spec", "masterSpec"),
    defaults={
        "": BODY,
        "spec": TRAINING_CONTAINER + workload_type("train", "preemptible") + (
            fixed("slotsPerWorker", 1), fixed("sshAuthMountPath", "/root/.ssh")),
        "masterSpec": TRAINING_CONTAINER,
    },
    list_types=frozenset({"distributed", "distributedtraining", "distributedworkload"}),
    server_filled=TYPE_FILLED,
    pods=_master_and_workers,
    can_suspend=True,
    completes=True,
)

DISTRIBUTED_INFERENCE = Kind(
    name="DistributedInference",
    api_path="/api/v1/workloads/distributed-inferences",
    body_keys=("spec",),
    containers=("spec.leader", "spec.worker"),
    defaults={
        "": BODY,
        "spec": workload_type("inference", "non-preemptible") + SERVING_PORT + (
            fixed("restartPolicy", "RecreateGroupOnPodRestart"),
            fixed("startupPolicy", "LeaderCreated"),
            fixed("workers", 0),
            fixed("replicas", 1),
            fixed("servingPort.exposeExternally", True),
            generated("servingPort.exposedUrl"),  # generated when exposed
        ),
        "spec.leader": CONTAINER,
        "spec.worker": CONTAINER,
    },
    list_types=frozenset({"distributedinference"}),
    server_filled=TYPE_FILLED,
    pods=_leader_and_workers,
    updatable_paths=frozenset({"spec.replicas"}),
)

TRAINING = Kind(
    name="Training",
    api_path="/api/v1/workloads/trainings",
    body_keys=("spec",),
    containers=("spec",),
    defaults={"": BODY,
              "spec": TRAINING_CONTAINER + workload_type("train", "preemptible")},
    list_types=frozenset({"training", "trainingworkload"}),
    server_filled=TYPE_FILLED,
    pods=single,
    can_suspend=True,
    completes=True,
)

WORKSPACE = Kind(
    name="Workspace",
    api_path="/api/v1/workloads/workspaces",
    body_keys=("spec",),
    containers=("spec",),
    defaults={"": BODY,
              "spec": TRAINING_CONTAINER + workload_type("build", "non-preemptible")},
    list_types=frozenset({"workspace", "interactiveworkload"}),
    server_filled=TYPE_FILLED,
    pods=single,
    can_suspend=True,
)

INFERENCE = Kind(
    name="Inference",
    api_path="/api/v1/workloads/inferences",
    body_keys=("spec",),
    containers=("spec",),
    defaults={"": BODY, "spec": CONTAINER + workload_type("inference", "non-preemptible")
              + SERVING_PORT + (
        fixed("servingPort.clusterLocalAccessOnly", False),
        fixed("autoscaling.minReplicas", 1),
        *(ServerValue(f"autoscaling.{key}", _replicas_default,
                      means="minReplicas, or 1 when that is 0")
          for key in ("maxReplicas", "initialReplicas", "activationReplicas")),
        fixed("autoscaling.metricThresholdPercentage", 70),
        fixed("autoscaling.scaleToZeroRetentionSeconds", 0),
    )},
    list_types=frozenset({"inference", "inferenceworkload"}),
    server_filled=TYPE_FILLED,
    pods=_autoscaled,
    # InferenceUpdateSpec (CONTRACT.md §4): each top-level field is sent whole.
    updatable_paths=frozenset(f"spec.{key}" for key in (
        "args", "category", "command", "compute", "createHomeDir", "environmentVariables",
        "image", "imagePullPolicy", "imagePullSecrets", "nodeAffinityRequired", "nodePools",
        "nodeType", "podAffinity", "preemptibility", "priorityClass", "probes", "workingDir",
        "autoscaling", "servingConfiguration")),
)


KINDS = (DISTRIBUTED_TRAINING, DISTRIBUTED_INFERENCE, TRAINING, WORKSPACE, INFERENCE)
