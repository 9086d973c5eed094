"""The Inference autoscaling rules of the spec model agree with the simulator's own
(written apart from CONTRACT.md §5 and §7): for every combination of the keys the rules
read, a spec validates exactly when the simulator would accept its create body."""

from __future__ import annotations

import itertools

import pytest
from pydantic import ValidationError

from reconciler.desired import models
from reconciler.simulator import kinds as sim_kinds
from reconciler.simulator import schema, validator

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
KEYS = ("minReplicas", "maxReplicas", "metric", "metricThreshold", "scaleToZeroRetentionSeconds")
VALUES = ((None, 0, 1, 2), (None, 1, 2, 4), (None, "concurrency"), (None, 8), (None, 60))


def _body(scaling: dict) -> dict:
    return {"name": "chat", "projectId": "7", "clusterId": CLUSTER,
            "spec": {"image": "vllm/vllm-openai:v0.6.3", "autoscaling": scaling}}


@pytest.mark.parametrize("combo", list(itertools.product(*VALUES)))
def test_the_model_accepts_what_the_simulator_accepts(combo):
    scaling = {k: v for k, v in zip(KEYS, combo) if v is not None}
    body = _body(scaling)
    assert validator.validate(schema.INFERENCE_CREATE, body) == []
    server_accepts = sim_kinds.inference_rules(body) == []
    try:
        models.InferenceDocument.model_validate({"kind": "Inference", **body})
        model_accepts = True
    except ValidationError:
        model_accepts = False
    assert model_accepts == server_accepts, scaling
