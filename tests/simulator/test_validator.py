"""The create-body validator's quick path never lets through what the full check refuses.

Each scalar of the schema is first tried with `accepts` (a test compiled from its
description); only values it refuses are checked in full. So `accepts(v)` must never be
True for a value the full check finds fault with, or a bad body would reach the store.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.simulator import schema, validator
from reconciler.simulator.kinds import KINDS
from tests.helpers.simulator import schema_scalars


SCALARS = {}  # by path; a path that another kind describes otherwise, also with its kind
for _kind in KINDS:
    for _body in (_kind.create, _kind.update):
        for _path, _scalar in schema_scalars(_body).items() if _body is not None else ():
            if SCALARS.setdefault(_path, _scalar) != _scalar:
                SCALARS[f"{_path} ({_kind.type})"] = _scalar
ENUM_VALUES = sorted({v for s in SCALARS.values() if s.enum for v in s.enum})
PROBES = st.one_of(
    st.none(), st.booleans(), st.integers(-70000, 70000), st.integers(),
    st.floats(allow_nan=True, allow_infinity=True), st.just(2.0), st.just(-0.0),
    st.text(max_size=70), st.text(alphabet="abz019-_./:+eEiGKMT", max_size=70),
    st.sampled_from(ENUM_VALUES), st.uuids().map(str), st.sampled_from(["0644", "0999", "/a/b"]),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=3), st.integers(),
                                                         max_size=2),
)


def _full(s: validator.Scalar, value) -> list:
    out: list = []
    validator._check_scalar(s, value, "f", out)
    return out


@settings(max_examples=400, deadline=None)
@given(path=st.sampled_from(sorted(SCALARS)), value=PROBES)
def test_a_value_the_quick_test_accepts_passes_the_full_check(path, value):
    s = SCALARS[path]
    if value is not None and s.accepts(value):
        assert _full(s, value) == []


def test_the_quick_test_accepts_ordinary_values():
    """The quick path is taken for the values specs hold (else it would save nothing)."""
    assert SCALARS[".spec.numWorkers"].accepts(2)
    assert SCALARS[".spec.distributedFramework"].accepts("PyTorch")
    assert SCALARS[".clusterId"].accepts("71f69d83-ba66-4822-adf5-55ce55efd210")
    assert SCALARS[".spec.compute.cpuMemoryRequest"].accepts("16Gi")
    assert SCALARS[".spec.compute.largeShmRequest"].accepts(True)
    assert SCALARS[".spec.compute.cpuCoreRequest"].accepts(0.5)
    assert not SCALARS[".spec.numWorkers"].accepts(0)
    assert not SCALARS[".spec.compute.largeShmRequest"].accepts(1)


def test_issues_name_the_field_and_come_in_document_order():
    body = {"name": "x", "projectId": "7", "clusterId": "not-a-uuid", "bogus": 1,
            "spec": {"numWorkers": 0, "image": None, "compute": {"cpuMemoryRequest": "lots"},
                     "environmentVariables": [{"name": "A", "value": 3}, None,
                                              {"name": ""}]}}
    issues = validator.validate(schema.DISTRIBUTED_CREATE, body)
    assert [(i.field, i.rule) for i in issues] == [
        ("clusterId", None), ("bogus", None), ("spec.numWorkers", "min"),
        ("spec.compute.cpuMemoryRequest", None),
        ("spec.environmentVariables[0].value", None),
        ("spec.environmentVariables[2].name", "min"),
    ]
