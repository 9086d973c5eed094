"""The simulator tests' materials: a valid create body per kind of the simulator's table
(`SAMPLES`) and an update body per kind with PATCH (`PATCHES`), and `schema_scalars`, the
scalars of a validator description by path. Used by tests/simulator's kind, listing,
behaviour and validator tests."""

from __future__ import annotations


# A valid create body per kind (a kind added to the table needs one here) and, for kinds
# with PATCH, a valid update body: GET shows each scalar it sends at its path after it.
SAMPLES = {
    "distributed": {"spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3",
                             "distributedFramework": "PyTorch", "numWorkers": 2}},
    "distributed-inference": {"spec": {"leader": {"image": "vllm/vllm-openai:v0.6"}}},
    "training": {"spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "completions": 1}},
    "workspace": {"spec": {"image": "jupyter/scipy-notebook:2024-05-27",
                           "ports": [{"container": 8888, "serviceType": "ClusterIP"}]}},
    "inference": {"spec": {"image": "vllm/vllm-openai:v0.6",
                           "servingPort": {"container": 8000}}},
    "nim-service": {"spec": {"image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
                             "ngcAuthSecret": "ngc-api", "servingPort": {"port": 8000},
                             "modelStore": {"nimCache": {"name": "llama-8b-cache"}},
                             "compute": {"gpuDevicesRequest": 1}}},
}


PATCHES = {"distributed-inference": {"spec": {"replicas": 3}},
           "inference": {"spec": {"image": "vllm/vllm-openai:v0.7",
                                  "autoscaling": {"minReplicas": 2}}},
           # NimServiceUpdateRequest: the whole spec.
           "nim-service": {"spec": {"image": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.4",
                                    "replicas": 2, "servingPort": {"port": 8000},
                                    "modelStore": {"nimCache": {"name": "llama-8b-cache"}}}}}


def schema_scalars(node, path: str = "") -> dict:
    """Every scalar of a `simulator.validator` description (as `simulator.schema` writes them) by its path (`spec.ports[].container`)."""
    from reconciler.simulator import validator

    if isinstance(node, validator.Obj):
        return {p: v for key, sub in node.properties.items()
                for p, v in schema_scalars(sub, f"{path}.{key}").items()}
    if isinstance(node, validator.Arr):
        return schema_scalars(node.items, path + "[]")
    return {path: node}
