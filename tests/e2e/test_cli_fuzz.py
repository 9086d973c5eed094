"""Beyond the known bad inputs: whatever the flags, the environment and the
files in the folder, the CLI ends with exit 0, 1 or 2 and prints no traceback. The global
flags go before the command or, as a Terraform user types them, after it."""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

from click.testing import CliRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reconciler.cli import main

ROOT = Path(__file__).resolve().parents[2]

COMMANDS = [["validate"], ["plan"], ["plan", "--format", "json"], ["plan", "--out", "p.json"],
            ["apply", "--auto-approve"], ["apply", "p.json"], ["show", "p.json"], ["drift"],
            ["state", "list"], ["state", "show"], ["force-unlock", "x"], ["sim", "--help"]]
FLAGS = [[], ["--sim"], ["--url", "http://h:99999"], ["--url", "http://[::1"], ["--url", "x"],
         ["--state", "st.json"], ["--state", "postgresql://"], ["--parallelism", "0"],
         ["--lock-timeout", "-1"], ["-v"], ["--no-color"], ["--bogus"], ["--state-name", "x"],
         ["--insecure"], ["--parallelism", "3"]]
ENV = st.fixed_dictionaries({}, optional={
    "RUNAI_URL": st.sampled_from(["http://", "https://:0", "ftp://x", ""]),
    "RUNAI_TOKEN": st.sampled_from(["t", ""]),
    "RUNAI_CLIENT_ID": st.just("id"),
    "RUNAI_MAX_ATTEMPTS": st.sampled_from(["0", "nan", "x", "9" * 5000]),
    "RUNAI_RETRY_BUDGET": st.sampled_from(["inf", "-1", "1e999"]),
})
TEXT = st.one_of(
    st.text(max_size=200),
    st.sampled_from(["{", "[1]", "null", "9" * 5000, "kind: Training\nname: [x\n",
                     '{"format": "runai-reconcile-plan", "version": 1, "changes": null}',
                     "kind: Training\nname: t\nprojectId: 07\nspec: {image: 5}\n"]))
FILES = st.dictionaries(st.sampled_from(["specs/a.yaml", "specs/b.json", "p.json", "st.json",
                                         ".runai-sim/data.json", "specs/.h.yaml"]),
                        TEXT, max_size=4)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flags=st.lists(st.sampled_from(FLAGS), max_size=2), command=st.sampled_from(COMMANDS),
       env=ENV, files=FILES, with_examples=st.booleans(), late=st.booleans())
# What the search found once (a plan file, a state file with an integer too long for
# Python; a corrupt --sim data file): kept as examples so that each run tries them.
@example(flags=[], command=["apply", "p.json"], env={}, files={"p.json": "9" * 5000},
         with_examples=True, late=False)
@example(flags=[["--state", "st.json"]], command=["plan"], env={},
         files={"st.json": "9" * 5000}, with_examples=True, late=False)
@example(flags=[["--sim"]], command=["plan"], env={}, files={".runai-sim/data.json": ""},
         with_examples=False, late=False)
@example(flags=[["--sim"]], command=["plan"], env={},
         files={".runai-sim/data.json": "9" * 5000}, with_examples=False, late=False)
@example(flags=[["--state", "st.json"], ["--sim"]], command=["state", "list"], env={},
         files={"st.json": "9" * 5000}, with_examples=True, late=True)
@example(flags=[["--parallelism", "0"], ["--bogus"]], command=["plan", "--format", "json"],
         env={}, files={}, with_examples=False, late=True)
def test_no_input_gives_a_traceback(tmp_path_factory, flags, command, env, files,
                                    with_examples, late):
    cwd = tmp_path_factory.mktemp("fuzz")
    if with_examples:
        shutil.copytree(ROOT / "specs", cwd / "specs")
    for name, text in files.items():
        (cwd / name).parent.mkdir(parents=True, exist_ok=True)
        (cwd / name).write_text(text)
    given = [a for f in flags for a in f]
    args = command + given if late else given + command
    with contextlib.chdir(cwd):
        res = CliRunner().invoke(main, args, env={**_clean_env(), **env}, input="")
    _no_traceback(res, args, env, files)


def _clean_env() -> dict:
    return {k: None for k in os.environ if k.startswith("RUNAI_")}


def _no_traceback(res, *context) -> None:
    """Exit 0, 1 or 2, and no traceback nor Python's own advice in the output."""
    out = res.stdout + res.stderr
    assert res.exception is None or isinstance(res.exception, SystemExit), (
        *context, repr(res.exception))
    assert "Traceback" not in out, (*context, out)
    assert "set_int_max_str_digits" not in out, (*context, out)
    assert res.exit_code in (0, 1, 2), (*context, out)


# --- the later commands, flags and files ---------------------------------------------
# export with its filters, import with garbage addresses and ids, --policy files and
# _defaults.yaml files holding garbage; against the embedded simulator (--sim), so that
# the commands get as far as the API and the state.

GARBAGE = st.one_of(st.text(max_size=60), st.sampled_from(
    ["", "*", "[", "..", "../x", "/", "a/b", "\0", "9" * 5000, "Training", "Training/7/x",
     "training/7/x", "Training/07/x", "Training/7/", "Training//x", "Training/7/x/y",
     "DistributedTraining/7/bert-ddp", "Nope/7/x", "-x", "--all"]))
