"""Finishing a plan built by hand in a test, as the planning operation finishes every plan
it makes (its GPU impact, and with rules their results) before a renderer reads it."""

from __future__ import annotations

from reconciler import operations


def finished(plan, rules=None, files=("policy.yaml",)):
    """`plan`, finished: what `operations.finish` does for `plan` and `apply`."""
    return operations.finish(plan, rules, files if rules is not None else ())
