"""The Workloads V2 family (CONTRACT.md §12): the Manifest entry, whose body carries a
Kubernetes manifest, with its wire form and hooks, and the pure facts and rules about
manifests they apply.

- `quantity`: a Kubernetes quantity ("1500m", "1Gi", "2e3") as an exact Fraction, and
  `align_quantities`, which gives equal-valued quantities under `resources` one spelling,
  so the diff compares them by value (`1Gi` = `1024Mi`).
- `item_key`: the strategic-merge keys of Kubernetes lists (`reconciler.kinds.lists`).
- `without_server_paths`: a manifest without what only the server writes (`status`,
  `metadata.uid`, `resourceVersion`, `creationTimestamp`, `managedFields`, ...).
- `KNOWN_TYPES`: the common workload types (offline `validate`), and `FROZEN`: per type,
  the paths that cannot change in place (a change there replaces the workload).
- `templates` (`pod_templates`): every pod template of a manifest with its replica range,
  by type, where it sits and its pods' labels (GPU accounting and policy rules).
- `conventional_order`: a manifest's keys as a person writes them (`export`).
- `to_create_body`, `to_update_body`, `from_response`: the engine's flat body
  (name, projectId, clusterId, priority, category, preemptibility, manifest) to and from
  the API's `{metadata, manifest}` and `WorkloadV2GetResponse` (`ManifestCodec`).
- `ManifestHooks`: the entry's diff hooks (both sides normalised, the type's frozen paths
  replace), its label (the manifest's own kind), containers, labels, completion and
  export shape.

Callers: the registry (`reconciler.kinds`, the entry), gpus (pod templates and their
GPUs), and the engine through the entry's behaviour.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from reconciler import quantities
from reconciler.kinds.entry import Codec, Hooks, Kind
from reconciler.kinds.pods import PodGroups
from reconciler.kinds.lists import NAME_KEYED, item_key_any  # noqa: F401 (re-exported)
from reconciler.kinds.lists import k8s_item_key as item_key

# --- quantities (k8s.io/apimachinery resource.Quantity grammar: `quantities`) ---------


def quantity(value: Any) -> Fraction | None:
    """The exact value of a Kubernetes quantity (a string or a number), None when `value`
    is not one."""
    return quantities.value(value)


def align_quantities(desired: Any, other: Any) -> Any:
    """A copy of `other` in which each quantity under a `resources` object (limits,
    requests) that equals `desired`'s at the same place by value is spelled as `desired`
    spells it; the rest is as it was."""
    return _align(desired, other, False)


def _align(d: Any, o: Any, in_resources: bool) -> Any:
    if isinstance(d, dict) and isinstance(o, dict):
        return {k: (_align(d[k], v, in_resources or k == "resources") if k in d else v)
                for k, v in o.items()}
    if isinstance(d, list) and isinstance(o, list):
        keyed = {item_key_any(i): i for i in d if item_key_any(i) is not None}
        out = []
        for n, item in enumerate(o):
            k = item_key_any(item)
            match = keyed.get(k) if k is not None else (d[n] if n < len(d) else None)
            out.append(_align(match, item, in_resources) if match is not None else item)
        return out
    if in_resources and not isinstance(o, (dict, list)) and d != o:
        qd, qo = quantity(d), quantity(o)
        if qd is not None and qd == qo:
            return d
    return o


# --- server-owned paths ---------------------------------------------------------------

SERVER_METADATA = ("uid", "resourceVersion", "creationTimestamp", "managedFields",
                   "generation", "selfLink", "deletionTimestamp")


def without_server_paths(manifest: Any) -> Any:
    """A copy of `manifest` without `status` and the metadata only the server writes."""
    if not isinstance(manifest, dict):
        return manifest
    out = {k: v for k, v in manifest.items() if k != "status"}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: v for k, v in meta.items() if k not in SERVER_METADATA}
    return out


# --- a person's key order --------------------------------------------------------------

_TOP_ORDER = ("apiVersion", "kind", "metadata", "spec")
_METADATA_ORDER = ("name", "namespace", "labels", "annotations")
_ITEM_KEYS = ("name", "groupName", "containerPort")


def conventional_order(manifest: Any) -> Any:
    """A copy of `manifest` with its keys in the order Kubernetes manifests are written in:
    `apiVersion`, `kind`, `metadata` (its `name`, `namespace`, `labels`, `annotations`
    first), `spec`, then any other key; below that each object's keys as they came (the
    API may answer them in another order than they were sent: JSON objects have none),
    except that a list item leads with what identifies it (a container's or a variable's
    `name`, a worker group's `groupName`, a port's `containerPort`), as `- name: ...` is
    written. What `export` writes."""
    if not isinstance(manifest, Mapping):
        return manifest
    out = _first(manifest, _TOP_ORDER, lambda k, v: _items_first(v))
    if isinstance(out.get("metadata"), Mapping):
        out["metadata"] = _first(out["metadata"], _METADATA_ORDER, lambda k, v: _items_first(v))
    return out


def _first(obj: Mapping, order: tuple[str, ...], below) -> dict:
    keys = [k for k in order if k in obj] + [k for k in obj if k not in order]
    return {k: below(k, obj[k]) for k in keys}


def _items_first(value: Any, in_list: bool = False) -> Any:
    if isinstance(value, Mapping):
        lead = next((k for k in _ITEM_KEYS if k in value), None) if in_list else None
        return _first(value, (lead,) if lead else (), lambda k, v: _items_first(v))
    if isinstance(value, list):
        return [_items_first(v, True) for v in value]
    return copy.deepcopy(value)


# --- workload types -------------------------------------------------------------------

# (apiVersion, kind) of the common workload types: what offline `validate` knows.
KNOWN_TYPES: frozenset[tuple[str, str]] = frozenset({
    ("kubeflow.org/v1", "PyTorchJob"), ("kubeflow.org/v2beta1", "MPIJob"),
    ("kubeflow.org/v1", "MPIJob"), ("kubeflow.org/v1", "TFJob"),
    ("kubeflow.org/v1", "XGBoostJob"), ("ray.io/v1", "RayJob"), ("ray.io/v1", "RayCluster"),
    ("ray.io/v1", "RayService"), ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("serving.kserve.io/v1beta1", "InferenceService"), ("apps/v1", "Deployment"),
    ("apps/v1", "StatefulSet"), ("batch/v1", "Job"),
    ("nvidia.com/v1alpha1", "DynamoGraphDeployment"),
})

# Per type, the manifest paths (dotted, under `manifest.`) that cannot change in place: a
# change at or under one replaces the workload. A type not here updates in place.
FROZEN: dict[str, tuple[str, ...]] = {
    "Job": ("spec.template", "spec.selector", "spec.completionMode"),
    "PyTorchJob": ("spec.pytorchReplicaSpecs",),
    "TFJob": ("spec.tfReplicaSpecs",),
    "XGBoostJob": ("spec.xgbReplicaSpecs",),
    "MPIJob": ("spec.mpiReplicaSpecs",),
    "RayJob": ("spec.rayClusterSpec", "spec.entrypoint"),
    "StatefulSet": ("spec.selector", "spec.serviceName", "spec.volumeClaimTemplates"),
    "Deployment": ("spec.selector",),
}

# Types that run to completion (left alone once finished, not re-created).
COMPLETES = frozenset({"Job", "PyTorchJob", "RayJob", "TFJob", "XGBoostJob", "MPIJob"})


def completes(manifest: Any) -> bool:
    """Whether a manifest's type runs to its end (`COMPLETES`)."""
    return type_of(manifest) in COMPLETES


