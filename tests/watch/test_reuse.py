"""`reuse.Reuse`: a watch cycle over an unchanged fleet does not plan it again, and any
change of what a plan is made from (a spec parsed again, a state read again, a live body,
a listed phase, an open intent) makes a new plan."""

from __future__ import annotations

from reconciler import planner
from reconciler.desired import load_specs
from reconciler.operations.reuse import Reuse
from reconciler.state.model import State

SPEC = """kind: Training
name: job-{i}
projectId: "7"
clusterId: 71f69d83-ba66-4822-adf5-55ce55efd210
spec:
  image: nvcr.io/nvidia/pytorch:24.05-py3
  compute: {{gpuDevicesRequest: 1}}
"""


def test_the_same_inputs_give_the_last_plan_and_any_change_a_new_one(tmp_path):
    for i in range(3):
        (tmp_path / f"job-{i}.yaml").write_text(SPEC.format(i=i))
    desired, state = load_specs(str(tmp_path)), State()
    made = []

    def plan(desired, state, live, listed, interrupted=()):
        def make():
            made.append(1)
            return planner.make_plan(desired, state, live, listed=listed)
        return reuse.plan(make, desired, state, live, listed, interrupted)

    reuse = Reuse()
    live, listed = {}, {}
    first = plan(desired, state, live, listed)
    assert plan(list(desired), state, {}, {}) is first and len(made) == 1
    live["Training/7/job-0"] = None  # the caller's dict changed after the plan: a new key
    gone = plan(desired, state, live, listed)
    assert gone is not first and len(made) == 2
    # The one before last is kept too (an auto refresh after a full one finds its plan).
    assert plan(desired, state, {}, {}) is first and len(made) == 2
    listed_one = plan(desired, state, {}, {"Training/7/job-1": "Running"})
    assert listed_one is not first and listed_one is not gone
    assert plan(desired, state, {"Training/7/job-0": None}, {}) is not gone  # two kept
    assert plan(desired, State(), {}, {}) is not first  # the state read again
    assert plan(load_specs(str(tmp_path)), state, {}, {}) is not first  # parsed again
    assert plan(desired, state, {}, {}, ("Training/7/job-2",)) is not first
    assert len(made) == 7


def test_what_is_derived_is_kept_for_the_very_same_inputs_only():
    reuse, made = Reuse(), []

    def derive(*inputs):
        return reuse.derived("sizes", inputs, lambda: made.append(1) or [id(i) for i in inputs])

    specs, state = [1, 2], State()
    first = derive(specs, state)
    assert derive(specs, state) is first and len(made) == 1
    assert derive(list(specs), state) is not first and len(made) == 2  # an equal list: made again
    assert derive(specs, State()) is not first and len(made) == 3  # the state read again
    assert reuse.derived("other", (specs, state), lambda: "x") == "x"  # each name its own
    assert derive(specs, state) is not first and len(made) == 4  # only the last is kept
