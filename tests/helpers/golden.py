"""Golden files: rendered output compared with a reviewed file; UPDATE_GOLDEN=1 rewrites it."""

from __future__ import annotations

import os
from pathlib import Path

from reconciler import __version__

# The plan document names the version that wrote it (`terraform_version`); a golden file
# holds this word instead, so that a release does not change every golden plan.
VERSION = "(runai-reconcile version)"


def versionless(text: str) -> str:
    """A rendered plan document with its `terraform_version`s said as `VERSION`."""
    return text.replace(f'"terraform_version": "{__version__}"',
                        f'"terraform_version": "{VERSION}"')


def assert_golden(path: Path, got: str) -> None:
    if os.environ.get("UPDATE_GOLDEN") == "1":
        path.write_text(got, encoding="utf-8")
    assert path.exists(), f"no golden {path.name}: run with UPDATE_GOLDEN=1 and review it"
    assert got == path.read_text(encoding="utf-8"), \
        f"{path.name} differs; if intended, rerun with UPDATE_GOLDEN=1 and review the diff"
