"""Property: whatever the engine records, the store gives back exactly, with one serial step."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.state import MemoryStore, ResourceState, State
from reconciler.state.store import dumps, loads

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=6)
dns = st.sampled_from(["a", "bert-ddp", "llama-70b-serve", "x9"])

resources = st.builds(
    ResourceState,
    kind=st.sampled_from(["DistributedTraining", "DistributedInference"]),
    name=dns, project_id=st.integers(0, 9999).map(str),
    cluster_id=st.uuids().map(str), workload_id=st.none() | st.uuids().map(str),
    applied=st.dictionaries(st.text(min_size=1), json_values, max_size=5),
    desired_phase=st.sampled_from(["Running", "Stopped"]),
    last_phase=st.none() | st.sampled_from(["Running", "Stopped", "Completed"]),
    prevent_destroy=st.booleans(), completed=st.booleans())


@settings(max_examples=30, deadline=None)
@given(st.lists(resources, max_size=4))
def test_store_round_trips_any_recorded_content(items):
    store = MemoryStore()
    state = store.read()
    for rs in items:
        state.set(rs)
    store.write(state)
    back = store.read()
    assert back == state and back.serial == 1
    assert loads(dumps(back), "x") == back
