"""The test PostgreSQL: the variable naming its URL, and `missing`, which skips a test
for want of it except in CI, where it fails (state, reliability and watch tests)."""

from __future__ import annotations

import os

import pytest


PG_ENV = "RUNAI_RECONCILE_TEST_PG"  # a PostgreSQL URL the tests may create schemas in


def missing(what: str) -> None:
    """Skip the test for want of `what`, except in CI (which provides it), where it fails."""
    if os.environ.get("CI"):
        pytest.fail(f"CI runs the PostgreSQL tests: {what}")
    pytest.skip(what)
