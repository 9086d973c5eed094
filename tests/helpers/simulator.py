"""The simulator tests' materials: a valid create body per kind of the simulator's table
(`SAMPLES`) and an update body per kind with PATCH (`PATCHES`); `schema_scalars`, the
scalars of a validator description by path, and `openapi_leaves`, those of an OpenAPI
schema, to compare the two; `openapi_checker`, which validates a body against NVIDIA's
OpenAPI files (3.0 ones too). Used by tests/simulator's kind, listing, behaviour,
validator and organisation tests."""

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
    if isinstance(node, validator.Map):  # OpenAPI's additionalProperties: no named leaves
        return {}
    return {path: node}


def json_schema_of(node):
    """An OpenAPI 3.0 document (or part) as JSON Schema 2020-12 reads it: `nullable: true`
    becomes a type (or enum) that also takes null. A 3.1 document is left as it is."""
    if isinstance(node, list):
        return [json_schema_of(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: json_schema_of(v) for k, v in node.items() if k != "nullable"}
    if node.get("nullable") is True:
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
        elif "type" not in out:
            return {"anyOf": [{"type": "null"}, out]}
    return out


def openapi_checker(api_dir, *files: str):
    """check(file, schema_name_or_ref, body): assert `body` validates against a schema of
    NVIDIA's OpenAPI `files` (3.0 or 3.1) in `api_dir`. A name is a component schema's;
    a ref (with a '#') is taken as it is."""
    import jsonschema
    import yaml
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    docs = {name: json_schema_of(yaml.safe_load((api_dir / name).read_text()))
            for name in files}
    registry = Registry().with_resources(
        (name, Resource.from_contents(doc, default_specification=DRAFT202012))
        for name, doc in docs.items())

    def check(file: str, name: str, body) -> None:
        ref = name if "#" in name else f"{file}#/components/schemas/{name}"
        validator = jsonschema.Draft202012Validator({"$ref": ref}, registry=registry)
        errors = sorted(validator.iter_errors(body), key=lambda e: list(e.path))
        assert not errors, "\n".join(f"{list(e.path)}: {e.message}" for e in errors[:5])

    check.docs = docs
    return check


def openapi_leaves(schema, components, path: str = "", out: dict | None = None) -> dict:
    """Every scalar of an OpenAPI schema by its path (`.resources[].gpu.deserved`), as
    (type, enum, minimum, maximum, pattern, minLength, maxLength): what `schema_scalars`
    gives for the simulator's own description. A part that only describes (no type, no
    properties) adds nothing."""
    out = {} if out is None else out
    if "$ref" in schema:
        return openapi_leaves(components[schema["$ref"].split("/")[-1]], components, path, out)
    for sub in schema.get("allOf", ()):
        openapi_leaves(sub, components, path, out)
    t = schema.get("type")
    base = [x for x in (t if isinstance(t, list) else [t]) if x not in (None, "null")]
    if "properties" in schema or base == ["object"]:
        for key, sub in schema.get("properties", {}).items():
            openapi_leaves(sub, components, f"{path}.{key}", out)
    elif base == ["array"]:
        openapi_leaves(schema["items"], components, path + "[]", out)
    elif base:
        out[path] = (base[0], tuple(schema["enum"]) if "enum" in schema else None,
                     schema.get("minimum"), schema.get("maximum"), schema.get("pattern", ".*"),
                     schema.get("minLength"), schema.get("maxLength"))
    return out


def description_leaves(node) -> dict:
    """`schema_scalars` of a description in `openapi_leaves`' form."""
    return {p: (n.type, n.enum, n.minimum, n.maximum, n.pattern or ".*", n.min_length,
                n.max_length) for p, n in schema_scalars(node).items()}
