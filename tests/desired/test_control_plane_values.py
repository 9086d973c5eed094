"""Values checked as the control plane would check them: quantities by Kubernetes'
grammar in every kind, a manifest's resources by Kubernetes' rules (extended resources
such as nvidia.com/gpu in whole devices), the flat kinds' GPU fields by their schema, and
images by the OCI reference grammar. Each bad value is one problem naming the file, the
line and the field; all of them are reported at once."""

from __future__ import annotations

import pytest

from reconciler.desired import load_specs, values
from reconciler.errors import SpecError

from tests.helpers.constants import CLUSTER

HEADER = f"""projectId: "7"
clusterId: {CLUSTER}
"""


def _flat(kind: str, spec: str) -> str:
    return f"kind: {kind}\nname: w\n{HEADER}spec:\n{spec}"


def _manifest(resources: str, image: str = "busybox:1.36", size: str = "8Gi") -> str:
    return f"""kind: Manifest
name: job
{HEADER}manifest:
  apiVersion: batch/v1
  kind: Job
  metadata: {{name: job}}
  spec:
    template:
      spec:
        containers:
          - name: main
            image: {image}
            resources: {resources}
        volumes:
          - name: shm
            emptyDir: {{medium: Memory, sizeLimit: {size}}}
"""


def _problems(specdir, text: str) -> list[str]:
    specdir.write("w.yaml", text)
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    return exc.value.problems


M = "manifest.spec.template.spec"
# (id, document, line, field path, words). The manifest's container starts at line 13.
CASES = [
    ("lower-case-suffix", _manifest('{limits: {memory: "8gi"}}'), 15,
     f"{M}.containers[0].resources.limits.memory", 'Kubernetes quantity such as 500m, 16Gi or 2, got "8gi"'),
    ("nan", _manifest('{limits: {memory: "NaN"}}'), 15,
     f"{M}.containers[0].resources.limits.memory", 'got "NaN"'),
    ("two-points", _manifest('{requests: {memory: "1.5.5Gi"}}'), 15,
     f"{M}.containers[0].resources.requests.memory", 'got "1.5.5Gi"'),
    ("negative", _manifest('{requests: {memory: "-8Gi"}}'), 15,
     f"{M}.containers[0].resources.requests.memory", 'must be >= 0, got "-8Gi"'),
    ("hex", _manifest('{limits: {cpu: "0x10"}}'), 15,
     f"{M}.containers[0].resources.limits.cpu", 'got "0x10"'),
    ("gpus-as-words", _manifest('{limits: {nvidia.com/gpu: "lots"}}'), 15,
     f"{M}.containers[0].resources.limits.nvidia.com/gpu", 'got "lots"'),
    ("negative-gpus", _manifest('{limits: {nvidia.com/gpu: -8}}'), 15,
     f"{M}.containers[0].resources.limits.nvidia.com/gpu", "must be >= 0, got -8"),
    ("fractional-gpus", _manifest('{limits: {nvidia.com/gpu: 8.5}}'), 15,
     f"{M}.containers[0].resources.limits.nvidia.com/gpu", "must be a whole number"),
    ("fractional-gpus-in-milli", _manifest('{limits: {nvidia.com/gpu: "500m"}}'), 15,
     f"{M}.containers[0].resources.limits.nvidia.com/gpu", "GPU fraction"),
    ("gpu-request-not-limit", _manifest('{requests: {nvidia.com/gpu: 4}, limits: {nvidia.com/gpu: 8}}'),
     15, f"{M}.containers[0].resources.requests.nvidia.com/gpu", "must be equal to its limit"),
    ("request-above-limit", _manifest('{requests: {cpu: "2"}, limits: {cpu: 1500m}}'), 15,
     f"{M}.containers[0].resources.requests.cpu", "less than or equal to its limit (limits.cpu)"),
    ("empty-dir-size", _manifest("{}", size="8GB"), 18,
     f"{M}.volumes[0].emptyDir.sizeLimit", 'got "8GB"'),
    ("manifest-image", _manifest("{}", image='"busybox:1\\nFOO bar"'), 14,
     f"{M}.containers[0].image", 'image reference such as nvcr.io/nvidia/pytorch:24.05-py3'),
    ("flat-quantity-api-pattern-lets-by", _flat("Training", "  image: x\n  compute:\n"
     "    cpuMemoryRequest: 1.5.5Gi\n"), 8, "spec.compute.cpuMemoryRequest", 'got "1.5.5Gi"'),
    ("flat-upper-k", _flat("Workspace", "  image: x\n  compute:\n    cpuMemoryLimit: 1K\n"), 8,
     "spec.compute.cpuMemoryLimit", 'got "1K"'),
    ("flat-empty-dir", _flat("Training", "  image: x\n  storage:\n    emptyDirVolume:\n"
     "    - {path: /dev/shm, sizeLimit: 8gi}\n"), 9,
     "spec.storage.emptyDirVolume[0].sizeLimit", 'got "8gi"'),
    ("flat-pvc-size", _flat("Training", "  image: x\n  storage:\n    pvc:\n    - path: /data\n"
     "      claimInfo: {size: 1Gii}\n"), 10, "spec.storage.pvc[0].claimInfo.size", 'got "1Gii"'),
    ("flat-extended-fraction", _flat("Training", "  image: x\n  compute:\n    extendedResources:\n"
     "    - {resource: example.com/fpga, quantity: '0.5'}\n"), 9,
     "spec.compute.extendedResources[0].quantity", "must be a whole number"),
    ("flat-gpus-fraction", _flat("Training", "  image: x\n  compute:\n    gpuDevicesRequest: 8.5\n"),
     8, "spec.compute.gpuDevicesRequest", "must be an integer, got 8.5"),
    ("flat-gpus-words", _flat("Training", "  image: x\n  compute:\n    gpuDevicesRequest: lots\n"),
     8, "spec.compute.gpuDevicesRequest", 'must be an integer, got "lots"'),
    ("flat-portion-above-one", _flat("Inference", "  image: x\n  compute:\n"
     "    gpuRequestType: portion\n    gpuPortionRequest: 1.5\n"), 9,
     "spec.compute.gpuPortionRequest", "must be <= 1"),
    ("flat-image", _flat("Training", '  image: "busybox:1\\nFOO bar"\n'), 6, "spec.image",
     'got "busybox:1\\nFOO bar"'),
    ("nim-image", _flat("NIMService", "  image: nvcr.io/nim/Meta/llama:1\n"), 6, "spec.image",
     "image reference"),
    ("nim-memory", _flat("NIMService", "  image: nvcr.io/nim/meta/llama:1\n  compute:\n"
     "    gpuMemoryRequest: 40 G\n"), 8, "spec.compute.gpuMemoryRequest", 'got "40 G"'),
]


