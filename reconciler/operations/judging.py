"""Judging a plan: the policy files' rules loaded (`load_policy`: every problem of every
file at once), a plan finished for the renderers, the executor and a saved plan (`finish`:
its GPU impact, then the rules' results, typed fields of `plans.Plan`), and apply's
refusal of a plan whose deny rules failed (`policy_refusal`, `refuse_denied`), and the
actions of a watch cycle that deny rules skip (`denied_actions`).

Callers: the package's `planning`, `applying`, `drifting` and `watching`, and
`reconciler.cli` through `reconciler.operations`.
"""

from __future__ import annotations

from collections.abc import Sequence

from reconciler import errors, gpus
from reconciler.plans import DRY_RUN_REFUSED, Plan
from reconciler.watch import modes


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
    """Why apply refuses `the_plan` for its policy results, or for a write the server's
    dry run refused (a Run:ai policy's); None when it does not."""
    reasons = []
    refused = [c for c in the_plan.changes
               if c.dry_run is not None and c.dry_run.verdict == DRY_RUN_REFUSED]
    if refused:
        reasons.append("the server's dry run refused " + "; ".join(
            f"{c.address} ({c.dry_run.message})" for c in refused))
    report = the_plan.policy
    if report is not None and not report.passed:
        failed = report.failed
        reasons.append(f"the plan breaks {len(failed)} deny rule"
                       f"{'s' if len(failed) != 1 else ''} of the policy "
                       f"({', '.join(r.name for r in failed)})")
    return "; and ".join(reasons) or None


def refuse_denied(the_plan: Plan) -> None:
    """`errors.PolicyDenied` when the plan's policy results failed: nothing is applied."""
    reason = policy_refusal(the_plan)
    if reason:
        raise errors.PolicyDenied(f"{reason}: nothing was applied.", the_plan)


def denied_actions(the_plan: Plan, chosen, state, rules: list | None,
                   files: Sequence[str]) -> dict:
    """address -> why the deny `rules` skip the action `chosen` holds for it
    (`watch.modes.Block`): the rules judge the actions a watch would take, as
    `apply --target` of them would (the rest held as the state has them)."""
    if rules is None or not chosen:
        return {}
    acting = Plan(changes=list(chosen), lineage=the_plan.lineage, serial=the_plan.serial,
                  targets=[c.address for c in chosen], gpu_quotas=the_plan.gpu_quotas,
                  project_names=the_plan.project_names,
                  quota_unknown=the_plan.quota_unknown, quota_pools=the_plan.quota_pools,
                  department_projects=the_plan.department_projects)
    picked = {c.address for c in chosen}
    acting.gpu_elsewhere = gpus.held_elsewhere(
        r for a, r in state.resources.items() if a not in picked)
    report = finish(acting, rules, files).policy
    violations = [(v.address, v.message, r.name) for r in report.failed
                  for v in r.violations]
    return modes.denied_by(violations, chosen)
