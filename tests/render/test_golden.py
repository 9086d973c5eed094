"""Rendered plans compared with reviewed golden files; UPDATE_GOLDEN=1 rewrites them.

The goldens are what users see: review a change to them like a change to the code."""

from __future__ import annotations

import pathlib

import pytest

from tests.helpers.golden import assert_golden, versionless

from reconciler.render import json as json_render
from reconciler.render import text as text_render

from tests.helpers.examples import PLANS
from tests.helpers.finishing import finished

GOLDEN = pathlib.Path(__file__).parent / "golden"
RENDERERS = {
    "txt": lambda plan: text_render.render_plan(finished(plan)),
    "json": lambda plan: versionless(json_render.render_plan(finished(plan))) + "\n",
}


@pytest.mark.parametrize("ext", sorted(RENDERERS))
@pytest.mark.parametrize("name", sorted(PLANS))
def test_matches_golden(name, ext):
    assert_golden(GOLDEN / f"{name}.{ext}", RENDERERS[ext](PLANS[name]()))


def test_every_golden_has_an_example():
    stale = {p.name for p in GOLDEN.iterdir()} - {f"{n}.{e}" for n in PLANS for e in RENDERERS}
    assert not stale, f"golden files without an example plan: {sorted(stale)}"
