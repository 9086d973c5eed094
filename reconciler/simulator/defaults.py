"""Server-side defaults that the simulated control plane fills into created workloads.

Callers: `reconciler.simulator.kinds` names one `fill_*(body, rand)` per kind; the
create handler calls it. A real control plane returns specs with documented defaults
(CONTRACT.md §5) filled in for fields the client did not send, plus a few generated
values (PVC claim names, ports, exposed URLs). A reconciler that diffs live against
desired naively sees these as perpetual drift, so the fake does the same. A field the
client sent, even with another value, is never touched; `null` counts as not sent.

Also filled, as a real cluster's workload types do: `priorityClass` and
`preemptibility` per kind (trainings "train"/"preemptible", workspaces
"build"/"non-preemptible", inferences "inference"/"non-preemptible").
"""

from __future__ import annotations

import random

AUTO_DELETION_SECONDS = 2592000  # 30 days

_EXCLUDE_ARRAYS = ("annotations", "imagePullSecrets", "ports", "relatedUrls")
_STORAGE_KINDS = ("configMapVolume", "dataVolume", "emptyDirVolume", "git", "hostPath", "nfs",
                  "pvc", "s3", "secretVolume")


def _put(obj: dict, key: str, value) -> None:
    if obj.get(key) is None:
        obj[key] = value


def _put_all(obj: dict, values: dict) -> None:
    for key, value in values.items():
        _put(obj, key, value)


def image_pull_policy(image: str) -> str:
    """`Always` for a `:latest` tag, else `IfNotPresent` (untagged images count as tagged)."""
    last = image.rsplit("/", 1)[-1]
    tag = last.split("@", 1)[0].partition(":")[2]
    return "Always" if tag == "latest" else "IfNotPresent"


def _container(c: dict, workload_name: str, rand: random.Random, *, training: bool) -> None:
    """Defaults shared by every container-shaped object (spec, masterSpec, leader, worker);
    `training` for the T, W and D shape, whose security has host fields."""
    if c.get("image"):
        _put(c, "imagePullPolicy", image_pull_policy(c["image"]))
    for key in _EXCLUDE_ARRAYS:
        for item in c.get(key) or ():
            if isinstance(item, dict):
                _put(item, "exclude", False)
    for port in c.get("ports") or ():
        if isinstance(port, dict) and port.get("serviceType") in ("NodePort", "LoadBalancer"):
            _put(port, "external", 30000 + rand.randrange(2768))
    security = c.get("security")
    if isinstance(security, dict):
        _put(security, "uidGidSource", "fromTheImage")
        if training:
            _put(security, "hostIpc", False)
            _put(security, "hostNetwork", False)
    http_get = (((c.get("probes") or {}).get("readiness") or {}).get("handler") or {}).get("httpGet")
    if isinstance(http_get, dict):
        _put(http_get, "path", "/")
        _put(http_get, "scheme", "HTTP")
    storage = c.get("storage")
    if isinstance(storage, dict):
        _storage(storage, workload_name, rand)


def _storage(storage: dict, workload_name: str, rand: random.Random) -> None:
    for kind in _STORAGE_KINDS:
        for item in storage.get(kind) or ():
            if isinstance(item, dict):
                _put(item, "exclude", False)
    for item in storage.get("hostPath") or ():
        _put(item, "readOnly", True)
    for item in storage.get("nfs") or ():
        _put(item, "readOnly", True)
    for item in storage.get("s3") or ():
        _put(item, "url", "https://s3.amazonaws.com")
        _put(item, "secretKeyOfAccessKeyId", "AccessKeyId")
        _put(item, "secretKeyOfSecretKey", "SecretKey")
    for item in storage.get("git") or ():
        _put(item, "secretKeyOfUser", "User")
        _put(item, "secretKeyOfPassword", "Password")
    for item in storage.get("pvc") or ():
        for key in ("existingPvc", "readOnly", "ephemeral", "dataSharing"):
            _put(item, key, False)
        if not item["existingPvc"]:
            _new_claim(item, f"{workload_name[:50]}-pvc", rand)


_TRAIN = {"priorityClass": "train", "preemptibility": "preemptible"}
_BUILD = {"priorityClass": "build", "preemptibility": "non-preemptible"}
_SERVE = {"priorityClass": "inference", "preemptibility": "non-preemptible"}


def _spec(body: dict) -> dict:
    spec = body.get("spec")
    if spec is None:
        spec = body["spec"] = {}
    return spec


def _training_spec(body: dict, rand: random.Random, own: dict) -> None:
    """The defaults of a T, W or D `spec`, with `own` (the kind's own defaults) filled
    after the two every one of them has."""
    spec = _spec(body)
    _put(spec, "backoffLimit", 6)
    _put(spec, "autoDeletionTimeAfterCompletionSeconds", AUTO_DELETION_SECONDS)
    _put_all(spec, own)
    _container(spec, body["name"], rand, training=True)


def fill_training(body: dict, rand: random.Random) -> None:
    """Fill the defaults of a Training body in place."""
    _training_spec(body, rand, _TRAIN)


def fill_workspace(body: dict, rand: random.Random) -> None:
    """Fill the defaults of a Workspace body in place."""
    _training_spec(body, rand, _BUILD)


