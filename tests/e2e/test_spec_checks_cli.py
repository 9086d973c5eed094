"""Folder defaults and the spec checks, through the CLI as a user runs
it (`validate`, and `plan`/`apply` on `--sim`): exit codes, messages naming the file the
bad value came from, warnings on stderr that leave `--format json` alone, secrets never
shown."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.helpers.cli import invoke
from tests.helpers.constants import CLUSTER

SECRET = "hunter2-in-defaults"


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    """The CLI in this process: stdout and stderr apart, an exception let out fails here."""
    return invoke(cwd, *args)


def write(root: Path, rel: str, text: str) -> None:
    path = root / "specs" / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))


def folder_with_defaults(root: Path) -> None:
    write(root, "_defaults.yaml", f"""
        clusterId: {CLUSTER}
        projectId: "7"
        spec:
          labels: [{{name: team, value: a}}]
          environmentVariables:
            - {{name: DB_PASSWORD, value: {SECRET}}}
            - {{name: LOG, value: info}}
        """)
    write(root, "team/_defaults.yaml", """
        spec:
          createHomeDir: yes
          environmentVariables: [{name: LOG, value: debug}]
        """)
    write(root, "team/t.yaml", "kind: Training\nname: t\nspec: {image: 'x:1'}\n")
    write(root, "team/u.yaml", "kind: Training\nname: u\nspec: {image: 'x:1'}\n")
    write(root, "w.yaml", "kind: Workspace\nname: w\nspec:\n  image: 'x:1'\n  labels: "
                          "[{name: team, value: b}]\n")


def test_plan_and_apply_with_folder_defaults(tmp_path):
    folder_with_defaults(tmp_path)
    warning = (f"Warning: {os.path.join('specs', 'team', '_defaults.yaml')}:2: "
               "spec.createHomeDir: yes is read as true here but as text by YAML 1.2 and "
               "most tools: write true")
    res = run(tmp_path, "validate")
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [warning]
    plan = run(tmp_path, "--sim", "plan", "--format", "json")
    assert plan.returncode == 0, plan.stderr
    assert plan.stderr.splitlines() == [warning]  # once, though two specs take it
    doc = json.loads(plan.stdout)  # stdout holds the plan alone
    after = {c["address"]: c["change"]["after"] for c in doc["resource_changes"]}
    assert sorted(after) == ["Training/7/t", "Training/7/u", "Workspace/7/w"]
    assert after["Training/7/t"]["spec"] == {
        "image": "x:1", "createHomeDir": True, "labels": [{"name": "team", "value": "a"}],
        "environmentVariables": [{"name": "DB_PASSWORD", "value": "(sensitive)"},
                                 {"name": "LOG", "value": "debug"}]}
    assert after["Workspace/7/w"]["spec"]["labels"] == [{"name": "team", "value": "b"}]
    text = run(tmp_path, "--sim", "plan")
    assert "(sensitive)" in text.stdout
    for out in (res, plan, text):
        assert SECRET not in out.stdout + out.stderr
    applied = run(tmp_path, "--sim", "apply", "--auto-approve")
    assert applied.returncode == 0, applied.stderr
    again = run(tmp_path, "--sim", "plan", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
    # the state keeps the keyed hash of the value the API was sent (as for a spec's own)
    state = json.loads((tmp_path / "state" / "state.json").read_text())
    assert SECRET not in json.dumps(state) and "hmac-sha256:" in json.dumps(state)


def test_a_bad_default_is_named_with_its_file_line_and_field(tmp_path):
    folder_with_defaults(tmp_path)
    write(tmp_path, "team/_defaults.yaml", f"""
        spec:
          environmentVariables:
            - {{name: API_TOKEN, value: 12:30}}
          nodeType: 0x1F
        """)
    for args in (("validate",), ("--sim", "plan", "--format", "json")):
        res = run(tmp_path, *args)
        assert res.returncode == 1
        assert res.stdout == "" and "Traceback" not in res.stderr
        where = os.path.join("specs", "team", "_defaults.yaml")
        t_yaml = os.path.join("specs", "team", "t.yaml")
        u_yaml = os.path.join("specs", "team", "u.yaml")
        *problems, last = res.stderr.splitlines()
        assert problems == [
            f"{where}:3: spec.environmentVariables[0].value: must be a string, got (sensitive) "
            f"(a default for {t_yaml}, {u_yaml})",
            f'{where}:4: spec.nodeType: must be a string, got 0x1F (YAML reads it as 31; quote '
            f'it: "0x1F") (a default for {t_yaml}, {u_yaml})']
        assert last.startswith("Error: 2 problems in the specs")


def test_a_default_item_without_its_key_is_reported_not_dropped(tmp_path):
    # An item without a name made the keyed merge give up: the spec's own list replaced
    # the defaults' whole, so HF_HOME was lost and the broken item never reported.
    defaults = f"""
        clusterId: {CLUSTER}
        projectId: "7"
        spec:
          environmentVariables:
            - {{name: HF_HOME, value: /cache}}
        """
    write(tmp_path, "team/_defaults.yaml", defaults + '    - {value: "2"}\n')
    write(tmp_path, "team/t.yaml", """
        kind: Training
        name: t
        spec:
          image: python:3.12
          environmentVariables: [{name: LOG, value: info}]
        """)
    res = run(tmp_path, "validate")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    where = os.path.join("specs", "team", "_defaults.yaml")
    *problems, last = res.stderr.splitlines()
    assert problems == [f"{where}:6: spec.environmentVariables[1].name: required field is "
                        f"missing (a default for {os.path.join('specs', 'team', 't.yaml')})"]
    write(tmp_path, "team/_defaults.yaml", defaults)
    res = run(tmp_path, "--sim", "plan", "--format", "json")
    assert res.returncode == 0, res.stderr
    (change,) = json.loads(res.stdout)["resource_changes"]
    assert change["change"]["after"]["spec"]["environmentVariables"] == [
        {"name": "HF_HOME", "value": "/cache"}, {"name": "LOG", "value": "info"}]


@pytest.mark.parametrize(("files", "expected"), [
    ({"a.yaml": "kind: Training\nname: t\nprojectId: '7'\nclusterId: C\nspec:\n  image: x\n"
                "  workingDir: 12:30\n"},
     ['{a}:7: spec.workingDir: must be a string, got 12:30 (YAML reads it as 750; quote it: '
      '"12:30")']),
    ({"a.yaml": "kind: Training\nname: t\nprojectId: '07'\nclusterId: C\nspec: {image: x}\n"},
     ["{a}:3: projectId: must not have a leading zero (another address for project 7): "
      "write '7'"]),
    ({"a.yaml": "kind: Training\nname: t\nprojectId: '7'\nclusterId: C\nspec:\n  image: x\n"
                "  backoffLimit: 010\n"},
     ["{a}:7: spec.backoffLimit: 010 is an octal number in YAML 1.1 (8) but a decimal one in "
      "YAML 1.2 (10): write the number meant without a leading zero"]),
    ({"a.yaml": "kind: Training\nname: t\nprojectId: '7'\nclusterId: C\nspec: {image: x}\n",
      "b/c.yaml": "kind: Workspace\nname: t\nprojectId: 7\nclusterId: C\nspec: {image: x}\n"},
     ["{b/c}:1: name 't' is already used in this project by Training/7/t at {a}:1 (names "
      "are unique per project across kinds)"]),
])
def test_spec_checks_through_validate(tmp_path, files, expected):
    for rel, text in files.items():
        write(tmp_path, rel, text.replace("clusterId: C", f"clusterId: {CLUSTER}"))
    res = run(tmp_path, "validate")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    names = {"a": os.path.join("specs", "a.yaml"), "b/c": os.path.join("specs", "b", "c.yaml")}
    *problems, last = res.stderr.splitlines()
    assert problems == [e.format(**names) for e in expected]
    assert last.startswith(f"Error: {len(expected)} problem")
