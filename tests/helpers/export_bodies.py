"""Create bodies for the export tests, each with the spec that `export` must give back.

A body is written once, with every value that a server default equals wrapped in
`Default(...)`: `split` turns it into the body to POST (defaults sent explicitly) and the
document `export` must write for it (defaults, and objects left empty, absent). The
hypothesis strategy `bodies(kind)` draws such bodies for every kind; `EXAMPLES` are fixed
ones (one per kind, with keyed lists out of order, a secret and explicit defaults) for
the end-to-end round trip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
KIND_NAMES = ("Training", "Workspace", "DistributedTraining", "Inference",
              "DistributedInference")


@dataclass(frozen=True)
class Default:
    """A value equal to the server's default: POSTed, but never exported."""
    value: Any


def split(tree: Any) -> tuple[Any, Any]:
    """(the body to POST, what export gives back): `Default`s kept / dropped."""
    if isinstance(tree, Default):
        return tree.value, None
    if isinstance(tree, dict):
        pairs = {k: split(v) for k, v in tree.items()}
        posted = {k: p for k, (p, _) in pairs.items()}
        expected = {k: e for k, (_, e) in pairs.items() if e is not None}
        return posted, expected or None
    if isinstance(tree, list):
        pairs = [split(v) for v in tree]
        expected = [e for _, e in pairs if e is not None]
        return [p for p, _ in pairs], expected or None
    return tree, tree


# --- hypothesis strategies ------------------------------------------------------------

def _choice(default: Any, *others: Any, omit: bool = True) -> st.SearchStrategy:
    """A field's value: left out (None), the default sent explicitly, or another value."""
    options = [st.just(Default(default)), *(st.just(o) for o in others)]
    return st.one_of(st.none(), *options) if omit else st.one_of(*options)


def _obj(**fields: st.SearchStrategy) -> st.SearchStrategy:
    """An object of the drawn fields, without those drawn as None (None if empty)."""
    return st.fixed_dictionaries(fields).map(
        lambda d: {k: v for k, v in d.items() if v is not None} or None)


def _keyed(items: list[dict], *, at_least: int = 0) -> st.SearchStrategy:
    """Some of `items`, in any order (a keyed list: the API's order is kept)."""
    return st.permutations(items).flatmap(
        lambda perm: st.integers(at_least, len(perm)).map(lambda n: list(perm[:n]) or None))


IMAGES = ("nvcr.io/nvidia/pytorch:24.05-py3", "python", "registry.example.com/team/app:latest",
          "ghcr.io/org/tool@sha256:0f3e1b2c")


def _pull_policy(image: str) -> str:
    return "Always" if image.endswith(":latest") else "IfNotPresent"


@st.composite
def container(draw, shape: str) -> dict:
    """A container-shaped object: `shape` "training" (T, W, D spec and masterSpec),
    "inference" (I spec) or "di" (a DI leader or worker)."""
    image = draw(st.sampled_from(IMAGES))
    c: dict[str, Any] = {"image": image}
    c["imagePullPolicy"] = draw(_choice(_pull_policy(image), "Never"))
    c["command"] = draw(st.sampled_from([None, "python", "torchrun"]))
    c["environmentVariables"] = draw(_keyed([
        {"name": "HF_HOME", "value": "/data/hf"},
        {"name": "LOG_LEVEL", "value": draw(st.sampled_from(["info", "debug"]))},
        {"name": "OMP_NUM_THREADS", "value": "8", "exclude": draw(st.booleans())},
        {"name": "POD_NAME", "podFieldRef": {"path": "metadata.name"}},
    ]))
    c["labels"] = draw(_keyed([{"name": "team", "value": "ml"},
                               {"name": "tier", "value": "gold"}]))
    c["annotations"] = draw(_keyed([
        {"name": "owner", "value": "ana", "exclude": draw(_choice(False, True))},
        {"name": "ticket", "value": "ML-12"}]))
    c["imagePullSecrets"] = draw(_keyed([{"name": "regcred",
                                          "exclude": draw(_choice(False, True))}]))
    security = {"uidGidSource": draw(_choice("fromTheImage", "custom"))}
    if shape == "training":
        security["hostIpc"] = draw(_choice(False, True))
        security["hostNetwork"] = draw(_choice(False, True))
    c["security"] = {k: v for k, v in security.items() if v is not None} or None
    c["probes"] = draw(st.none() | _obj(
        path=_choice("/", "/healthz"), scheme=_choice("HTTP", "HTTPS"),
        port=st.just(8080)).map(lambda http: {"readiness": {"handler": {"httpGet": http}}}))
    if shape != "di":
        c["ports"] = draw(_keyed([
            {"container": 8080, "serviceType": "NodePort", "exclude": draw(_choice(False, True))},
            {"container": 6006, "serviceType": "ClusterIP"}]))
        c["relatedUrls"] = draw(_keyed([{"url": "https://wiki.example.com/ml", "type": "docs",
                                         "exclude": draw(_choice(False, True))}]))
    c["storage"] = draw(storage(shape))
    return {k: v for k, v in c.items() if v is not None}