def fill_distributed(body: dict, rand: random.Random) -> None:
    """Fill the defaults of a DistributedWorkload body in place."""
    _training_spec(body, rand, {"slotsPerWorker": 1, "sshAuthMountPath": "/root/.ssh",
                                **_TRAIN})
    master = body.get("masterSpec")
    if isinstance(master, dict):
        _put(master, "backoffLimit", 6)
        _put(master, "autoDeletionTimeAfterCompletionSeconds", AUTO_DELETION_SECONDS)
        _container(master, body["name"], rand, training=True)


def fill_inference(body: dict, rand: random.Random) -> None:
    """Fill the defaults of an Inference body in place: an `autoscaling` is always there,
    with its replica counts (CONTRACT.md §5)."""
    spec = _spec(body)
    _put_all(spec, _SERVE)
    _container(spec, body["name"], rand, training=False)
    serving = spec.get("servingPort")
    if isinstance(serving, dict):
        _put(serving, "protocol", "http")
        _put(serving, "authorizationType", "public")
        _put(serving, "clusterLocalAccessOnly", False)
    scaling = spec.get("autoscaling")
    if scaling is None:
        scaling = spec["autoscaling"] = {}
    _put(scaling, "minReplicas", 1)
    replicas = scaling["minReplicas"] or 1  # "minReplicas, or 1 if minReplicas is set to 0"
    for key in ("maxReplicas", "initialReplicas", "activationReplicas"):
        _put(scaling, key, replicas)
    _put(scaling, "metricThresholdPercentage", 70)
    if scaling["minReplicas"] == 0:  # "Available only if minReplicas is set to 0"
        _put(scaling, "scaleToZeroRetentionSeconds", 0)


def _exposed_url(body: dict) -> str:
    return f"https://{body['name']}-{body['projectId']}.inference.runai-sim.local"


def fill_distributed_inference(body: dict, rand: random.Random) -> None:
    """Fill the defaults of a DistributedInference body in place."""
    spec = _spec(body)
    _put(spec, "restartPolicy", "RecreateGroupOnPodRestart")
    _put(spec, "startupPolicy", "LeaderCreated")
    _put(spec, "workers", 0)
    _put(spec, "replicas", 1)
    _put_all(spec, _SERVE)
    serving = spec.get("servingPort")
    if isinstance(serving, dict):
        _put(serving, "protocol", "http")
        _put(serving, "authorizationType", "public")
        _put(serving, "exposeExternally", True)
        if serving["exposeExternally"]:
            _put(serving, "exposedUrl", _exposed_url(body))
    for role in ("leader", "worker"):
        if isinstance(spec.get(role), dict):
            _container(spec[role], body["name"], rand, training=False)


def fill_nim_service(body: dict, rand: random.Random) -> None:
    """Fill the defaults of a NIM service body in place (nim-services.yml's "default" and
    "Defaults to" texts): replicas 1, autoscaling's counts and window, the serving port's
    service type, exposure and protocol, a new PVC's claim name and access modes."""
    spec = _spec(body)
    _put_all(spec, _SERVE)
    _put(spec, "replicas", 1)
    if spec.get("image"):
        _put(spec, "imagePullPolicy", image_pull_policy(spec["image"]))
    for key in ("annotations", "imagePullSecrets"):
        for item in spec.get(key) or ():
            if isinstance(item, dict):
                _put(item, "exclude", False)
    http_get = (((spec.get("probes") or {}).get("readiness") or {}).get("handler")
                or {}).get("httpGet")
    if isinstance(http_get, dict):
        _put(http_get, "path", "/")
        _put(http_get, "scheme", "HTTP")
    scaling = spec.get("autoscaling")
    if isinstance(scaling, dict):
        _put(scaling, "minReplicas", 1)
        _put(scaling, "maxReplicas", scaling["minReplicas"])
        _put(scaling, "scaleWindowSeconds", 300)
    serving = spec.get("servingPort")
    if isinstance(serving, dict):
        _put(serving, "serviceType", "ClusterIP")
        _put(serving, "exposeExternally", True)
        _put(serving, "exposedProtocol", "grpc" if serving.get("grpcPort") else "http")
        if serving["exposeExternally"]:
            _put(serving, "exposedUrl", _exposed_url(body))
    pvc = (spec.get("modelStore") or {}).get("pvc")
    if isinstance(pvc, dict):
        _put(pvc, "existingPvc", False)
        _put(pvc, "readOnly", False)
        if not pvc["existingPvc"]:
            _new_claim(pvc, f"{body['name'][:50]}-nim", rand)


def _new_claim(pvc: dict, prefix: str, rand) -> None:
    """What the server fills into a PVC it creates: a generated claim name (`prefix-` and
    five random characters) and the claim's access modes and volume mode."""
    suffix = "".join(rand.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(5))
    _put(pvc, "claimName", f"{prefix}-{suffix}")
    info = pvc.get("claimInfo")
    if isinstance(info, dict):
        modes = info.get("accessModes")
        if modes is None:
            modes = info["accessModes"] = {}
        _put(modes, "readWriteOnce", True)
        _put(modes, "readOnlyMany", False)
        _put(modes, "readWriteMany", False)
        _put(info, "volumeMode", "Filesystem")
