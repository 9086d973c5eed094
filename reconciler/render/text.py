"""The human plan: Terraform's vocabulary and symbols, only what changes (pure).

    # DistributedInference/7/llama-70b-serve will be updated in place
      ~ DistributedInference llama-70b-serve (project 7, team-a)
          ~ spec.replicas: 2 -> 4

Symbols: `+` create, `~` update in place, `-/+` replace, `-` delete, `<` suspend,
`>` resume (plain ASCII, so any terminal and any CI log shows them). Values are JSON.
The project's name follows its id when the spec or the state knows it. Before the
summary line, the GPU impact (`render.impact`): the GPUs of each workload apply changes,
and of its project against the project's quota (a project the plan holds: its quota
before and after, per node pool), then the plan's quota warnings.
No-ops are not listed. Colour (ANSI) only when the caller asks for it: the CLI decides
from the TTY, `--no-color` and `NO_COLOR`. Caller: the CLI's `plan` and `apply`.
"""

from __future__ import annotations

from reconciler import kinds
from reconciler.plans import Action, FieldChange, Plan, ResourceChange
from reconciler.render import impact, words

NO_CHANGES = "No changes. Live workloads match the specs."

_RESET, _BOLD, _RED, _GREEN, _YELLOW = "\x1b[0m", "\x1b[1m", "\x1b[31m", "\x1b[32m", "\x1b[33m"
_ACTION_COLOR = {
    Action.CREATE: _GREEN, Action.UPDATE: _YELLOW, Action.DELETE: _RED,
    Action.SUSPEND: _YELLOW, Action.RESUME: _GREEN,
}
_SIGN_COLOR = {"+": _GREEN, "~": _YELLOW, "-": _RED}


def render_plan(plan: Plan, *, color: bool = False) -> str:
    """The plan as text ending in a newline, `NO_CHANGES` when there is nothing to do."""
    paint = _painter(color)
    todo = words.in_apply_order(plan.actionable())
    note = [words.targets_note(plan.targets), ""] if plan.targets else []
    adopting = _adopting(plan)
    recording = words.state_only_lines(plan)
    if recording:
        adopting += [words.STATE_ONLY_NOTE] + [f"  = {line}" for line in recording] + [""]
    if not plan.has_changes:
        return "\n".join(note + adopting + [NO_CHANGES] + _policy(plan, paint)) + "\n"
    lines = note + adopting
    present = {rc.action for rc in todo}
    if todo:
        lines.append("Actions are shown with these symbols:")
    for action in words.SUMMARY_ORDER:
        if action in present:
            lines.append(f"{_symbol(action, paint):>{3 + _width_of_codes(action, paint)}} "
                         f"{words.LEGEND[action]}")
    if todo:
        lines += ["", "runai-reconcile will perform the following actions:", ""]
    for rc in todo:
        lines += _resource(rc, paint)
        lines.append("")
    lines += _gpu_impact(plan, paint)
    lines += _quota_warnings(plan, paint)
    lines.append(paint(_BOLD, "Plan:") + f" {words.plan_summary(plan)}.")
    return "\n".join(lines + _policy(plan, paint)) + "\n"


_POLICY_MARK = {"failed": ("FAIL", _RED), "warned": ("WARN", _YELLOW)}


def _policy(plan: Plan, paint) -> list[str]:
    """After the summary: the policy's verdict, each violation (failures first), notes."""
    report = plan.policy
    if report is None:
        return []
    head = words.policy_heading(report) + ("; " + words.POLICY_FAILED_NOTE if not report.passed
                                           else "")
    lines = ["", paint(_BOLD, head) + "."]
    for status, message in words.policy_violations(report):
        mark, color = _POLICY_MARK[status]
        lines.append(f"  {paint(color, mark)} {message}")
    lines += [f"  {paint(_YELLOW, 'WARN')} (pre-existing) {message}"
              for message in words.policy_preexisting(report)]
    lines += [f"  note: {n}" for n in words.policy_notes(report)]
    return lines


