"""The README's five-minute tour on `--sim` prints what the README shows: its first
command (less the virtual environment and the install), then every `$ ` line of the
tour's console blocks run in bash, in order, in a fresh folder holding the example
specs in git; each block's output (stdout and stderr, as a terminal shows them) must be
the lines the README gives under it. Two things differ from the words: `sim serve` gets
a free port instead of 8080 (put back in the output), and the `sleep 2` that waits for
it polls until it answers, so a loaded machine does not break the tour."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys

import pytest

from tests.helpers.constants import ROOT

README = ROOT / "README.md"
TOUR = "## A five-minute tour on `--sim`"


def _first_command() -> str:
    block = re.search(r"```bash\n(.*?)```", README.read_text(encoding="utf-8"), re.S).group(1)
    return next(line for line in block.splitlines() if line and not line.startswith("#"))


def _tour_blocks() -> list[tuple[list[str], str]]:
    """(commands, expected output) of each console block of the tour."""
    text = README.read_text(encoding="utf-8")
    start = text.index(TOUR)
    section = text[start:text.index("\n## ", start + len(TOUR))]
    blocks = []
    for body in re.findall(r"```console\n(.*?)```", section, re.S):
        commands, output = [], []
        for line in body.splitlines():
            if line.startswith("$ "):
                commands.append(line[2:])
            else:
                output.append(line + "\n")
        blocks.append((commands, "".join(output)))
    return blocks


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


INSTALL = ["python3 -m venv .venv", ". .venv/bin/activate",
           "pip install -r requirements/test.txt", "pip install --no-deps -e ."]


def test_the_first_command_installs_the_lock_into_a_fresh_virtual_environment():
    """The locked set (what CI installs, each file checked against its hash), then the
    package alone; .ci/run runs this very line."""
    steps = _first_command().split(" && ")
    assert steps[:len(INSTALL)] == INSTALL
    assert steps[len(INSTALL):] == ["runai-reconcile --sim apply --auto-approve",
                                    "runai-reconcile --sim plan --detailed-exitcode"]


@pytest.mark.http
def test_the_tour_prints_what_the_readme_shows(tmp_path):
    work = tmp_path / "tour"
    shutil.copytree(ROOT / "specs", work / "specs")
    (work / "docs" / "examples").mkdir(parents=True)
    shutil.copy(ROOT / "docs" / "examples" / "policy.yaml", work / "docs" / "examples")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")}
    env.update(NO_COLOR="1", GIT_CONFIG_NOSYSTEM="1", HOME=str(tmp_path),
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))

    # `runai-reconcile` is this checkout's CLI, a program on PATH (so `kill %1` ends it).
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "runai-reconcile").write_text(
        f'#!/bin/sh\nexec "{sys.executable}" -m reconciler.cli "$@"\n')
    (bin_dir / "runai-reconcile").chmod(0o755)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"

    def bash(script: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-c", script], cwd=work, env=env,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=120)

    setup = bash("git init -q . && git add specs docs && git commit -qm specs")
    assert setup.returncode == 0, setup.stderr
    first = " && ".join(_first_command().split(" && ")[len(INSTALL):])
    res = bash(first)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.endswith("No changes. Live workloads match the specs.\n")

    port = _free_port()
    blocks = _tour_blocks()
    assert len(blocks) >= 5
    for commands, expected in blocks:
        script = "\n".join(commands).replace("8080", str(port)).replace(
            "sleep 2", f"for _ in $(seq 300); do curl -s localhost:{port}/_sim/faults >/dev/null && break; sleep 0.1; done")
        res = bash(f"{{\n{script}\n}} 2>&1")
        shown = res.stdout.replace(str(port), "8080")
        assert shown == expected, f"$ {commands[0]} ..."
