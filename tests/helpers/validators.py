"""The ecosystem's own checkers (kubectl's kustomize, kubernetes-validate, checkov,
check-jsonschema, actionlint), as the `test` extra installs them beside this Python:
`tool(name)` is the path of one, or a skip saying how to install it (CI fails on skips).
checkov pins a `packaging` older than pytest's, so it lives in an environment of its own
that .ci/run makes, named by $RUNAI_RECONCILE_CHECKOV."""

from __future__ import annotations

import os
import pathlib
import shutil
import sys

import pytest

_BIN = pathlib.Path(sys.executable).parent


def tool(name: str) -> str:
    """The executable `name`, from this environment's bin folder first, then PATH."""
    if name == "checkov" and os.environ.get("RUNAI_RECONCILE_CHECKOV"):
        return str(pathlib.Path(os.environ["RUNAI_RECONCILE_CHECKOV"]).absolute())
    found = shutil.which(name, path=str(_BIN)) or shutil.which(name)
    if not found:
        pytest.skip(f"{name} is not installed: pip install -e '.[test]'" + (
            " (checkov: in an environment of its own, named by RUNAI_RECONCILE_CHECKOV)"
            if name == "checkov" else ""))
    return found
