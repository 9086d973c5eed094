"""`adoption`, the pure half of `import`: the checks of a live workload against an
address, the state record it writes; and the pairing of specs with list items by project
and name (`live.workloads.match_listed`, which the plan and `import --all` share).

The record's promise, checked for every example spec (all five kinds): after an import,
the three-way diff of the spec against the record and the live body (the simulator's
defaults filled in) finds nothing, where recording the raw live body would not."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest

from reconciler import adoption, diff, kinds
from reconciler.live import workloads
from reconciler.desired.loader import load_specs
from reconciler.simulator import kinds as sim_kinds

from tests.helpers.builders import live_of

# The example specs, with the project a name stands for resolved (the simulator's
# `project-7` is project 7).
ALL_EXAMPLES = load_specs(Path(__file__).resolve().parents[2] / "specs")
# The workloads among them (adopted through the simulator's kinds below; the
# organisation's units are adopted in tests/e2e/test_organisation.py).
EXAMPLES = {d.address: d for d in (
    d if d.resolved else d.with_project_id(d.project_name.removeprefix("project-"))
    for d in ALL_EXAMPLES if kinds.get(d.kind).listed)}


def simulated_live(d, *, phase: str = "Running") -> dict:
    """GET's answer for a workload created from `d`'s body by the simulator."""
    body = copy.deepcopy(d.body)
    sim = next(k for k in sim_kinds.KINDS if k.path == kinds.get(d.kind).api_path)
    sim.fill(body, random.Random(7))
    return live_of(body, defaults=False, desired_phase=phase,
                   actual_phase="Stopped" if phase == "Stopped" else "Running")


def test_the_examples_hold_every_kind():
    assert {d.kind for d in ALL_EXAMPLES} == set(kinds.KINDS)


@pytest.mark.parametrize("address", sorted(EXAMPLES))
def test_after_import_the_spec_plans_clean_against_live(address):
    d = EXAMPLES[address]
    kind = kinds.get(d.kind)
    live = simulated_live(d, phase=d.desired_phase)
    rec = adoption.record(kind, live, desired=d)
    assert rec.address == address and rec.workload_id == live["workloadId"]
    assert rec.desired_phase == d.desired_phase
    assert diff.diff_workload(kind, d.body, rec.applied, live) == []


def test_recording_the_raw_live_body_would_be_a_perpetual_diff():
    d = EXAMPLES["Training/7/llama-8b-lora"]
    kind = kinds.get(d.kind)
    live = simulated_live(d)
    raw = diff.project(kind, live)
    removed = {c.path for c in diff.diff_workload(kind, d.body, raw, live)}
    # A generated value, read as "the user removed it" (a default the spec leaves out is no
    # change: the diff knows the kind's defaults, spec.imagePullPolicy among them).
    assert removed == {"spec.storage.pvc[checkpoints].claimName"}
    applied = adoption.record(kind, live).applied["spec"]
    assert "imagePullPolicy" not in applied
    assert "claimName" not in applied["storage"]["pvc"][0]


def test_record_without_a_spec_takes_everything_from_live():
    d = EXAMPLES["Workspace/7/jupyter-research"]
    live = simulated_live(d, phase="Stopped")
    live["projectId"] = 7  # CONTRACT.md §2: it may come back as a number
    rec = adoption.record(kinds.WORKSPACE, live)
    assert (rec.project_id, rec.desired_phase, rec.last_phase) == ("7", "Stopped", "Stopped")
    assert rec.applied["projectId"] == "7" and "desiredPhase" not in rec.applied
    assert not rec.prevent_destroy and rec.project_name is None


def test_record_with_a_spec_takes_its_lifecycle_and_project_name():
    d = EXAMPLES["DistributedInference/7/qwen-32b-serve"]
    rec = adoption.record(kinds.DISTRIBUTED_INFERENCE, simulated_live(d), desired=d)
    assert rec.project_name == d.project_name and rec.project_name
    assert rec.prevent_destroy == d.lifecycle.prevent_destroy


def test_a_completed_training_is_recorded_completed():
    d = EXAMPLES["Training/7/llama-8b-lora"]
    live = {**simulated_live(d), "actualPhase": "Completed"}
    assert adoption.record(kinds.TRAINING, live).completed


LIVE = {"name": "bert", "projectId": "7", "workloadId": "w-1"}


@pytest.mark.parametrize("address, found_kind, live, expected", [
    ("Training/7/bert", "Training", LIVE, []),
    ("Training/7/bert", "Training", {**LIVE, "projectId": 7}, []),
    ("Workspace/7/bert", "Training", LIVE, ["its kind is Training, not Workspace"]),
    ("Training/8/bert", "Training", LIVE, ["its project is 7, not 8"]),
    ("Training/7/gpt", "Training", LIVE, ["its name is 'bert', not 'gpt'"]),
    ("Training/team-a/bert", "Training", LIVE,
     ["its project is 7, not team-a (an address gives the project's id, not its name)"]),
    ("Inference/9/gpt", "Training", LIVE, ["its kind is Training, not Inference",
                                           "its project is 7, not 9",
                                           "its name is 'bert', not 'gpt'"]),
])
def test_mismatches_name_each_field_with_both_values(address, found_kind, live, expected):
    assert adoption.mismatches(address, found_kind, live) == expected


def test_match_listed_pairs_specs_by_project_and_name():
    wanted = [EXAMPLES["Training/7/llama-8b-lora"], EXAMPLES["Workspace/7/jupyter-research"]]
    items = [{"name": "llama-8b-lora", "projectId": 7, "id": "a"},
             {"name": "jupyter-research", "projectId": "8", "id": "b"},  # another project
             {"name": "unrelated", "projectId": "7", "id": "c"},
             {"name": "jupyter-research", "projectId": "7"}]  # no id: unusable
    assert workloads.match_listed(wanted, items) == {"Training/7/llama-8b-lora": "a"}
