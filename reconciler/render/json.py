"""The machine plan: a versioned JSON document modelled on `terraform show -json` (pure).

The format is documented field by field in docs/plan-format.md; `FORMAT_VERSION`
follows its promise (fields are only added within 1.x; removing or changing the
meaning of one bumps the major). Every address of the plan appears in
`resource_changes`, no-ops included. `change.actions` speaks only Terraform's vocabulary
(`TERRAFORM_ACTIONS`), so tools written for `terraform show -json` read it; our own
action (suspend, resume, replace) is `action` beside it.

The document is also a plan in Terraform's shape, for the tools that read one (checkov's
`terraform_plan` framework, OPA/Rego policies, terraform-json readers): each change and
drift entry has `mode`, `type` (`resource_type`), `provider_name`, and `change.after` is the
planned object (`before` with what apply changes: `_planned`), with `after_unknown` and the
sensitivity masks (`true` where `masking` hides a value); `planned_values`, `prior_state`
and `terraform_version` hold the workloads after and before apply.

Callers: the CLI's `--format json` of `plan` and `show`; and of `apply`, whose one document
(`apply_document`, its own `APPLY_FORMAT_VERSION`, "Apply result" in the same page) holds
the plan and the result.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import jsonpatch
import orjson

from reconciler import __version__, kinds, plans
from reconciler.plans import Action, GpuImpact, Plan, ProjectImpact, Report, ResourceChange
from reconciler.render import impact, words

FORMAT_VERSION = "1.10"
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


# Terraform's resource identity beside ours: every workload is a managed resource of one
# provider, its type named for its kind (docs/plan-format.md has the table).
MODE = "managed"
PROVIDER_NAME = "runai-reconcile"
SCHEMA_VERSION = 0
# What a create (or a replace's create) leaves to the server: known after apply.
UNKNOWN_ON_CREATE = {"workloadId": True}
# Terraform's `prior_state.format_version`: the shape of its state representation.
STATE_FORMAT_VERSION = "1.0"
_WORD = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def resource_type(kind: str) -> str:
    """`type` of a kind's workloads: `runai_` and the kind in snake case
    (`DistributedTraining` -> `runai_distributed_training`, `NIMService` ->
    `runai_nim_service`)."""
    return "runai_" + _WORD.sub("_", kind).lower()


def plan_document(plan: Plan) -> dict[str, Any]:
    changes = sorted(plan.changes, key=lambda rc: rc.address)
    counts = plan.counts()
    shown = [(rc, _bodies(rc)) for rc in changes]
    doc: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "terraform_version": __version__,
        "has_changes": plan.has_changes,
        "resource_changes": [_resource_change(rc, b) for rc, b in shown],
        "resource_drift": [d for d in map(_drift, changes) if d is not None],
        "planned_values": {"root_module": {"resources": [
            _resource(rc, b.after, b.after_sensitive) for rc, b in shown
            if b.after is not None]}},
        "prior_state": {
            "format_version": STATE_FORMAT_VERSION, "terraform_version": __version__,
            "values": {"root_module": {"resources": [
                _resource(rc, b.before, b.before_sensitive) for rc, b in shown
                if b.before is not None]}}},
        "summary": counts,
        "state": {"lineage": plan.lineage, "serial": plan.serial},
        "gpu_impact": _gpu_impact(plan.impact),
    }
    if plan.targets:
        doc["targets"] = sorted(plan.targets)
    if plan.impact.warnings:  # the plan's warnings: about quotas, for now
        doc["warnings"] = [{"code": w.code, "address": w.address, "message": w.message}
                           for w in impact.warnings(plan.impact)]
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
    return _dumps(plan_document(plan))


def _dumps(doc: dict[str, Any]) -> str:
    """`json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)`, by orjson: the same
    text (but for the spelling of a few floats, `1e16` for `1e+16`), in a tenth of the time
    a plan's bodies take `json` (planned_values and prior_state hold each body again)."""
    try:
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | _SORTED).decode()
    except TypeError:  # an integer beyond 64 bits
        return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False)


