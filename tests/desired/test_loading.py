"""Good specs load into the exact create body; files, documents and problems across them."""

from __future__ import annotations

import json
import os
import pathlib
import textwrap

import pytest

from reconciler.desired import DesiredWorkload, Lifecycle, load_specs
from reconciler.errors import SpecError
from reconciler.simulator.projects import DEFAULT_CLUSTER_ID as SIM_CLUSTER

from tests.helpers.constants import CLUSTER

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_body_is_exactly_what_the_user_wrote(specdir):
    specdir.write("bert.yaml", f"""
        kind: DistributedTraining
        name: bert-ddp
        projectId: 7
        clusterId: {CLUSTER}
        templateId: 0b0f4b4e-8f7e-4f0e-9a55-1c1e5e0d4c11
        desiredPhase: Stopped
        useGivenNameAsPrefix: false
        lifecycle:
          preventDestroy: true
          ignoreChanges: [spec.numWorkers]
          sensitive: ["spec.environmentVariables[TOKEN].value"]
        spec:
          image: nvcr.io/nvidia/pytorch:24.05-py3
          numWorkers: 4
          category: null
          compute: {{gpuDevicesRequest: 8, cpuCoreRequest: 1, gpuPortionLimit: null}}
          environmentVariables:
            - {{name: TOKEN, value: abc}}
        masterSpecSameAsWorker: true
        """)
    [w] = load_specs(specdir.root)
    assert w == DesiredWorkload(
        kind="DistributedTraining", name="bert-ddp", project_id="7", cluster_id=CLUSTER,
        body={
            "name": "bert-ddp", "projectId": "7", "clusterId": CLUSTER,
            "templateId": "0b0f4b4e-8f7e-4f0e-9a55-1c1e5e0d4c11",
            "spec": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "numWorkers": 4,
                     "compute": {"gpuDevicesRequest": 8, "cpuCoreRequest": 1},
                     "environmentVariables": [{"name": "TOKEN", "value": "abc"}]},
            "masterSpecSameAsWorker": True,
        },
        desired_phase="Stopped",
        lifecycle=Lifecycle(prevent_destroy=True, ignore_changes=("spec.numWorkers",),
                            sensitive=("spec.environmentVariables[TOKEN].value",)),
        source=str(specdir.root / "bert.yaml"), line=1)
    # numbers stay as written: an int given for a double field is not turned into a float
    assert type(w.body["spec"]["compute"]["cpuCoreRequest"]) is int
    assert w.address == "DistributedTraining/7/bert-ddp"


def test_defaults_are_not_added(specdir):
    specdir.write("a.yaml", f"""
        kind: DistributedInference
        name: serve
        projectId: "12"
        clusterId: {CLUSTER}
        spec:
          leader: {{image: vllm/vllm-openai:v0.6.3}}
        """)
    [w] = load_specs(specdir.root)
    assert w.body == {"name": "serve", "projectId": "12", "clusterId": CLUSTER,
                      "spec": {"leader": {"image": "vllm/vllm-openai:v0.6.3"}}}
    assert w.desired_phase == "Running" and w.lifecycle == Lifecycle()


def test_multi_document_yaml_and_json_files_in_nested_folders(specdir):
    doc = {"kind": "DistributedInference", "projectId": "7", "clusterId": CLUSTER,
           "spec": {"replicas": 2, "leader": {"image": "vllm/vllm-openai:v0.6.3"}}}
    specdir.write("b/serve.json", json.dumps({**doc, "name": "json-one"}, indent=2))
    specdir.write("b/list.json", json.dumps([{**doc, "name": "json-two"}, {**doc, "name": "json-three"}]))
    specdir.write("a/many.yml", f"""
        ---
        # an empty document is skipped
        ---
        kind: DistributedTraining
        name: first
        projectId: "7"
        clusterId: {CLUSTER}
        spec: {{image: x}}
        ---
        kind: DistributedTraining
        name: second
        projectId: "7"
        clusterId: {CLUSTER}
        spec: {{image: y}}
        ...
        """)
    specdir.write("a/notes.txt", "not a spec")
    specdir.write(".hidden/skip.yaml", "kind: nonsense")
    specdir.write("a/.swap.yaml", "kind: nonsense")
    loaded = load_specs(specdir.root)
    assert [w.name for w in loaded] == ["first", "second", "json-two", "json-three", "json-one"]
    assert loaded[1].line == 10
    assert loaded[4].body["spec"] == doc["spec"]


