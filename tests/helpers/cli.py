"""`runai-reconcile` as a user runs it: as a subprocess on a workspace, `run` (output
captured) and `run_on_a_terminal` (stderr on a pseudo-terminal); in this process, `invoke`
(a folder, the arguments, the environment; the answer shaped as a subprocess's); and
`PROGRESS`, the progress line a terminal shows. Used by the e2e tests of the everyday
messages and of bad input, and the secrets-in-output tests."""

from __future__ import annotations

import contextlib
import logging
import os
import pty
import re
import subprocess
import sys
import threading


def env_of(ws, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("RUNAI_")}
    env.update({k: v for k, v in ws.env.items() if v is not None})
    return {**env, **extra}


def run(ws, *args: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "reconciler.cli", "--state",
                           str(ws.state_path), *args], env=env_of(ws, **extra), cwd=ws.root,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def invoke(cwd, *args: str, **extra: str) -> subprocess.CompletedProcess:
    """The CLI in this process (click's runner), in the folder `cwd`, with no `RUNAI_`
    variable but those of `extra` and NO_COLOR set: its exit code, stdout and stderr apart,
    as a subprocess's. An exception the CLI lets out fails the test where it happened (a
    process would print its traceback), so "no traceback" holds when this returns. The root
    logger is the CLI's for the call, as in a process of its own: its warnings (and any
    traceback logged) reach the stderr returned, not pytest's log capture."""
    from click.testing import CliRunner

    from reconciler.cli import main

    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith("RUNAI_")}
    env.update({"NO_COLOR": "1", **extra})
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    root.handlers = []
    try:
        with contextlib.chdir(cwd):
            res = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers, root.level = handlers, level
    return subprocess.CompletedProcess(["runai-reconcile", *args], res.exit_code,
                                       res.stdout, res.stderr)


def run_on_a_terminal(ws, *args: str) -> tuple[int, str, str]:
    """The CLI with its stderr on a pseudo-terminal: (exit code, stdout, what the terminal got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "reconciler.cli", "--state",
                             str(ws.state_path), *args], env=env_of(ws), cwd=ws.root,
                            stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    seen = bytearray()
    def read_stdout() -> None:
        with proc.stdout:
            seen.extend(proc.stdout.read())

    reader = threading.Thread(target=read_stdout)
    reader.start()
    terminal = bytearray()
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the last holder of the slave side closed it
            break
        if not chunk:
            break
        terminal.extend(chunk)
    os.close(master)
    code = proc.wait(timeout=120)
    reader.join()
    return code, seen.decode(), terminal.decode()


PROGRESS = re.compile(r"\r\x1b\[K(Refreshing|Applying): (\d+) of (\d+) done, "
                      r"(\d+\.\d) s elapsed, (\d+) failed")
