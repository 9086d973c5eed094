"""Judging a plan: the policy files' rules loaded (`load_policy`: every problem of every
file at once), a plan finished for the renderers, the executor and a saved plan (`finish`:
its GPU impact, then the rules' results, typed fields of `plans.Plan`), and apply's
refusal of a plan whose deny rules failed (`policy_refusal`, `refuse_denied`).

Callers: the package's `planning`, `applying`, `drifting` and `watching`, and
`reconciler.cli` through `reconciler.operations`.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler import errors, gpus
from reconciler.plans import Plan


def load_policy(paths: Sequence[str]) -> list | None:
    """The rules (`policy.Source`s) of the policy files at `paths`, None without any;
    `errors.PolicyFileError` lists every problem (file, line, field) of every file."""
    if not paths:
        return None
    from reconciler import policy
    from reconciler.desired import documents
    from reconciler.desired.sources import Problem

    rules: list = []
    problems: list[Problem] = []
    for path in paths:
        doc, raw, found = documents.read_model(path, policy.PolicyFile)
        problems += [Problem(p.file, p.line, p.path, policy.problem_words(p.path, p.message))
                     for p in found]
        if doc is not None and raw is not None:
            rules += policy.sources_of(path, doc, raw.line_of)
    problems += [Problem(f, line, "", m) for f, line, m in policy.duplicate_names(rules)]
    if problems:
        raise errors.PolicyFileError([str(p) for p in problems])
    return rules


def finish(the_plan: Plan, rules: list | None, files: Sequence[str]) -> Plan:
    """Finish `the_plan` for the renderers, the executor and a saved plan: its GPU impact
    (from its changes and the quota reads it carries) and, with `rules` (None: no
    policy, and a saved plan keeps the results it recorded), their results
    (`plan.policy`), which read that impact. Returns the plan."""
    the_plan.gpu_impact = gpus.impact_of(the_plan)
    if rules is not None:
        from reconciler import policy

        the_plan.policy = policy.evaluate(rules, the_plan, files=files)
    return the_plan


def policy_refusal(the_plan: Plan) -> str | None:
    """Why apply refuses `the_plan` for its policy results, None when it does not."""
    report = the_plan.policy
    if report is None or report.passed:
        return None
    failed = report.failed
    return (f"the plan breaks {len(failed)} deny rule{'s' if len(failed) != 1 else ''} of the "
            f"policy ({', '.join(r.name for r in failed)})")


def refuse_denied(the_plan: Plan) -> None:
    """`errors.PolicyDenied` when the plan's policy results failed: nothing is applied."""
    reason = policy_refusal(the_plan)
    if reason:
        raise errors.PolicyDenied(f"{reason}: nothing was applied.", the_plan)