@st.composite
def storage(draw, shape: str) -> dict | None:
    new_pvc = {"name": "ckpt", "path": "/ckpt",
               "claimInfo": draw(_obj(size=st.just("10Gi"),
                                      volumeMode=_choice("Filesystem", "Block"),
                                      accessModes=_obj(readWriteOnce=_choice(True, False),
                                                       readWriteMany=_choice(False, True))))}
    for key in ("existingPvc", "readOnly", "dataSharing", "exclude"):
        new_pvc[key] = draw(_choice(False, omit=True))
    existing_pvc = {"name": "data", "path": "/data", "existingPvc": True,
                    "claimName": "shared-data", "readOnly": draw(_choice(False, True))}
    s: dict[str, Any] = {
        "pvc": draw(_keyed([{k: v for k, v in new_pvc.items() if v is not None},
                            {k: v for k, v in existing_pvc.items() if v is not None}])),
        "emptyDirVolume": draw(_keyed([{"name": "scratch", "path": "/scratch",
                                        "exclude": draw(_choice(False, True))}])),
    }
    if shape != "di":
        s["nfs"] = draw(_keyed([{"name": "datasets", "server": "nfs.example.com",
                                 "path": "/exports", "mountPath": "/datasets",
                                 "readOnly": draw(_choice(True, False))}]))
        s["hostPath"] = draw(_keyed([{"name": "cache", "path": "/var/cache",
                                      "mountPath": "/cache",
                                      "readOnly": draw(_choice(True, False))}]))
        s["git"] = draw(_keyed([{"name": "code", "repository": "https://git.example.com/r",
                                 "path": "/code",
                                 "secretKeyOfUser": draw(_choice("User", "login"))}]))
    if shape == "training":
        s["s3"] = draw(_keyed([{"name": "bucket", "bucket": "models", "path": "/models",
                                "url": draw(_choice("https://s3.amazonaws.com",
                                                    "https://minio.example.com")),
                                "secretKeyOfSecretKey": draw(_choice("SecretKey", "sk"))}]))
    s = {k: v for k, v in s.items() if v is not None}
    return s or None


def _drop_none(d: dict) -> dict:
    return {k: v for k, v in d.items() if v is not None}


@st.composite
def _training_spec(draw, priority: str, preemptibility: str, other_preemptibility: str) -> dict:
    spec = draw(container("training"))
    spec["backoffLimit"] = draw(_choice(6, 2))
    spec["autoDeletionTimeAfterCompletionSeconds"] = draw(_choice(2592000, 3600))
    spec["priorityClass"] = draw(_choice(priority, "high"))
    spec["preemptibility"] = draw(_choice(preemptibility, other_preemptibility))
    spec["nodePools"] = draw(st.sampled_from([None, ["h100", "default"], ["default", "h100"]]))
    return _drop_none(spec)


@st.composite
def bodies(draw, kind: str) -> tuple[dict, bool]:
    """(a create body with `Default` markers, whether to suspend it once created)."""
    name = draw(st.from_regex(r"[a-z][a-z0-9]{2,10}", fullmatch=True))
    body: dict[str, Any] = {"name": name, "projectId": "7", "clusterId": CLUSTER}
    if kind == "Training":
        spec = draw(_training_spec("train", "preemptible", "non-preemptible"))
        spec["completions"] = draw(st.sampled_from([None, 2]))
    elif kind == "Workspace":
        spec = draw(_training_spec("build", "non-preemptible", "preemptible"))
    elif kind == "DistributedTraining":
        spec = draw(_training_spec("train", "preemptible", "non-preemptible"))
        if draw(st.booleans()):
            spec.update(distributedFramework="MPI", numWorkers=2,
                        slotsPerWorker=draw(_choice(1, 4)),
                        sshAuthMountPath=draw(_choice("/root/.ssh", "/home/mpi/.ssh")))
        else:
            spec.update(distributedFramework="PyTorch", numWorkers=3)
        if draw(st.booleans()):
            body["masterSpecSameAsWorker"] = True
        else:
            master = draw(container("training"))
            master["backoffLimit"] = draw(_choice(6, 1))
            body["masterSpec"] = _drop_none(master)
    elif kind == "Inference":
        spec = draw(container("inference"))
        spec["priorityClass"] = draw(_choice("inference", "high"))
        spec["preemptibility"] = draw(_choice("non-preemptible", "preemptible"))
        spec["servingPort"] = draw(st.none() | _obj(
            container=st.just(8000), protocol=_choice("http", "grpc"),
            authorizationType=_choice("public", "authenticatedUsers"),
            clusterLocalAccessOnly=_choice(False, True)))
        spec["autoscaling"] = draw(st.none() | autoscaling())
    else:
        leader = draw(container("di"))
        spec = {"leader": leader, "workers": draw(_choice(0, 1))}
        if spec["workers"] == 1:
            spec["worker"] = draw(container("di"))
        spec["replicas"] = draw(_choice(1, 2))
        spec["restartPolicy"] = draw(_choice("RecreateGroupOnPodRestart", "None"))
        spec["startupPolicy"] = draw(_choice("LeaderCreated", "LeaderReady"))
        spec["priorityClass"] = draw(_choice("inference", "high"))
        spec["preemptibility"] = draw(_choice("non-preemptible", "preemptible"))
        spec["servingPort"] = draw(st.none() | _obj(
            port=st.just(8000), protocol=_choice("http"),
            authorizationType=_choice("public", "authenticatedUsers"),
            exposeExternally=_choice(True, False)))
    body["spec"] = _drop_none(spec)
    suspend = kind in ("Training", "Workspace", "DistributedTraining") and draw(st.booleans())
    return body, suspend