def test_json_problems_name_the_line(specdir):
    specdir.write("serve.json", json.dumps(
        {"kind": "DistributedInference", "name": "x", "projectId": "7", "clusterId": CLUSTER,
         "spec": {"replicas": -1, "leader": {"image": "x", "imagePullPolcy": "Always"}}}, indent=2))
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    where = specdir.root / "serve.json"
    assert exc.value.problems == [
        f"{where}:7: spec.replicas: must be >= 0, got -1",
        f"{where}:10: spec.leader.imagePullPolcy: unknown field (did you mean 'imagePullPolicy'?)",
    ]


@pytest.mark.parametrize("text,line,words", [
    ('{"kind": "DistributedTraining",\n "name": }', 2, "invalid JSON"),
    ('{"kind": "DistributedTraining",\n "kind": "b"}', 2, "kind: duplicate key"),
    ('"just text"', 1, "must be a mapping, not the text"),
    ('{"spec": NaN}', None, "NaN is not valid JSON"),
])
def test_bad_json(specdir, text, line, words):
    specdir.write("x.json", text)
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    problem = exc.value.problems[0]
    where = str(specdir.root / "x.json") + (f":{line}" if line else "")
    assert problem.startswith(where + ": ") and words in problem


@pytest.mark.parametrize("text,line,words", [
    ("kind: DistributedTraining\nname: [oops\n", 3, "invalid YAML"),
    ("kind: DistributedTraining\n  name: x\n", 2, "invalid YAML"),
    ("kind: DistributedTraining\nname:\tx: y\n", 2, "invalid YAML"),
    ("- a\n- b\n", 1, "a spec document must be a mapping, not a list"),
    ("? [a, b]\n: c\n", 1, "a key must be a plain string"),
    ("a: &x [*x]\n", 1, "too large"),
])
def test_bad_yaml(specdir, text, line, words):
    specdir.write("x.yaml", text)
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    [problem] = exc.value.problems
    assert problem.startswith(f"{specdir.root / 'x.yaml'}:{line}: "), problem
    assert words in problem


def test_every_problem_in_every_file_at_once(specdir):
    specdir.write("a.yaml", f"""
        kind: DistributedTraining
        name: Bad_Name
        projectId: "7"
        clusterId: {CLUSTER}
        spec:
          image: x
          numWorkers: 0
          imagePullPolcy: Always
        ---
        kind: Distributed
        """)
    specdir.write("b/c.yaml", "kind: [\n")
    specdir.write("d.json", "{")
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    a, c, d = (str(specdir.root / p) for p in ("a.yaml", "b/c.yaml", "d.json"))
    problems = exc.value.problems
    assert [p.split(": ")[0] for p in problems] == [
        f"{a}:2", f"{a}:7", f"{a}:8", f"{a}:10", f"{c}:2", f"{d}:1"]
    assert "unknown kind \"Distributed\"" in problems[3]
    assert str(exc.value) == "\n".join(problems)


def test_duplicate_addresses_name_both_files(specdir):
    doc = textwrap.dedent(f"""\
        kind: DistributedTraining
        name: bert-ddp
        projectId: "7"
        clusterId: {CLUSTER}
        spec: {{image: x}}
        """)
    specdir.write("a.yaml", doc)
    specdir.write("sub/b.yaml", "# the same workload again\n" + doc.replace('"7"', "7"))
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    assert exc.value.problems == [
        f"{specdir.root / 'sub/b.yaml'}:2: duplicate address DistributedTraining/7/bert-ddp: "
        f"already defined at {specdir.root / 'a.yaml'}:1"]


def test_same_name_in_another_project_is_fine(specdir):
    specdir.write("a.yaml", f"""
        kind: DistributedTraining
        name: x
        projectId: "7"
        clusterId: {CLUSTER}
        spec: {{image: x}}
        ---
        kind: DistributedTraining
        name: x
        projectId: "8"
        clusterId: {CLUSTER}
        spec: {{image: x}}
        """)
    assert len(load_specs(specdir.root)) == 2


