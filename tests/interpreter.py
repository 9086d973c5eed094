"""Which Python runs the tests: an early plugin (`-p tests.interpreter` in pyproject's
`addopts`), loaded before pytest loads other plugins or captures output.

Started from a Python that lacks the dependency lock's releases (a bare `python3 -m
pytest`, without activating the environment first) in a checkout whose `.venv` holds
them (the README's first command made it), the run goes on in `.venv`'s Python, as
activating it would have made it: the same arguments, `.venv/bin` first on PATH. Without
such a `.venv`, the root conftest stops the run at once, naming what is missing, rather
than on an ImportError deep in a fixture module (`missing`).

It also gives the run its two workers (`pytest_load_initial_conftests`)."""

from __future__ import annotations

import importlib.metadata
import os
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
TEST_LOCK = ROOT / "requirements" / "test.txt"
VENV = ROOT / ".venv"
# Set in the Python the run goes on in: it never goes on a second time.
_MOVED = "RUNAI_RECONCILE_TESTS_MOVED_TO_VENV"

# A release pinned for every platform: `name==version \` (a line with a marker is not).
_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==\S+ \\$", re.MULTILINE)


def missing(lock_text: str) -> list[str]:
    """The releases `lock_text` (a requirements file made by .ci/lock) pins for every
    platform that this Python has not installed."""
    out = []
    for name in _PINNED.findall(lock_text):
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            out.append(name)
    return out


def _started_as_pytest() -> bool:
    """Whether this process is pytest's command (`python -m pytest`, `pytest`), whose
    arguments can be handed on; not a program that calls `pytest.main` itself."""
    started = pathlib.Path(sys.argv[0])
    return started.name in ("pytest", "py.test") or started.parts[-2:] == ("pytest",
                                                                          "__main__.py")


def _go_on_in_venv() -> None:
    python = VENV / "bin" / "python"
    if (os.environ.get(_MOVED) or not python.exists() or not _started_as_pytest()
            or pathlib.Path(sys.prefix).resolve() == VENV.resolve()
            or not missing(TEST_LOCK.read_text(encoding="utf-8"))):
        return
    os.environ.update({_MOVED: "1", "VIRTUAL_ENV": str(VENV),
                       "PATH": f"{VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"})
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(python, [str(python), "-m", "pytest", *sys.argv[1:]])


_go_on_in_venv()


def pytest_load_initial_conftests(early_config, parser, args: list[str]) -> None:
    """Two workers, grouped by `xdist_group` (`-n 2 --dist loadgroup`), unless the command
    line says how many (`-n 0`: one process) or pytest-xdist is not loaded (`-p no:xdist`,
    as a debugger's run asks): then the run goes on in one process and still collects,
    where the same options in `addopts` would be refused as unknown."""
    if early_config.pluginmanager.has_plugin("xdist") and not any(
            a.startswith(("-n", "--numprocesses", "--dist")) for a in args):
        args[:] = ["-n", "2", "--dist", "loadgroup", *args]
