"""The shared `sim serve` of the end-to-end tests (`sim_server`, also used by the
reliability, hardening and state tests) starts every test with its start-up faults."""

from __future__ import annotations

import pytest

from reconciler.simulator import Faults
from tests.helpers import simserve

pytestmark = pytest.mark.http


@pytest.mark.parametrize("turn", ["one", "another"])
def test_no_fault_setting_leaks_from_one_test_to_the_next(sim_server, turn):
    """Whichever of the two runs second finds what the first set, if `sim_server` left a
    setting behind (token lifetime and Retry-After used to stay)."""
    assert sim_server.admin.get("/_sim/faults").json() == Faults().to_json()
    assert sim_server.admin.put("/_sim/faults", json=simserve.ODD_FAULTS).status_code == 200