@pytest.mark.parametrize("doc,line,path,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_value_the_control_plane_refuses_is_one_clear_problem(specdir, doc, line, path, words):
    problems = _problems(specdir, doc)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"{specdir.root / 'w.yaml'}:{line}: {path}: "), problems[0]
    assert words in problems[0]


def test_every_bad_value_of_a_manifest_is_reported_at_once(specdir):
    problems = _problems(specdir, _manifest(
        '{requests: {memory: "8gi", cpu: "-1"}, limits: {nvidia.com/gpu: "lots"}}',
        image="'busybox:1 FOO'", size='"0x10"'))
    assert [p.split(": ")[1] for p in problems] == [
        f"{M}.containers[0].image", f"{M}.containers[0].resources.requests.memory",
        f"{M}.containers[0].resources.requests.cpu",
        f"{M}.containers[0].resources.limits.nvidia.com/gpu", f"{M}.volumes[0].emptyDir.sizeLimit"]


@pytest.mark.parametrize("resources", [
    '{requests: {memory: 64Gi, cpu: 500m}, limits: {memory: 65536Mi, cpu: "1", nvidia.com/gpu: 8}}',
    '{requests: {nvidia.com/gpu: "4"}}', '{limits: {cpu: 0.5, memory: 1e9, ephemeral-storage: 10G}}',
    '{requests: {nvidia.com/gpu: 2}, limits: {nvidia.com/gpu: "2"}}'])
def test_resources_kubernetes_takes_load(specdir, resources):
    specdir.write("w.yaml", _manifest(resources))
    assert len(load_specs(specdir.root)) == 1


@pytest.mark.parametrize("image", [
    "busybox", "busybox:1.36", "nvcr.io/nvidia/pytorch:24.05-py3", "localhost:5000/team/img",
    "registry.example.com:443/a/b-c__d.e:v1_2.3-rc", "[::1]:5000/img:tag",
    "vllm/vllm-openai:v0.6.3", "img@sha256:" + "a" * 64,
    "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3@sha256:" + "0f" * 32])
def test_image_references_by_the_oci_grammar(image):
    assert values.is_image_reference(image)


@pytest.mark.parametrize("image", [
    "busybox:1\nFOO bar", "busybox:1 ", "Busybox", "nvcr.io/NVIDIA/pytorch", "img:", "img@sha256:abc",
    "img:" + "t" * 129, "-img", "img//x", "a/" * 130 + "b", "", "img:tag:again", "https://nvcr.io/x"])
def test_what_is_no_image_reference(image):
    assert not values.is_image_reference(image)
