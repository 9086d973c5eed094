"""The machine plan: a versioned JSON document modelled on `terraform show -json` (pure).

The format is documented field by field in docs/plan-format.md; `FORMAT_VERSION`
follows its promise (fields are only added within 1.x; removing or changing the
meaning of one bumps the major). Every address of the plan appears in
`resource_changes`, no-ops included. `change.actions` speaks only Terraform's vocabulary
(`TERRAFORM_ACTIONS`), so tools written for `terraform show -json` read it; our own
action (suspend, resume, replace) is `action` beside it. Callers: the CLI's `--format json` of
`plan` and `show`; and of `apply`, whose one document (`apply_document`, its own
`APPLY_FORMAT_VERSION`, "Apply result" in the same page) holds the plan and the result.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch
import orjson

from reconciler import kinds, plans
from reconciler.plans import Action, GpuImpact, Plan, Report, ResourceChange
from reconciler.render import impact, words

FORMAT_VERSION = "1.9"
APPLY_FORMAT_VERSION = "1.2"
_SORTED = orjson.OPT_SORT_KEYS
_MISSING = object()


# Terraform's `change.actions` for each of our actions. A suspend or a resume is an update
# of the workload's `desiredPhase` (its `changed_paths` say so); Terraform has no verb for
# either, and a tool written for it reads an unknown verb as nothing it knows to show.
TERRAFORM_ACTIONS: dict[Action, tuple[str, ...]] = {
    Action.CREATE: ("create",),
    Action.UPDATE: ("update",),
    Action.REPLACE: ("delete", "create"),
    Action.DELETE: ("delete",),
    Action.SUSPEND: ("update",),
    Action.RESUME: ("update",),
    Action.NOOP: ("no-op",),
}


def actions(action: Action) -> list[str]:
    """`change.actions` (and drift's and apply's `actions`) for `action`."""
    return list(TERRAFORM_ACTIONS[action])


def plan_document(plan: Plan) -> dict[str, Any]:
    changes = sorted(plan.changes, key=lambda rc: rc.address)
    counts = plan.counts()
    doc: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "has_changes": plan.has_changes,
        "resource_changes": [_resource_change(rc) for rc in changes],
        "resource_drift": [d for d in map(_drift, changes) if d is not None],
        "summary": counts,
        "state": {"lineage": plan.lineage, "serial": plan.serial},
        "gpu_impact": _gpu_impact(plan.impact),
    }
    if plan.targets:
        doc["targets"] = sorted(plan.targets)
    if plan.policy is not None:
        doc["policy"] = policy_document(plan.policy)
    return doc


def policy_document(report: Report) -> dict[str, Any]:
    """docs/plan-format.md, "policy": the verdict, then each rule, failures first."""
    def violation(v) -> dict[str, Any]:
        return {"address": v.address, "message": v.message, "unknown": v.unknown}

    return {
        "passed": report.passed,
        "summary": report.summary(),
        "files": list(report.files),
        "rules": [{"name": r.name, "check": r.check, "limit": r.limit,
                   "enforcement": r.enforcement, "scope": r.scope, "on_unknown": r.on_unknown,
                   "source": r.source, "status": r.status,
                   "violations": [violation(v) for v in r.violations],
                   "preexisting": [violation(v) for v in r.preexisting],
                   "notes": list(r.notes)} for r in report.ordered()],
    }


def render_plan(plan: Plan) -> str:
    return json.dumps(plan_document(plan), indent=2, sort_keys=True, ensure_ascii=False)


def _gpu_impact(found: GpuImpact) -> dict[str, Any]:
    """docs/plan-format.md, "gpu_impact": the GPUs before and after apply of every changed
    workload (an action, or GPUs that move), every project's totals and quota."""
    before, after = impact.total(found.projects)
    return {
        "quotas_read": found.quotas_read,
        "workloads": [{"address": w.address, "kind": w.kind, "project_id": w.project_id,
                       "action": w.action.value, "before": impact.gpus_doc(w.before),
                       "after": impact.gpus_doc(w.after), "moves_gpus": w.moves}
                      for w in found.workloads if w.moves or w.action is not Action.NOOP],
        "projects": [{"project_id": p.project_id, "project_name": p.project_name,
                      "before": impact.gpus_doc(p.before), "after": impact.gpus_doc(p.after),
                      "quota": None if p.quota is None else impact.number(p.quota),
                      "quota_unknown": p.unknown,
                      "over_quota": p.over_quota} for p in found.projects],
        "total": {"before": impact.gpus_doc(before), "after": impact.gpus_doc(after)},
        "over_quota": [p.project_id for p in found.projects if p.over_quota],
    }


def _resource_change(rc: ResourceChange) -> dict[str, Any]:
    changes = list(rc.changes)
    implied = words.phase_change(rc)
    if implied is not None:
        changes.append(implied)
    return {
        "address": rc.address,
        "kind": rc.kind,
        **words.manifest_kind_field(words.manifest_kind(rc)),
        "name": rc.name,
        "project_id": rc.project_id,
        "workload_id": rc.workload_id,
        "action": rc.action.value,
        "change": _change(rc),
        "action_reason": rc.reason,
        "replace_paths": rc.replace_paths,
        "changed_paths": [
            {"path": c.path, "before": words.mask_at(c.path, c.before, rc.sensitive),
             "after": words.mask_at(c.path, c.after, rc.sensitive), "drift": c.drift,
             "added": c.added, "forces_replacement": c.forces_replacement}
            for c in changes
        ],
        "patch": words.mask_body(rc.patch, rc.sensitive) if rc.action is Action.UPDATE else None,
        "desired_phase": rc.desired_phase,
        "live_phase": rc.live_phase,
        "adopted": rc.adopted,
        "state_changes": rc.state_changes,
    }


