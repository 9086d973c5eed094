"""The global options work after the command too, where a Terraform user
types them (`runai-reconcile plan --no-color`), as they do before it; given in both
places, the one after the command wins (docs/command-line.md). Through the CLI: click's
runner in process (`invoke` for -v's log, which it hands the root logger as a process has
it), a subprocess where the option acts on the process (colour on a terminal)."""

from __future__ import annotations

import os
import pty
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import main
from tests.helpers.cli import invoke

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A folder with the example specs and nothing else: `--sim` keeps its data here."""
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _env(**extra: str | None) -> dict[str, str | None]:
    return {**{k: None for k in os.environ if k.startswith("RUNAI_")}, "NO_COLOR": None,
            **extra}


def cli(*args: str, **env: str | None):
    return CliRunner().invoke(main, list(args), env=_env(**env))


# Each option, given before the command and after it: the same effect, one that its default
# would not have (so the option after the command is shown to be read, not ignored).
CASES = {
    "--sim": (["--sim"], ["plan", "--no-refresh"], "14 to create"),
    "--state": (["--state", "elsewhere.json"], ["state", "list"], "No state at elsewhere.json"),
    "--state-name": (["--state-name", "team-b"], ["state", "list"],
                     "Error: --state-name selects a state in a PostgreSQL --state"),
    "--url": (["--url", "http://127.0.0.1:9"], ["plan"], "cannot connect to 127.0.0.1:9"),
    "--parallelism": (["--parallelism", "0"], ["plan"],
                      "Invalid value for '--parallelism': 0 is not in the range"),
    "--lock-timeout": (["--lock-timeout", "-1"], ["drift"],
                       "Invalid value for '--lock-timeout'"),
    "--no-color": (["--no-color", "--sim"], ["validate"], "14 specs valid"),
    "--insecure": (["--insecure", "--sim"], ["plan", "--no-refresh"], "14 to create"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_global_option_after_the_command_does_what_it_does_before(folder, name):
    flags, command, expected = CASES[name]
    before = cli(*flags, *command, RUNAI_TOKEN="t")
    after = cli(*command, *flags, RUNAI_TOKEN="t")
    assert expected in before.output, before.output
    assert (after.exit_code, _said(after.output)) == (before.exit_code, _said(before.output))


def _said(output: str) -> list[str]:
    """The output less click's usage lines, which name the command the error is of, and
    with the seconds a give-up took left out (`in 0.6 s`: the same retries, timed by a
    machine that may be loaded)."""
    return [re.sub(r" in \d+\.\d s\b", " in (time) s", line) for line in output.splitlines()
            if not line.startswith(("Usage:", "Try '"))]


def test_after_the_command_wins_over_before_it(folder):
    res = cli("--state", "first.json", "state", "list", "--state", "second.json")
    assert res.exit_code == 0, res.output
    assert "No state at second.json" in res.output
    # An apply writes where the later --state says, and nowhere else.
    res = cli("--state", "first.json", "--sim", "apply", "--auto-approve", "--state",
              "second.json")
    assert res.exit_code == 0, res.output
    assert (folder / "second.json").is_file() and not (folder / "first.json").exists()
    res = cli("--state", "first.json", "plan", "--sim", "--state", "second.json",
              "--detailed-exitcode")
    assert res.exit_code == 0, res.output  # the state applied: nothing to do


def test_a_global_option_after_a_state_subcommand_and_after_state(folder):
    for args in (["state", "list", "--state", "x.json"], ["state", "--state", "x.json", "list"]):
        res = cli(*args)
        assert (res.exit_code, res.output.strip()) == (
            0, "No state at x.json: nothing has been applied with it yet."), args


def test_a_bad_global_option_after_the_command_is_one_error_line_and_exit_1(folder):
    res = cli("plan", "--parallelism", "many")
    assert res.exit_code == 1
    assert "Invalid value for '--parallelism'" in res.output
    assert "Traceback" not in res.output


def _on_a_terminal(folder: Path, *args: str) -> tuple[int, str, str]:
    """The CLI as a process with its stdout on a pseudo-terminal: (exit code, what the
    terminal got, stderr)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_") and k != "NO_COLOR"}
    master, slave = pty.openpty()  # stdout on a terminal: colour unless told otherwise
    proc = subprocess.Popen([sys.executable, "-m", "reconciler.cli", *args], env=env,
                            cwd=folder, stdout=slave, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL)
    os.close(slave)
    seen = bytearray()
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        seen.extend(chunk)
    os.close(master)
    with proc.stderr:
        err = proc.stderr.read().decode()
    return proc.wait(timeout=120), seen.decode(), err


def test_no_color_after_the_command_on_a_terminal(folder):
    code, coloured, _ = _on_a_terminal(folder, "--sim", "plan")
    assert code == 0 and "\x1b[" in coloured  # the terminal gets colour by default
    for args in (["--no-color", "--sim", "plan"], ["plan", "--no-color", "--sim"]):
        code, out, err = _on_a_terminal(folder, *args)
        assert code == 0, err
        assert "\x1b[" not in out and "14 to create" in out, args


def test_verbose_after_the_command_logs_the_requests(folder):
    """In this process (`invoke` gives the CLI the root logger, as a process has it)."""
    quiet = invoke(folder, "--sim", "plan")
    assert quiet.returncode == 0 and "INFO:" not in quiet.stderr
    for args in (["-v", "--sim", "plan"], ["plan", "-v", "--sim"], ["plan", "--sim", "--verbose"]):
        res = invoke(folder, *args)
        assert res.returncode == 0, res.stderr
        assert "INFO: GET /api/v1/workloads" in res.stderr, args
