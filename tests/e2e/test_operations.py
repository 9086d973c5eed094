"""The operations on their own (no CLI), against the simulator in process: the plan made
while the specs load beside the reads is the plan made in one go from the same inputs,
and a declined approval writes nothing."""

from __future__ import annotations

import httpx
import pytest

from reconciler import errors, operations, planner
from reconciler.api import RunaiClient
from reconciler.plans import Action
from reconciler.simulator import DEFAULT_CLIENT_ID, DEFAULT_CLIENT_SECRET, create_app
from reconciler.state import MemoryStore
from tests.helpers.specs import training_doc


@pytest.fixture
def sim():
    app = create_app()

    def connect():
        return RunaiClient("http://sim", client_id=DEFAULT_CLIENT_ID,
                           client_secret=DEFAULT_CLIENT_SECRET,
                           transport=httpx.ASGITransport(app=app))

    return connect


def write_specs(folder, names, image="nvcr.io/nvidia/pytorch:24.05-py3"):
    for n in names:
        (folder / f"{n}.yaml").write_text(training_doc(n, image))


def test_the_plan_of_the_operation_is_the_plan_made_in_one_go(tmp_path, sim):
    # 120 files: enough for the specs to load beside the reads.
    names = [f"job-{i:03d}" for i in range(120)]
    write_specs(tmp_path, names)
    store = MemoryStore()
    options = operations.PlanOptions(parallelism=16)
    first = operations.apply(str(tmp_path), store, sim, options, approve=lambda plan: True)
    assert first.count(Action.CREATE) == 120 and not first.failed

    write_specs(tmp_path, names[:10], image="nvcr.io/nvidia/pytorch:24.10-py3")  # replaced
    for n in names[10:15]:
        (tmp_path / f"{n}.yaml").unlink()  # deleted
    write_specs(tmp_path, ["new-1", "new-2"])  # created
    result = operations.plan(str(tmp_path), store, sim, options)
    whole = planner.make_plan(result.desired, store.read(), result.live)
    assert [(c.address, c.action, c.reason, c.changes) for c in result.plan.changes] == \
        [(c.address, c.action, c.reason, c.changes) for c in whole.changes]
    assert result.plan.counts() == {**dict.fromkeys(result.plan.counts(), 0),
                                    "no-op": 105, "replace": 10, "delete": 5, "create": 2}


def test_a_declined_approval_applies_nothing(tmp_path, sim):
    write_specs(tmp_path, ["a", "b"])
    store = MemoryStore()
    seen = []

    def approve(plan):
        seen.append(plan.counts()["create"])
        return False

    with pytest.raises(errors.ReconcileError, match="apply cancelled"):
        operations.apply(str(tmp_path), store, sim, operations.PlanOptions(), approve=approve)
    assert seen == [2]
    assert operations.state_list(store) == []
    assert operations.plan(str(tmp_path), store, sim, operations.PlanOptions()).plan.counts()["create"] == 2
