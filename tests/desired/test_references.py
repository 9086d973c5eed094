"""`${env:NAME}` and `${file:PATH}` spec values: resolved when a command runs, sensitive
wherever they are, never written into the spec cache; one error per reference that does
not resolve, naming the file, line and field, and nothing sent."""

from __future__ import annotations

import json
import os
import pathlib

import pytest
from click.testing import CliRunner

from reconciler.cli import main
from tests.helpers.constants import CLUSTER

ENV_SECRET = "env-s3cret-value"
FILE_SECRET = "file-s3cret-value"


def spec(secret_file: pathlib.Path) -> str:
    return f"""kind: Training
name: t1
projectId: "1"
clusterId: {CLUSTER}
spec:
  image: busybox
  args: "${{file:{secret_file}}}"
  environmentVariables:
    - name: HF
      value: "${{env:MY_SECRET}}"
    - name: LITERAL
      value: "$${{env:NOT_A_REFERENCE}}"
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "specs").mkdir()
    secret_file = tmp_path / "secret.txt"
    (tmp_path / "specs" / "t.yaml").write_text(spec(secret_file))
    return tmp_path


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, ["--sim", *args], env=env)


def test_an_unset_variable_and_a_missing_file_are_one_error_each_and_nothing_is_sent(folder):
    res = run("apply", "--auto-approve", "specs", env={"MY_SECRET": None})
    assert res.exit_code == 1
    lines = [line for line in res.stderr.splitlines() if line.startswith("specs/t.yaml")]
    assert lines == [
        f"specs/t.yaml:7: spec.args: ${{file:{folder / 'secret.txt'}}}: cannot read "
        f"{folder / 'secret.txt'}: No such file or directory",
        "specs/t.yaml:10: spec.environmentVariables[HF].value: ${env:MY_SECRET}: the "
        "environment variable MY_SECRET is not set"], res.stderr
    assert "Traceback" not in res.output
    assert not (folder / "state" / "state.json").exists()


def test_references_are_sent_resolved_and_shown_masked(folder):
    (folder / "secret.txt").write_text(FILE_SECRET + "\n")
    res = run("apply", "--auto-approve", "specs", env={"MY_SECRET": ENV_SECRET})
    assert res.exit_code == 0, res.output
    assert ENV_SECRET not in res.output and FILE_SECRET not in res.output
    state = (folder / "state" / "state.json").read_text()
    assert ENV_SECRET not in state and FILE_SECRET not in state and "hmac-sha256:" in state
    # What the control plane received is the values themselves (the simulator's data).
    sim = json.dumps([json.loads(p.read_text()) for p in (folder / ".runai-sim").rglob("*.json")])
    assert ENV_SECRET in sim and FILE_SECRET in sim and "${env:NOT_A_REFERENCE}" in sim
    # The same values plan no change; a changed one plans an update of that field.
    again = run("plan", "--detailed-exitcode", "specs", env={"MY_SECRET": ENV_SECRET})
    assert again.exit_code == 0, again.output
    changed = run("plan", "--detailed-exitcode", "specs", env={"MY_SECRET": ENV_SECRET + "2"})
    assert changed.exit_code == 2, changed.output
    assert "spec.environmentVariables[HF]" in changed.stdout and "spec.args" not in changed.stdout
    assert ENV_SECRET not in changed.output


def test_the_spec_cache_keeps_the_reference_not_the_value(folder):
    (folder / "secret.txt").write_text(FILE_SECRET)
    assert run("plan", "specs", env={"MY_SECRET": ENV_SECRET}).exit_code == 0
    cache = pathlib.Path(os.environ["XDG_CACHE_HOME"]) / "runai-reconcile"
    files = [p for p in cache.rglob("*") if p.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        assert ENV_SECRET.encode() not in data and FILE_SECRET.encode() not in data
    # A second run, served by the cache, resolves the references again.
    res = run("plan", "specs", env={"MY_SECRET": None})
    assert res.exit_code == 1 and "MY_SECRET is not set" in res.stderr
