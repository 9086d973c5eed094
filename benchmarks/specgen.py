"""Generates N realistic workload specs (2-4 KB each, mixed kinds) for the benchmarks.

Callers: `benchmarks/bench.py` and the smoke test in tests/perf/. Deterministic for a
given seed: the same N gives byte-identical files, so runs compare.
Spec shapes follow the examples under specs/, in a mix of the five kinds as a platform
team's fleet has them: single-node fine-tuning trainings, Jupyter workspaces (a quarter
kept suspended), autoscaled vLLM inferences, PyTorch DDP and MPI distributed trainings
and vLLM distributed inferences; spread over 20 projects, padded with environment
variables, labels and annotations as real team specs are.
"""

from __future__ import annotations

import random
from pathlib import Path

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
PROJECTS = 20

_PYTORCH = """\
kind: DistributedTraining
name: {name}
projectId: "{project}"
clusterId: {cluster}
spec:
  image: nvcr.io/nvidia/pytorch:{tag}-py3
  imagePullPolicy: IfNotPresent
  distributedFramework: PyTorch
  numWorkers: {workers}
  command: torchrun
  args: >-
    --nnodes={workers} --nproc_per_node={gpus} /workspace/train/run_pretraining.py
    --config=/workspace/configs/{name}.json --output_dir=/checkpoints/{name}
  workingDir: /workspace/train
  compute:
    gpuDevicesRequest: {gpus}
    cpuCoreRequest: {cpus}
    cpuMemoryRequest: {mem}Gi
    largeShmRequest: true
  environmentVariables:
{env}
  labels:
{labels}
  annotations:
    - name: owner
      value: team-{project}@example.com
  tolerations:
    - name: gpu-a100
      key: nvidia.com/gpu
      operator: Exists
      effect: NoSchedule
  nodePools: [a100-80gb, default]
  storage:
    pvc:
      - name: checkpoints
        path: /checkpoints
        claimName: {name}-checkpoints
        existingPvc: true
    emptyDirVolume:
      - name: scratch
        path: /scratch
        sizeLimit: 200Gi
masterSpecSameAsWorker: true
"""

_MPI = """\
kind: DistributedTraining
name: {name}
projectId: "{project}"
clusterId: {cluster}
spec:
  image: nvcr.io/nvidia/tensorflow:{tag}-tf2-py3
  distributedFramework: MPI
  numWorkers: {workers}
  slotsPerWorker: {gpus}
  mpiLauncherCreationPolicy: WaitForWorkersReady
  cleanPodPolicy: Running
  command: /usr/sbin/sshd
  args: -De
  compute:
    gpuDevicesRequest: {gpus}
    cpuCoreRequest: {cpus}
    cpuMemoryRequest: {mem}Gi
    largeShmRequest: true
  environmentVariables:
{env}
  labels:
{labels}
  storage:
    nfs:
      - name: imagenet
        server: nfs.data.example.com
        path: /exports/imagenet
        mountPath: /data/imagenet
        readOnly: true
masterSpecSameAsWorker: false
masterSpec:
  image: nvcr.io/nvidia/tensorflow:{tag}-tf2-py3
  command: mpirun
  args: >-
    -np {slots} -bind-to none -map-by slot -x NCCL_DEBUG=INFO -x LD_LIBRARY_PATH -x PATH
    python /workspace/resnet/train.py --data-dir=/data/imagenet --batch-size=256 --epochs=90
  compute:
    cpuCoreRequest: 2
    cpuMemoryRequest: 4Gi
  environmentVariables:
    - name: OMPI_ALLOW_RUN_AS_ROOT
      value: "1"
    - name: OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
      value: "1"
"""

_INFERENCE = """\
kind: DistributedInference
name: {name}
projectId: "{project}"
clusterId: {cluster}
spec:
  workers: 1
  replicas: {replicas}
  startupPolicy: LeaderCreated
  restartPolicy: RecreateGroupOnPodRestart
  servingPort:
    port: 8000
    protocol: http
    authorizationType: authenticatedUsers
  leader:
    image: vllm/vllm-openai:v0.6.{minor}
    command: sh
    args: >-
      -c "ray start --head --port=6379 && python3 -m vllm.entrypoints.openai.api_server
      --model meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size {gpus} --port 8000"
    compute:
      gpuDevicesRequest: {gpus}
      cpuCoreRequest: {cpus}
      cpuMemoryRequest: {mem}Gi
      largeShmRequest: true
    environmentVariables:
{env_deep}
    storage:
      pvc:
        - name: model-cache
          path: /models
          claimName: {name}-weights
          existingPvc: true
          readOnly: true
  worker:
    image: vllm/vllm-openai:v0.6.{minor}
    command: sh
    args: -c "ray start --block --address=$(LWS_LEADER_ADDRESS):6379"
    compute:
      gpuDevicesRequest: {gpus}
      cpuCoreRequest: {cpus}
      cpuMemoryRequest: {mem}Gi
      largeShmRequest: true
    environmentVariables:
      - name: HF_HOME
        value: /models/hf
"""