@st.composite
def autoscaling(draw) -> dict | None:
    """An autoscaling whose replica counts default to minReplicas (or 1 when it is 0);
    always with a metric, which a range of replicas needs."""
    minimum = draw(st.sampled_from([None, Default(1), 0, 2]))
    low = 1 if minimum is None else (minimum.value if isinstance(minimum, Default) else minimum)
    scaling: dict[str, Any] = {"minReplicas": minimum, "metric": "concurrency",
                               "metricThreshold": 10}
    for key in ("maxReplicas", "initialReplicas", "activationReplicas"):
        scaling[key] = draw(_choice(low or 1, (low or 1) + 2))
    scaling["metricThresholdPercentage"] = draw(_choice(70, 50))
    if low == 0:
        scaling["scaleToZeroRetentionSeconds"] = draw(_choice(0, 60))
    return _drop_none(scaling)


# --- fixed examples (the end-to-end round trip) ----------------------------------------

def _container(image: str, **extra: Any) -> dict:
    return {
        "image": image,
        "imagePullPolicy": Default(_pull_policy(image)),
        "environmentVariables": [  # out of alphabetical order, with a secret
            {"name": "WANDB_PROJECT", "value": "export-demo"},
            {"name": "HF_TOKEN", "value": "hf_s3cr3t_value_never_in_git"},
            {"name": "HF_HOME", "value": "/data/hf"},
        ],
        "labels": [{"name": "tier", "value": "gold"}, {"name": "team", "value": "ml"}],
        "annotations": [{"name": "owner", "value": "ana", "exclude": Default(False)}],
        "security": {"uidGidSource": Default("fromTheImage")},
        **extra,
    }


EXAMPLES: dict[str, tuple[dict, bool]] = {
    "Training": ({
        "name": "llama-lora", "projectId": "7", "clusterId": CLUSTER,
        "spec": {**_container("nvcr.io/nvidia/pytorch:24.05-py3",
                              storage={"pvc": [{"name": "ckpt", "path": "/ckpt",
                                                "claimInfo": {"size": "100Gi"}}],
                                       "nfs": [{"name": "datasets", "server": "nfs.example.com",
                                                "path": "/exports", "mountPath": "/data",
                                                "readOnly": Default(True)}]}),
                 "backoffLimit": Default(6), "priorityClass": Default("train"),
                 "nodePools": ["h100", "default"]},
    }, True),
    "Workspace": ({
        "name": "jupyter", "projectId": "7", "clusterId": CLUSTER,
        "spec": {**_container("jupyter/base-notebook:latest",
                              ports=[{"container": 8888, "serviceType": "NodePort"}]),
                 "preemptibility": Default("non-preemptible")},
    }, False),
    "DistributedTraining": ({
        "name": "bert-ddp", "projectId": "8", "clusterId": CLUSTER,
        "spec": {**_container("nvcr.io/nvidia/pytorch:24.05-py3"),
                 "distributedFramework": "MPI", "numWorkers": 2,
                 "slotsPerWorker": Default(1), "sshAuthMountPath": Default("/root/.ssh"),
                 "autoDeletionTimeAfterCompletionSeconds": Default(2592000)},
        "masterSpecSameAsWorker": True,
    }, True),
    "Inference": ({
        "name": "mistral-chat", "projectId": "7", "clusterId": CLUSTER,
        "spec": {**_container("vllm/vllm-openai:v0.6.3"),
                 "servingPort": {"container": 8000, "protocol": Default("http")},
                 "autoscaling": {"minReplicas": 2, "maxReplicas": 4, "metric": "concurrency",
                                 "metricThreshold": 16,
                                 "metricThresholdPercentage": Default(70)}},
    }, False),
    "DistributedInference": ({
        "name": "qwen-serve", "projectId": "8", "clusterId": CLUSTER,
        "spec": {"workers": 1, "replicas": Default(1),
                 "startupPolicy": Default("LeaderCreated"),
                 "servingPort": {"port": 8000, "authorizationType": "authenticatedUsers"},
                 "leader": _container("vllm/vllm-openai:v0.6.3", command="sh"),
                 "worker": _container("vllm/vllm-openai:v0.6.3", command="sh")},
    }, False),
}
