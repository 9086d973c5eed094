"""A spec of each v1-shaped kind beside the distributed ones (Training, Workspace,
Inference), `apply_kinds` that applies all three, and `undefined_keys`, which lists the
keys of a body that NVIDIA's schema does not define. Used by the e2e tests of those kinds
and of NIM services."""

from __future__ import annotations

from tests.helpers.constants import CLUSTER


TRAINING = f"""
kind: Training
name: llama-lora
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: nvcr.io/nvidia/pytorch:24.05-py3
  command: accelerate
  args: launch --num_processes 8 sft_lora.py --bf16
  backoffLimit: 2
  compute:
    gpuDevicesRequest: 8
    cpuMemoryRequest: 256Gi
  environmentVariables:
    - name: HF_HOME
      value: /data/hf
    - name: WANDB_PROJECT
      value: llama-lora
  labels:
    - name: team
      value: support-ml
    - name: tier
      value: gold
  storage:
    pvc:
      - name: checkpoints
        path: /checkpoints
        claimInfo:
          size: 200Gi
"""


WORKSPACE = f"""
kind: Workspace
name: jupyter-ana
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: jupyter/pytorch-notebook:cuda12-python-3.11
  command: start-notebook.sh
  compute:
    gpuDevicesRequest: 1
  environmentVariables:
    - name: JUPYTER_ENABLE_LAB
      value: "yes"
    - name: TZ
      value: Europe/Berlin
  labels:
    - name: team
      value: research
    - name: owner
      value: ana
  ports:
    - container: 8888
      serviceType: ClusterIP
"""


INFERENCE = f"""
kind: Inference
name: mistral-chat
projectId: "7"
clusterId: {CLUSTER}
spec:
  image: vllm/vllm-openai:v0.6.3
  command: python3 -m vllm.entrypoints.openai.api_server
  args: --model mistralai/Mistral-7B-Instruct-v0.3 --port 8000
  compute:
    gpuDevicesRequest: 1
  environmentVariables:
    - name: HF_HOME
      value: /models/hf
    - name: VLLM_LOGGING_LEVEL
      value: INFO
  labels:
    - name: team
      value: serving
    - name: model
      value: mistral-7b
  servingPort:
    container: 8000
  autoscaling:
    minReplicas: 1
    maxReplicas: 4
    metric: concurrency
    metricThreshold: 16
"""


def _resolve(schema: dict, components: dict) -> dict:
    if "$ref" in schema:
        return _resolve(components[schema["$ref"].rsplit("/", 1)[1]], components)
    props = dict(schema.get("properties", {}))
    for part in schema.get("allOf", ()):
        props.update(_resolve(part, components).get("properties", {}))
    return {**schema, "properties": props}


def undefined_keys(schema: dict, value, components: dict, path: str, out: list[str]) -> None:
    schema = _resolve(schema, components)
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            undefined_keys(schema["items"], item, components, f"{path}[{i}]", out)
    elif isinstance(value, dict):
        for key, sub in value.items():
            if key not in schema["properties"]:
                out.append(f"{path}.{key}: not defined by the schema")
            else:
                undefined_keys(schema["properties"][key], sub, components, f"{path}.{key}", out)


def apply_kinds(ws, sim):
    ws.write("train.yaml", TRAINING)
    ws.write("ws.yaml", WORKSPACE)
    ws.write("serve.yaml", INFERENCE)
    assert ws.plan("--detailed-exitcode").exit_code == 2
    res = ws.apply()
    assert res.exit_code == 0, res.output
    return {w["name"]: w for w in sim.live()}
