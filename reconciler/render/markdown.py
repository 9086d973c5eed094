"""Markdown for pull-request comments: plans and drift reports (pure).

A summary table (counts per kind and per action, always complete), the GPU impact table
(per project whose GPUs or quota move: before, after, quota; `render.impact`), the quota
table (per organisation unit and node pool whose GPU quota the plan changes) and the
plan's quota warnings, then one
collapsible `<details>` section per changed workload holding a ```diff block (its GPUs
before and after in its summary line when they move). GitHub
refuses comments longer than 65,535 characters: past `limit` the sections that do not
fit are summarised as one line per workload, then as a count, and the comment says so.
Values are masked as in every format (`words`). Callers: the CLI's `plan`, `show`,
`apply` (preview) and `drift` with `--format markdown`.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from reconciler.plans import (Action, FieldChange, GpuImpact, Plan, ResourceChange,
                              WorkloadGpus)
from reconciler.render import drift as drift_render
from reconciler.render import impact, words

GITHUB_LIMIT = 65_535
PLAN_TITLE = "### runai-reconcile plan"
DRIFT_TITLE = "### runai-reconcile drift report"
NO_CHANGES = "**No changes.** Live workloads match the specs."
NO_DRIFT = "**No drift.** Live workloads match the state."
# Room kept for the "too long" note and the lines that count what is left out.
_RESERVE = 1_200
# Pending changes of a drift report, adoptions and changes to the state alone of a plan
# are listed by name up to this; the rest are counted.
_PENDING_LISTED = 100
_PROJECTS_LISTED = 50  # rows of the GPU impact table; the total counts every project


def render_plan(plan: Plan, *, limit: int = GITHUB_LIMIT) -> str:
    """The plan as a PR comment of at most `limit` characters."""
    todo = words.in_apply_order(plan.actionable())
    head = [PLAN_TITLE, ""]
    if plan.targets:
        head += ["> " + words.targets_note(plan.targets), ""]
    if not plan.has_changes:
        return "\n".join(head + [NO_CHANGES] + _policy(plan)) + "\n"
    head += ["**Plan:** " + words.plan_summary(plan) + ".", ""]
    if todo:
        head += _plan_table(todo)
    found = plan.impact
    head += _gpu_table(found)
    head += _quota_table(found)
    head += _quota_warnings(found)
    adopted = sorted(rc.address for rc in plan.changes if rc.adopted)
    if adopted:
        head += [""] * (head[-1] != "") + ["**Adopted** (found live, not in the state; recorded instead of created): "
                 + ", ".join(f"`{a}`" for a in adopted[:_PENDING_LISTED])
                 + (f" and {len(adopted) - _PENDING_LISTED} more" if len(adopted) > _PENDING_LISTED
                    else "")]
    recording = words.state_only_lines(plan)
    if recording:
        head += [""] * (head[-1] != "") + [words.STATE_ONLY_NOTE, ""]
        head += [f"- {line}" for line in recording[:_PENDING_LISTED]]
        if len(recording) > _PENDING_LISTED:
            head.append(f"- …and {len(recording) - _PENDING_LISTED} more (`runai-reconcile "
                        "plan` lists them)")
    drifted = [rc for rc in todo if rc.is_drift or words.drifted_paths(rc)]
    if drifted:
        n = len(drifted)
        head += ["", f"**Drift:** {n} of {len(todo)} changed workloads "
                 f"{'were' if n != 1 else 'was'} changed outside runai-reconcile."]
    head += _policy(plan)
    head.append("")
    moving = {w.address: w for w in impact.workloads(found)}
    sections = [(_plan_line(rc), _plan_details(rc, moving.get(rc.address))) for rc in todo]
    return _assemble(head, sections, limit, noun="changed workloads")


def render_drift(report, *, limit: int = GITHUB_LIMIT) -> str:
    """A `drift.DriftReport` as a PR comment or CI summary of at most `limit` characters."""
    head = [DRIFT_TITLE, ""]
    pending = report.pending_changes()
    n = len(report.drifted)
    if not n:
        head.append(NO_DRIFT)
    else:
        noun = words.resources_noun([item.kind for item in report.drifted], n)
        head += [f"**Drift:** {n} {noun} changed outside runai-reconcile.", ""]
        head += ["| kind | changed | suspended or resumed | deleted |", "|---|---:|---:|---:|"]
        by_kind: dict[str, list[int]] = {}
        for item in report.drifted:
            row = by_kind.setdefault(item.kind, [0, 0, 0])
            row[{"drift": 0, "phase_drift": 1}.get(item.reason, 2)] += 1
        for kind in sorted(by_kind):
            head.append(f"| {kind} | " + " | ".join(str(v) for v in by_kind[kind]) + " |")
        totals = [sum(r[i] for r in by_kind.values()) for i in range(3)]
        head.append("| **total** | " + " | ".join(f"**{v}**" for v in totals) + " |")
        taken_freed = drift_render.gpus_moved(report)
        if taken_freed:
            head += ["", f"**GPUs:** {taken_freed}."]
    head.append("")
    if report.interrupted:
        head += [words.interrupted_heading(len(report.interrupted), bold=True), ""]
        head += [f"- {words.interrupted_item(item)}" for item in report.interrupted] + [""]
    if report.pending_error:
        head += ["The specs cannot be planned against the state:", "",
                 _fence("\n".join(report.pending_error.splitlines())), ""]
    elif pending:
        m = len(pending)
        head += [f"**Pending:** the specs differ from the state for {m} workload"
                 f"{'s' if m != 1 else ''} (not drift: `runai-reconcile apply` makes them):", ""]
        pending = sorted(pending, key=lambda rc: rc.address)
        head += [_plan_line(rc) for rc in pending[:_PENDING_LISTED]]
        if m > _PENDING_LISTED:
            head.append(f"- …and {m - _PENDING_LISTED} more (`runai-reconcile plan` lists them)")
        head.append("")
    sections = [(_drift_line(item), _drift_details(item)) for item in report.drifted]
    return _assemble(head, sections, limit, noun="drifted workloads")


# The policy section lists this many violations and notes, then counts the rest: the
# table of rules above them keeps every count.
_POLICY_LISTED = 40


def _policy(plan: Plan) -> list[str]:
    """The "Policy" section: the verdict, a table of the rules (failures first), then
    the violations and notes, at most `_POLICY_LISTED` lines of them, shared among the
    rules."""
    report = plan.policy
    if report is None:
        return []
    verdict = words.policy_heading(report)
    if not report.passed:
        verdict += "; " + words.POLICY_FAILED_NOTE
    out = ["", "#### Policy", "", f"**{verdict}.**", "",
           "| rule | check | enforcement | result | violations |", "|---|---|---|---|---:|"]
    for r in report.ordered():
        result = f"**{r.status}**" if r.status != "passed" else r.status
        old = f" (+{len(r.preexisting)} pre-existing)" if r.preexisting else ""
        out.append(f"| {_cell(r.name)} | {_cell(r.description)} | {r.enforcement} | {result} "
                   f"| {len(r.violations)}{old} |")
    groups = [[f"- **{r.status}** {_code(v.message)}" for v in r.violations]
              for r in report.ordered()]
    groups.append([f"- pre-existing {_code(m)}" for m in words.policy_preexisting(report)])
    groups.append([f"- note: {_code(n)}" for n in words.policy_notes(report)])
    listed = _shares([len(g) for g in groups], _POLICY_LISTED)
    items = [line for g, n in zip(groups, listed) for line in g[:n]]
    left = sum(map(len, groups)) - len(items)
    if items:
        out += [""] + items
        if left:
            out.append(f"- …and {left} more (`runai-reconcile show PLANFILE` lists them all)")
    return out


def _shares(sizes: list[int], room: int) -> list[int]:
    """How many of each group to list in `room` lines: one of each in turn, in order, so
    every rule broken has examples however many the first one has."""
    shares = [0] * len(sizes)
    while room and any(s < n for s, n in zip(shares, sizes)):
        for i, n in enumerate(sizes):
            if room and shares[i] < n:
                shares[i] += 1
                room -= 1
    return shares


def _cell(text: str) -> str:
    """Text in a table cell: a code span, its pipes escaped."""
    return _code(text).replace("|", "\\|")


def _code(text: str) -> str:
    """An inline code span (globs and names keep their `*` and `_`)."""
    ticks = "``" if "`" in text else "`"
    return f"{ticks}{text}{ticks}"


# --- layout -------------------------------------------------------------------------

def _assemble(head: list[str], sections: Sequence[tuple[str, str]], limit: int, *,
              noun: str) -> str:
    """Head, then as many detail sections as fit; the rest one line each, then a count."""
    full = "\n".join(head) + "\n" + "".join(d for _, d in sections)
    if len(full.rstrip("\n")) + 1 <= limit:
        return full.rstrip("\n") + "\n"
    budget = limit - _RESERVE - len("\n".join(head)) - 1
    # Every workload named, if possible, is worth more than a few more in detail.
    names_after = [0] * (len(sections) + 1)
    for i in range(len(sections) - 1, -1, -1):
        names_after[i] = names_after[i + 1] + len(sections[i][0]) + 1
    shown: list[str] = []
    used = 0
    for i, (_, details) in enumerate(sections):
        if used + len(details) + min(names_after[i + 1], budget // 2) > budget:
            break
        shown.append(details)
        used += len(details)
    listed: list[str] = []
    for line, _ in sections[len(shown):]:
        if used + len(line) + 1 > budget:
            break
        listed.append(line)
        used += len(line) + 1
    left = len(sections) - len(shown) - len(listed)
    note = (f"> **This comment is shortened** to stay under GitHub's {GITHUB_LIMIT:,}-character "
            f"limit: {len(shown)} of {len(sections)} {noun} are shown in detail"
            + (f", {len(listed)} by name only" if listed else "")
            + (f" and {left} are only counted" if left else "")
            + ". The counts above are complete; `runai-reconcile show PLANFILE` "
              "(or the full report artifact) has everything.")
    out = "\n".join(head) + "\n" + note + "\n\n" + "".join(shown)
    if listed:
        out += "\n".join(listed) + "\n"
    if left:
        out += f"\n…and {left} more {noun}, not listed.\n"
    return out.rstrip("\n") + "\n"


def _plan_table(todo: list[ResourceChange]) -> list[str]:
    actions = words.SUMMARY_ORDER
    rows: dict[str, dict[Action, int]] = {}
    for rc in todo:
        rows.setdefault(rc.kind, {a: 0 for a in actions})[rc.action] += 1
    out = ["| kind | " + " | ".join(a.value for a in actions) + " |",
           "|---|" + "---:|" * len(actions)]
    for kind in sorted(rows):
        out.append(f"| {kind} | " + " | ".join(str(rows[kind][a]) for a in actions) + " |")
    totals = [sum(r[a] for r in rows.values()) for a in actions]
    out.append("| **total** | " + " | ".join(f"**{v}**" for v in totals) + " |")
    return out


def _gpu_table(found: GpuImpact) -> list[str]:
    """The projects whose GPUs move or that are over quota (those over it first when there
    are too many to list), with a total of them all."""
    listed = impact.projects(found)
    if not listed:
        return []
    shown = sorted(listed, key=lambda p: not p.over_quota)[:_PROJECTS_LISTED]
    shown.sort(key=lambda p: (len(p.project_id), p.project_id))
    out = ["", f"**{impact.TITLE}** ({impact.MEANING.replace('->', '→')}):", "",
           "| project | before | after | change | quota | |", "|---|---:|---:|---:|---:|---|"]
    for p in shown:
        q = impact.quota(p, found.quotas_read).removeprefix("quota ").replace("->", "→")
        flag = f"**{impact.over_by(p)}**" if p.over_quota else ""
        out.append(f"| {impact.project_label(p).removeprefix('project ')} | "
                   f"{impact.amount(p.before)} | {impact.amount(p.after)} | "
                   f"{impact.change(p.before, p.after)} | {q} | {flag} |")
    before, after = impact.total(listed)
    out.append(f"| **total** | **{impact.amount(before)}** | **{impact.amount(after)}** | "
               f"**{impact.change(before, after)}** | | |")
    if len(listed) > len(shown):
        out += ["", f"…and {len(listed) - len(shown)} more projects whose GPUs change "
                "(the total counts them)."]
    return out


_QUOTAS_LISTED = 50  # rows of the quota table


def _quota_table(found: GpuImpact) -> list[str]:
    """The organisation units whose GPU quota the plan changes, a row per node pool:
    deserved and limit, before → after."""
    changed = impact.quota_changes(found)
    rows = [(q, pool) for q in changed for pool in q.pools]
    if not rows:
        return []
    out = ["", "**Quota changes** (GPUs per node pool, before → after apply):", "",
           "| unit | node pool | deserved | limit |", "|---|---|---:|---:|"]
    for q, pool in rows[:_QUOTAS_LISTED]:
        out.append(f"| {q.kind} `{q.name}` | {pool.pool} | {impact.deserved(pool, '→')} | "
                   f"{impact.limit(pool, '→')} |")
    if len(rows) > _QUOTAS_LISTED:
        out += ["", f"…and {len(rows) - _QUOTAS_LISTED} more node pools whose quota changes "
                "(`runai-reconcile plan` lists them)."]
    return out


def _quota_warnings(found: GpuImpact) -> list[str]:
    """The plan's quota warnings, one line each."""
    listed = impact.warnings(found)
    if not listed:
        return []
    lines = [f"> **Warning:** {html.escape(w.message, quote=False)}" for w in listed]
    # Two spaces end a line of a quote block without ending the block.
    return [""] + [line + "  " for line in lines[:-1]] + lines[-1:]