def test_a_name_used_by_two_kinds_in_one_project_names_both_files(specdir):
    specdir.write("a.yaml", f"""
        kind: Training
        name: x
        projectId: "7"
        clusterId: {CLUSTER}
        spec: {{image: x}}
        """)
    specdir.write("b/c.yaml", f"""
        kind: Workspace
        name: x
        projectId: 7
        clusterId: {CLUSTER}
        spec: {{image: x}}
        ---
        kind: Workspace
        name: x
        project: team-a
        clusterId: {CLUSTER}
        spec: {{image: x}}
        """)
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    assert exc.value.problems == [
        f"{specdir.root / 'b/c.yaml'}:1: name 'x' is already used in this project by "
        f"Training/7/x at {specdir.root / 'a.yaml'}:1 (names are unique per project across "
        "kinds)"]


@pytest.mark.parametrize("written", ['"07"', '"007"', '"00"'])
def test_a_project_id_with_a_leading_zero_is_refused(specdir, written):
    specdir.write("a.yaml", f"""
        kind: Training
        name: x
        projectId: {written}
        clusterId: {CLUSTER}
        spec: {{image: x}}
        """)
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    bare = written.strip('"').lstrip("0") or "0"
    assert exc.value.problems == [
        f"{specdir.root / 'a.yaml'}:3: projectId: must not have a leading zero (another "
        f"address for project {bare}): write '{bare}'"]


def test_files_are_named_by_the_path_the_user_gave(specdir, monkeypatch):
    specdir.write("t/x.yaml", "kind: Nope\n")
    monkeypatch.chdir(specdir.root.parent)
    with pytest.raises(SpecError) as exc:
        load_specs("specs/")
    assert exc.value.problems[0].startswith(os.path.join("specs", "t", "x.yaml") + ":1: kind: ")


def test_missing_directory_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError) as exc:
        load_specs(tmp_path / "nope")
    assert exc.value.problems == [f"{tmp_path / 'nope'}: no such directory"]


def test_unreadable_file_is_a_spec_error(specdir):
    (specdir.root / "gone.yaml").symlink_to(specdir.root / "missing-target.yaml")
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    assert exc.value.problems[0].startswith(f"{specdir.root / 'gone.yaml'}: cannot read")


def test_binary_file_is_a_spec_error(specdir):
    (specdir.root / "x.yaml").write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(SpecError) as exc:
        load_specs(specdir.root)
    assert "is not UTF-8" in exc.value.problems[0] or "invalid YAML" in exc.value.problems[0]


def test_empty_directory_gives_no_workloads(specdir):
    specdir.write("empty.yaml", "# nothing yet\n")
    assert load_specs(specdir.root) == []


def test_a_single_file_can_be_loaded(specdir):
    path = specdir.write("one.yaml", f"kind: DistributedTraining\nname: a\nprojectId: '1'\n"
                                     f"clusterId: {CLUSTER}\nspec: {{image: x}}\n")
    [w] = load_specs(path)
    assert w.source == str(path)


def test_the_example_specs_load():
    loaded = {w.address: w for w in load_specs(ROOT / "specs")}
    assert set(loaded) >= {"DistributedTraining/7/bert-ddp", "DistributedTraining/7/resnet-mpi",
                           "DistributedInference/7/llama-70b-serve", "Training/7/llama-8b-lora",
                           "Workspace/7/jupyter-research", "Inference/7/mistral-7b-chat"}
    units = {a for a in loaded if a.split("/")[1] in (SIM_CLUSTER, "project:team-nlp")}
    assert units == {f"Department/{SIM_CLUSTER}/research", f"Project/{SIM_CLUSTER}/team-nlp",
                     f"Project/{SIM_CLUSTER}/team-vision",
                     f"AccessRule/{SIM_CLUSTER}/nlp-researchers",
                     "Policy/project:team-nlp/training"}
    for w in loaded.values():
        kept_stopped = w.address == "Workspace/7/jupyter-research"
        assert w.cluster_id == (SIM_CLUSTER if w.address in units else CLUSTER), w.address
        assert w.desired_phase == ("Stopped" if kept_stopped else "Running")
        # A unit is protected unless its spec opts out; the examples' workloads are not.
        assert w.lifecycle.prevent_destroy is w.address.startswith(("Department", "Project"))
        assert not {"kind", "desiredPhase", "lifecycle"} & set(w.body)
    assert "masterSpec" in loaded["DistributedTraining/7/resnet-mpi"].body
    serve = loaded["DistributedInference/7/llama-70b-serve"].body["spec"]
    assert serve["leader"]["image"].startswith("vllm/vllm-openai:") and serve["workers"] >= 1
