"""Spec loading's quick path (no line table unless a file has a problem, data taken as
parsed when it holds no null and no alias) gives the same workloads and the same
problems, with their lines, as a careful load would."""

from __future__ import annotations

import pytest

from reconciler.desired import load_specs
from reconciler.errors import SpecError

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
HEAD = f"""kind: DistributedTraining
projectId: "7"
clusterId: {CLUSTER}
"""


def _write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_problem_in_the_second_document_names_its_own_line(tmp_path):
    _write(tmp_path, "a.yaml", HEAD + "name: ok\nspec: {image: x}\n---\n---\n" + HEAD
           + "name: bad\nspec:\n  image: x\n  numWorkers: 0\n")
    with pytest.raises(SpecError) as exc:
        load_specs(tmp_path)
    assert exc.value.problems == [
        f"{tmp_path / 'a.yaml'}:14: spec.numWorkers: must be >= 1, got 0"]


def test_null_values_are_dropped_and_list_items_kept(tmp_path):
    _write(tmp_path, "a.yaml", HEAD + "name: a\nspec:\n  image: x\n  args: null\n  command: ~\n"
           "  nodePools: [a, b]\n")
    [w] = load_specs(tmp_path)
    assert w.body["spec"] == {"image": "x", "nodePools": ["a", "b"]}


def test_an_aliased_subtree_gives_independent_copies(tmp_path):
    _write(tmp_path, "a.yaml", HEAD + "name: a\nspec:\n  image: x\n  labels: &l\n"
           "    - {name: team, value: a}\n  annotations: *l\n")
    [w] = load_specs(tmp_path)
    spec = w.body["spec"]
    assert spec["labels"] == spec["annotations"] == [{"name": "team", "value": "a"}]
    assert spec["labels"] is not spec["annotations"]


def test_scalars_keep_their_yaml_types(tmp_path):
    # (an octal 012 is refused: tests/desired/test_yaml_forms.py)
    _write(tmp_path, "a.yaml", HEAD + "name: a\nspec:\n  image: x\n  numWorkers: 10\n"
           "  tty: yes\n  stdin: True\n  compute: {gpuDevicesRequest: 0x2, gpuPortionRequest: 0.5}\n")
    with pytest.raises(SpecError) as exc:
        load_specs(tmp_path)
    [problem] = exc.value.problems  # 0x2 is 2
    assert "spec.compute.gpuPortionRequest" in problem and "more than one GPU" in problem
    _write(tmp_path, "a.yaml", HEAD + "name: a\nspec:\n  image: x\n  numWorkers: 10\n"
           "  stdin: yes\n  tty: True\n  compute: {gpuDevicesRequest: 0x2}\n")
    [w] = load_specs(tmp_path)
    assert w.body["spec"]["numWorkers"] == 10 and w.body["spec"]["compute"] == {"gpuDevicesRequest": 2}
    assert w.body["spec"]["stdin"] is True and w.body["spec"]["tty"] is True


@pytest.mark.parametrize("value,words", [("!!bool maybe", "not a valid bool: 'maybe'"),
                                         ("!!int four", "not a valid int: 'four'")])
def test_a_scalar_that_its_tag_cannot_read_is_a_clear_problem(tmp_path, value, words):
    _write(tmp_path, "a.yaml", HEAD + f"name: a\nspec:\n  image: x\n  numWorkers: {value}\n")
    with pytest.raises(SpecError) as exc:
        load_specs(tmp_path)
    [problem] = exc.value.problems
    assert problem.startswith(f"{tmp_path / 'a.yaml'}:7: invalid YAML: ") and words in problem


def test_duplicate_keys_inside_and_outside_a_nested_map_in_file_order(tmp_path):
    _write(tmp_path, "a.yaml", HEAD + "name: a\nspec: {image: x, compute: {gpuDevicesRequest: 1, "
           "gpuDevicesRequest: 2}, image: y}\n")
    with pytest.raises(SpecError) as exc:
        load_specs(tmp_path)
    assert [p.split(": ", 1)[1] for p in exc.value.problems] == [
        "image: duplicate key", "gpuDevicesRequest: duplicate key"]


def test_merge_keys_are_flattened_and_deep_nesting_refused(tmp_path):
    _write(tmp_path, "a.yaml", HEAD + "name: a\nx-base: &b {image: x, numWorkers: 2}\n")
    _write(tmp_path, "b.yaml", HEAD + "name: b\nspec:\n  <<: {image: x, numWorkers: 2}\n  numWorkers: 3\n")
    with pytest.raises(SpecError) as exc:
        load_specs(tmp_path)
    assert exc.value.problems == [f"{tmp_path / 'a.yaml'}:5: x-base: unknown field"]
    (tmp_path / "a.yaml").unlink()
    [w] = load_specs(tmp_path)
    assert w.body["spec"] == {"image": "x", "numWorkers": 3}
    _write(tmp_path, "c.yaml", HEAD + "name: c\nspec: " + "[" * 120 + "]" * 120 + "\n")
    with pytest.raises(SpecError) as exc:
        load_specs(tmp_path)
    assert exc.value.problems == [f"{tmp_path / 'c.yaml'}:1: document is too large or too "
                                  "deeply nested (aliases?)"]