_TRAINING = """\
kind: Training
name: {name}
projectId: "{project}"
clusterId: {cluster}
spec:
  image: nvcr.io/nvidia/pytorch:{tag}-py3
  command: accelerate
  args: >-
    launch --num_processes {gpus} /workspace/finetune/sft_lora.py
    --model_name_or_path meta-llama/Llama-3.1-8B-Instruct --dataset_name /data/{name}
    --output_dir /checkpoints/{name} --lora_r 16 --learning_rate 2e-4 --bf16
  workingDir: /workspace/finetune
  backoffLimit: 2
  compute:
    gpuDevicesRequest: {gpus}
    cpuCoreRequest: {cpus}
    cpuMemoryRequest: {mem}Gi
    largeShmRequest: true
  environmentVariables:
{env}
  labels:
{labels}
  nodePools: [h100, default]
  storage:
    pvc:
      - name: checkpoints
        path: /checkpoints
        claimName: {name}-checkpoints
        existingPvc: true
    nfs:
      - name: datasets
        server: nfs.data.example.com
        path: /exports/datasets
        mountPath: /data
        readOnly: true
"""

_WORKSPACE = """\
kind: Workspace
name: {name}
projectId: "{project}"
clusterId: {cluster}
desiredPhase: {phase}
spec:
  image: jupyter/pytorch-notebook:cuda12-python-3.11
  command: start-notebook.sh
  args: --NotebookApp.base_url=/{name} --NotebookApp.token=''
  createHomeDir: true
  compute:
    gpuDevicesRequest: 1
    cpuCoreRequest: 4
    cpuMemoryRequest: 32Gi
  environmentVariables:
{env}
  labels:
{labels}
  ports:
    - container: 8888
      serviceType: ClusterIP
      toolType: jupyter-notebook
      toolName: Jupyter
  exposedUrls:
    - container: 8888
      authorizationType: authenticatedUsers
      toolType: jupyter-notebook
  storage:
    pvc:
      - name: home
        path: /home/jovyan/work
        claimName: {name}-home
        existingPvc: true
"""

_SERVE = """\
kind: Inference
name: {name}
projectId: "{project}"
clusterId: {cluster}
spec:
  image: vllm/vllm-openai:v0.6.{minor}
  command: python3 -m vllm.entrypoints.openai.api_server
  args: >-
    --model mistralai/Mistral-7B-Instruct-v0.3 --served-model-name {name}
    --max-model-len 16384 --port 8000
  compute:
    gpuDevicesRequest: 1
    cpuCoreRequest: 8
    cpuMemoryRequest: 48Gi
  environmentVariables:
{env}
  labels:
{labels}
  servingPort:
    container: 8000
    authorizationType: authenticatedUsers
  autoscaling:
    minReplicas: 1
    maxReplicas: {replicas}
    metric: concurrency
    metricThreshold: 16
  servingConfiguration:
    initializationTimeoutSeconds: 600
  storage:
    pvc:
      - name: model-cache
        path: /models
        claimName: {name}-weights
        existingPvc: true
        readOnly: true
"""

# (share, template, name prefix), the shares summing to 1
_MIX = ((0.25, _TRAINING, "ft"), (0.20, _WORKSPACE, "lab"), (0.20, _SERVE, "chat"),
        (0.20, _PYTORCH, "ddp"), (0.07, _MPI, "mpi"), (0.08, _INFERENCE, "serve"))


def _items(pairs: list[tuple[str, str]], indent: int) -> str:
    pad = " " * indent
    return "\n".join(f'{pad}- name: {k}\n{pad}  value: "{v}"' for k, v in pairs)


def spec_text(i: int, rng: random.Random) -> tuple[str, str]:
    """(file stem, YAML text) of the i-th workload."""
    roll = rng.random()
    for share, template, prefix in _MIX:
        roll -= share
        if roll < 0:
            break
    name = f"{prefix}-{i:05d}"
    gpus = rng.choice((1, 2, 4, 8))
    workers = rng.randint(1, 8)
    env = [(f"TRAIN_OPTION_{k:02d}", f"value-{rng.getrandbits(40):x}")
           for k in range(rng.randint(16, 36))]
    labels = [("team", f"team-{i % 17}"), ("cost-center", f"cc-{rng.randint(100, 999)}"),
              ("model", name)]
    text = template.format(
        name=name, project=1 + i % PROJECTS, cluster=CLUSTER,
        tag=rng.choice(("24.05", "24.07", "24.10")), workers=workers, gpus=gpus,
        cpus=gpus * 4, mem=gpus * 32, slots=workers * gpus, replicas=rng.randint(1, 4),
        phase="Stopped" if rng.random() < 0.25 else "Running",
        minor=rng.randint(0, 4), env=_items(env, 4), env_deep=_items(env, 6),
        labels=_items(labels, 4))
    return name, text


def write_specs(directory: Path, n: int, *, seed: int = 6) -> list[Path]:
    """Write N spec files under `directory` (one workload per file, 100 per folder)."""
    rng = random.Random(seed)
    paths = []
    for i in range(n):
        stem, text = spec_text(i, rng)
        sub = directory / f"batch-{i // 100:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        p = sub / f"{stem}.yaml"
        p.write_text(text, encoding="utf-8")
        paths.append(p)
    return paths
