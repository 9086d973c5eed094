"""The GitHub Action (action.yml) and the workflows under docs/ci/ pass GitHub's own schemas
(check-jsonschema's vendored ones) and actionlint; the action installs runai-reconcile from
its own checkout, and the pull request's workflow uploads no saved plan."""

from __future__ import annotations

import pathlib
import subprocess

import yaml

from tests.helpers.validators import tool

ROOT = pathlib.Path(__file__).resolve().parents[2]
ACTION = ROOT / "action.yml"
WORKFLOWS = sorted((ROOT / "docs" / "ci").glob("github-*.yml"))


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_the_action_passes_github_s_action_schema():
    done = _run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-actions", str(ACTION))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_workflows_pass_github_s_workflow_schema():
    assert len(WORKFLOWS) == 3
    done = _run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows",
                *map(str, WORKFLOWS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_workflows_pass_actionlint():
    done = _run(tool("actionlint"), "-shellcheck=", "-pyflakes=", "-no-color",
                *map(str, WORKFLOWS))
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_action_installs_from_its_own_checkout_with_the_postgres_extra():
    action = yaml.safe_load(ACTION.read_text())
    assert action["runs"]["using"] == "composite"
    assert action["inputs"]["extras"]["default"] == "postgres"
    scripts = [s["run"] for s in action["runs"]["steps"] if "run" in s]
    [install] = [s for s in scripts if "pip install" in s]
    assert '"$GITHUB_ACTION_PATH"' in install or '"$target"' in install
    assert 'target="$GITHUB_ACTION_PATH"' in install  # never a name on a package index
    # the locked dependencies (hashes checked) before the package
    locked = install.index('--require-hashes')
    assert 'requirements/runtime.txt' in install and locked < install.index('"$target"')
    [step] = [s for s in action["runs"]["steps"] if "pip install" in s.get("run", "")]
    assert step["env"]["SETUPTOOLS_SCM_PRETEND_VERSION"] == "${{ inputs.version }}"


def test_the_pull_request_uploads_renderings_not_the_saved_plan():
    plan = yaml.safe_load((ROOT / "docs" / "ci" / "github-plan.yml").read_text())
    steps = plan["jobs"]["plan"]["steps"]
    [upload] = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload["with"]["path"].split() == ["plan.md", "reviewed-plan.json"]
    script = next(s["run"] for s in steps if "--out plan.json" in s.get("run", ""))
    assert "rm plan.json" in script


def test_every_workflow_keeps_the_spec_cache_between_runs_before_it_plans():
    """A runner starts cold: each workflow restores runai-reconcile's spec cache, keyed by
    the specs' content, before its first runai-reconcile command that reads the specs."""
    for path in WORKFLOWS:
        steps = [s for job in yaml.safe_load(path.read_text())["jobs"].values()
                 for s in job["steps"]]
        cache = [i for i, s in enumerate(steps) if str(s.get("uses", "")).startswith("actions/cache@")]
        reads = [i for i, s in enumerate(steps)
                 if any(f"runai-reconcile{w}" in str(s.get("run", ""))
                        for w in (" validate", " --no-color plan", " --no-color drift",
                                  " plan", " drift"))]
        assert cache and reads and cache[0] < reads[0], path.name
        spec = steps[cache[0]]["with"]
        assert spec["path"] == "~/.cache/runai-reconcile", path.name
        assert "hashFiles('specs/**')" in spec["key"], path.name
