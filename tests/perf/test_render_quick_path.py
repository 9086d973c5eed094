"""A create's leaves in the plan's text and markdown (`words.created_shown`, the text's
`created_lines`): a body in which nothing can be masked is shown without a masking check
per leaf, and whatever the body and the spec's `lifecycle.sensitive` paths, each leaf
reads exactly as `words.shown` masks it."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler import gpus, planner
from reconciler.desired.types import Lifecycle
from reconciler.render import markdown, text, words
from reconciler.state.model import State
from tests.helpers.desired import dt
from tests.helpers.masking_values import FIELDS, VALUES, sensitive_paths

SENSITIVE = sensitive_paths()


def _create(spec: dict, sensitive: tuple[str, ...] = ()):
    d = dt("quick")
    d = dataclasses.replace(d, body={**d.body, "spec": spec},
                            lifecycle=Lifecycle(sensitive=sensitive))
    plan = planner.make_plan([d], State(), {})
    plan.gpu_impact = gpus.impact_of(plan)
    return plan


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(FIELDS, VALUES, max_size=4), SENSITIVE)
def test_each_leaf_reads_as_shown_masks_it(spec, sensitive):
    rc = _create(spec, tuple(sensitive)).changes[0]
    assert words.created_shown(rc) == [(p, words.shown(p, v, rc.sensitive))
                                       for p, v in words.created_leaves(rc)]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(FIELDS, VALUES, max_size=4), SENSITIVE, st.booleans())
def test_the_texts_lines_are_the_leaves_as_shown(spec, sensitive, stopped):
    """The text's lines of a create (`words.created_lines`, made in one walk when nothing
    can be masked) are `created_shown`'s pairs, in its order, `desiredPhase` included."""
    rc = _create(spec, tuple(sensitive)).changes[0]
    if stopped:
        rc = dataclasses.replace(rc, desired_phase="Stopped")
    assert words.created_lines(rc, "  + ") == [f"  + {p}: {t}"
                                               for p, t in words.created_shown(rc)]


def test_a_body_with_nothing_to_mask_is_shown_without_a_check_per_leaf(monkeypatch):
    checked: list[str] = []
    real = words.shown

    def counting(path, value, sensitive=()):
        checked.append(path)
        return real(path, value, sensitive)

    monkeypatch.setattr(words, "shown", counting)
    plain = _create({"image": "nvcr.io/nvidia/pytorch:24.05-py3", "numWorkers": 2,
                     "environmentVariables": [{"name": "LOG_LEVEL", "value": "debug"}]})
    shown = text.render_plan(plain) + markdown.render_plan(plain)
    assert "+ spec.environmentVariables[LOG_LEVEL]: " \
           '{"name": "LOG_LEVEL", "value": "debug"}' in shown
    assert checked == []

    secret = _create({"image": "nvcr.io/nvidia/pytorch:24.05-py3",
                      "environmentVariables": [{"name": "API_TOKEN", "value": "s3cr3t"}]})
    shown = text.render_plan(secret) + markdown.render_plan(secret)
    assert "s3cr3t" not in shown and words.MASK in shown
    assert "spec.environmentVariables[API_TOKEN]" in checked
