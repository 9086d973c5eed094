"""The Manifest kind's pure rules: Kubernetes quantities by value, lists keyed as
strategic merge keys them, what replaces by the manifest's type, and GPUs per type."""

from __future__ import annotations

import copy
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import diff, gpus, kinds
from reconciler.kinds import manifests

K = kinds.MANIFEST
CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"


def _container(name: str, gpus_: int, memory: str = "1Gi", cpu: str = "1500m") -> dict:
    return {"name": name, "image": f"nvcr.io/{name}:1",
            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
            "ports": [{"containerPort": 8080}, {"containerPort": 9090}],
            "resources": {"limits": {"nvidia.com/gpu": gpus_, "memory": memory, "cpu": cpu}}}


def body(manifest: dict, **meta) -> dict:
    return {"name": "w", "projectId": "7", "clusterId": CLUSTER, "priority": "medium",
            **meta, "manifest": manifest}


def pytorchjob(workers: int = 2) -> dict:
    def group(n):
        return {"replicas": n, "template": {"spec": {"containers": [
            _container("pytorch", 8), _container("sidecar", 0)]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": {"name": "w"},
            "spec": {"pytorchReplicaSpecs": {"Master": group(1), "Worker": group(workers)}}}


def deployment(replicas: int = 2) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "w"},
            "spec": {"replicas": replicas, "template": {"spec": {"containers": [
                _container("a", 1), _container("b", 0)]}}}}


def test_quantities_by_value():
    assert manifests.quantity("1500m") == manifests.quantity("1.5") == Fraction(3, 2)
    assert manifests.quantity("1Gi") == manifests.quantity("1024Mi")
    assert manifests.quantity("2e3") == manifests.quantity("2k") == 2000
    assert manifests.quantity("1G") != manifests.quantity("1Gi")
    assert manifests.quantity("lots") is None


def test_pytorchjob_of_two_workers_and_a_master_of_eight_is_24_gpus():
    assert gpus.held("Manifest", body(pytorchjob())).high == 24


def test_rayjob_worker_group_2_to_6_of_4_plus_a_head_of_0_is_8_to_24():
    manifest = {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {"rayClusterSpec": {
        "headGroupSpec": {"template": {"spec": {"containers": [{"name": "head"}]}}},
        "workerGroupSpecs": [{"groupName": "g", "replicas": 2, "minReplicas": 2,
                              "maxReplicas": 6, "template": {"spec": {"containers": [
                                  {"name": "w", "resources": {
                                      "limits": {"nvidia.com/gpu": "4"}}}]}}}]}}}
    held = gpus.held("Manifest", body(manifest))
    assert (held.low, held.high) == (8, 24)


def test_an_unknown_type_counts_each_pod_template_once_and_says_so():
    manifest = {"apiVersion": "example.com/v1", "kind": "Thing", "spec": {"a": {"template": {
        "spec": {"containers": [{"name": "x", "resources": {"requests": {
            "nvidia.com/gpu": 2}}}]}}}}}
    templates, known = manifests.pod_templates(manifest)
    assert not known and len(templates) == 1
    assert gpus.held("Manifest", body(manifest)).high == 2


def test_policy_sees_every_container_of_every_pod_template():
    names = [c["name"] for _, c in kinds.containers(K, body(pytorchjob()))]
    assert names == ["pytorch", "sidecar", "pytorch", "sidecar"]


def test_a_frozen_path_of_the_type_replaces_and_an_open_one_updates():
    before = body(pytorchjob(2))
    after = body(pytorchjob(3))
    [change] = diff.diff_workload(K, after, before, before)
    assert change.path.endswith("Worker.replicas") and change.forces_replacement
    dep = body(deployment(2))
    [change] = diff.diff_workload(K, body(deployment(5)), dep, dep)
    assert change.path == "manifest.spec.replicas" and not change.forces_replacement
    [change] = diff.diff_workload(K, body(deployment(2), preemptibility="preemptible"),
                                  dep, dep)
    assert change.forces_replacement


def test_server_only_paths_are_never_compared():
    applied = body(deployment())
    live = copy.deepcopy(applied)
    live["manifest"]["status"] = {"readyReplicas": 2}
    live["manifest"]["metadata"].update(uid="u", resourceVersion="9",
                                        creationTimestamp="2026-01-01T00:00:00Z",
                                        managedFields=[{"manager": "x"}])
    assert diff.diff_workload(K, applied, applied, live) == []


# --- the property: respelling never plans a change; a real change always does --------

_SPELLINGS = {"1Gi": ["1024Mi", "1048576Ki", "1073741824"], "1500m": ["1.5", "1500m"],
              "2": ["2000m", "2"]}


def _respelled(manifest: dict, rand) -> dict:
    out = copy.deepcopy(manifest)
    for _, _, pod in manifests.pod_templates(out)[0]:
        rand.shuffle(pod["containers"])
        for c in pod["containers"]:
            rand.shuffle(c["env"])
            rand.shuffle(c["ports"])
            limits = c["resources"]["limits"]
            for key in ("memory", "cpu"):
                limits[key] = rand.choice(_SPELLINGS.get(limits[key], [limits[key]]))
    return out


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False), st.booleans(), st.booleans(),
       st.sampled_from(["state", "no-state"]))
def test_reordering_and_respelling_never_plans_a_change(rand, use_deployment, drifted, mode):
    original = deployment() if use_deployment else pytorchjob()
    applied = body(original)
    desired = body(_respelled(original, rand))
    live = body(_respelled(original, rand)) if drifted else applied
    changes = diff.diff_workload(K, desired, applied if mode == "state" else None, live)
    assert changes == []


@settings(max_examples=60, deadline=None)
@given(st.randoms(use_true_random=False), st.sampled_from(["image", "env", "memory", "port"]))
def test_a_real_change_always_plans_one(rand, what):
    original = pytorchjob()
    applied = body(original)
    changed = _respelled(original, rand)
    containers = manifests.pod_templates(changed)[0][rand.randrange(2)][2]["containers"]
    c = next(c for c in containers if c["name"] == "pytorch")
    if what == "image":
        c["image"] = "nvcr.io/other:2"
    elif what == "env":
        next(e for e in c["env"] if e["name"] == "A")["value"] = "changed"
    elif what == "memory":
        c["resources"]["limits"]["memory"] = "2Gi"
    else:
        c["ports"].append({"containerPort": 7070})
    assert diff.diff_workload(K, body(changed), applied, applied) != []
