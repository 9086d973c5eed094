"""The pure facts about manifests: which types run to
completion and how their end shows (`manifests.outcome`, `Kind.runs_to_completion`), the
manifest's own kind of a body (`manifests.kind_in`), a person's key order
(`manifests.conventional_order`), and where a manifest's containers and labels sit
(`kinds.containers`, `kinds.labels`)."""

from __future__ import annotations

import pytest

from reconciler import kinds
from reconciler.kinds import manifests

JOB = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
       "spec": {"template": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}}}


@pytest.mark.parametrize("manifest_type, status, outcome", [
    ("Job", {"conditions": [{"type": "Complete", "status": "True"}]}, "Completed"),
    ("Job", {"conditions": [{"type": "Complete", "status": "False"}]}, None),
    ("Job", {"conditions": [{"type": "Failed", "status": "True"}]}, "Failed"),
    ("PyTorchJob", {"conditions": [{"type": "Created", "status": "True"},
                                   {"type": "Succeeded", "status": "True"}]}, "Completed"),
    ("PyTorchJob", {"conditions": [{"type": "Running", "status": "True"}]}, None),
    ("RayJob", {"jobDeploymentStatus": "Complete", "jobStatus": "SUCCEEDED"}, "Completed"),
    ("RayJob", {"jobDeploymentStatus": "Complete", "jobStatus": "FAILED"}, "Failed"),
    ("RayJob", {"jobDeploymentStatus": "Running", "jobStatus": "RUNNING"}, None),
    ("Widget", {"phase": "Succeeded"}, "Completed"),
    ("Job", None, None),
])
def test_the_end_of_a_workload_in_its_types_own_words(manifest_type, status, outcome):
    assert manifests.outcome(manifest_type, status) == outcome


def test_only_a_manifest_of_a_type_that_finishes_runs_to_completion():
    manifest = kinds.MANIFEST
    assert manifest.runs_to_completion({"manifest": JOB})
    assert manifest.runs_to_completion({"manifest": {**JOB, "kind": "RayJob"}})
    assert not manifest.runs_to_completion({"manifest": {**JOB, "kind": "Deployment"}})
    assert manifest.runs_to_completion({"phase": "Completed"})  # a list item: no manifest
    assert kinds.TRAINING.runs_to_completion({"spec": {}})
    assert not kinds.NIM_SERVICE.runs_to_completion({"spec": {}})
    assert not kinds.WORKSPACE.runs_to_completion(None)


def test_the_manifest_kind_of_a_body():
    assert manifests.kind_in(None, {"manifest": JOB}) == "Job"
    assert manifests.kind_in({"spec": {"image": "x"}}) is None
    assert manifests.kind_in({"manifest": {}}, None) is None


def test_conventional_order_puts_the_header_first_and_names_lead_list_items():
    scrambled = {"spec": {"template": {"spec": {"containers": [
        {"image": "busybox", "env": [{"value": "1", "name": "A"}], "name": "main"}]}}},
        "status": {}, "metadata": {"labels": {"b": "1", "a": "2"}, "name": "j"},
        "kind": "Job", "apiVersion": "batch/v1"}
    out = manifests.conventional_order(scrambled)
    assert list(out) == ["apiVersion", "kind", "metadata", "spec", "status"]
    assert list(out["metadata"]) == ["name", "labels"]
    assert list(out["metadata"]["labels"]) == ["b", "a"]  # as it came
    [container] = out["spec"]["template"]["spec"]["containers"]
    assert list(container) == ["name", "image", "env"]
    assert list(container["env"][0]) == ["name", "value"]
    assert out == scrambled  # the same content


def test_containers_and_labels_of_a_manifest_sit_at_their_paths():
    ray = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"labels": {"team": "a"}},
           "spec": {"rayClusterSpec": {
               "headGroupSpec": {"template": {"spec": {"containers": [{"name": "head"}]}}},
               "workerGroupSpecs": [{"groupName": "gpu", "template": {
                   "metadata": {"labels": {"tier": "gold"}},
                   "spec": {"initContainers": [{"name": "fetch"}],
                            "containers": [{"name": "w"}]}}}]}}}
    body = {"manifest": ray}
    assert [p for p, _ in kinds.containers(kinds.MANIFEST, body)] == [
        "manifest.spec.rayClusterSpec.headGroupSpec.template.spec.containers[head]",
        "manifest.spec.rayClusterSpec.workerGroupSpecs[gpu].template.spec.initContainers[fetch]",
        "manifest.spec.rayClusterSpec.workerGroupSpecs[gpu].template.spec.containers[w]"]
    assert kinds.labels(kinds.MANIFEST, body) == [
        ("manifest.spec.rayClusterSpec.headGroupSpec.template.metadata.labels",
         frozenset({"team"})),
        ("manifest.spec.rayClusterSpec.workerGroupSpecs[gpu].template.metadata.labels",
         frozenset({"team", "tier"}))]
    unknown = {"apiVersion": "example.com/v1", "kind": "Widget",
               "spec": {"parts": [{"name": "p", "template": {"spec": {
                   "containers": [{"name": "c"}]}}}]}}
    assert [p for p, _ in kinds.containers(kinds.MANIFEST, {"manifest": unknown})] == [
        "manifest.spec.parts[0].template.spec.containers[c]"]
