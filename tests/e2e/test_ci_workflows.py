"""The GitHub workflows' own shell steps (docs/ci/github-plan.yml, then github-apply.yml),
run with bash as a runner would, against `sim serve`: the pull request's artifact holds no
sensitive value of the specs, and merging applies the reviewed plan, or stops before any
write when the plan at the merged commit is not the reviewed one."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.helpers.constants import CLIENT_ID, CLIENT_SECRET
from tests.helpers.specs import TRAINING

pytestmark = pytest.mark.http

CI = pathlib.Path(__file__).resolve().parents[2] / "docs" / "ci"
SECRET = "wandb-0123456789"  # TRAINING's WANDB_API_KEY: a sensitive value
assert SECRET in TRAINING


def _steps(workflow: str) -> list[dict]:
    doc = yaml.safe_load((CI / workflow).read_text())
    [job] = doc["jobs"].values()
    return job["steps"]


def _run_steps(steps: list[dict], cwd: pathlib.Path, env: dict) -> subprocess.CompletedProcess:
    """Each `run:` step in turn, with bash -e as GitHub's runner runs them; stops at the
    first that fails."""
    for step in steps:
        if "run" not in step:
            continue
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", step["run"]], cwd=cwd,
                              env=env, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            return done
    return done


@pytest.fixture
def runner_env(sim_server, tmp_path) -> dict:
    if not shutil.which("jq"):
        pytest.skip("jq is not installed (GitHub's runners have it)")
    bin_dir = str(pathlib.Path(sys.executable).parent)  # runai-reconcile, as the action installs it
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")}
    env.update(PATH=bin_dir + os.pathsep + env.get("PATH", ""), NO_COLOR="1",
               RUNAI_URL=sim_server.url, RUNAI_CLIENT_ID=CLIENT_ID,
               RUNAI_CLIENT_SECRET=CLIENT_SECRET,
               RUNAI_RECONCILE_STATE=str(tmp_path / "state.json"),
               GITHUB_OUTPUT=str(tmp_path / "github-output"))
    return env


def _checkout(root: pathlib.Path, training: str) -> pathlib.Path:
    (root / "specs").mkdir(parents=True)
    (root / "specs" / "train.yaml").write_text(training)
    return root


def _pull_request(tmp_path, env, training=TRAINING) -> list[pathlib.Path]:
    """The plan workflow's steps in a checkout of the pull request; the artifact's files."""
    pr = _checkout(tmp_path / "pr", training)
    steps = _steps("github-plan.yml")
    done = _run_steps(steps, pr, env)
    assert done.returncode == 0, done.stderr
    [upload] = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    return [pr / name for name in upload["with"]["path"].split()]


def _merge(tmp_path, env, artifact, training=TRAINING) -> subprocess.CompletedProcess:
    """The apply workflow's steps in a checkout of the merged commit, the artifact downloaded."""
    merged = _checkout(tmp_path / "merged", training)
    for f in artifact:
        shutil.copy(f, merged / f.name)
    return _run_steps(_steps("github-apply.yml"), merged, env)


def test_the_artifact_holds_no_sensitive_value_and_merging_applies_the_reviewed_plan(
        sim_server, runner_env, tmp_path):
    artifact = _pull_request(tmp_path, runner_env)
    assert [f.name for f in artifact] == ["plan.md", "reviewed-plan.json"]
    for f in artifact:
        assert f.exists() and SECRET not in f.read_text(), f.name
    assert not (tmp_path / "pr" / "plan.json").exists()  # the saved plan stays in the job
    done = _merge(tmp_path, runner_env, artifact)
    assert done.returncode == 0, done.stderr
    assert [w["name"] for w in sim_server.live()] == ["bert-ddp"]


def test_a_merged_commit_whose_plan_is_not_the_reviewed_one_is_not_applied(
        sim_server, runner_env, tmp_path):
    artifact = _pull_request(tmp_path, runner_env)
    changed = TRAINING.replace("numWorkers: 2", "numWorkers: 3")
    done = _merge(tmp_path, runner_env, artifact, training=changed)
    assert done.returncode == 1
    assert "not the one reviewed" in done.stdout
    assert sim_server.live() == []