def _gpu_impact(plan: Plan, paint) -> list[str]:
    """The workloads whose GPUs move, then their projects with the quota (a project over
    it in red); nothing when no GPUs move and no project is over quota."""
    found = plan.impact
    listed = impact.projects(found)
    if not listed:
        return []
    out = [paint(_BOLD, impact.TITLE) + f" ({impact.MEANING}):"]
    out += [f"  {w.address}: {impact.moves(w.before, w.after)}" for w in impact.workloads(found)]
    for p in listed:
        line = f"  {impact.project_label(p)}: {impact.moves(p.before, p.after)}, " \
               + impact.quota(p, found.quotas_read)
        out.append(line + (": " + paint(_RED, impact.over_by(p)) if p.over_quota else ""))
        # Its quota per node pool, as read, or before and after where the plan changes it.
        out += [f"      {impact.pool(q)}" for q in p.pools]
    if len(listed) > 1:
        out.append(f"  total: {impact.moves(*impact.total(listed))}")
    return out + [""]


def _quota_warnings(plan: Plan, paint) -> list[str]:
    """What the plan does to quotas that is no error (`plans.QuotaWarning`), one line
    each, as Terraform prints its warnings."""
    found = impact.warnings(plan.impact)
    return [f"{paint(_YELLOW, 'Warning:')} {w.message}" for w in found] + [""] * bool(found)


def _adopting(plan: Plan) -> list[str]:
    adopted = sorted(rc.address for rc in plan.changes if rc.adopted)
    if not adopted:
        return []
    return (["Found live but not in the state (not created by runai-reconcile, or the state "
             "was lost); apply adopts them into the state instead of creating them:"]
            + [f"  = {a}" for a in adopted] + [""])


def _resource(rc: ResourceChange, paint) -> list[str]:
    sym = _symbol(rc.action, paint)
    pad = " " * (3 - len(words.SYMBOLS[rc.action]))
    out = [
        "  " + paint(_BOLD, words.header(rc)),
        f"{pad}{sym} {rc.kind} {rc.name} ({words.manifest_type(rc)}{_scope(rc)} "
        f"{words.project_shown(rc)}"
        + (f", {rc.project_name})" if rc.project_name else ")"),
    ]
    verdict = words.dry_run(rc)
    if verdict is not None:
        refused = rc.dry_run is not None and rc.dry_run.verdict == "refused"
        out.append("      " + paint(_RED if refused else _BOLD, f"# {verdict}"))
    changes = words.field_changes(rc)
    if changes:
        out += [_field(c, paint, rc.sensitive) for c in changes]
    elif rc.action is Action.CREATE and rc.after:
        out += words.created_lines(rc, f"      {paint(_GREEN, '+')} ")
    going = words.takes_with(rc)
    if going:
        out.append(f"      {paint(_RED, '#')} {going}")
    return out


def _scope(rc: ResourceChange) -> str:
    """What the middle of the address names: `project`, or an organisation unit's
    `cluster` (`Kind.address_scope`)."""
    kind = kinds.KINDS.get(rc.kind)
    return kind.address_scope if kind is not None else "project"


def _field(c: FieldChange, paint, sensitive: tuple[str, ...]) -> str:
    before = words.shown(c.path, c.before, sensitive)
    after = words.shown(c.path, c.after, sensitive)
    if c.added:  # live alone holds it: apply takes it out
        sign, text = "-", f"{c.path}: {before}"
    elif c.before is None and c.after is not None:
        sign, text = "+", f"{c.path}: {after}"
    elif c.after is None and c.before is not None:
        sign, text = "-", f"{c.path}: {before} -> null"
    else:
        sign, text = "~", f"{c.path}: {before} -> {after}"
    notes = []
    if c.drift:
        notes.append(words.drift_note(c))
    if c.forces_replacement:
        notes.append(paint(_RED, "forces replacement"))
    line = f"      {paint(_SIGN_COLOR[sign], sign)} {text}"
    return line + ("  # " + ", ".join(notes) if notes else "")


def _symbol(action: Action, paint) -> str:
    if action is Action.REPLACE:
        return paint(_RED, "-") + "/" + paint(_GREEN, "+")
    return paint(_ACTION_COLOR[action], words.SYMBOLS[action])


def _width_of_codes(action: Action, paint) -> int:
    """How many invisible characters colour adds to the symbol (for right alignment)."""
    return len(_symbol(action, paint)) - len(words.SYMBOLS[action])


def _painter(color: bool):
    if not color:
        return lambda code, text: text
    return lambda code, text: f"{code}{text}{_RESET}"
