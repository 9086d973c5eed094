"""Fixtures for the review and drift tests: the e2e `sim serve` and workspace, and specs."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import CLUSTER, _sim_process, sim_server, ws  # noqa: F401 - fixtures
from tests.e2e.test_plan_apply_http import INFERENCE, TRAINING  # noqa: F401 - the same specs

@pytest.fixture
def applied(ws, sim_server):
    """A workspace with the training and the inference applied: name -> live list item."""
    ws.write("train.yaml", TRAINING)
    ws.write("serve.yaml", INFERENCE)
    res = ws.apply()
    assert res.exit_code == 0, res.output
    return {w["name"]: w for w in sim_server.live()}
