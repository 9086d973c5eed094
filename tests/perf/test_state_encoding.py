"""The state file's bytes are exactly what `json.dumps(indent=2, sort_keys=True)` writes
(the store encodes them with its own quicker code): whatever the applied bodies hold."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.state import store
from reconciler.state.model import ResourceState, State

KEYS = st.text(max_size=6) | st.sampled_from(["spec", "a", "é", "\u2028", '"', "\\"])
LEAVES = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
          | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=8))
BODIES = st.dictionaries(KEYS, st.recursive(LEAVES, lambda inner: st.lists(inner, max_size=3)
                                             | st.dictionaries(KEYS, inner, max_size=3),
                                             max_leaves=15), max_size=4)


def _state(bodies: list[dict]) -> State:
    state = State()
    for i, body in enumerate(bodies):
        state.set(ResourceState(kind="DistributedTraining", name=f"w{i}", project_id="7",
                                cluster_id="c", workload_id=f"id{i}" if i % 2 else None,
                                applied=body))
    return state


@settings(max_examples=150, deadline=None)
@given(st.lists(BODIES, max_size=3), st.integers(0, 10))
def test_state_bytes_are_json_dumps_indent_2_sorted(bodies, serial):
    state = _state(bodies)
    expected = state.to_json()
    expected["serial"] = serial
    want = (json.dumps(expected, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    assert store.dumps(state, serial=serial) == want


def test_a_tuple_in_a_body_is_written_as_json_writes_a_list():
    state = _state([{"spec": {"args": ("a", "b"), "n": True}}])
    got = json.loads(store.dumps(state))
    assert got["resources"]["DistributedTraining/7/w0"]["applied"] == {"spec": {"args": ["a", "b"], "n": True}}