def _plan_line(rc: ResourceChange) -> str:
    symbol, rest = words.listed(rc).split(" ", 1)
    return f"- `{symbol}` {rest}"


def _plan_details(rc: ResourceChange, moved: WorkloadGpus | None = None) -> str:
    summary = (f"<code>{html.escape(words.SYMBOLS[rc.action])}</code> "
               f"<b>{html.escape(rc.address)}</b>"
               f"{html.escape(words.address_note(words.manifest_kind(rc), rc.project_name))} "
               f"{html.escape(words.phrase(rc))}")
    if moved is not None:
        summary += " · GPUs " + html.escape(impact.moves(moved.before, moved.after, "→"))
    changes = words.field_changes(rc)
    lines: list[str] = []
    for c in changes:
        lines += _diff_lines(c, rc.sensitive)
    if not changes and rc.action is Action.CREATE and rc.after:
        lines = [f"+ {p}: {text}" for p, text in words.created_shown(rc)]
    if not changes and rc.action is Action.DELETE and rc.before:
        lines = [f"- {p}: {words.shown(p, v, rc.sensitive)}"
                 for p, v in words.leaves(rc.before)]
    going = words.takes_with(rc)
    if going:
        lines.append(f"# {going}")
    body = _fence("\n".join(lines), "diff") + "\n" if lines else ""
    verdict = words.dry_run(rc)
    if verdict is not None:
        summary += " · " + html.escape(f"the server's dry run: {rc.dry_run.verdict}")
        body = f"{_sentence(verdict)}\n\n{body}"
    return f"<details><summary>{summary}</summary>\n\n{body}\n</details>\n\n"