def _gpu_impact(found: GpuImpact) -> dict[str, Any]:
    """docs/plan-format.md, "gpu_impact": the GPUs before and after apply of every changed
    workload (an action, or GPUs that move), every project's totals and quota."""
    before, after = impact.total(found.projects)
    out = {
        "quotas_read": found.quotas_read,
        "workloads": [{"address": w.address, "kind": w.kind, "project_id": w.project_id,
                       "action": w.action.value, "before": impact.gpus_doc(w.before),
                       "after": impact.gpus_doc(w.after), "moves_gpus": w.moves}
                      for w in found.workloads if w.moves or w.action is not Action.NOOP],
        "projects": [_project(p) for p in found.projects],
        "total": {"before": impact.gpus_doc(before), "after": impact.gpus_doc(after)},
        "over_quota": [p.project_id for p in found.projects if p.over_quota],
    }
    if found.quotas:
        out["quota_changes"] = [
            {"address": q.address, "kind": q.kind, "name": q.name, "quota_of": q.unit,
             "action": q.action.value, "project_id": q.project_id,
             "node_pools": [impact.quota_doc(pool) for pool in q.pools]}
            for q in impact.quota_changes(found)]
    return out


def _project(p: ProjectImpact) -> dict[str, Any]:
    out = {"project_id": p.project_id, "project_name": p.project_name,
           "before": impact.gpus_doc(p.before), "after": impact.gpus_doc(p.after),
           "quota": None if p.quota is None else impact.number(p.quota),
           "quota_unknown": p.unknown, "over_quota": p.over_quota}
    if p.pools or p.planned_by or p.quota_changes:  # its quota per node pool is known
        out.update({"planned_by": p.planned_by,
                    "quota_before": None if p.quota_before is None
                    else impact.number(p.quota_before),
                    "quota_below_held": p.below_held,
                    "node_pools": [impact.quota_doc(q) for q in p.pools]})
    return out


def _identity(rc: ResourceChange) -> dict[str, Any]:
    """Terraform's members naming a resource: `mode`, `type`, `name`, `provider_name`."""
    return {"mode": MODE, "type": resource_type(rc.kind), "name": rc.name,
            "provider_name": PROVIDER_NAME}


def _resource(rc: ResourceChange, values: Any, sensitive: Any) -> dict[str, Any]:
    """One resource of `planned_values` or `prior_state`, in Terraform's shape."""
    return {"address": rc.address, **_identity(rc), "schema_version": SCHEMA_VERSION,
            "values": values, "sensitive_values": sensitive or {}}


def _resource_change(rc: ResourceChange, bodies: _Bodies) -> dict[str, Any]:
    changes = list(rc.changes)
    implied = words.phase_change(rc)
    if implied is not None:
        changes.append(implied)
    return {
        "address": rc.address,
        **_identity(rc),
        "kind": rc.kind,
        **words.manifest_kind_field(words.manifest_kind(rc)),
        "project_id": rc.project_id,
        "workload_id": rc.workload_id,
        "action": rc.action.value,
        "change": _change(rc, bodies),
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
        **({"takes_with": list(rc.takes_with)}
           if rc.takes_with and rc.action in (Action.DELETE, Action.REPLACE) else {}),
        **({"dry_run": {"verdict": rc.dry_run.verdict, "message": rc.dry_run.message}}
           if rc.dry_run is not None else {}),
    }


@dataclass(frozen=True)
class _Bodies:
    """A change's workload before and after apply as shown (masked), and where `masking`
    hid a value in each (Terraform's sensitivity masks)."""
    before: Any
    after: Any
    before_sensitive: Any
    after_sensitive: Any


def _bodies(rc: ResourceChange) -> _Bodies:
    before, after = _planned(rc)
    shown_before = words.mask_body(before, rc.sensitive)
    if after is before:
        shown_after = shown_before
    else:
        shown_after = words.mask_body(after, rc.sensitive)
    before_sensitive = _sensitivity(before, shown_before)
    after_sensitive = (before_sensitive if after is before
                       else _sensitivity(after, shown_after))
    return _Bodies(shown_before, shown_after, before_sensitive, after_sensitive)


def _planned(rc: ResourceChange) -> tuple[Any, Any]:
    """The workload's body before apply (live, or as last applied without a refresh) and the
    planned object after it: for an update, `before` with what the update sends
    (`_update_patch`: the server's defaults it leaves out kept); for a create or a replace,
    the body created; none after a delete; for a suspend, a resume or a no-op, the body as
    it is (the phase is not part of it; none when nothing is live)."""
    before = rc.before
    if rc.action is Action.DELETE:
        return before, None
    if rc.action in (Action.CREATE, Action.REPLACE):
        return before, rc.after
    if rc.action is Action.UPDATE:
        if isinstance(before, dict) and rc.patch is not None:
            ops = _update_patch(kinds.get(rc.kind), before, rc.patch)
            return before, jsonpatch.apply_patch(before, ops) if ops else before
        return before, rc.after
    return before, before


