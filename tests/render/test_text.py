"""The text renderer: what a reviewer reads in a terminal or a CI log."""

from __future__ import annotations

import copy
import re

from reconciler import plans
from reconciler.plans import Action, FieldChange, Plan
from reconciler.render import text as text_render

from tests.helpers import examples
from tests.helpers.finishing import finished

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_colour_only_when_asked_and_only_colour():
    plan = examples.PLANS["mixed"]()
    plain = text_render.render_plan(finished(plan))
    coloured = text_render.render_plan(finished(plan), color=True)
    assert "\x1b[" not in plain
    assert "\x1b[32m+" in coloured and "\x1b[31m-" in coloured and "\x1b[33m~" in coloured
    assert ANSI.sub("", coloured) == plain


def test_nothing_to_do_says_so_and_lists_no_noops():
    out = text_render.render_plan(finished(examples.PLANS["no_changes"]()))
    assert out == "No changes. Live workloads match the specs.\n"


def test_noops_are_not_listed_among_changes():
    out = text_render.render_plan(finished(examples.PLANS["mixed"]()))
    assert "steady" not in out and "finished-run" not in out
    assert "Plan: 1 to create, 1 to update, 1 to replace, 1 to delete, 0 to suspend, 1 to resume." \
        in out.splitlines()


def test_each_changed_workload_has_header_symbol_and_fields_in_address_order():
    plan = examples.plan(examples.update(), examples.create())
    plan.changes.reverse()  # the renderer sorts, whatever the order it is given
    lines = text_render.render_plan(finished(plan)).splitlines()
    headers = [ln.strip() for ln in lines if ln.strip().startswith("# ")]
    assert headers == ["# DistributedInference/7/llama-70b-serve will be updated in place",
                       "# DistributedTraining/7/bert-ddp will be created"]
    assert "  ~ DistributedInference llama-70b-serve (project 7)" in lines
    assert "      ~ spec.replicas: 2 -> 4" in lines
    assert '      + spec.image: "nvcr.io/nvidia/pytorch:24.05-py3"' in lines


def test_replace_marks_every_path_that_forces_it():
    out = text_render.render_plan(finished(examples.PLANS["replace"]()))
    image = [ln for ln in out.splitlines() if "spec.image" in ln]
    assert image == ['      ~ spec.image: "nvcr.io/nvidia/pytorch:24.05-py3" -> '
                     '"nvcr.io/nvidia/pytorch:24.10-py3"  # forces replacement']
    assert "-/+ DistributedTraining llama-ft-ddp (project 7)" in out.splitlines()


def test_drift_is_said_in_the_header_and_on_the_field():
    out = text_render.render_plan(finished(examples.PLANS["update_drift"]()))
    assert "was changed outside runai-reconcile (drift) and will be updated in place" in out
    assert "~ spec.replicas: 4 -> 2  # changed outside runai-reconcile" in out


def test_a_drifted_field_inside_a_user_change_is_marked_alone():
    rc = examples.update()
    rc.changes.append(FieldChange("spec.workers", 1, 2, drift=True))
    lines = text_render.render_plan(finished(examples.plan(rc))).splitlines()
    assert "      ~ spec.replicas: 2 -> 4" in lines
    assert "      ~ spec.workers: 1 -> 2  # changed outside runai-reconcile" in lines


def test_phase_changes_without_field_changes_still_show_the_phase():
    out = text_render.render_plan(finished(examples.PLANS["suspend"]()))
    assert '  < DistributedTraining bert-ddp (project 7)\n      ~ desiredPhase: "Running" -> "Stopped"\n' in out


def test_secret_looking_env_values_never_appear():
    for name, build in examples.PLANS.items():
        out = text_render.render_plan(finished(build()), color=True)
        for secret in ("hf_abcdefghijklmnop", "hf_old", "hf_new"):
            assert secret not in out, name


def test_unknown_reasons_fall_back_to_the_actions_wording():
    rc = examples.delete()
    rc.reason = plans.REASON_DESTROY if hasattr(plans, "REASON_DESTROY") else "destroy_requested"
    out = text_render.render_plan(finished(examples.plan(rc)))
    assert "# DistributedTraining/7/old-sweep will be destroyed\n" in out


def test_rendering_does_not_change_the_plan():
    plan = examples.PLANS["mixed"]()
    before = copy.deepcopy(plan)
    text_render.render_plan(finished(plan), color=True)
    assert plan == before


def test_all_actions_have_a_legend_line():
    every = [examples.create(), examples.update(), examples.replace(), examples.delete(),
             examples.suspend(), examples.resume_phase_drift()]
    every[4].address = "DistributedTraining/7/zz"  # suspend and resume of distinct workloads
    out = text_render.render_plan(finished(Plan(changes=every)))
    legend = out.split("\n\n")[0].splitlines()[1:]
    assert legend == ["  + create", "  ~ update in place", "-/+ replace (delete, then create)",
                      "  - delete", "  < suspend", "  > resume"]
    assert {a for a in Action if a is not Action.NOOP} == {rc.action for rc in every}
