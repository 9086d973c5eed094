"""Drift reports as text and as a versioned JSON document (pure).

Read a finished `drift.DriftReport`; the markdown form is `render.markdown.render_drift`.
Drift (live differs from the state) comes first, with the GPUs each drifted workload
holds as applied and live, and in all how many drift took or freed; pending changes (the specs differ from
the state, which is not drift) are listed after it, apart. Values are masked as in every
format (`words`). Caller: the CLI's `drift`. The JSON is documented in docs/plan-format.md.
"""

from __future__ import annotations

import json
from typing import Any

from reconciler.render import impact, words
from reconciler.render import json as json_render

FORMAT_VERSION = "1.5"
NO_DRIFT = "No drift. Live workloads match the state."

_WORDS = {
    "drift": "was changed outside runai-reconcile",
    "phase_drift": "was suspended or resumed outside runai-reconcile",
    "deleted_outside": "was deleted outside runai-reconcile",
}


def render_text(report) -> str:
    lines: list[str] = []
    if not report.drifted:
        lines.append(NO_DRIFT)
    else:
        n = len(report.drifted)
        noun = words.resources_noun([item.kind for item in report.drifted], n)
        lines += [f"Drift: {n} {noun} changed outside runai-reconcile.", ""]
        for item in report.drifted:
            lines.append(f"  # {item.address}{words.address_note(item.manifest_kind, None)} "
                         f"{_WORDS[item.reason]}")
            for p in item.paths:
                state = words.shown(p.path, p.state, item.sensitive)
                live = words.shown(p.path, p.live, item.sensitive)
                if p.added:
                    lines.append(f"      + {p.path}: live {live}  # added outside "
                                 "runai-reconcile, not in the state")
                else:
                    lines.append(f"      ~ {p.path}: state {state}, live {live}")
            if item.reason == "deleted_outside":
                lines.append(f"      - {words.resources_noun([item.kind], 1)} "
                             f"{item.workload_id} is in the state, gone from live")
            if item.gpus_state != item.gpus_live:
                lines.append(f"      GPUs: state {impact.amount(item.gpus_state)}, live "
                             f"{impact.amount(item.gpus_live)} "
                             f"({impact.change(item.gpus_state, item.gpus_live)})")
            lines.append("")
        taken_freed = gpus_moved(report)
        if taken_freed:
            lines += [f"GPUs: {taken_freed}.", ""]
        lines.append("`runai-reconcile plan` shows how apply would bring them back to the specs.")
    if report.interrupted:
        lines += ["", words.interrupted_heading(len(report.interrupted))]
        lines += [f"  {words.interrupted_item(item)}" for item in report.interrupted]
    pending = report.pending_changes()
    if report.pending_error:
        lines += ["", "The specs cannot be planned against the state:", report.pending_error]
    elif pending:
        m = len(pending)
        lines += ["", f"Pending (not drift): the specs differ from the state for {m} "
                      f"workload{'s' if m != 1 else ''}; `runai-reconcile apply` makes them:"]
        for rc in sorted(pending, key=lambda rc: rc.address):
            symbol, rest = words.listed(rc).split(" ", 1)
            lines.append(f"  {symbol:>3} {rest}")
            for c in words.changes_shown(rc):
                before = words.shown(c.path, c.before, rc.sensitive)
                after = words.shown(c.path, c.after, rc.sensitive)
                lines.append(f"        ~ {c.path}: {before} -> {after}")
    return "\n".join(lines).rstrip("\n") + "\n"


def gpus_moved(report) -> str | None:
    """`drift took 8 and freed 4 (live against the state)`, None when it moved none; at each
    end when they differ: `drift took (min 1, max 6) and freed 0 ...`."""
    taken, freed = report.gpus_moved()
    if not (taken.low or taken.high or freed.low or freed.high):
        return None

    def said(g) -> str:
        out = impact.ends(g.low, g.high)
        return out if g.low == g.high else f"({out})"
    return f"drift took {said(taken)} and freed {said(freed)} (live against the state)"


def report_document(report) -> dict[str, Any]:
    pending = sorted(report.pending_changes(), key=lambda rc: rc.address)
    taken, freed = report.gpus_moved()
    return {
        "format_version": FORMAT_VERSION,
        "has_drift": report.has_drift,
        "drift": [{
            "address": item.address, "kind": item.kind,
            **words.manifest_kind_field(item.manifest_kind),
            "name": item.name, "project_id": item.project_id, "workload_id": item.workload_id,
            "reason": item.reason,
            "paths": [{"path": p.path,
                       "state": words.mask_at(p.path, p.state, item.sensitive),
                       "live": words.mask_at(p.path, p.live, item.sensitive),
                       "added": p.added}
                      for p in item.paths],
            "gpus": {"state": impact.gpus_doc(item.gpus_state),
                     "live": impact.gpus_doc(item.gpus_live)},
        } for item in report.drifted],
        "pending_changes": [{
            "address": rc.address, "kind": rc.kind,
            **words.manifest_kind_field(words.manifest_kind(rc)), "action": rc.action.value,
            "actions": json_render.actions(rc.action), "action_reason": rc.reason, "state_changes": rc.state_changes,
            "changed_paths": [{"path": c.path,
                               "before": words.mask_at(c.path, c.before, rc.sensitive),
                               "after": words.mask_at(c.path, c.after, rc.sensitive)}
                              for c in rc.changes],
        } for rc in pending],
        "interrupted": [{
            "address": item.address, "kind": item.kind,
            **words.manifest_kind_field(item.manifest_kind), "name": item.name,
            "project_id": item.project_id, "workload_id": item.workload_id,
        } for item in report.interrupted],
        "pending_error": report.pending_error,
        "summary": {"drifted": len(report.drifted), "pending": len(pending),
                    "interrupted": len(report.interrupted),
                    "gpus_taken": impact.number(taken.high),
                    "gpus_freed": impact.number(freed.high),
                    "gpus_taken_min": impact.number(taken.low),
                    "gpus_freed_min": impact.number(freed.low)},
        "state": {"lineage": report.lineage, "serial": report.serial},
    }


def render_json(report) -> str:
    return json.dumps(report_document(report), indent=2, sort_keys=True, ensure_ascii=False)
