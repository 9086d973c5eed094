"""Property tests: whatever bytes or structures a spec file holds, loading it either
succeeds or raises SpecError; it never lets another exception reach the user."""

from __future__ import annotations

import json
import pathlib
import tempfile

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.desired import load_specs
from reconciler.errors import SpecError

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "specs").rglob("*.yaml"))
EXAMPLE_TEXTS = [p.read_text() for p in EXAMPLES]
EXAMPLE_DOCS = [yaml.safe_load(t) for t in EXAMPLE_TEXTS]

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _load(name: str, content: str | bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", errors="surrogatepass")
        try:
            workloads = load_specs(tmp)
        except SpecError as exc:
            assert exc.problems and all(p.startswith(str(path)) for p in exc.problems)
            return
        for w in workloads:
            assert not {"kind", "desiredPhase", "lifecycle", "useGivenNameAsPrefix"} & set(w.body)
            json.dumps(w.body)  # what is sent to the API is plain JSON


@SETTINGS
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=300))
def test_random_text(text):
    _load("x.yaml", text)


@SETTINGS
@given(st.binary(max_size=200))
def test_random_bytes_as_json(data):
    _load("x.json", data)


@st.composite
def mutated_example(draw):
    lines = draw(st.sampled_from(EXAMPLE_TEXTS)).splitlines()
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "truncate", "indent"]))
        if op == "delete" and len(lines) > 1:
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "replace":
            indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
            key = draw(st.sampled_from(["image", "numWorkers", "compute", "name", "replicas",
                                        "environmentVariables", "kind", "spec", "- name",
                                        "gpuDevicesRequest", "masterSpec", "lifecycle"]))
            value = draw(st.sampled_from(["", "null", "-1", "1.5", "true", "[]", "{}", "x",
                                          "'7'", "[a, {b: c}]", "&a [1]", "*a", "~", "1e999"]))
            lines[i] = f"{indent}{key}: {value}"
        elif op == "truncate":
            lines[i] = lines[i][: draw(st.integers(0, len(lines[i])))]
        else:
            lines[i] = " " + lines[i]
    return "\n".join(lines) + "\n"


@SETTINGS
@given(mutated_example())
def test_mutated_examples(text):
    _load("x.yaml", text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=10)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


@st.composite
def example_with_a_value_replaced(draw):
    doc = json.loads(json.dumps(draw(st.sampled_from(EXAMPLE_DOCS))))
    path = draw(st.sampled_from(list(_paths(doc))[1:]))
    target = doc
    for seg in path[:-1]:
        target = target[seg]
    target[path[-1]] = draw(json_values)
    return doc


@settings(SETTINGS, max_examples=60)
@given(example_with_a_value_replaced())
def test_examples_with_random_values(doc):
    _load("x.yaml", yaml.safe_dump(doc, allow_unicode=True))
    _load("x.json", json.dumps(doc))
