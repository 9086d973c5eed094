"""Folder defaults: a `_defaults.yaml` supplies fields to every spec at or below its folder
(deeper files win, the spec over all), by the merge rules of docs/specs.md, "Folder defaults";
problems name the file the bad value came from, with its line and field."""

from __future__ import annotations

import pytest

from reconciler.desired import load_specs, start_loading
from reconciler.errors import SpecError

from tests.helpers.constants import CLUSTER

OTHER_CLUSTER = "0b0f4b4e-8f7e-4f0e-9a55-1c1e5e0d4c11"


def test_spec_over_deeper_defaults_over_outer_ones(specdir):
    specdir.write("_defaults.yaml", f"""
        clusterId: {CLUSTER}
        projectId: "7"
        lifecycle:
          preventDestroy: true
          sensitive: ["spec.environmentVariables[DB_URL].value"]
        spec:
          compute: {{cpuCoreRequest: 1, cpuMemoryRequest: 1Gi}}
          labels:
            - {{name: team, value: a}}
            - {{name: tier, value: gold}}
          environmentVariables:
            - {{name: LOG, value: info}}
            - {{name: DB_URL, value: "postgres://db"}}
          nodePools: [a100, h100]
          workingDir: /outer
        """)
    specdir.write("team/_defaults.yaml", f"""
        clusterId: {OTHER_CLUSTER}
        project: team-b
        spec:
          compute: {{cpuCoreRequest: 2}}
          labels:
            - {{name: owner, value: bob}}
          environmentVariables:
            - {{name: LOG, secret: {{name: log-level, key: level}}}}
        """)
    specdir.write("team/sub/t.yaml", """
        kind: Training
        name: t
        lifecycle:
          sensitive: [spec.args]
        spec:
          image: x
          args: --fast
          labels:
            - {name: tier, value: silver}
          environmentVariables:
            - {name: EXTRA, value: "1"}
          nodePools: [l4]
          workingDir: null
        """)
    [w] = load_specs(specdir.root)
    assert w.project_name == "team-b" and w.project_id == ""  # project: replaced projectId
    assert w.cluster_id == OTHER_CLUSTER
    assert w.body == {"name": "t", "clusterId": OTHER_CLUSTER, "spec": {
        "image": "x", "args": "--fast",
        # keyed lists merge by key: the deeper item replaces the outer one whole, in place
        "labels": [{"name": "team", "value": "a"}, {"name": "tier", "value": "silver"},
                   {"name": "owner", "value": "bob"}],
        "environmentVariables": [{"name": "LOG", "secret": {"name": "log-level", "key": "level"}},
                                 {"name": "DB_URL", "value": "postgres://db"},
                                 {"name": "EXTRA", "value": "1"}],
        "nodePools": ["l4"],  # another list replaces
        "compute": {"cpuCoreRequest": 2, "cpuMemoryRequest": "1Gi"},  # mappings merge deep
        # workingDir: null removed the default
    }}
    assert w.lifecycle.prevent_destroy is True
    # lifecycle.sensitive is the union: a spec cannot unmask what its folder masks
    assert set(w.lifecycle.sensitive) == {"spec.args", "spec.environmentVariables[DB_URL].value"}
    assert w.source == str(specdir.root / "team/sub/t.yaml")


def test_a_defaults_file_is_no_workload_and_applies_only_below_its_folder(specdir):
    specdir.write("a/_defaults.yaml", f"clusterId: {CLUSTER}\nprojectId: '7'\n")
    specdir.write("a/t.yaml", "kind: Training\nname: t\nspec: {image: x}\n")
    specdir.write("b/_defaults.yaml", "# nothing yet\n")
    specdir.write("b/u.yaml", "kind: Training\nname: u\nspec: {image: x}\n")
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    assert exc.value.problems == [
        f"{specdir.root / 'b/u.yaml'}:1: clusterId: required field is missing",
        f"{specdir.root / 'b/u.yaml'}:1: projectId: required field is missing (or give "
        "project: with the project's name)"]
    (specdir.root / "b/u.yaml").unlink()
    assert [w.name for w in load_specs(specdir.root)] == ["t"]


def test_a_single_spec_file_given_takes_no_folder_defaults(specdir):
    specdir.write("_defaults.yaml", f"clusterId: {CLUSTER}\nprojectId: '7'\n")
    path = specdir.write("t.yaml", "kind: Training\nname: t\nspec: {image: x}\n")
    assert len(load_specs(specdir.root)) == 1
    with pytest.raises(SpecError, match="clusterId: required field is missing"):
        load_specs(path)


def test_a_bad_default_names_the_defaults_file_line_and_field_once(specdir):
    specdir.write("_defaults.yaml", f"""
        projectId: "7"
        clusterId: {CLUSTER}
        spec:
          labels:
            - {{name: team, value: a}}
            - {{name: cost, value: 12:30}}
          imagePullPolcy: Always
        """)
    for name in "abcde":
        specdir.write(f"w/{name}.yaml", f"kind: Training\nname: {name}\nspec: {{image: x}}\n")
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    where = specdir.root / "_defaults.yaml"
    specs = ", ".join(str(specdir.root / f"w/{n}.yaml") for n in "abc")
    assert exc.value.problems == [
        f'{where}:6: spec.labels[1].value: must be a string, got 12:30 (YAML reads it as 750; '
        f'quote it: "12:30") (a default for {specs} and 2 more)',
        f"{where}:7: spec.imagePullPolcy: unknown field (did you mean 'imagePullPolicy'?) "
        f"(a default for {specs} and 2 more)"]


