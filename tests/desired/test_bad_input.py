"""Bad spec documents: each gives one clear problem naming the file, line and field path."""

from __future__ import annotations

import pytest

from reconciler.desired import load_specs
from reconciler.errors import SpecError

from tests.helpers.constants import CLUSTER

DT = f"""kind: DistributedTraining
name: bert-ddp
projectId: "7"
clusterId: {CLUSTER}
"""
DI = f"""kind: DistributedInference
name: llama-serve
projectId: "7"
clusterId: {CLUSTER}
"""

# (id, document, line, field path, words the message must hold). Lines 1-4 are the header.
CASES = [
    ("unknown-spec-key", DT + "spec:\n  image: x\n  imagePullPolcy: Always\n",
     7, "spec.imagePullPolcy", "unknown field (did you mean 'imagePullPolicy'?)"),
    ("unknown-top-key", DT + "projectID: '7'\nspec: {image: x}\n",
     5, "projectID", "did you mean 'projectId'?"),
    ("unknown-compute-key", DT + "spec:\n  image: x\n  compute:\n    gpuDeviceRequest: 1\n",
     8, "spec.compute.gpuDeviceRequest", "did you mean 'gpuDevicesRequest'?"),
    ("bad-enum", DT + "spec:\n  image: x\n  imagePullPolicy: Sometimes\n",
     7, "spec.imagePullPolicy", "'Always', 'Never' or 'IfNotPresent', got \"Sometimes\""),
    ("framework-enum", DT + "spec:\n  image: x\n  distributedFramework: pytorch\n",
     7, "spec.distributedFramework", "got \"pytorch\""),
    ("negative-gpus", DT + "spec:\n  image: x\n  compute:\n    gpuDevicesRequest: -1\n",
     8, "spec.compute.gpuDevicesRequest", "must be >= 0, got -1"),
    ("zero-workers", DT + "spec:\n  image: x\n  numWorkers: 0\n",
     7, "spec.numWorkers", "must be >= 1, got 0"),
    ("bad-quantity", DT + "spec:\n  image: x\n  compute:\n    cpuMemoryRequest: 10 GB\n",
     8, "spec.compute.cpuMemoryRequest", "Kubernetes quantity"),
    ("string-for-int", DT + "spec:\n  image: x\n  numWorkers: \"4\"\n",
     7, "spec.numWorkers", "must be an integer, got \"4\""),
    ("int-for-string", DT + "spec:\n  image: x\n  environmentVariables:\n  - name: A\n    value: 1\n",
     9, "spec.environmentVariables[0].value", "quote it"),
    ("env-value-and-secret", DT + "spec:\n  image: x\n  environmentVariables:\n"
     "  - name: A\n    value: v\n  - name: B\n    value: v\n    secret: {name: s, key: k}\n",
     12, "spec.environmentVariables[1].secret", "mutually exclusive"),
    ("env-configmap-and-podfield", DT + "spec:\n  image: x\n  environmentVariables:\n"
     "  - name: A\n    configMap: {name: c, key: k}\n    podFieldRef: {path: status.podIP}\n",
     10, "spec.environmentVariables[0].podFieldRef", "mutually exclusive"),
    ("env-secret-name-dns", DT + "spec:\n  image: x\n  environmentVariables:\n"
     "  - name: A\n    secret:\n      name: My_Secret\n      key: k\n",
     10, "spec.environmentVariables[0].secret.name", "DNS-1123"),
    ("env-missing-name", DT + "spec:\n  image: x\n  environmentVariables:\n  - value: v\n",
     8, "spec.environmentVariables[0].name", "required field is missing"),
    ("portion-without-request", DT + "spec:\n  image: x\n  compute:\n    gpuRequestType: portion\n",
     7, "spec.compute.gpuPortionRequest", "required when gpuRequestType is portion"),
    ("memory-with-portion", DT + "spec:\n  image: x\n  compute:\n    gpuRequestType: memory\n"
     "    gpuMemoryRequest: 10G\n    gpuPortionRequest: 0.5\n",
     10, "spec.compute.gpuPortionRequest", "not allowed when gpuRequestType is memory"),
    ("fraction-with-many-gpus", DT + "spec:\n  image: x\n  compute:\n    gpuDevicesRequest: 2\n"
     "    gpuPortionRequest: 0.5\n", 9, "spec.compute.gpuPortionRequest", "more than one GPU"),
    ("limit-below-request", DT + "spec:\n  image: x\n  compute:\n    cpuMemoryRequest: 2Gi\n"
     "    cpuMemoryLimit: 1Gi\n", 9, "spec.compute.cpuMemoryLimit", "must not be less than"),
    ("master-spec-conflict", DT + "spec: {image: x}\nmasterSpecSameAsWorker: true\n"
     "masterSpec:\n  image: y\n", 7, "masterSpec", "masterSpecSameAsWorker is true"),
    ("missing-image", DT + "spec:\n  numWorkers: 2\n", 5, "spec.image", "required"),
    ("mpi-only-field", DT + "spec:\n  image: x\n  distributedFramework: PyTorch\n"
     "  slotsPerWorker: 2\n", 8, "spec.slotsPerWorker", "MPI only"),
    ("max-below-min", DT + "spec:\n  image: x\n  minReplicas: 3\n  maxReplicas: 2\n",
     8, "spec.maxReplicas", "must not be less than minReplicas"),
    ("tty-without-stdin", DT + "spec:\n  image: x\n  tty: true\n", 7, "spec.tty", "stdin"),
    ("name-not-dns", DT.replace("bert-ddp", "Bert_DDP") + "spec: {image: x}\n",
     2, "name", "DNS-1123"),
    ("name-too-long", DT.replace("bert-ddp", "a" * 64) + "spec: {image: x}\n",
     2, "name", "at most 63 characters"),
    ("project-not-digits", DT.replace('"7"', "team-a") + "spec: {image: x}\n",
     3, "projectId", "string of digits"),
    ("cluster-not-uuid", DT.replace(CLUSTER, "prod-cluster") + "spec: {image: x}\n",
     4, "clusterId", "must be a UUID"),
    ("missing-cluster", DT.replace(f"clusterId: {CLUSTER}\n", "") + "spec: {image: x}\n",
     1, "clusterId", "required field is missing"),
    ("template-not-uuid", DT + "templateId: abc\nspec: {image: x}\n",
     5, "templateId", "must be a UUID"),
    ("prefix-refused", DT + "useGivenNameAsPrefix: true\nspec: {image: x}\n",
     5, "useGivenNameAsPrefix", "random name suffix"),
    ("phase-enum", DT + "desiredPhase: Paused\nspec: {image: x}\n",
     5, "desiredPhase", "'Running' or 'Stopped'"),
    ("di-cannot-stop", DI + "desiredPhase: Stopped\nspec:\n  leader: {image: x}\n",
     5, "desiredPhase", "cannot be suspended"),
    ("di-missing-leader", DI + "spec:\n  replicas: 2\n", 5, "spec.leader", "required"),
    ("di-worker-needed", DI + "spec:\n  workers: 2\n  leader: {image: x}\n",
     5, "spec.worker", "required when workers is greater than 0"),
    ("di-replicas-range", DI + "spec:\n  replicas: 1001\n  leader: {image: x}\n",
     6, "spec.replicas", "must be <= 1000"),
    ("di-no-host-network", DI + "spec:\n  leader:\n    image: x\n    security:\n"
     "      hostNetwork: true\n", 9, "spec.leader.security.hostNetwork", "unknown field"),
    ("di-no-s3", DI + "spec:\n  leader:\n    image: x\n    storage:\n      s3: []\n",
     9, "spec.leader.storage.s3", "unknown field"),
    ("di-restart-enum", DI + "spec:\n  restartPolicy: Always\n  leader: {image: x}\n",
     6, "spec.restartPolicy", "RecreateGroupOnPodRestart"),
    ("di-port-range", DI + "spec:\n  servingPort:\n    port: 70000\n  leader: {image: x}\n",
     7, "spec.servingPort.port", "must be <= 65535"),
    ("toleration-seconds", DT + "spec:\n  image: x\n  tolerations:\n  - key: k\n"
     "    operator: Exists\n    effect: NoSchedule\n    seconds: 30\n",
     11, "spec.tolerations[0].seconds", "NoExecute"),
    ("match-values", DT + "spec:\n  image: x\n  nodeAffinityRequired:\n    nodeSelectorTerms:\n"
     "    - matchExpressions:\n      - key: gpu\n        operator: In\n",
     10, "spec.nodeAffinityRequired.nodeSelectorTerms[0].matchExpressions[0].values",
     "must not be empty"),
    ("pvc-claim-size", DT + "spec:\n  image: x\n  storage:\n    pvc:\n    - path: /data\n",
     9, "spec.storage.pvc[0].claimInfo", "claimInfo.size is required"),
    ("probe-path", DT + "spec:\n  image: x\n  probes:\n    readiness:\n      handler:\n"
     "        httpGet: {path: health}\n", 10, "spec.probes.readiness.handler.httpGet.path",
     "absolute HTTP path"),
    ("capability-enum", DT + "spec:\n  image: x\n  security:\n    capabilities: [NET_ADMIN, ROOT]\n",
     8, "spec.security.capabilities[1]", "got \"ROOT\""),
    ("label-name-too-long", DT + "spec:\n  image: x\n  labels:\n  - name: " + "l" * 64 + "\n",
     8, "spec.labels[0].name", "at most 63"),
    ("empty-command", DT + "spec:\n  image: x\n  command: \"\"\n", 7, "spec.command", "must not be empty"),
    ("spec-not-mapping", DT + "spec: [image, x]\n", 5, "spec", "must be a mapping"),
    ("ignore-path-typo", DT + "lifecycle:\n  ignoreChanges:\n  - spec.numWorkrs\nspec: {image: x}\n",
     7, "lifecycle.ignoreChanges[0]", "did you mean 'numWorkers'?"),
    ("ignore-path-root", DT + "lifecycle:\n  sensitive: [metadata.name]\nspec: {image: x}\n",
     6, "lifecycle.sensitive[0]", "starting with one of spec, masterSpec"),
    ("ignore-path-syntax", DT + "lifecycle:\n  ignoreChanges: ['spec..image']\nspec: {image: x}\n",
     6, "lifecycle.ignoreChanges[0]", "not a dotted path"),
    ("prevent-destroy-type", DT + "lifecycle:\n  preventDestroy: yes please\nspec: {image: x}\n",
     6, "lifecycle.preventDestroy", "must be true or false"),
    ("unknown-kind", DT.replace("DistributedTraining", "distributedtrainng") + "spec: {image: x}\n",
     1, "kind", "did you mean 'DistributedTraining'?"),
    ("kind-missing", DT.replace("kind: DistributedTraining\n", "") + "spec: {image: x}\n",
     1, "kind", "required field is missing"),
    ("duplicate-key", DT + "spec:\n  image: x\n  image: y\n", 7, "image", "duplicate key"),
]


@pytest.mark.parametrize("doc,line,path,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_document_is_one_clear_problem(specdir, doc, line, path, words):
    specdir.write("team/train.yaml", doc)
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    problems = exc.value.problems
    assert len(problems) == 1, problems
    prefix = f"{specdir.root / 'team' / 'train.yaml'}:{line}: {path}: "
    assert problems[0].startswith(prefix), problems[0]
    assert words in problems[0]


def test_there_are_enough_bad_cases():
    assert len(CASES) >= 30