def _change(rc: ResourceChange) -> dict[str, Any]:
    """`actions`, the masked `before` and `after`, and for an update or replace the RFC 6902
    `patch` between them: made from the masked bodies, so it holds no sensitive value."""
    before = words.mask_body(rc.before, rc.sensitive)
    after = words.mask_body(rc.after, rc.sensitive)
    patch = None
    if rc.action is Action.UPDATE and isinstance(before, dict) and rc.patch is not None:
        patch = _update_patch(kinds.get(rc.kind), before, words.mask_body(rc.patch, rc.sensitive))
    elif rc.action in (Action.UPDATE, Action.REPLACE):
        patch = jsonpatch.make_patch(*_unshared(before, after)).patch
    return {"actions": actions(rc.action), "before": before, "after": after, "patch": patch}


def _update_patch(kind: kinds.Kind, before: dict, update: dict) -> list:
    """The JSON Patch of what an update does to `before`: each updatable field that the
    update body (`ResourceChange.patch`) holds, from its value in `before` to the sent one,
    with the server's defaults inside it that the update leaves out kept
    (`Kind.with_defaults_aligned`): no operation on a field apply does not send."""
    was: dict = {}
    sent: dict = {}
    roots = kind.updatable_paths
    for root in roots:
        if any(other != root and kinds.under(root, other) for other in roots):
            continue  # inside another updatable field, which is sent whole
        parts = root.split(".")
        value = _get(update, parts)
        if value is not _MISSING:
            _put(sent, parts, value)
            old = _get(before, parts)
            if old is not _MISSING:
                _put(was, parts, old)
    sent, was = kind.with_defaults_aligned(sent, was)
    return jsonpatch.make_patch(*_unshared(was, sent)).patch


def _get(body: Any, parts: list[str]) -> Any:
    for p in parts:
        body = body.get(p, _MISSING) if isinstance(body, dict) else _MISSING
    return body


def _put(body: dict, parts: list[str], value: Any) -> None:
    for p in parts[:-1]:
        body = body.setdefault(p, {})
    body[parts[-1]] = value


def _unshared(before: Any, after: Any) -> tuple[Any, Any]:
    """Both objects without the members they share (equal as JSON), at every depth: the same
    patch, but jsonpatch does not walk the bulk of two bodies that differ in a field."""
    if type(before) is not dict or type(after) is not dict:
        return before, after
    shared = {k for k in before.keys() & after.keys() if _same(before[k], after[k])}
    b = {k: v for k, v in before.items() if k not in shared}
    a = {k: v for k, v in after.items() if k not in shared}
    for k in b.keys() & a.keys():
        b[k], a[k] = _unshared(b[k], a[k])
    return b, a


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON: Python's == also takes 1, 1.0 and true for one value."""
    if a != b:
        return False
    try:
        return orjson.dumps(a, option=_SORTED) == orjson.dumps(b, option=_SORTED)
    except TypeError:  # orjson refuses integers beyond 64 bits
        return words.encode(a) == words.encode(b)


def _drift(rc: ResourceChange) -> dict[str, Any] | None:
    paths = words.drifted_paths(rc)
    if not paths and not rc.is_drift:
        return None
    # Terraform's words for what happened outside, so that a tool that reads every
    # `resource_drift[].change.actions` of a Terraform plan reads ours.
    outside = ["delete"] if rc.reason == plans.REASON_DELETED_OUTSIDE else ["update"]
    return {"address": rc.address, "kind": rc.kind,
            **words.manifest_kind_field(words.manifest_kind(rc)),
            "action_reason": rc.reason, "paths": paths, "change": {"actions": outside}}


# --- apply result -------------------------------------------------------------------

_SIGNALS = {2: "SIGINT", 15: "SIGTERM"}


def apply_document(result) -> dict[str, Any]:
    """An `executor.ApplyResult` (read by its attributes: the renderers sit below the
    executor): the plan performed, then one outcome per change that changes anything."""
    plan = result.plan
    by_addr = {o.address: o for o in [*result.outcomes, *result.unknown]}
    outcomes = []
    for rc in sorted(plan.changes if plan else [], key=lambda rc: rc.address):
        if not rc.changes_state:
            continue
        o = by_addr.get(rc.address)  # none: skipped after a signal (`result.not_started`)
        status = o.status if o is not None else "not_started"
        outcomes.append({
            "address": rc.address, "kind": rc.kind,
            **words.manifest_kind_field(words.manifest_kind(rc)),
            "name": rc.name, "project_id": rc.project_id, "action": rc.action.value,
            "actions": actions(rc.action), "adopted": rc.adopted,
            "outcome": status,
            "error": o.message if o is not None and status == "failed" else None,
            "detail": o.message if o is not None and status == "unknown" else None,
            "workload_id": o.workload_id if o is not None else rc.workload_id,
        })
    tally = {k: sum(1 for e in outcomes if e["outcome"] == k)
             for k in ("done", "failed", "not_started", "unknown")}
    return {
        "format_version": APPLY_FORMAT_VERSION,
        "plan": plan_document(plan) if plan is not None else None,
        "outcomes": outcomes,
        "summary": {**tally, **result.counts()},
        "interrupted": result.interrupted,
        "signal": _SIGNALS.get(result.signal) if result.signal else None,
    }


def render_apply(result) -> str:
    return json.dumps(apply_document(result), indent=2, sort_keys=True, ensure_ascii=False)
