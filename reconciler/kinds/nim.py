"""The v2 NIM family (CONTRACT.md §12, nim-services.yml): the NIMService entry and its
wire form, the metadata envelope.

The engine's body of every kind is flat: `name`, `projectId`, `clusterId` beside the
kind's body keys (`spec`), and a live body adds `workloadId`, `createdAt`, `desiredPhase`
and so on. A NIM service's create body is `{metadata: {name, projectId}, spec}` (no
clusterId: the project names the cluster, so the diff leaves it out and a list scope is
the project alone), its update body `{spec}` (the planner's update body already), and its
answer `{metadata: {id, name, projectId, clusterId, createdAt, updatedAt, ...},
desiredPhase, spec}`, which `Envelope.read` flattens. Its GET answer holds no phase: the
entry's `phase_source` says the workloads API gives it.

Caller: the registry (`reconciler.kinds`); the API client through `Kind.create_body`,
`Kind.read`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler import quantities
from reconciler.kinds.pods import PodGroups, compute, obj, pods
from reconciler.kinds.entry import (
    BODY, TYPE_FILLED, Codec, Kind, ServerValue, fixed, generated, image_pull_policy,
    new_pvc_claim, same, workload_type)

# The create metadata's keys (NIMServiceMetadataCreateParams).
_CREATE_METADATA = ("name", "projectId", "useGivenNameAsPrefix")


class Envelope(Codec):
    """The metadata envelope: name and projectId in `metadata`, no clusterId sent; an
    answer's `metadata` flattened (its `id` is the `workloadId`)."""

    sends_cluster = False

    def create_body(self, kind: Kind, body: dict) -> dict:
        out: dict[str, Any] = {"metadata": {k: body[k] for k in _CREATE_METADATA
                                            if k in body}}
        for key in kind.body_keys:
            if key in body:
                out[key] = body[key]
        return out

    def read(self, kind: Kind, answer: Any) -> Any:
        if not isinstance(answer, dict):
            return answer
        meta = answer.get("metadata")
        if not isinstance(meta, dict):
            return answer
        out: dict[str, Any] = {}
        for key, value in meta.items():
            out["workloadId" if key == "id" else key] = value
        for key, value in answer.items():
            if key != "metadata":
                out[key] = value
        return out


ENVELOPE = Envelope()



def _max_replicas_nim(scaling: Mapping, value: Any) -> bool:
    # "Defaults to minReplicas" (minReplicas: "Defaults to 1").
    minimum = scaling.get("minReplicas")
    return same(value, 1 if minimum is None else minimum)


def _exposed_protocol(serving: Mapping, value: Any) -> bool:
    # "If grpcPort is set, this defaults to grpc. Otherwise, it defaults to http."
    return value == ("grpc" if serving.get("grpcPort") is not None else "http")


def _replicas(body: Mapping[str, Any]) -> PodGroups:
    # replicas (default 1), or autoscaling's minReplicas..maxReplicas (defaults 1 and
    # minReplicas), each a leader and `multiNode.workers` (default 0) workers alike.
    spec = obj(body.get("spec"))
    scaling = spec.get("autoscaling")
    if scaling:
        low = pods(obj(scaling).get("minReplicas"), 1)
        high = pods(obj(scaling).get("maxReplicas"), low)
    else:
        low = high = pods(spec.get("replicas"), 1)
    each = 1 + pods(obj(spec.get("multiNode")).get("workers"), 0)
    return [(low * each, high * each, compute(spec))]


NIM_SERVICE = Kind(
    name="NIMService",
    api_path="/api/v2/workloads/nim-services",
    delete_path="/api/v2/workloads",
    body_keys=("spec",),
    containers=("spec",),
    defaults={"": BODY, "spec": (
        ServerValue("imagePullPolicy", image_pull_policy,
                    means="Always for a :latest tag, else IfNotPresent"),
        *(fixed(f"{key}[].exclude", False) for key in ("annotations", "imagePullSecrets")),
        fixed("probes.readiness.handler.httpGet.path", "/"),
        fixed("probes.readiness.handler.httpGet.scheme", "HTTP"),
        *workload_type("inference", "non-preemptible"),
        fixed("replicas", 1),
        fixed("autoscaling.minReplicas", 1),
        ServerValue("autoscaling.maxReplicas", _max_replicas_nim, means="minReplicas"),
        fixed("autoscaling.scaleWindowSeconds", 300),
        fixed("servingPort.serviceType", "ClusterIP"),
        fixed("servingPort.exposeExternally", True),
        ServerValue("servingPort.exposedProtocol", _exposed_protocol,
                    means="grpc when grpcPort is set, else http"),
        generated("servingPort.exposedUrl"),
        fixed("modelStore.pvc.existingPvc", False),
        fixed("modelStore.pvc.readOnly", False),
        generated("modelStore.pvc.claimName", new_pvc_claim),
        fixed("modelStore.pvc.claimInfo.accessModes.readWriteOnce", True),
        fixed("modelStore.pvc.claimInfo.accessModes.readOnlyMany", False),
        fixed("modelStore.pvc.claimInfo.accessModes.readWriteMany", False),
        fixed("modelStore.pvc.claimInfo.volumeMode", "Filesystem"),
    )},
    # The simulator's `type` (CONTRACT.md §12: the real one is not documented).
    list_types=frozenset({"nimservice", "nim"}),
    server_filled=TYPE_FILLED,
    pods=_replicas,
    # NimServiceUpdateRequest is `{spec: NimServiceSpec}`, the whole spec: every spec field
    # is updated in place, the spec sent whole. Name and project (metadata) are create-only.
    updatable_paths=frozenset({"spec"}),
    codec=ENVELOPE,
    quantities={"spec": quantities.NIM_FIELDS},
    phase_source="workloads",
)
