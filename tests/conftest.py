"""Fixtures shared by every test area. Area fixtures live in tests/<area>/conftest.py;
those of several areas in tests/fixtures (loaded here by `pytest_plugins`), and shared
helpers (constants, builders, the `sim serve` process) in tests/helpers. No test module
imports another, nor a conftest (tests/test_layout.py).

In CI (`CI` set, as `.ci/run` runs) no test may skip: a test that needs ../shared or a
server and skips there would hide exactly what it is for, so the run fails, naming it."""

from __future__ import annotations

import os
import pathlib
import sys

import pytest

pytest.register_assert_rewrite("tests.helpers")

from tests import interpreter  # noqa: E402 (after the rewrite is registered)

ROOT = pathlib.Path(__file__).resolve().parent.parent


# Run from a Python without the locked dependencies (and no `.venv` holding them to go on
# in: `tests.interpreter`), the fixture modules below would stop on an ImportError: say
# what is wrong instead.
_missing = interpreter.missing(interpreter.TEST_LOCK.read_text(encoding="utf-8"))
if _missing:
    raise pytest.UsageError(
        f"{sys.executable} has not installed what the tests need ({', '.join(_missing[:5])}"
        f"{', ...' if len(_missing) > 5 else ''}): run the README's first command, or "
        "`. .venv/bin/activate` first in a new shell (README.md, docs/development.md)")

pytest_plugins = ["tests.fixtures.sim", "tests.fixtures.postgres", "tests.fixtures.tls"]

SHARED_API = ROOT.parent / "shared" / "runai-api"
IN_CI = bool(os.environ.get("CI"))


@pytest.fixture(scope="session")
def shared_api_dir() -> pathlib.Path:
    """../shared/runai-api: NVIDIA's OpenAPI files (tests may read them; the package may not)."""
    if not SHARED_API.is_dir():
        if IN_CI:
            pytest.fail("../shared/runai-api is not beside the project, and CI must have it")
        pytest.skip("../shared/runai-api is not beside the project")
    return SHARED_API


@pytest.fixture(scope="session", autouse=True)
def _spec_cache_of_the_session(tmp_path_factory):
    """The spec cache (reconciler.desired.cache) of every CLI run the tests make, in
    process or not, goes to a folder of this session's, not the user's ~/.cache."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
        yield


_skipped: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if IN_CI and _skipped and exitstatus == 0:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(f"CI: {len(_skipped)} test(s) skipped, and none may in CI:",
                                red=True)
            for nodeid in _skipped[:50]:
                reporter.write_line(f"  {nodeid}")
        session.exitstatus = 1
