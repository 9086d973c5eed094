"""Fixtures for the renderer tests: the hand-built example plans of `examples`."""

from __future__ import annotations

import pytest

from tests.helpers.examples import PLANS


@pytest.fixture(params=sorted(PLANS))
def example(request):
    """(name, Plan) for every example plan."""
    return request.param, PLANS[request.param]()