def _change(rc: ResourceChange, bodies: _Bodies) -> dict[str, Any]:
    """`actions`, the masked `before` and `after` (the planned object), Terraform's
    `after_unknown`, sensitivity masks and `replace_paths`, and for an update or replace
    the RFC 6902 `patch` from `before` to `after`: made from the masked bodies, so it
    holds no sensitive value, and from their members in key order, so it is the same
    whatever order the API or a saved plan gave them."""
    before, after = bodies.before, bodies.after
    patch = None
    if rc.action in (Action.UPDATE, Action.REPLACE):
        patch = jsonpatch.make_patch(*_unshared(_keys_sorted(before),
                                                _keys_sorted(after))).patch
    created = rc.action in (Action.CREATE, Action.REPLACE)
    return {"actions": actions(rc.action), "before": before, "after": after, "patch": patch,
            "after_unknown": ({**UNKNOWN_ON_CREATE, **dict.fromkeys(rc.known_after, True)}
                              if created else {}),
            "before_sensitive": bodies.before_sensitive,
            "after_sensitive": bodies.after_sensitive,
            "replace_paths": [_steps(p, rc.before, rc.after) for p in rc.replace_paths]}


def _sensitivity(value: Any, shown: Any) -> Any:
    """Terraform's sensitivity mask of `value` (shown as `shown`, its masked copy): `true`
    where `masking` hid a value; an object for an object, a list (of `false` for what is
    not hidden) for a list, nested values that are not hidden left out; `false` for a
    body that is none."""
    if isinstance(shown, str) and shown == words.MASK and value != words.MASK:
        return True
    if isinstance(value, dict) and isinstance(shown, dict):
        out = {}
        for k, v in value.items():
            s = _sensitivity(v, shown.get(k))
            if s is not False:
                out[k] = s
        return out
    if isinstance(value, list) and isinstance(shown, list):
        return [_sensitivity(v, s) for v, s in zip(value, shown)]
    return False


def _keys_sorted(value: Any) -> Any:
    """`value` with the members of every object in key order (jsonpatch's operations
    follow the order it walks them)."""
    if type(value) is dict:
        return {k: _keys_sorted(value[k]) for k in sorted(value)}
    if type(value) is list:
        return [_keys_sorted(v) for v in value]
    return value


_STEP = re.compile(r"\[(?P<key>[^\]]*)\]|(?P<field>[^.\[\]]+)")


def _steps(path: str, *bodies: Any) -> list[str | int]:
    """A dotted path (`spec.environmentVariables[HF_HOME].value`) as Terraform's
    `replace_paths` has it, a list of steps: object members by name, list items by their
    index in the first of `bodies` that holds the item (the steps end at the list when
    none does)."""
    for body in bodies:
        steps: list[str | int] = []
        node: Any = body
        field = ""
        for m in _STEP.finditer(path):
            if m.group("field") is not None:
                field = m.group("field")
                steps.append(field)
                node = node.get(field) if isinstance(node, dict) else None
                continue
            key = m.group("key")
            index = next((i for i, item in enumerate(node if isinstance(node, list) else ())
                          if isinstance(item, dict) and kinds.item_key(field, item) == key),
                         None)
            if index is None:
                break
            steps.append(index)
            node = node[index]
        else:
            return steps
    return [m.group("field") for m in _STEP.finditer(path.split("[", 1)[0])]


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
    before, after = _drifted(rc)
    shown_before = words.mask_body(before, rc.sensitive)
    shown_after = words.mask_body(after, rc.sensitive)
    return {"address": rc.address, **_identity(rc), "kind": rc.kind,
            **words.manifest_kind_field(words.manifest_kind(rc)),
            "action_reason": rc.reason, "paths": paths,
            "change": {"actions": outside, "before": shown_before, "after": shown_after,
                       "after_unknown": {},
                       "before_sensitive": _sensitivity(before, shown_before),
                       "after_sensitive": _sensitivity(after, shown_after)}}


def _drifted(rc: ResourceChange) -> tuple[Any, Any]:
    """What changed outside: the body as last applied (with the server's defaults that the
    live one holds, which are no change) and the body live now (none once deleted)."""
    live = None if rc.reason == plans.REASON_DELETED_OUTSIDE else rc.before
    if rc.applied is None:
        return live, live
    if live is None:
        return rc.applied, None
    applied, _ = kinds.get(rc.kind).with_defaults_aligned(rc.applied, live)
    return applied, live


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