def _condition(status: Mapping, kind: str) -> bool:
    return any(isinstance(c, Mapping) and c.get("type") == kind
               and str(c.get("status")).lower() == "true"
               for c in status.get("conditions") or ())


def outcome(manifest_type: str, status: Any) -> str | None:
    """"Completed" or "Failed" when the Kubernetes `status` of a workload of
    `manifest_type` says it ran to its end, else None: a Job's condition Complete (or
    Failed); a Kubeflow job's condition Succeeded (or Failed); a RayJob's `jobStatus`
    SUCCEEDED (or FAILED); any type's `status.phase` Completed or Succeeded (or Failed).
    The API does not say how a v2 workload's end shows (CONTRACT.md §12); these are the
    types' own status fields."""
    if not isinstance(status, Mapping):
        return None
    if manifest_type == "Job":
        done = _condition(status, "Complete")
    elif manifest_type in ("PyTorchJob", "TFJob", "XGBoostJob", "MPIJob"):
        done = _condition(status, "Succeeded")
    elif manifest_type == "RayJob":
        done = status.get("jobStatus") == "SUCCEEDED"
        if status.get("jobStatus") == "FAILED":
            return "Failed"
    else:
        done = False
    if done or status.get("phase") in ("Completed", "Succeeded"):
        return "Completed"
    if _condition(status, "Failed") or status.get("phase") == "Failed":
        return "Failed"
    return None


