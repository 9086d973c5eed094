"""Fixtures for the performance tests: the end-to-end `sim serve` and workspace."""

from tests.e2e.conftest import _sim_process, sim_server, ws  # noqa: F401
