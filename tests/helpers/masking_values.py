"""Hypothesis strategies for the masking properties (tests/perf/test_masking_quick_path.py,
test_render_quick_path.py): values of every shape with environment variables, some named
as secrets, among them, and `lifecycle.sensitive` path lists."""

from __future__ import annotations

from hypothesis import strategies as st

NAMES = st.sampled_from(["API_TOKEN", "HOME", "db_password", "LOG_LEVEL", "aws-key", "x"])
SCALARS = st.none() | st.integers() | st.booleans() | st.sampled_from(["v", "s3cr3t", "a.b[c]"])
ENV = st.lists(st.fixed_dictionaries({"name": NAMES}, optional={"value": SCALARS}), max_size=3)
FIELDS = st.sampled_from(["spec", "compute", "args", "labels", "environmentVariables", "value",
                          "name", "image", "storage", "secretKey"])
VALUES = st.recursive(SCALARS | ENV, lambda inner: st.dictionaries(FIELDS, inner, max_size=4)
                      | st.lists(inner, max_size=3), max_leaves=12)


def sensitive_paths(*more: str) -> st.SearchStrategy[list[str]]:
    """Up to two `lifecycle.sensitive` paths."""
    return st.lists(st.sampled_from(["spec.args", "spec.compute", "spec", "spec.labels[team]",
                                     "spec.environmentVariables[HOME]", *more]), max_size=2)
