"""What every renderer says the same way: symbols, headers, value encoding, masking.

Pure helpers over `plans` objects; callers are `render.text` and `render.json` (and
the markdown renderer to come), so that a symbol or a phrase changes in one place.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any

from reconciler import kinds, phases, plans
from reconciler.masking import MASK, is_masked, mask_at, mask_body, secret_name  # noqa: F401
from reconciler.masking import may_name_a_secret
from reconciler.plans import Action, ResourceChange

SYMBOLS = {
    Action.CREATE: "+",
    Action.UPDATE: "~",
    Action.REPLACE: "-/+",
    Action.DELETE: "-",
    Action.SUSPEND: "<",
    Action.RESUME: ">",
}

LEGEND = {
    Action.CREATE: "create",
    Action.UPDATE: "update in place",
    Action.REPLACE: "replace (delete, then create)",
    Action.DELETE: "delete",
    Action.SUSPEND: "suspend",
    Action.RESUME: "resume",
}

# The order of the summary line.
SUMMARY_ORDER = (Action.CREATE, Action.UPDATE, Action.REPLACE, Action.DELETE,
                 Action.SUSPEND, Action.RESUME)

_OUTSIDE = "outside runai-reconcile"
# A workload gone while a killed or abandoned apply was deleting or creating it.
INTERRUPTED = "was left half-done by an interrupted apply (not drift)"

_HEADERS: dict[tuple[Action, str | None], str] = {
    (Action.CREATE, None): "will be created",
    (Action.CREATE, plans.REASON_DELETED_OUTSIDE): f"was deleted {_OUTSIDE} and will be re-created",
    (Action.CREATE, plans.REASON_INTERRUPTED): INTERRUPTED + " and will be created",
    (Action.UPDATE, None): "will be updated in place",
    (Action.UPDATE, plans.REASON_DRIFT): f"was changed {_OUTSIDE} (drift) and will be updated in place",
    (Action.REPLACE, None): "must be replaced",
    (Action.REPLACE, plans.REASON_DRIFT): f"was changed {_OUTSIDE} (drift) and must be replaced",
    (Action.REPLACE, plans.REASON_REPLACE_REQUESTED): "will be replaced, as requested",
    (Action.REPLACE, plans.REASON_DELETED_OUTSIDE):
        f"was deleted {_OUTSIDE} and will be re-created",
    (Action.REPLACE, plans.REASON_PROJECT_REPLACED):
        "must be replaced: its project is replaced",
    (Action.CREATE, plans.REASON_PROJECT_REPLACED):
        "will be created again: its project is replaced",
    (Action.DELETE, None): "will be destroyed",
    (Action.DELETE, plans.REASON_REMOVED): "will be destroyed: it is no longer in the specs",
    (Action.SUSPEND, None): "will be suspended",
    (Action.SUSPEND, plans.REASON_PHASE_DRIFT): f"was resumed {_OUTSIDE} (drift) and will be suspended",
    (Action.RESUME, None): "will be resumed",
    (Action.RESUME, plans.REASON_PHASE_DRIFT): f"was suspended {_OUTSIDE} (drift) and will be resumed",
}


_WORKLOAD_RANK = 40  # `Kind.rank` of every workload type


def in_apply_order(changes) -> list[ResourceChange]:
    """The changes in the order apply takes them, for a reviewer reading from the top:
    creates and updates by their type's rank (a department, then its projects, then
    access rules and Run:ai policies, then workloads), an organisation unit's deletion
    after its workloads' (deletes in reverse); by address within a rank. A plan of
    workloads alone keeps the order of their addresses."""
    def key(rc: ResourceChange) -> tuple[int, str]:
        kind = kinds.KINDS.get(rc.kind)
        rank = kind.rank if kind is not None else _WORKLOAD_RANK
        if rc.action is Action.DELETE:
            rank = 2 * _WORKLOAD_RANK - rank
        return rank, rc.address
    return sorted(changes, key=key)


def phrase(rc: ResourceChange) -> str:
    """`will be ...`, with the drift said in words when it is drift."""
    return _HEADERS.get((rc.action, rc.reason)) or _HEADERS[(rc.action, None)]


def listed(rc: ResourceChange) -> str:
    """`<symbol> <address> (<action>)`: one change on one line; a no-op that changes the
    state alone is `= <address> (state only: <settings>)`."""
    where = f"{rc.address}{address_note(manifest_kind(rc), rc.project_name)}"
    if rc.action is Action.NOOP:
        return f"= {where} (state only: {', '.join(rc.state_changes) or 'adopted'})"
    return f"{SYMBOLS[rc.action]} {where} ({rc.action.value})"


def takes_with(rc: ResourceChange) -> str:
    """What a delete or replace takes with it, in one line (empty: nothing)."""
    if not rc.takes_with or rc.action not in (Action.DELETE, Action.REPLACE):
        return ""
    return "takes with it: " + ", ".join(rc.takes_with)


def dry_run(rc: ResourceChange) -> str | None:
    """The server's dry-run verdict on the change's write, in words (None: none was
    sent): `the server's dry run: accepted`, `... refused: <its message>`, or
    `... unchecked: <why>`."""
    found = rc.dry_run
    if found is None:
        return None
    return f"the server's dry run: {found.verdict}" + (f": {found.message}"
                                                        if found.message else "")


def header(rc: ResourceChange) -> str:
    """`# <address> will be ...`."""
    return f"# {rc.address} {phrase(rc)}"


def address_note(manifest_kind: str | None, project_name: str | None) -> str:
    """What is said after an address: a Manifest's own kind and the project's name, each
    when known: ` (PyTorchJob, project team-a)`, ` (PyTorchJob)`, ` (project team-a)`, ``."""
    said = [manifest_kind or "", f"project {project_name}" if project_name else ""]
    said = [s for s in said if s]
    return f" ({', '.join(said)})" if said else ""


def plan_summary(plan: plans.Plan) -> str:
    """`0 to create, ..., 0 to resume`, then the changes to the state alone when there are
    any (Terraform's "1 to import"): `, 1 to adopt, 1 to record in the state`."""
    counts = plan.counts()
    parts = [f"{counts[a.value]} to {a.value}" for a in SUMMARY_ORDER]
    if counts[plans.ADOPT]:
        parts.append(f"{counts[plans.ADOPT]} to adopt")
    if counts[plans.STATE_ONLY]:
        parts.append(f"{counts[plans.STATE_ONLY]} to record in the state")
    return ", ".join(parts)


def state_only_lines(plan: plans.Plan) -> list[str]:
    """One line per no-op whose lifecycle settings only the state records changed."""
    return [f"{rc.address}: {', '.join(rc.state_changes)}" for rc in plan.state_only()
            if rc.state_changes and not rc.adopted]


STATE_ONLY_NOTE = ("The specs changed settings that only the state records; apply records "
                   "them (no API call):")


def interrupted_heading(n: int, *, bold: bool = False) -> str:
    """Drift's section on the workloads an apply left half-done (which is not drift)."""
    title = "Interrupted apply (not drift):"
    return ((f"**{title}**" if bold else title)
            + f" {n} workload{'s' if n != 1 else ''} {'were' if n != 1 else 'was'} being "
            "deleted, replaced or created by an apply that did not finish (its intents are "
            f"open in the journal); `runai-reconcile apply` finishes {'them' if n != 1 else 'it'}:")


def interrupted_item(item) -> str:
    """One such workload (a `drift.DriftedWorkload`)."""
    gone = f"workload {item.workload_id} gone from live" if item.workload_id else "not live"
    return f"{item.address} ({gone})"


def targets_note(targets) -> str:
    """Said wherever a plan limited by --target is shown: it may be incomplete."""
    targets = sorted(targets)
    return ("Note: --target is in effect: only " + ", ".join(targets)
            + (" was" if len(targets) == 1 else " were") + " planned; the plan may be incomplete.")


def encode(value: Any) -> str:
    """A value as it appears in text: JSON, on one line, keys sorted."""
    t = type(value)
    if t is str:  # most leaves: json.dumps' own string encoder, without its set-up
        return _encode_str(value)
    if t is bool:
        return "true" if value else "false"
    if t is int:
        return int.__repr__(value)
    if value is None:
        return "null"
    return _encode_any(value)


_encode_str = json.encoder.encode_basestring  # what dumps(ensure_ascii=False) uses


def _any_encoder():
    """`json.JSONEncoder(sort_keys=True, ensure_ascii=False).encode` without its set-up
    per call: the C encoder it makes for each value, made with the same arguments (a new
    one per value: it keeps the circular-reference marks of the value it encodes)."""
    encoder = json.JSONEncoder(sort_keys=True, ensure_ascii=False)
    make = json.encoder.c_make_encoder
    if make is None:  # no C accelerator: the encoder as it is
        return encoder.encode
    default, key_sep, item_sep = encoder.default, encoder.key_separator, encoder.item_separator

    def encode_any(value: Any) -> str:
        return "".join(make({}, default, _encode_str, None, key_sep, item_sep, True, False,
                            True)(value, 0))

    return encode_any


_encode_any = _any_encoder()


def leaves(body: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """Flatten nested objects into (dotted path, value). A list of objects with item keys
    (CONTRACT.md §6) gives one entry per item, `path[key]`, as the diff names them; other
    lists stay whole values."""
    out: list[tuple[str, Any]] = []
    for key in sorted(body):
        value = body[key]
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value:
            out.extend(leaves(value, path))
            continue
        keys = _item_keys(key, value) if isinstance(value, list) and value else None
        if keys is not None:
            out.extend((f"{path}[{k}]", item) for k, item in zip(keys, value))
        else:
            out.append((path, value))
    return out


class _KnownAfterApply:
    """The value of a path known only after apply (`ResourceChange.known_after`)."""

    def __repr__(self) -> str:
        return KNOWN_AFTER_APPLY


KNOWN_AFTER_APPLY = "(known after apply)"
UNKNOWN = _KnownAfterApply()


def project_shown(rc: ResourceChange) -> str:
    """The project id as outputs say it: `(known after apply)` when the same plan creates
    the project."""
    return KNOWN_AFTER_APPLY if "projectId" in rc.known_after else rc.project_id


def created_leaves(rc: ResourceChange) -> list[tuple[str, Any]]:
    """What a create sends, leaf by leaf (as its type shows a body: `Kind.shown`), each
    value known only after apply as `UNKNOWN`, plus `desiredPhase` when it starts
    suspended."""
    return _created_leaves(rc, _created_body(rc))


def created_shown(rc: ResourceChange) -> list[tuple[str, str]]:
    """`created_leaves`, each value as `shown` says it. When nothing in the body can be
    masked (no `sensitive` path, no secret-looking word in its JSON text:
    `masking.may_name_a_secret`), each as `encode` says it, without a check per leaf."""
    body = _created_body(rc)
    return _shown_leaves(rc, body, bool(rc.sensitive) or may_name_a_secret(body))


def _shown_leaves(rc: ResourceChange, body: dict[str, Any],
                  maskable: bool) -> list[tuple[str, str]]:
    found = _created_leaves(rc, body)
    if maskable:
        return [(path, shown(path, value, rc.sensitive)) for path, value in found]
    return [(path, KNOWN_AFTER_APPLY if value is UNKNOWN else encode(value))
            for path, value in found]


def created_lines(rc: ResourceChange, lead: str) -> list[str]:
    """`created_shown` as lines `<lead><path>: <text>`. When nothing in the body can be
    masked and nothing in it is known only after apply, the lines are made in one walk of
    the body (`leaves`' order and paths), without a pair per leaf."""
    body = _created_body(rc)
    maskable = bool(rc.sensitive) or may_name_a_secret(body)
    if maskable or rc.known_after:
        return [f"{lead}{path}: {text}" for path, text in _shown_leaves(rc, body, maskable)]
    out: list[str] = []
    _leaf_lines(body, "", lead, out)
    if rc.desired_phase == phases.STOPPED:
        out.append(f"{lead}desiredPhase: {encode(phases.STOPPED)}")
    return out


def _leaf_lines(body: dict[str, Any], prefix: str, lead: str, out: list[str]) -> None:
    """`leaves(body, prefix)`, each appended to `out` as `<lead><path>: <encode(value)>`."""
    for key in sorted(body):
        value = body[key]
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value:
            _leaf_lines(value, path, lead, out)
            continue
        keys = _item_keys(key, value) if isinstance(value, list) and value else None
        if keys is not None:
            out.extend([f"{lead}{path}[{k}]: {encode(item)}" for k, item in zip(keys, value)])
        else:
            out.append(f"{lead}{path}: {encode(value)}")


def _created_body(rc: ResourceChange) -> dict[str, Any]:
    kind = kinds.KINDS.get(rc.kind)
    return kind.shown(rc.after or {}) if kind is not None else (rc.after or {})


def _created_leaves(rc: ResourceChange, body: dict[str, Any]) -> list[tuple[str, Any]]:
    out = leaves(body)
    if rc.known_after:
        out = sorted(out + [(path, UNKNOWN) for path in rc.known_after], key=lambda x: x[0])
    if rc.desired_phase == phases.STOPPED:
        out.append(("desiredPhase", phases.STOPPED))
    return out


def _item_keys(field: str, items: list) -> list[str] | None:
    """The item keys of the list `field`, when each item has one and no two share one;
    else None (the list is shown whole)."""
    if field in kinds.ORDERED_LISTS or field in kinds.SET_LISTS:
        return None
    keys = [kinds.item_key(field, item) for item in items]
    return keys if None not in keys and len(set(keys)) == len(keys) else None


def phase_change(rc: ResourceChange) -> plans.FieldChange | None:
    """For a suspend or resume whose plan lists no `desiredPhase` change, the one it implies."""
    if rc.action not in (Action.SUSPEND, Action.RESUME):
        return None
    if any(c.path == "desiredPhase" for c in rc.changes):
        return None
    before, after = ((phases.RUNNING, phases.STOPPED) if rc.action is Action.SUSPEND
                     else (phases.STOPPED, phases.RUNNING))
    return plans.FieldChange("desiredPhase", before, after,
                             drift=rc.reason == plans.REASON_PHASE_DRIFT)


def field_changes(rc: ResourceChange) -> list[plans.FieldChange]:
    """The field changes a text or markdown section lists: the plan's (`changes_shown`),
    then the phase change its action implies (`phase_change`)."""
    out = changes_shown(rc)
    implied = phase_change(rc)
    return out if implied is None else [*out, implied]


def changes_shown(rc: ResourceChange) -> list[plans.FieldChange]:
    """The plan's field changes, each new value known only after apply
    (`ResourceChange.known_after`) as `UNKNOWN` (a workload whose project is replaced:
    `projectId: "7" -> (known after apply)`)."""
    if not rc.known_after:
        return rc.changes
    return [dataclasses.replace(c, after=UNKNOWN) if c.path in rc.known_after else c
            for c in rc.changes]


def drift_note(c: plans.FieldChange) -> str:
    """What a drifted field change's note says: `added outside runai-reconcile` for what
    live alone holds (apply removes it), else `changed outside runai-reconcile`."""
    return f"added {_OUTSIDE}" if c.added else f"changed {_OUTSIDE}"


def drifted_paths(rc: ResourceChange) -> list[str]:
    """The paths changed outside the reconciler: drifted field changes, phase drift."""
    paths = [c.path for c in rc.changes if c.drift]
    if rc.reason == plans.REASON_PHASE_DRIFT and "desiredPhase" not in paths:
        paths.append("desiredPhase")
    return paths


# --- sensitive values ---------------------------------------------------------------
#
# The rules and `mask_at`/`mask_body` live in `reconciler.masking` (the spec loader's
# messages use them too); re-exported here for the renderers.

_ENV_FIELD = "environmentVariables"
_K8S_ENV = re.compile(r"(?:^|\.)env(?:\[|$)")
_LAST_FIELD = re.compile(r"(?:^|\.)(?P<field>[A-Za-z0-9_]+)(?:\[[^\]]*\])?$")


def shown(path: str, value: Any, sensitive: Sequence[str] = ()) -> str:
    """`encode(mask_at(path, value, sensitive))`: the value at `path` as text, masked.

    Quick when nothing in it can be masked: a secret-named variable's path always holds
    "environmentVariables" or a manifest's "env" (in `path`, or as a key below it, so in
    the encoded text), and
    a `sensitive` path can only mask inside `path` when one starts with the other."""
    if value is UNKNOWN:
        return KNOWN_AFTER_APPLY
    text = encode(value)
    if any(p.startswith(path) or path.startswith(p) for p in sensitive):
        return encode(mask_at(path, value, sensitive))
    if _ENV_FIELD in text or '"env"' in text or ("env" in path and _K8S_ENV.search(path)):
        # (a Kubernetes container's `env`, in a Manifest: the same rule, no quick path)
        return encode(mask_at(path, value, sensitive))
    if _ENV_FIELD in path:
        if path.endswith("]") and type(value) is dict and not is_masked(path + ".value"):
            return text  # one variable: only its `value` can be masked
        masked = _variables_masked(path, value)
        return text if masked is value else encode(masked)
    return text


def _variables_masked(path: str, value: Any) -> Any:
    """`mask_at(path, value)` for a value whose text never says "environmentVariables",
    with no `sensitive` path: `value` itself when nothing in it is masked. Only the
    `value` of an item of a variables list at `path` can be: one check per item."""
    m = _LAST_FIELD.search(path)
    if not (isinstance(value, list) and m and m.group("field") == _ENV_FIELD
            and not path.endswith("]")):
        return mask_at(path, value)
    out = value
    for i, item in enumerate(value):
        if isinstance(item, list):
            return mask_at(path, value)
        key = kinds.item_key(_ENV_FIELD, item)
        if (key is not None and item.get("value") is not None and secret_name(key)
                and is_masked(f"{path}[{key}].value")):
            if out is value:
                out = list(value)
            out[i] = {k: MASK if k == "value" else v for k, v in item.items()}
    return out


# --- policy results (a `plans.Report`) -------------------------------------------------

POLICY_FAILED_NOTE = "apply refuses a plan that breaks a deny rule"


def policy_heading(report) -> str:
    """`Policy failed (policy.yaml): 3 rules: 1 failed, 2 passed`."""
    verdict = "failed" if not report.passed else "passed"
    files = f" ({', '.join(report.files)})" if report.files else ""
    return f"Policy {verdict}{files}: {report.summary()}"


def policy_violations(report) -> list[tuple[str, str]]:
    """(status, message) of every violation, failures first, then warnings."""
    return [(r.status, v.message) for r in report.ordered() for v in r.violations]


def policy_preexisting(report) -> list[str]:
    """The violations by what the plan leaves as it is (a rule's `scope: changed`): never
    failing the plan, listed after its own violations."""
    return [v.message for r in report.ordered() for v in r.preexisting]


def policy_notes(report) -> list[str]:
    """What a rule could not check, or let pass (`rule <name>: <note>`)."""
    return [f"rule {r.name}: {n}" for r in report.ordered() for n in r.notes]


def manifest_kind(rc: ResourceChange) -> str | None:
    """A Manifest change's own kind (`PyTorchJob`: of the spec, else of the workload it
    replaces or deletes), shown beside the address in every format; None for other kinds."""
    return kinds.label(rc.kind, rc.after, rc.before)


def manifest_kind_field(manifest_kind: str | None) -> dict[str, str]:
    """The JSON documents' `manifest_kind` member: present only for a Manifest."""
    return {"manifest_kind": manifest_kind} if manifest_kind else {}


def manifest_type(rc) -> str:
    """`PyTorchJob, ` for a Manifest change (`manifest_kind`, for the text header's
    parenthesis), else ``."""
    kind = manifest_kind(rc)
    return f"{kind}, " if kind else ""


def resources_noun(kind_names: Sequence[str], n: int) -> str:
    """"workload(s)" when every kind named is one that lives in a project (a workload),
    else "resource(s)" (a department, a project, an access rule or a Run:ai policy among
    them), for `n` of them."""
    found = [kinds.KINDS.get(name) for name in kind_names]
    word = "workload" if all(k is None or k.in_project for k in found) else "resource"
    return word + ("s" if n != 1 else "")
