"""The CI recipes under docs/ci/ parse, and every `runai-reconcile ...` line in them parses
with the CLI as it exists (an option that does not exist, or a bad value, fails here)."""

from __future__ import annotations

import pathlib
import re
import shlex

import click
import pytest
import yaml

from reconciler.cli import main

CI = pathlib.Path(__file__).resolve().parents[2] / "docs" / "ci"
RECIPES = sorted(CI.glob("*.y*ml"))
_SHELL_STOP = {">", ">>", "2>", "|", "||", "&&", ";", "2>&1"}


def _run_scripts(node):
    """The shell scripts of workflow steps (`run:` values)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == "run" and isinstance(v, str):
                yield v
            else:
                yield from _run_scripts(v)
    elif isinstance(node, list):
        for item in node:
            yield from _run_scripts(item)


def _command_lines(doc) -> list[list[str]]:
    """Argument lists of `runai-reconcile` in shell steps, and in container command+args."""
    found = []
    for text in _run_scripts(doc):
        text = text.replace("\\\n", " ")
        for line in text.splitlines():
            line = line.strip()
            if not line.startswith("runai-reconcile "):
                continue
            words = []
            for w in shlex.split(line)[1:]:
                if w in _SHELL_STOP or re.match(r"^\d?>", w):
                    break
                words.append(w)
            found.append(words)
    for container in _containers(doc):
        # the image's ENTRYPOINT is runai-reconcile (Containerfile): its args are the command
        if container.get("command") == ["runai-reconcile"] or (
                "/runai-reconcile:" in container.get("image", "") and "command" not in container):
            found.append(list(container.get("args", [])))
    return found


def _containers(node):
    if isinstance(node, dict):
        for key in ("containers", "initContainers"):
            for c in node.get(key) or []:
                yield c
        for v in node.values():
            yield from _containers(v)
    elif isinstance(node, list):
        for v in node:
            yield from _containers(v)


def _parse(args: list[str]) -> list[str]:
    """Parse `args` down to the leaf command; return the command path. Raises UsageError."""
    cmd: click.Command = main
    ctx = cmd.make_context("runai-reconcile", list(args))
    path = []
    while isinstance(cmd, click.Group):
        rest = [*ctx._protected_args, *ctx.args]
        name, sub, rest = cmd.resolve_command(ctx, rest)
        path.append(name)
        cmd = sub
        ctx = sub.make_context(name, rest, parent=ctx)
    return path


def test_there_are_the_four_recipes():
    assert {p.name for p in RECIPES} == {"github-plan.yml", "github-apply.yml",
                                         "github-drift.yml", "k8s-drift-cronjob.yaml"}


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_recipe_parses_and_its_commands_exist(recipe):
    docs = list(yaml.safe_load_all(recipe.read_text()))
    assert docs and all(isinstance(d, dict) for d in docs)
    lines = [args for d in docs for args in _command_lines(d)]
    assert lines, f"{recipe.name} runs no runai-reconcile command"
    for args in lines:
        _parse(args)


def test_recipes_use_what_the_issue_asks():
    text = {p.name: p.read_text() for p in RECIPES}
    plan = yaml.safe_load(text["github-plan.yml"])
    assert "pull_request" in plan[True]  # YAML 1.1 reads `on:` as true
    assert "--out plan.json --format markdown" in text["github-plan.yml"]
    assert "upload-artifact" in text["github-plan.yml"] and "updateComment" in text["github-plan.yml"]
    assert "runai-reconcile --no-color --lock-timeout 900 apply plan.json" in text["github-apply.yml"]
    drift = yaml.safe_load(text["github-drift.yml"])
    assert "schedule" in drift[True]
    assert "--detailed-exitcode" in text["github-drift.yml"] and "GITHUB_STEP_SUMMARY" in text["github-drift.yml"]
    kinds = [d["kind"] for d in yaml.safe_load_all(text["k8s-drift-cronjob.yaml"])]
    assert "CronJob" in kinds


def test_the_checker_rejects_what_does_not_exist():
    with pytest.raises(click.UsageError):
        _parse(["plan", "specs", "--no-such-flag"])
    with pytest.raises(click.BadParameter):
        _parse(["drift", "specs", "--format", "html"])
    with pytest.raises(click.UsageError):
        _parse(["frobnicate"])
    assert _parse(["state", "rm", "DistributedTraining/7/x"]) == ["state", "rm"]


def _version() -> str:
    """The newest release: the first versioned heading of CHANGELOG.md (Keep a Changelog),
    the version its git tag gives the package."""
    import re
    text = (CI.parents[1] / "CHANGELOG.md").read_text(encoding="utf-8")
    return re.search(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", text, re.M).group(1)


@pytest.mark.parametrize("recipe", [p for p in RECIPES if p.name.startswith("github-")],
                         ids=lambda p: p.name)
def test_workflows_install_through_this_repository_s_action_at_the_release_tag(recipe):
    """The workflows run in the workloads' repository: installing `.` would install that
    (or fail), and no package index carries runai-reconcile; they use this repository's
    action (action.yml), pinned at the release this project is at."""
    doc = yaml.safe_load(recipe.read_text())
    installs = [line for script in _run_scripts(doc) for line in script.splitlines()
                if "pip install" in line]
    assert installs == []
    steps = [s for job in doc["jobs"].values() for s in job["steps"]]
    ours = [s for s in steps if s.get("uses", "").split("@")[0].endswith("/runai-reconcile")]
    assert [s["uses"].split("@")[1] for s in ours] == [f"v{_version()}"]
    assert ours[0]["with"]["version"] == _version()
    assert steps.index(ours[0]) < min(i for i, s in enumerate(steps)
                                      if "runai-reconcile " in s.get("run", ""))


def test_the_cronjob_image_is_the_release_the_containerfile_builds():
    docs = list(yaml.safe_load_all((CI / "k8s-drift-cronjob.yaml").read_text()))
    [cron] = [d for d in docs if d["kind"] == "CronJob"]
    [drift] = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    assert drift["image"].endswith(f"/runai-reconcile:{_version()}")
    assert "-f Containerfile ." in (CI / "k8s-drift-cronjob.yaml").read_text()
