"""The ecosystem's own checkers (kubectl's kustomize, kubernetes-validate, checkov,
check-jsonschema, actionlint), as the `test` extra installs them beside this Python:
`tool(name)` is the path of one, or a skip saying how to install it (CI fails on skips)."""

from __future__ import annotations

import pathlib
import shutil
import sys

import pytest

_BIN = pathlib.Path(sys.executable).parent


def tool(name: str) -> str:
    """The executable `name`, from this environment's bin folder first, then PATH."""
    found = shutil.which(name, path=str(_BIN)) or shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed: pip install -e '.[test]'")
    return found
