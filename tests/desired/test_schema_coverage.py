"""The hand-written models cover every field of the API's create bodies, and no more.

Walks NVIDIA's OpenAPI schemas (../shared/runai-api, read by the tests only) beside the
pydantic models and compares the property names of every object at every depth.
"""

from __future__ import annotations

import typing

import pytest
import yaml
from pydantic import BaseModel

from reconciler.desired import models
from reconciler.desired.loader import _unwrap


def _resolve(schema: dict, components: dict) -> dict:
    """Follow $ref and merge allOf into one {properties, items} view."""
    if "$ref" in schema:
        return _resolve(components[schema["$ref"].rsplit("/", 1)[1]], components)
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    if "allOf" in schema:
        props: dict = dict(schema.get("properties", {}))
        for part in schema["allOf"]:
            props.update(_resolve(part, components).get("properties", {}))
        merged["properties"] = props
    return merged


def _compare(schema: dict, annotation, components: dict, path: str, out: list[str]) -> None:
    schema = _resolve(schema, components)
    t = _unwrap(annotation)
    if "items" in schema:
        assert typing.get_origin(t) is list, f"{path}: the API has a list here"
        _compare(schema["items"], typing.get_args(t)[0], components, path + "[]", out)
        return
    props = schema.get("properties")
    if not props:
        return
    assert isinstance(t, type) and issubclass(t, BaseModel), f"{path}: the API has an object here"
    ours, theirs = set(t.model_fields), set(props)
    if ours != theirs:
        out.append(f"{path}: missing {sorted(theirs - ours)}, extra {sorted(ours - theirs)}")
    for name in ours & theirs:
        _compare(props[name], t.model_fields[name].annotation, components, f"{path}.{name}", out)


CONTROL = {"kind", "desiredPhase", "lifecycle", "project"}  # project: the name, for projectId


@pytest.mark.parametrize("kind,file,request_schema", [
    ("Training", "trainings.yml", "TrainingCreationRequest"),
    ("Workspace", "workspaces.yml", "WorkspaceCreationRequest"),
    ("Inference", "inferences.yml", "InferenceCreationRequest"),
    ("DistributedTraining", "distributed.yml", "DistributedCreationRequest"),
    ("DistributedInference", "distributed-inferences.yml", "DistributedInferenceCreationRequest"),
])
def test_models_match_the_create_body(shared_api_dir, kind, file, request_schema):
    components = yaml.safe_load((shared_api_dir / file).read_text())["components"]["schemas"]
    body = _resolve(components[request_schema], components)
    model = models.MODELS[kind]
    assert set(model.model_fields) - CONTROL == set(body["properties"])
    problems: list[str] = []
    for name, prop in body["properties"].items():
        _compare(prop, model.model_fields[name].annotation, components, name, problems)
    assert problems == []