def _sentence(verdict: str) -> str:
    """The dry-run verdict as a line of the section (the server's message as code)."""
    head, _, message = verdict.partition(": ")
    word, _, why = message.partition(": ")
    return f"{head.capitalize()}: **{word}**" + (f": {_code(why)}" if why else "")


def _diff_lines(c: FieldChange, sensitive: tuple[str, ...]) -> list[str]:
    notes = []
    if c.drift:
        notes.append(words.drift_note(c))
    if c.forces_replacement:
        notes.append("forces replacement")
    tail = "  # " + ", ".join(notes) if notes else ""
    before = words.mask_at(c.path, c.before, sensitive)
    after = words.mask_at(c.path, c.after, sensitive)
    out = []
    if c.before is not None:
        out.append(f"- {c.path}: {words.encode(before)}" + (tail if c.after is None else ""))
    if c.after is not None:
        shown = words.KNOWN_AFTER_APPLY if c.after is words.UNKNOWN else words.encode(after)
        out.append(f"+ {c.path}: {shown}{tail}")
    return out


def _drift_line(item) -> str:
    note = f"{item.manifest_kind}, " if item.manifest_kind else ""
    return f"- {item.address} ({note}{_DRIFT_WORDS[item.reason]})"


_DRIFT_WORDS = {
    "drift": "changed outside runai-reconcile",
    "phase_drift": "suspended or resumed outside runai-reconcile",
    "deleted_outside": "deleted outside runai-reconcile",
}


def _drift_details(item) -> str:
    summary = (f"<b>{html.escape(item.address)}</b>"
               f"{html.escape(words.address_note(item.manifest_kind, None))} "
               f"{_DRIFT_WORDS[item.reason]}")
    lines: list[str] = []
    for p in item.paths:
        state = words.mask_at(p.path, p.state, item.sensitive)
        live = words.mask_at(p.path, p.live, item.sensitive)
        lines += [f"- {p.path}: {words.encode(state)}  # state",
                  f"+ {p.path}: {words.encode(live)}  # live"]
    if item.reason == "deleted_outside":
        lines = [f"- workload {item.workload_id}  # in the state, gone from live"]
    if item.gpus_state != item.gpus_live:
        summary += " · GPUs " + html.escape(impact.moves(item.gpus_state, item.gpus_live, "→"))
    return (f"<details><summary>{summary}</summary>\n\n"
            f"{_fence(chr(10).join(lines), 'diff')}\n\n</details>\n\n")


_BACKTICKS = re.compile(r"`{3,}")


def _fence(text: str, lang: str = "") -> str:
    """A code block whose fence is longer than any run of backticks inside it."""
    longest = max((len(m.group()) for m in _BACKTICKS.finditer(text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{lang}\n{text}\n{fence}"

