"""The dependency lock (requirements/, made by .ci/lock) against pyproject.toml: every
dependency the package and its `test` extra name is pinned within its range and with
hashes (pip installs a locked file only against its hash, so a pin without one fails
the README's first command), the runtime lock is the test lock's pins, and the tools
lock holds every validator requirements/tools.in names. A range
edited in pyproject.toml without `.ci/lock` run again fails here, naming the package."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests import interpreter
from tests.helpers.constants import ROOT

TEST_LOCK = ROOT / "requirements" / "test.txt"
RUNTIME_LOCK = ROOT / "requirements" / "runtime.txt"
TOOLS_LOCK = ROOT / "requirements" / "tools.txt"
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)")


def read_lock(path: Path) -> dict[str, tuple[str, int]]:
    """{canonical name: (pinned version, how many hashes)} of a pip requirements file."""
    pins: dict[str, tuple[str, int]] = {}
    name = None
    for line in path.read_text(encoding="utf-8").splitlines():
        if m := _PIN.match(line):
            name = canonicalize_name(m.group(1))
            pins[name] = (m.group(2), 0)
        elif name and line.strip().startswith("--hash="):
            version, hashes = pins[name]
            pins[name] = (version, hashes + 1)
        elif not line.startswith(" "):
            name = None
    return pins


def problems(requirements: list[str], lock: dict[str, tuple[str, int]], where: str) -> list[str]:
    """What in `lock` fails the `requirements` (pyproject's words): one line each."""
    out = []
    for text in requirements:
        req = Requirement(text)
        pin = lock.get(canonicalize_name(req.name))
        if pin is None:
            out.append(f"{text}: not pinned in {where}; run .ci/lock")
        elif not req.specifier.contains(Version(pin[0]), prereleases=True):
            out.append(f"{text}: {where} pins {pin[0]}; run .ci/lock")
        elif pin[1] == 0:
            out.append(f"{text}: {where} pins {pin[0]} without a hash; run .ci/lock")
    return out


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def test_the_test_lock_pins_every_dependency_and_test_extra_within_its_range():
    project = pyproject()
    wanted = project["dependencies"] + project["optional-dependencies"]["test"]
    assert problems(wanted, read_lock(TEST_LOCK), "requirements/test.txt") == []


def test_the_runtime_lock_pins_the_dependencies_at_the_test_locks_versions():
    runtime, test = read_lock(RUNTIME_LOCK), read_lock(TEST_LOCK)
    project = pyproject()
    wanted = project["dependencies"] + project["optional-dependencies"]["postgres"]
    assert problems(wanted, runtime, "requirements/runtime.txt") == []
    assert {name: pin[0] for name, pin in runtime.items()} == {
        name: test[name][0] for name in runtime}


def test_the_tools_lock_pins_every_validator_of_tools_in():
    wanted = [line.split("#")[0].strip() for line in
              (ROOT / "requirements" / "tools.in").read_text(encoding="utf-8").splitlines()]
    assert problems([w for w in wanted if w], read_lock(TOOLS_LOCK), "requirements/tools.txt") == []


def test_every_locked_release_carries_hashes():
    for path in (TEST_LOCK, RUNTIME_LOCK, TOOLS_LOCK):
        lock = read_lock(path)
        assert [name for name, (_, hashes) in lock.items() if hashes == 0] == [], path
    assert len(read_lock(RUNTIME_LOCK)) >= 20


def test_a_range_edited_without_locking_again_is_named():
    lock = {"pytest": ("9.2.0", 2), "click": ("8.5.1", 0)}
    assert problems(["checkov>=3", "pytest>=10", "click>=8.2", "PyTest>=9"], lock,
                    "requirements/test.txt") == [
        "checkov>=3: not pinned in requirements/test.txt; run .ci/lock",
        "pytest>=10: requirements/test.txt pins 9.2.0; run .ci/lock",
        "click>=8.2: requirements/test.txt pins 8.5.1 without a hash; run .ci/lock",
    ]


def test_what_this_python_lacks_of_the_lock_is_named():
    """The root conftest stops a run from a Python without the locked releases, naming
    them (tests/interpreter.py); a marker line is not required everywhere."""
    text = ("pytest==9.2.0 \\\n    --hash=sha256:00\n"
            "no-such-release-here==1.0 \\\n    --hash=sha256:00\n"
            "tzdata==2026.1 ; sys_platform == 'win32' \\\n    --hash=sha256:00\n")
    assert interpreter.missing(text) == ["no-such-release-here"]
    assert interpreter.missing(TEST_LOCK.read_text(encoding="utf-8")) == []
