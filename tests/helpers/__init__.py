"""Helpers the test areas share: constants, builders of specs, plans and bodies, the
`sim serve` process, golden files. Plain modules that test modules import; fixtures are in
conftest.py files and in tests/fixtures (the root conftest's `pytest_plugins`)."""