POLICY_TEXT = st.one_of(TEXT, st.sampled_from([
    "rules: 5", "rules: [5]", "rules:\n  - name: r\n", "rules:\n  - {name: r, maxGpusPerWorkload: nan}\n",
    "rules:\n  - {name: r, maxGpusPerWorkload: .inf}\n",
    "rules:\n  - {name: r, maxGpusPerWorkload: " + "9" * 5000 + "}\n",
    "rules:\n  - {name: r, maxDestructive: 1.5}\n", "rules:\n  - {name: r, allowedImages: []}\n",
    "rules:\n  - {name: r, maxGpusPerProject: {'*': -1}}\n",
    "rules:\n  - {name: r, withinProjectQuota: yes, match: {kinds: [Nope]}}\n",
    "rules:\n  - {name: r, forbidLatestTag: true}\n  - {name: r, forbidLatestTag: true}\n",
    "rules:\n  - {name: cap, maxGpusPerWorkload: 1}\n", "&a [*a]", "!!python/object:os.system {}"]))
DEFAULTS_TEXT = st.one_of(TEXT, st.sampled_from([
    "clusterId: 5", "projectId: 07", "kind: Training", "name: x", "spec: 5", "spec: [1]",
    "spec:\n  environmentVariables: 5\n", "spec:\n  environmentVariables: [{name: DB_PASSWORD}]\n",
    "spec:\n  environmentVariables: [{value: 1}]\n", "spec:\n  labels: [{name: a, value: 1}]\n",
    "lifecycle: {preventDestroy: maybe}", "project: ''", "spec:\n  nodePools: {a: 1}\n",
    "unknownField: 1", "- 1\n- 2\n", "---\na: 1\n---\nb: 2\n"]))
NEW_COMMANDS = st.one_of(
    st.tuples(st.just("export"), st.lists(st.sampled_from(
        [["--project", "7"], ["--project", "nope"], ["--project", ""], ["--project", "9" * 5000],
         ["--kind", "training"], ["--kind", "Nope"], ["--name", "["], ["--name", "*"],
         ["--name", "../*"], ["--out", "specs"], ["--out", "p.json"], ["--out", "/dev/null"],
         ["--force"], ["--include-secrets"], ["--defaults"], ["--format", "json"],
         ["--format", "yaml"]]), max_size=3)),
    st.tuples(st.just("import"), st.lists(GARBAGE, max_size=3).map(lambda a: [[x] for x in a])),
    st.tuples(st.just("import"), st.lists(st.sampled_from(
        [["--all"], ["--project", "7"], ["--project", "x"], ["--kind", "Training"],
         ["--kind", "x"], ["specs"], ["nowhere"]]), max_size=3)),
    st.tuples(st.sampled_from(["plan", "apply", "validate"]), st.lists(st.sampled_from(
        [["--policy", "pol.yaml"], ["--policy", "nowhere.yaml"], ["--policy", "specs"],
         ["--policy", ""], ["--auto-approve"], ["--format", "json"], ["--format", "markdown"],
         ["--out", "p.json"], ["--no-refresh"]]), max_size=3)),
    st.tuples(st.just("apply"), st.just([["p.json"], ["--policy", "pol.yaml"]])),
)
NEW_FILES = st.fixed_dictionaries({}, optional={
    "pol.yaml": POLICY_TEXT, "specs/_defaults.yaml": DEFAULTS_TEXT,
    "specs/team/_defaults.yaml": DEFAULTS_TEXT, "p.json": TEXT,
    "specs/team/t.yaml": st.just("kind: Training\nname: t\nspec: {image: busybox}\n")})
NEW_ENV = st.fixed_dictionaries({}, optional={
    "RUNAI_RECONCILE_POLICY": st.sampled_from(["pol.yaml", "", ":", "pol.yaml:nowhere", "/"])})


@settings(max_examples=80, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sim=st.booleans(), command=NEW_COMMANDS, env=NEW_ENV, files=NEW_FILES,
       with_examples=st.booleans(), applied=st.booleans(), sim_after=st.booleans())
# What the search found once (an empty WORKLOAD_ID reached the client: a ValueError).
@example(sim=True, command=("import", [["DistributedTraining/7/bert-ddp"], [""]]), env={},
         files={}, with_examples=False, applied=False, sim_after=False)
@example(sim=True, command=("import", [["Training/7/x"], ["9" * 5000]]), env={}, files={},
         with_examples=True, applied=False, sim_after=False)
@example(sim=True, command=("plan", [["--policy", "pol.yaml"]]), env={},
         files={"pol.yaml": "rules:\n  - {name: r, maxGpusPerWorkload: nan}\n"},
         with_examples=True, applied=False, sim_after=False)
def test_the_new_commands_give_no_traceback(tmp_path_factory, sim, command, env, files,
                                            with_examples, applied, sim_after):
    cwd = tmp_path_factory.mktemp("fuzz-new")
    if with_examples:
        shutil.copytree(ROOT / "specs", cwd / "specs")
    with contextlib.chdir(cwd):
        if applied and with_examples:  # live workloads to export and import, a state
            CliRunner().invoke(main, ["--sim", "apply", "--auto-approve"], env=_clean_env())
        for name, text in files.items():
            (cwd / name).parent.mkdir(parents=True, exist_ok=True)
            (cwd / name).write_text(text)
        name, flags = command
        if sim and sim_after:  # --sim after the command, among its own flags
            flags = [*flags[:len(flags) // 2], ["--sim"], *flags[len(flags) // 2:]]
        rest = [a for f in flags for a in f]
        args = (["--sim"] if sim and not sim_after else []) + [name] + rest
        res = CliRunner().invoke(main, args, env={**_clean_env(), **env}, input="")
    _no_traceback(res, args, env, files)