def type_of(manifest: Any) -> str:
    """The manifest's own kind ("" when none)."""
    kind = manifest.get("kind") if isinstance(manifest, Mapping) else None
    return kind if isinstance(kind, str) else ""


def kind_in(*bodies: Any) -> str | None:
    """The manifest's own kind (`PyTorchJob`) of the first of `bodies` (a Manifest
    workload's flat body: spec, state or live) that holds a manifest naming one; None
    for any other kind's body: what every output shows beside `Manifest`."""
    for body in bodies:
        if isinstance(body, Mapping):
            kind = type_of(body.get("manifest"))
            if kind:
                return kind
    return None


def forces_replacement(manifest_type: str, path: str) -> bool:
    """Whether a change at body `path` ("manifest.spec.template.spec...") of a manifest of
    `manifest_type` replaces the workload."""
    if path in ("manifest.kind", "manifest.apiVersion", "manifest.metadata.name",
                "manifest.metadata.namespace"):
        return True
    for frozen in FROZEN.get(manifest_type, ()):
        full = "manifest." + frozen
        if path == full or (path.startswith(full) and path[len(full)] in ".["):
            return True
    return False


# --- pod templates --------------------------------------------------------------------

def _obj(x: Any) -> Mapping:
    return x if isinstance(x, Mapping) else {}


def _int(x: Any, default: int) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else default


@dataclass(frozen=True)
class PodTemplate:
    """One pod template of a manifest: how many pods it makes (`low`..`high`: a Ray worker
    group's min..max replicas), the pod spec, where that pod spec sits (a dotted path
    under the manifest, keyed list items in brackets as the diff names them:
    `spec.pytorchReplicaSpecs.Worker.template.spec`,
    `spec.rayClusterSpec.workerGroupSpecs[gpu].template.spec`) and the labels its pods
    get (the template's `metadata.labels`)."""
    low: int
    high: int
    pod: Mapping
    path: str
    labels: Mapping


