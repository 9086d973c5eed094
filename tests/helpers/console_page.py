"""A docs page run as a reader runs it, for the tests that keep a walk-through true: its
blocks in the page's order, in one bash in a given folder. A `console` block's `$ `
lines are the commands, its other lines their output (stdout and stderr, as a terminal
shows them); a `yaml` block whose first line is `# <path>.yaml` is a file the reader
writes there, when they reach it. A block may be fenced with more than three backticks
(one that shows markdown holding fences of its own)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

_BLOCK = re.compile(r"^(`{3,})(console|yaml)\n(.*?)^\1$", re.M | re.S)
_FILE = re.compile(r"# ([\w./-]+\.ya?ml)")
_MARK = "@@ console block @@"


@dataclass(frozen=True)
class Block:
    """A console block (`commands`, the `expected` output) or a file (`path`, `text`)."""
    commands: tuple[str, ...] = ()
    expected: str = ""
    path: str = ""
    text: str = ""


def blocks(text: str) -> list[Block]:
    """The page's console blocks and files, in order (other yaml blocks are examples)."""
    out = []
    for _, lang, body in _BLOCK.findall(text):
        if lang == "yaml":
            first = body.split("\n", 1)[0]
            if _FILE.fullmatch(first):
                out.append(Block(path=_FILE.fullmatch(first).group(1), text=body))
            continue
        commands, output = [], []
        for line in body.splitlines():
            if line.startswith("$ "):
                commands.append(line[2:])
            else:
                output.append(line + "\n")
        out.append(Block(commands=tuple(commands), expected="".join(output)))
    return out


def cli_env(tmp: Path, root: Path) -> dict[str, str]:
    """An environment in which `runai-reconcile` is this checkout's CLI (a program on
    PATH, so a shell's job control sees it), without the caller's RUNAI_ settings, with
    no colour and a git identity."""
    bin_dir = tmp / "bin"
    bin_dir.mkdir(exist_ok=True)
    program = bin_dir / "runai-reconcile"
    program.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m reconciler.cli "$@"\n')
    program.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")}
    env.update(NO_COLOR="1", GIT_CONFIG_NOSYSTEM="1", HOME=str(tmp),
               GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t", PATH=f"{bin_dir}{os.pathsep}{env['PATH']}")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return env


def run(page: list[Block], cwd: Path, env: dict[str, str], *, timeout: float = 120,
        edit=lambda script: script) -> list[str]:
    """Each console block's output, the page run in one bash (its variables, working
    directory and background jobs carry from block to block). `edit` rewrites each
    block's commands (a free port for the page's, say)."""
    script = []
    for i, block in enumerate(page):
        if block.path:
            tag = f"EOF_{i}"
            script.append(f"mkdir -p \"$(dirname '{block.path}')\"\n"
                          f"cat > '{block.path}' <<'{tag}'\n{block.text}{tag}")
        else:
            script.append(f"echo '{_MARK}'\n{{\n{edit(chr(10).join(block.commands))}\n}} 2>&1")
    res = subprocess.run(["bash", "-c", "\n".join(script)], cwd=cwd, env=env,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         timeout=timeout)
    assert res.stderr == "", res.stderr
    return res.stdout.split(_MARK + "\n")[1:]


def readme_first_run(readme: str) -> str:
    """The README's first command less the virtual environment and the install: what it
    leaves (the example specs applied on `--sim`, then a plan with no changes) is where
    the walk-throughs start."""
    block = re.search(r"```bash\n(.*?)```", readme, re.S).group(1)
    line = next(x for x in block.splitlines() if x and not x.startswith("#"))
    return " && ".join(step for step in line.split(" && ")
                       if step.startswith("runai-reconcile "))


def wait_for_port(port: int) -> str:
    """What a page's `sleep 2` (for `sim serve` to start) becomes in a test: a poll until
    the server answers, so a loaded machine does not break the page."""
    return (f"for _ in $(seq 300); do curl -s localhost:{port}/_sim/faults >/dev/null "
            "&& break; sleep 0.1; done")