def test_a_specs_own_problem_names_its_own_index_after_defaults_items(specdir):
    specdir.write("_defaults.yaml", f"""
        projectId: "7"
        clusterId: {CLUSTER}
        spec:
          environmentVariables: [{{name: A, value: a}}, {{name: B, value: b}}]
        """)
    specdir.write("t.yaml", """
        kind: Training
        name: t
        spec:
          image: x
          environmentVariables:
            - name: C
              value: 12
        """)
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    assert exc.value.problems == [
        f'{specdir.root / "t.yaml"}:7: spec.environmentVariables[0].value: must be a string, '
        'got 12 (quote it: "12")']


def test_secrets_from_defaults_are_masked_in_problems(specdir):
    specdir.write("_defaults.yaml", f"""
        projectId: "7"
        clusterId: {CLUSTER}
        lifecycle:
          sensitive: [spec.args]
        spec:
          environmentVariables:
            - {{name: DB_PASSWORD, value: 987654321}}
        """)
    specdir.write("t.yaml", "kind: Training\nname: t\nspec:\n  image: x\n  args: 4242\n")
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    text = "\n".join(exc.value.problems)
    assert "987654321" not in text and "4242" not in text
    assert exc.value.problems == [
        f"{specdir.root / 't.yaml'}:5: spec.args: must be a string, got (sensitive)",
        f"{specdir.root / '_defaults.yaml'}:7: spec.environmentVariables[0].value: must be a "
        f"string, got (sensitive) (a default for {specdir.root / 't.yaml'})"]


@pytest.mark.parametrize(("text", "line", "message"), [
    ("clusterId: [unclosed\n", 2, "invalid YAML"),
    ("- clusterId: x\n", 1, "_defaults.yaml must be a mapping of spec fields"),
    ("clusterId: x\n---\nprojectId: '7'\n", 3, "_defaults.yaml holds one document"),
    ("name: shared\n", 1, "name: cannot be a default: every spec names itself"),
])
def test_a_broken_defaults_file_is_one_problem_and_its_specs_wait(specdir, text, line, message):
    specdir.write("team/_defaults.yaml", text)
    for name in "ab":
        specdir.write(f"team/{name}.yaml", f"kind: Training\nname: {name}\nspec: {{image: x}}\n")
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    [problem] = exc.value.problems  # the specs below are not checked without their defaults
    assert problem.startswith(f"{specdir.root / 'team/_defaults.yaml'}:{line}: ")
    assert message in problem


def test_defaults_under_another_name_are_refused(specdir):
    specdir.write("_defaults.yml", f"clusterId: {CLUSTER}\n")
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    assert exc.value.problems == [
        f"{specdir.root / '_defaults.yml'}: folder defaults must be named _defaults.yaml: "
        "this file is not read"]


def _generated(specdir, count: int, bad: bool = False) -> None:
    specdir.write("_defaults.yaml", f"clusterId: {CLUSTER}\nprojectId: '7'\n"
                                    "spec: {labels: [{name: team, value: a}]}\n")
    specdir.write("half/_defaults.yaml", "spec:\n  createHomeDir: yes\n"
                  + ("  nodeType: 12:30\n" if bad else ""))
    for i in range(count):
        folder = "half/" if i % 2 else ""
        specdir.write(f"{folder}w{i:03}.yaml", f"kind: Training\nname: w{i}\nspec: {{image: x}}\n")


def test_loading_in_child_processes_gives_the_same_outcome(specdir):
    _generated(specdir, 40)
    here = load_specs(specdir.root)
    there = start_loading(specdir.root, processes=3).result()
    assert there == here and len(here) == 40
    assert [w.warnings for w in there] == [w.warnings for w in here]
    assert all(w.body["spec"]["labels"] == [{"name": "team", "value": "a"}] for w in here)
    assert here[1].warnings == (
        f"{specdir.root / 'half/_defaults.yaml'}:2: spec.createHomeDir: yes is read as true "
        "here but as text by YAML 1.2 and most tools: write true",)


def test_a_bad_default_seen_by_several_loader_processes_is_one_problem(specdir):
    _generated(specdir, 40, bad=True)
    with pytest.raises(SpecError) as here:
        load_specs(specdir.root)
    with pytest.raises(SpecError) as there:
        start_loading(specdir.root, processes=3).result()
    assert there.value.problems == here.value.problems
    [problem] = here.value.problems
    assert problem.startswith(f"{specdir.root / 'half/_defaults.yaml'}:3: spec.nodeType: must "
                              'be a string, got 12:30')
    assert problem.endswith("and 17 more)")