def templates(manifest: Any) -> tuple[list[PodTemplate], bool]:
    """(every pod template of a manifest, whether its type is known): the replicas of
    each, by type (CONTRACT.md §12). An unknown type has each pod template found
    (`template: {spec}`, anywhere) once."""
    kind = type_of(manifest)
    spec = _obj(_obj(manifest).get("spec"))
    out: list[PodTemplate] = []

    def add(low: int, high: int, template: Any, path: str) -> None:
        t = _obj(template)
        out.append(PodTemplate(low, high, _obj(t.get("spec")), f"{path}.spec",
                               _obj(_obj(t.get("metadata")).get("labels"))))

    replica_specs = {"PyTorchJob": "pytorchReplicaSpecs", "TFJob": "tfReplicaSpecs",
                     "XGBoostJob": "xgbReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}
    if kind in replica_specs:
        key = replica_specs[kind]
        for role, group in _obj(spec.get(key)).items():
            n = _int(_obj(group).get("replicas"), 1)
            add(n, n, _obj(group).get("template"), f"spec.{key}.{role}.template")
        return out, True
    if kind in ("RayJob", "RayCluster", "RayService"):
        where = ("spec" if kind == "RayCluster" else
                 "spec.rayClusterSpec" if spec.get("rayClusterSpec") else "spec.rayClusterConfig")
        cluster = spec if kind == "RayCluster" else _obj(
            spec.get("rayClusterSpec") or spec.get("rayClusterConfig"))
        add(1, 1, _obj(cluster.get("headGroupSpec")).get("template"),
            f"{where}.headGroupSpec.template")
        for n, group in enumerate(cluster.get("workerGroupSpecs") or ()):
            g = _obj(group)
            count = _int(g.get("replicas"), 1)
            low, high = _int(g.get("minReplicas"), count), _int(g.get("maxReplicas"), count)
            key = item_key("workerGroupSpecs", g)
            add(min(low, high), max(low, high), g.get("template"),
                f"{where}.workerGroupSpecs[{key if key is not None else n}].template")
        return out, True
    if kind == "LeaderWorkerSet":
        replicas = _int(spec.get("replicas"), 1)
        tmpl = _obj(spec.get("leaderWorkerTemplate"))
        size = _int(tmpl.get("size"), 1)
        if tmpl.get("leaderTemplate"):
            add(replicas, replicas, tmpl.get("leaderTemplate"),
                "spec.leaderWorkerTemplate.leaderTemplate")
            n = replicas * max(size - 1, 0)
        else:
            n = replicas * size
        add(n, n, tmpl.get("workerTemplate"), "spec.leaderWorkerTemplate.workerTemplate")
        return out, True
    if kind in ("Deployment", "StatefulSet", "Job"):
        n = _int(spec.get("parallelism" if kind == "Job" else "replicas"), 1)
        add(n, n, spec.get("template"), "spec.template")
        return out, True
    if kind == "InferenceService":
        predictor = _obj(spec.get("predictor"))
        low = _int(predictor.get("minReplicas"), 1)
        high = _int(predictor.get("maxReplicas"), max(low, 1))
        out.append(PodTemplate(low, high, predictor, "spec.predictor", {}))
        return out, True
    for path, template in _find_templates(manifest, ""):
        add(1, 1, template, path)
    return out, False


def pod_templates(manifest: Any) -> tuple[list[tuple[int, int, Mapping]], bool]:
    """([(fewest pods, most pods, pod spec)], whether the type is known): `templates`
    for counting."""
    found, known = templates(manifest)
    return [(t.low, t.high, t.pod) for t in found], known


def _find_templates(node: Any, path: str) -> list[tuple[str, Mapping]]:
    """(dotted path, template) of every `template: {spec: {...}}` under `node`."""
    out: list[tuple[str, Mapping]] = []
    if isinstance(node, Mapping):
        for k, v in node.items():
            here = f"{path}.{k}" if path else str(k)
            if k == "template" and isinstance(v, Mapping) and isinstance(v.get("spec"), Mapping):
                out.append((here, v))
            else:
                out.extend(_find_templates(v, here))
    elif isinstance(node, list):
        field = path.rsplit(".", 1)[-1]
        for n, v in enumerate(node):
            key = item_key(field, v) if isinstance(v, Mapping) else None
            out.extend(_find_templates(v, f"{path}[{key if key is not None else n}]"))
    return out


def labels(manifest: Any) -> Mapping:
    """The manifest's own `metadata.labels` (empty when none)."""
    return _obj(_obj(_obj(manifest).get("metadata")).get("labels"))


def containers(pod: Mapping) -> list[Mapping]:
    """Every container of a pod spec (init containers included)."""
    return [c for key in ("initContainers", "containers")
            for c in (pod.get(key) or ()) if isinstance(c, Mapping)]


def pod_gpus(pod: Mapping) -> float | None:
    """`nvidia.com/gpu` of one pod: the limits (or requests) of its containers, summed;
    None when one of them is not a whole number of devices (`lots`, `-8`, `8.5`), which
    Kubernetes refuses and a count cannot read."""
    total = Fraction(0)
    for c in _obj(pod).get("containers") or ():
        res = _obj(_obj(c).get("resources"))
        value = _obj(res.get("limits")).get("nvidia.com/gpu")
        if value is None:
            value = _obj(res.get("requests")).get("nvidia.com/gpu")
        if value is None:
            continue
        q = quantity(value)
        if q is None or q < 0 or q.denominator != 1:
            return None
        total += q
    return float(total)


# --- the wire form --------------------------------------------------------------------

META = ("name", "projectId", "clusterId", "priority", "category", "preemptibility")


def to_create_body(body: Mapping) -> dict:
    """The API's create body (`{metadata, manifest}`) of the engine's flat body."""
    return {"metadata": {k: body[k] for k in META if body.get(k) is not None},
            "manifest": copy.deepcopy(body.get("manifest") or {})}


def to_update_body(body: Mapping) -> dict:
    """The API's PUT body: `metadata` holds only priority and category."""
    return {"metadata": {k: body[k] for k in ("priority", "category")
                         if body.get(k) is not None},
            "manifest": copy.deepcopy(body.get("manifest") or {})}


def from_response(answer: Mapping) -> dict:
    """The engine's flat body of a `WorkloadV2GetResponse` (or a bare `WorkloadV2`): the
    user's manifest is `rawManifest`, without what only the server writes."""
    workload = _obj(answer.get("workload")) if "workload" in answer else answer
    meta = _obj(workload.get("metadata"))
    out: dict = {k: meta[k] for k in META if meta.get(k) is not None}
    if meta.get("id") is not None:
        out["workloadId"] = meta["id"]
    for key in ("createdAt", "updatedAt", "updatedBy", "projectName"):
        if meta.get(key) is not None:
            out[key] = meta[key]
    out["desiredPhase"] = workload.get("desiredPhase")
    out["manifest"] = without_server_paths(workload.get("rawManifest") or {})
    sync = _obj(answer.get("syncInfo"))
    if sync:
        out["syncStatus"] = sync.get("status")
        out["actualPhase"] = {"Synced": "Running", "Failed": "Failed", "Deleting": "Deleting",
                              "Deleted": "Deleted"}.get(str(sync.get("status")), "Creating")
        ended = outcome(type_of(out["manifest"]),
                        _obj(workload.get("workloadManifest")).get("status"))
        if ended is not None:
            out["actualPhase"] = ended
    return out


# --- the entry's behaviour --------------------------------------------------------------


class ManifestCodec(Codec):
    """Workloads V2 on the wire: `{metadata, manifest}` in, `WorkloadV2GetResponse` out."""

    def create_body(self, kind: Kind, body: dict) -> dict:
        return to_create_body(body)

    def update_body(self, kind: Kind, body: dict) -> dict:
        return to_update_body(body)

    def read(self, kind: Kind, answer: Any) -> Any:
        return from_response(answer) if isinstance(answer, Mapping) else answer


class ManifestHooks(Hooks):
    """A body that carries a Kubernetes manifest: what only the server writes is left out
    of every side before the diff and quantities under `resources` compare by value; a
    change the manifest's type cannot take in place replaces; its containers and labels
    are its pod templates'; it runs to completion by its type; every output names the
    manifest's own kind beside the address; export writes it in a person's key order."""

    manifest_path = ("manifest",)
    normalises = True

    def normalise(self, kind: Kind, bodies: Sequence[dict | None]) -> list[dict | None]:
        out = [None if b is None else {**b, "manifest": without_server_paths(
            b.get("manifest"))} for b in bodies]
        ref = next((b for b in out if b is not None), None)
        if ref is None:
            return out
        return [b if b is None or b is ref else {
            **b, "manifest": align_quantities(ref.get("manifest"), b.get("manifest"))}
            for b in out]

    def forces_replacement(self, kind: Kind, body: Mapping | None, path: str) -> bool:
        return forces_replacement(type_of((body or {}).get("manifest")), path)

    def label(self, kind: Kind, bodies: Sequence[Any]) -> str | None:
        return kind_in(*bodies)

    def containers(self, kind: Kind, body: Mapping | None) -> list[tuple[str, Mapping]]:
        out = []
        for t in templates((body or {}).get("manifest"))[0]:
            for key in ("initContainers", "containers"):
                for c in t.pod.get(key) or ():
                    if isinstance(c, Mapping):
                        out.append((f"manifest.{t.path}.{key}[{c.get('name', '')}]", c))
        return out

    def labels(self, kind: Kind, body: Mapping | None) -> list[tuple[str, frozenset[str]]]:
        # Each pod template's `metadata.labels` with the manifest's own (the workload's).
        manifest = (body or {}).get("manifest")
        own = set(labels(manifest))
        out: list[tuple[str, frozenset[str]]] = []
        for t in templates(manifest)[0]:
            where = (f"manifest.{t.path.removesuffix('.spec')}.metadata.labels"
                     if t.path.endswith(".spec") else "manifest.metadata.labels")
            if all(where != w for w, _ in out):
                out.append((where, frozenset(own | set(t.labels))))
        return out

    def runs_to_completion(self, kind: Kind, body: Mapping | None) -> bool:
        # By its type; a body that does not say (a list item carries no manifest) may.
        if isinstance(body, Mapping) and isinstance(body.get("manifest"), Mapping):
            return completes(body["manifest"])
        return True

    def export_shape(self, kind: Kind, doc: dict) -> dict:
        if isinstance(doc.get("manifest"), dict):
            doc["manifest"] = conventional_order(doc["manifest"])
        return doc

    def manifest_warning(self, kind: Kind, manifest: Mapping) -> str | None:
        pair = (manifest.get("apiVersion"), manifest.get("kind"))
        if pair in KNOWN_TYPES:
            return None
        return (f"{pair[1]} ({pair[0]}) is not one of the common workload types this tool "
                "knows offline: the control plane must have it registered "
                "(GET /api/v1/workload-types); its GPUs are counted once per pod template")


CODEC = ManifestCodec()
HOOKS = ManifestHooks()


def _pods_of_templates(body: Mapping[str, Any]) -> PodGroups:
    # Each pod template of the manifest, by its type (`pod_templates`): its containers'
    # nvidia.com/gpu limits (or requests), as a compute of whole devices. A pod whose GPUs
    # cannot be read (`lots`) has a device count that is none (NaN).
    found, _ = pod_templates(body.get("manifest"))
    return [(low, high, {"gpuDevicesRequest": math.nan if (n := pod_gpus(pod)) is None else n})
            for low, high, pod in found]


MANIFEST = Kind(
    name="Manifest",
    api_path="/api/v2/workloads",
    body_keys=("priority", "category", "preemptibility", "manifest"),
    containers=(),  # a manifest's pod templates: `containers` reads them by type
    defaults={},
    list_types=frozenset({"manifest", "workloadv2", "v2workload"}),
    # "Each workload type has a default" priority (and category, preemptibility).
    server_filled=frozenset({"priority", "category", "preemptibility"}),
    pods=_pods_of_templates,
    # WorkloadV2MetadataUpdateParams: priority and category; the manifest whole (PUT). A
    # change the manifest's type cannot take in place replaces (`FROZEN`).
    updatable_paths=frozenset({"priority", "category", "manifest"}),
    update_method="PUT",
    completes=True,
    codec=CODEC,
    hooks=HOOKS,
)
