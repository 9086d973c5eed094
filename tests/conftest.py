"""Fixtures shared by every test area. Area fixtures live in tests/<area>/conftest.py."""

from __future__ import annotations

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHARED_API = ROOT.parent / "shared" / "runai-api"


@pytest.fixture(scope="session")
def shared_api_dir() -> pathlib.Path:
    """../shared/runai-api: NVIDIA's OpenAPI files (tests may read them; the package may not)."""
    if not SHARED_API.is_dir():
        pytest.skip("../shared/runai-api is not beside the project")
    return SHARED_API
