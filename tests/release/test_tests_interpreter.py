"""Which Python runs the tests (`tests.interpreter`): pytest started by a Python without
the lock's releases, in a checkout whose `.venv` holds them, goes on in `.venv`'s Python
with the same arguments, once; with no `.venv`, the root conftest's message stands.

Shown on a small checkout of its own: `tests/interpreter.py` and pyproject's pytest
settings copied, a lock pinning a release no Python here has (so the running one lacks
it), and a `.venv` made without pip whose site reaches this Python's packages (so pytest
runs there, and lacks that release too: the run must not go on a second time)."""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import textwrap
import venv

from tests.helpers.constants import ROOT

WHERE = """\
import os, sys

def test_where():
    print("ran in", sys.prefix, "moved:", os.environ.get("RUNAI_RECONCILE_TESTS_MOVED_TO_VENV"))
"""


def _checkout(tmp_path):
    root = tmp_path / "checkout"
    (root / "tests").mkdir(parents=True)
    (root / "requirements").mkdir()
    (root / "tests" / "__init__.py").write_text("")
    shutil.copy(ROOT / "tests" / "interpreter.py", root / "tests")
    (root / "tests" / "test_where.py").write_text(WHERE)
    (root / "requirements" / "test.txt").write_text(
        "no-such-release-anywhere==1.0 \\\n    --hash=sha256:00\n")
    (root / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.pytest.ini_options]
        addopts = "-p tests.interpreter -p no:cacheprovider -p no:xdist -s -q"
        pythonpath = ["."]
        """))
    return root


def _run(root, *args):
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTEST_ADDOPTS", "RUNAI_RECONCILE_TESTS_MOVED_TO_VENV")}
    return subprocess.run([sys.executable, "-m", "pytest", *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def test_a_run_without_the_lock_goes_on_in_the_checkouts_venv_once(tmp_path):
    root = _checkout(tmp_path)
    venv.create(root / ".venv", with_pip=False)
    [sites] = list((root / ".venv" / "lib").glob("python*/site-packages"))
    (sites / "this-python.pth").write_text("\n".join(site.getsitepackages()) + "\n")

    res = _run(root, "tests/test_where.py")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ran in {root / '.venv'} moved: 1" in res.stdout, res.stdout
    assert "1 passed" in res.stdout


def test_without_a_venv_the_run_stays_where_it_was_started(tmp_path):
    root = _checkout(tmp_path)
    res = _run(root, "tests/test_where.py")
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"ran in {sys.prefix} moved: None" in res.stdout, res.stdout


def test_two_workers_unless_the_command_line_says_otherwise_and_no_xdist_still_runs():
    """The repository's own settings: `-n 2` by default, one process with `-n 0` or with
    pytest-xdist turned off (which `-n` in `addopts` would make a usage error)."""
    layout = "tests/test_layout.py"
    for extra, workers in (((), True), (("-n", "0"), False), (("-p", "no:xdist"), False)):
        res = _run(ROOT, layout, "-p", "no:cacheprovider", *extra)
        assert res.returncode == 0, (extra, res.stdout + res.stderr)
        assert ("2 workers" in res.stdout) is workers, (extra, res.stdout)
        assert " passed" in res.stdout and "failed" not in res.stdout, res.stdout
