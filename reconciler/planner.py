"""Desired workloads + state + live bodies -> a `plans.Plan` (pure).

Called by `operations` (plan, apply, and drift's pending changes through `drift`)
once it has loaded the specs, read the state and refreshed live; the executor then
runs the plan and the renderers show it. Nothing here does I/O: the caller hands in
everything, including what refresh found.

`live[address]` is the workload's GET body, or None when refresh found no workload;
an address missing from `live` was not refreshed (`--no-refresh`), and the plan is made
from the state alone (the last applied body stands in for live, the phase comes from
the state). `listed` holds the addresses the workload list vouched for (`--refresh=auto`:
unchanged since the state last saw them match it) with their listed phase: planned from
the state as well, with that phase as the live one.

One `ResourceChange` per address in the specs or the state (no-ops included), sorted
by address; the order apply runs them in is each change's `waits_for` (names freed by
deletions, references, the types' ranks: creates and updates department, project,
workloads, deletes in reverse), and a workload whose project the plan creates has its
projectId `known_after` apply. The per-field comparison is `diff.diff_workload`; what to do with its
result (create, update, replace, delete, suspend, resume, no-op) is decided here from
the kind's capabilities in `kinds`.

Sensitive values: the state holds each as its keyed hash (`masking.hash_sensitive`), so
once the state has a key the desired and live values are compared hashed with it too: a
changed secret is a change, a secret changed in live is drift, and no value is needed
from the state. The changes sent (`after`, `patch`) carry the desired values themselves.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import orjson

from reconciler import diff, errors, kinds, masking, phases, plans
from reconciler.desired.types import DesiredWorkload
from reconciler.plans import Action
from reconciler.state.model import ResourceState, State

_NOT_REFRESHED = object()


def make_plan(desired: list[DesiredWorkload], state: State, live: Mapping[str, dict | None], *,
              targets: Sequence[str] = (), replace: Sequence[str] = (),
              destroy: bool = False, interrupted: Collection[str] = (),
              listed: Mapping[str, str | None] | None = None,
              refuse_protected: bool = True, judge: bool = True) -> plans.Plan:
    """The plan that takes live to `desired`; raises `errors.PlanError` when none can be made
    (a protected workload would be deleted or replaced, an unknown --target or --replace).
    `refuse_protected=False` makes the plan anyway: the caller skips what `protected`
    names (watch does, workload by workload). `judge=False` leaves both refusals
    (`refuse`) to the caller, which calls it once it knows what deletions take with them.

    `interrupted`: the addresses a killed apply was deleting or creating (from the
    journal's open intents, `operations`); one gone from live is finished, not called deleted
    outside."""
    interrupted_ = frozenset(interrupted)
    by_addr: dict[str, DesiredWorkload] = {}
    for dw in desired:
        if dw.address in by_addr:
            raise errors.PlanError(
                f"two specs have the address {dw.address}: {by_addr[dw.address].source or '?'} "
                f"and {dw.source or '?'}")
        by_addr[dw.address] = dw
    known = set(by_addr) | set(state.resources)
    unknown = sorted(f"{a} (kind {rs.kind})" for a, rs in state.resources.items()
                     if rs.kind not in kinds.KINDS)
    if unknown:
        raise errors.PlanError(
            "the state holds workloads of kinds this version does not know: "
            + ", ".join(unknown))

    targets = _check_addresses("--target", targets, known)
    replace = _check_addresses("--replace", replace, known)
    if destroy and replace:
        raise errors.PlanError("--replace cannot be combined with --destroy")
    for addr in replace:
        if addr not in by_addr:
            raise errors.PlanError(
                f"--replace {addr}: no spec for it, so it could not be created again")
        if targets and addr not in targets:
            raise errors.PlanError(f"--replace {addr} is outside the --target addresses")

    selected = sorted(targets) if targets else sorted(known)
    key = state.secret_key()
    replace_set = frozenset(replace)
    changes: list[plans.ResourceChange] = []
    for addr in selected:
        dw = by_addr.get(addr)
        rs = state.resources.get(addr)
        lv = live.get(addr, _NOT_REFRESHED)
        if listed and lv is _NOT_REFRESHED and rs is not None and addr in listed \
                and listed[addr] != rs.last_phase:
            rs = copy.copy(rs)  # the state's own record is left as it is
            rs.last_phase = listed[addr]
        if destroy:
            rc = _plan_destroy(addr, dw, rs, lv)
        else:
            rc = _plan_one(addr, dw, rs, lv, addr in replace_set,
                           interrupted=addr in interrupted_, key=key)
        changes.append(rc)

    _follow_replaced_projects(changes, by_addr)
    if judge:
        refuse(changes, desired, state, refuse_protected=refuse_protected, destroy=destroy,
               targets=targets)
    _order_name_reuse(changes)
    _order_references(changes)
    _order_ranks(changes)
    _await_projects(changes, by_addr, targets)
    return plans.Plan(changes=changes, lineage=state.lineage, serial=state.serial,
                      targets=sorted(targets))


# --- one address --------------------------------------------------------------------

def hashed_alike(key: bytes | None, sensitive: Sequence[str], applied: Any,
                 *bodies: Any) -> list[Any]:
    """`bodies` with their sensitive values as keyed hashes, to compare with `applied`, a
    state record's body that holds them so; as they are when it holds no hash (no key,
    a record of before the hashes, or no secret: most bodies, told apart quickly)."""
    if key is None or not _holds_hash(applied):
        return list(bodies)
    return [b if not isinstance(b, dict) else masking.hash_sensitive(b, sensitive, key)
            for b in bodies]


def _holds_hash(body: Any) -> bool:
    if not isinstance(body, dict):
        return False
    try:
        return masking.HASH_PREFIX.encode() in orjson.dumps(body)
    except (TypeError, orjson.JSONEncodeError):  # a value JSON cannot hold: look closer
        return masking.has_sensitive(body)


def _plan_one(addr: str, dw: DesiredWorkload | None, rs: ResourceState | None, lv: Any,
              force_replace: bool, *, interrupted: bool = False,
              key: bytes | None = None) -> plans.ResourceChange:
    refreshed = lv is not _NOT_REFRESHED
    live_body: dict | None = lv if refreshed else None
    kind = kinds.get(dw.kind if dw else rs.kind)  # type: ignore[union-attr]
    ch = functools.partial(_change, addr, kind, refreshed=refreshed)

    if dw is None:  # in state only: the spec was removed
        if refreshed and live_body is None:
            return ch(None, None, rs, Action.NOOP, plans.REASON_GONE)
        return ch(None, live_body, rs, Action.DELETE, plans.REASON_REMOVED)

    if (refreshed and live_body is None) or (not refreshed and rs is None):
        # Nothing live to compare with.
        if force_replace:
            return ch(dw, None, rs, Action.CREATE, plans.REASON_REPLACE_REQUESTED)
        if rs is None:
            return ch(dw, None, rs, Action.CREATE, plans.REASON_NEW)
        if kind.runs_to_completion(rs.applied) and phases.state_completed(rs):
            body, = hashed_alike(key, (*dw.lifecycle.sensitive, *rs.sensitive), rs.applied,
                                 dw.body)
            user = diff.diff_workload(kind, body, rs.applied, None,
                                      ignore=dw.lifecycle.ignore_changes)
            if user:  # the spec changed since it ran: run it again
                return ch(dw, None, rs, Action.CREATE, plans.REASON_SPEC_CHANGED, user)
            return ch(dw, None, rs, Action.NOOP, plans.REASON_COMPLETED)
        if interrupted:  # our own delete (a replace's) or create, cut short
            return ch(dw, None, rs, Action.CREATE, plans.REASON_INTERRUPTED)
        return ch(dw, None, rs, Action.CREATE, plans.REASON_DELETED_OUTSIDE)

    applied = rs.applied if rs is not None else None
    sensitive = (*dw.lifecycle.sensitive, *(rs.sensitive if rs is not None else ()))
    body, live_ = hashed_alike(key, sensitive, applied, dw.body, live_body)
    fcs = diff.diff_workload(kind, body, applied, live_,
                             ignore=dw.lifecycle.ignore_changes)
    user_changed = any(not c.drift for c in fcs)

    if force_replace:
        return ch(dw, live_body, rs, Action.REPLACE, plans.REASON_REPLACE_REQUESTED, fcs)

    if kind.runs_to_completion(live_body or applied) and _completed(live_body, rs):
        # A finished training (or job): only a change of its spec runs it again.
        user = [c for c in fcs if not c.drift]
        if user:
            return ch(dw, live_body, rs, Action.REPLACE, plans.REASON_SPEC_CHANGED, user)
        return ch(dw, live_body, rs, Action.NOOP, plans.REASON_COMPLETED)

    reason = plans.REASON_SPEC_CHANGED if user_changed else plans.REASON_DRIFT
    if any(c.forces_replacement for c in fcs):
        return ch(dw, live_body, rs, Action.REPLACE, reason, fcs)
    if fcs:
        rc = ch(dw, live_body, rs, Action.UPDATE, reason, fcs)
        rc.patch = _patch(kind, rc.after, fcs)  # ignored paths keep their prior value
        return rc

    if kind.can_suspend:
        phase = _phase_change(dw, rs, live_body)
        if phase is not None:
            action, reason, fc = phase
            return ch(dw, live_body, rs, action, reason, [fc])
    return ch(dw, live_body, rs, Action.NOOP, plans.REASON_UNCHANGED)


def _plan_destroy(addr: str, dw: DesiredWorkload | None, rs: ResourceState | None,
                  lv: Any) -> plans.ResourceChange:
    refreshed = lv is not _NOT_REFRESHED
    live_body: dict | None = lv if refreshed else None
    kind = kinds.get(rs.kind if rs else dw.kind)  # type: ignore[union-attr]
    ch = functools.partial(_change, addr, kind, refreshed=refreshed)
    if rs is None:
        # Never created by us: --destroy leaves what it does not manage alone.
        reason = plans.REASON_UNCHANGED if live_body is not None else plans.REASON_GONE
        return ch(None, live_body, rs, Action.NOOP, reason)
    if refreshed and live_body is None:
        return ch(None, None, rs, Action.NOOP, plans.REASON_GONE)
    return ch(None, live_body, rs, Action.DELETE, plans.REASON_DESTROY)


# --- phases -------------------------------------------------------------------------

def _completed(live_body: dict | None, rs: ResourceState | None) -> bool:
    if live_body is not None:
        return phases.live_completed(live_body)
    return rs is not None and phases.state_completed(rs)


def _suspended(live_body: dict | None, rs: ResourceState | None) -> bool:
    if live_body is not None:
        return phases.live_suspended(live_body)
    return rs is not None and phases.state_suspended(rs)


def _phase_change(dw: DesiredWorkload, rs: ResourceState | None,
                  live_body: dict | None) -> tuple[Action, str, plans.FieldChange] | None:
    suspended = _suspended(live_body, rs)
    want = dw.desired_phase
    if want == phases.STOPPED and not suspended:
        action = Action.SUSPEND
    elif want == phases.RUNNING and suspended:
        action = Action.RESUME
    else:
        return None
    by_spec = rs is None or rs.desired_phase != want
    reason = plans.REASON_PHASE if by_spec else plans.REASON_PHASE_DRIFT
    fc = plans.FieldChange(path="desiredPhase",
                           before=phases.STOPPED if suspended else phases.RUNNING,
                           after=want, drift=not by_spec)
    return action, reason, fc


# --- building the change --------------------------------------------------------------

def _change(addr: str, kind: kinds.Kind, dw: DesiredWorkload | None, live_body: dict | None,
            rs: ResourceState | None, action: Action, reason: str,
            fcs: list[plans.FieldChange] | None = None, *,
            refreshed: bool = True) -> plans.ResourceChange:
    k, project_id, name = kinds.parse_address(addr)
    before = workload_id = live_phase = None
    if live_body is not None:
        before = diff.project(kind, kind.hooks.addressed(kind, live_body, name))
        workload_id = live_body.get("workloadId")
        live_phase = live_body.get("actualPhase")
    elif not refreshed and rs is not None:
        before, workload_id, live_phase = rs.applied, rs.workload_id, rs.last_phase
    if action is Action.CREATE:
        before = None
    state_changes = (_state_changes(dw, rs) if action is Action.NOOP and dw is not None
                     and rs is not None else [])
    return plans.ResourceChange(
        address=addr, kind=k, name=name, project_id=project_id, action=action, reason=reason,
        changes=sorted(fcs or (), key=lambda c: c.path),
        workload_id=workload_id,
        before=before,
        after=(_kept_ignored(dw, rs) if dw is not None and action is not Action.DELETE
               else None),
        desired_phase=dw.desired_phase if dw is not None else None,
        live_phase=live_phase,
        sensitive=(tuple(dw.lifecycle.sensitive) if dw is not None
                   else tuple(rs.sensitive) if rs is not None else ()),
        ignore_changes=tuple(dw.lifecycle.ignore_changes) if dw is not None else (),
        adopted=rs is None and dw is not None and live_body is not None,
        project_name=(dw.project_name if dw is not None and dw.project_name
                      else rs.project_name if rs is not None else None),
        state_changes=state_changes,
        applied=rs.applied if rs is not None and _drifted(reason, fcs) else None,
    )


def _drifted(reason: str, fcs: list[plans.FieldChange] | None) -> bool:
    """Changed outside the reconciler: what the plan's drift report lists."""
    return reason in (plans.REASON_DRIFT, plans.REASON_PHASE_DRIFT,
                      plans.REASON_DELETED_OUTSIDE) or any(c.drift for c in fcs or ())


def _kept_ignored(dw: DesiredWorkload, rs: ResourceState | None) -> dict:
    """The body to send: the spec's, with each ignored path at its prior value
    (`diff.keep_ignored`). A prior sensitive value is only its hash in the state: the
    spec's value at that path is sent instead (a hash is never sent)."""
    after = diff.keep_ignored(dw.body, rs.applied if rs else None, dw.lifecycle.ignore_changes)
    if after is dw.body or rs is None or not rs.applied:
        return after
    sensitive = (*dw.lifecycle.sensitive, *rs.sensitive)
    spec_values: dict[str, list[Any]] = {}
    masking.map_sensitive(dw.body, sensitive,
                          lambda p, v: spec_values.setdefault(p, []).append(v))
    seen: dict[str, int] = {}

    def unhashed(path: str, value: Any) -> Any:
        i = seen[path] = seen.get(path, -1) + 1
        if not masking.is_hashed(value):
            return value
        found = spec_values.get(path, [])
        return found[i] if i < len(found) else None
    return masking.map_sensitive(after, sensitive, unhashed)


def _state_changes(dw: DesiredWorkload, rs: ResourceState) -> list[str]:
    """What the spec changed that only the state records (apply writes it, no API call)."""
    out = []
    if dw.desired_phase != rs.desired_phase:  # live is in that phase already
        out.append("desiredPhase")
    if dw.lifecycle.prevent_destroy != rs.prevent_destroy:
        out.append("lifecycle.preventDestroy")
    if list(dw.lifecycle.sensitive) != list(rs.sensitive):
        out.append("lifecycle.sensitive")
    return out


def _patch(kind: kinds.Kind, body: dict, fcs: list[plans.FieldChange]) -> dict:
    """The update body, nested as in the create body (e.g. {"spec": {"replicas": 4}}): for a
    PATCH kind each changed updatable field with its full desired value; for a PUT kind
    (`Kind.update_method`) every updatable field the spec sets, changed or not (the whole
    document). A field the spec leaves out that holds only what was added outside (an
    environment variable in a list the spec has none of) is sent empty (`[]`, `{}`), which
    removes what was added: null would leave it as it is."""
    if kind.update_method == "PUT":
        roots = [p for p in sorted(kind.updatable_paths)
                 if not any(q != p and kinds.under(p, q) for q in kind.updatable_paths)]
    else:
        roots = [_updatable_root(kind, c.path) for c in fcs]
    emptied = {_updatable_root(kind, c.path): [] if c.path[len(root)] == "[" else {}
               for c in fcs if c.added and kind.update_method != "PUT"
               and (root := _updatable_root(kind, c.path)) != c.path}
    out: dict[str, Any] = {}
    for top in roots:
        value: Any = body
        parts = top.split(".")
        for p in parts:
            value = value.get(p) if isinstance(value, dict) else None
        if value is None and kind.update_method == "PUT":
            continue
        if value is None and top in emptied:
            value = emptied[top]
        node = out
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = value
    return out


def _updatable_root(kind: kinds.Kind, path: str) -> str:
    for p in sorted(kind.updatable_paths, key=len):
        if kinds.under(path, p):
            return p
    raise AssertionError(f"{path} is not updatable for {kind.name}")  # the diff said it was


def _order_name_reuse(changes: list[plans.ResourceChange]) -> None:
    """Names are unique per project across kinds: a create (or replace) of a name that a
    deletion of another kind frees must wait for that deletion."""
    freed: dict[tuple[str, str], list[str]] = {}
    for rc in changes:
        if rc.action is Action.DELETE:
            freed.setdefault((rc.project_id, rc.name), []).append(rc.address)
    for rc in changes:
        if rc.action in (Action.CREATE, Action.REPLACE):
            rc.waits_for.extend(a for a in freed.get((rc.project_id, rc.name), ())
                                if a != rc.address and a not in rc.waits_for)


def _key(kind: kinds.Kind, name: str, body: dict | None) -> tuple[str, str, str]:
    # What a reference names: (its collection, its name, its cluster).
    return kind.api_path, name, str((body or {}).get("clusterId") or "")


def makers(changes: Sequence[plans.ResourceChange],
           actions: Collection[Action] = (Action.CREATE, Action.REPLACE)
           ) -> dict[tuple[str, str, str], plans.ResourceChange]:
    """(collection, name, cluster) -> the change of `changes` (of `actions`) that makes
    that resource: what a reference names (`named_in`)."""
    return {_key(kinds.get(c.kind), c.name, c.after): c
            for c in changes if c.action in actions}


def named_in(made: Mapping[tuple[str, str, str], plans.ResourceChange],
             rc: plans.ResourceChange) -> list[plans.ResourceChange]:
    """The changes of `made` (`makers`) that make a resource `rc`'s planned body names
    (`Codec.references`): what it waits for; a Run:ai policy's project that exists only
    once apply has made it."""
    if not rc.after:
        return []
    kind = kinds.get(rc.kind)
    found = (made.get((r.path, r.name, r.cluster)) for r in kind.codec.references(kind, rc.after))
    return [c for c in found if c is not None and c is not rc]


def _order_references(changes: list[plans.ResourceChange]) -> None:
    """A create or replace whose body names (`Codec.references`) a resource this plan
    creates or replaces waits for it (a project for its new department); a delete of a
    resource waits for the deletes of those that name it (deletes in reverse)."""
    deleted: dict[tuple[str, str, str], plans.ResourceChange] = {
        _key(kinds.get(rc.kind), rc.name, rc.before): rc
        for rc in changes if rc.action is Action.DELETE}
    made = makers(changes)
    for rc in changes:
        kind = kinds.get(rc.kind)
        if rc.action in (Action.CREATE, Action.REPLACE):
            rc.waits_for.extend(first.address for first in named_in(made, rc)
                                if first.address not in rc.waits_for)
        elif rc.action is Action.DELETE and rc.before:
            for ref in kind.codec.references(kind, rc.before):
                later = deleted.get((ref.path, ref.name, ref.cluster))
                if later is not None and later is not rc and rc.address not in later.waits_for:
                    later.waits_for.append(rc.address)


_MAKES = (Action.CREATE, Action.UPDATE, Action.REPLACE)


def _order_ranks(changes: list[plans.ResourceChange]) -> None:
    """Creates and updates in the order of their types' ranks (`Kind.rank`: a department,
    then a project, then the workloads), deletes in reverse: each waits for this plan's
    changes of the same sort whose types come before it. Nothing to do in a plan whose
    changes are all of one rank (workloads alone)."""
    def ranked(actions) -> list[tuple[int, plans.ResourceChange]]:
        return [(kinds.get(rc.kind).rank, rc) for rc in changes if rc.action in actions]

    for found, before in ((ranked(_MAKES), lambda a, b: a < b),
                          (ranked((Action.DELETE,)), lambda a, b: a > b)):
        if len({r for r, _ in found}) < 2:
            continue
        for rank, rc in found:
            first = [other.address for r, other in found if before(r, rank)]
            rc.waits_for.extend(a for a in first if a not in rc.waits_for)


def _await_projects(changes: list[plans.ResourceChange], by_addr: Mapping[str, DesiredWorkload],
                    targets: Sequence[str]) -> None:
    """A workload whose `project:` names a resource this plan creates (unresolved: no
    project of that name exists yet) gets its `projectId` known after apply, from that
    create, and waits for it. PlanError when the plan does not create it (--target left
    it out)."""
    waiting = [rc for rc in changes if rc.action is Action.CREATE
               and (dw := by_addr.get(rc.address)) is not None and not dw.resolved]
    if not waiting:
        return
    makers = {(dw.name, dw.cluster_id): addr for addr, dw in by_addr.items()
              if kinds.get(dw.kind).holds_workloads}
    created = {rc.address for rc in changes if rc.action is Action.CREATE}
    problems = []
    for rc in waiting:
        dw = by_addr[rc.address]
        maker = makers.get((dw.project_name, dw.cluster_id))
        if maker is None or maker not in created:
            also = f"; add --target {maker}" if maker is not None and targets else ""
            problems.append(f"{rc.address}: its project {dw.project_name!r} does not exist yet "
                            f"and this plan does not create it{also}")
            continue
        rc.known_after = {"projectId": maker}
        if maker not in rc.waits_for:
            rc.waits_for.append(maker)
    if problems:
        raise errors.PlanError("\n".join(problems))


def _follow_replaced_projects(changes: list[plans.ResourceChange],
                              by_addr: Mapping[str, DesiredWorkload]) -> None:
    """Each workload whose spec names (`project:`) a project this plan replaces (a
    resource that holds workloads: `Kind.holds_workloads`) is created again in the new
    project, as Terraform's `replace_triggered_by` would: the project's deletion takes the
    old one with it. Planned as a replace (`goes_with` the project's change: apply sends no
    delete of its own) with its `projectId` known after apply and a change of it that
    forces the replacement; one that is not live (deleted outside, or completed and gone)
    is a create in the new project. A workload whose spec is gone keeps its delete, which
    goes first (deletes in reverse rank).

    A spec that gives the replaced project's id (`projectId`) rather than its name could
    not follow it: no project has that id after apply. PlanError, naming the spec."""
    replaced = {str(rc.workload_id): rc for rc in changes
                if rc.action is Action.REPLACE and rc.workload_id
                and kinds.get(rc.kind).holds_workloads}
    if not replaced:
        return
    problems = []
    for i, rc in enumerate(changes):
        project = replaced.get(rc.project_id)
        dw = by_addr.get(rc.address)
        if project is None or dw is None or rc.action is Action.DELETE \
                or not kinds.get(rc.kind).in_project:
            continue
        if not dw.project_name:
            where = f"{dw.source}:{dw.line}" if dw.line is not None else dw.source or "?"
            problems.append(
                f"{where}: projectId: {rc.address} is in project {rc.project_id}, which this "
                f"plan replaces ({project.address}): once it is replaced no project has that "
                f"id. Name the project instead (project: {project.name}) so that the "
                "workload is created again in the new one")
            continue
        changes[i] = _following(rc, project)
    if problems:
        raise errors.PlanError("\n".join(problems))


def _following(rc: plans.ResourceChange,
               project: plans.ResourceChange) -> plans.ResourceChange:
    """`rc`, a workload in the project that `project` replaces, created again in the new
    one (`_follow_replaced_projects`)."""
    moved = plans.FieldChange(path="projectId", before=rc.project_id, after=None,
                              forces_replacement=True)
    live = rc.workload_id is not None and rc.action is not Action.CREATE
    changes = [c for c in rc.changes if c.path != "projectId"] + [moved] * live
    return dataclasses.replace(
        rc, action=Action.REPLACE if live else Action.CREATE,
        reason=plans.REASON_PROJECT_REPLACED if live or rc.reason == plans.REASON_COMPLETED
        else rc.reason,
        changes=sorted(changes, key=lambda c: c.path),
        after={k: v for k, v in (rc.after or {}).items() if k != "projectId"},
        patch=None, adopted=False, state_changes=[],
        known_after={**rc.known_after, "projectId": project.address},
        goes_with=project.address if live else None,
        waits_for=[*rc.waits_for, *([project.address]
                                    if project.address not in rc.waits_for else [])])


# --- checks -------------------------------------------------------------------------

def _check_addresses(flag: str, addrs: Sequence[str], known: set[str]) -> list[str]:
    problems = []
    for a in addrs:
        try:
            kinds.parse_address(a)
        except ValueError as exc:
            problems.append(f"{flag} {a}: {exc}")
            continue
        if a not in known:
            problems.append(f"{flag} {a}: no spec or state entry has this address")
    if problems:
        raise errors.PlanError("\n".join(problems))
    return list(dict.fromkeys(addrs))


def protected(changes: Sequence[plans.ResourceChange], desired: Sequence[DesiredWorkload],
              state: State) -> dict[str, str]:
    """address -> why, for each change that would delete or replace a resource (a workload,
    a department, a project) that `preventDestroy` protects (in its spec, or recorded in the state once its spec is gone)."""
    going = [rc for rc in changes if rc.action in (Action.DELETE, Action.REPLACE)]
    by_addr = {d.address: d for d in desired} if going else {}
    out: dict[str, str] = {}
    for rc in going:
        dw = by_addr.get(rc.address)
        if dw is not None:
            if dw.lifecycle.prevent_destroy:
                where = f"lifecycle.preventDestroy in {dw.source}" if dw.source else \
                    "lifecycle.preventDestroy in its spec"
                out[rc.address] = (f"protected by {where}; set it to false and run again "
                                   "to allow this")
        else:
            rs = state.resources.get(rc.address)
            if rs is not None and rs.prevent_destroy:
                out[rc.address] = (
                    "protected by preventDestroy recorded in the state; restore its spec "
                    "with preventDestroy: false and apply, or forget it with "
                    f"`runai-reconcile state rm {rc.address}` (it stays in Run:ai, unmanaged)")
    return out


def refuse(changes: Sequence[plans.ResourceChange], desired: Sequence[DesiredWorkload],
           state: State, *, refuse_protected: bool = True, destroy: bool = False,
           targets: Sequence[str] = ()) -> None:
    """`errors.PlanError` for a plan that must not be made: one that deletes or replaces a
    protected resource (with `refuse_protected`: `_refuse_protected`), then one that
    deletes everything because no spec was found (unless --destroy or --target)."""
    if refuse_protected:
        _refuse_protected(changes, desired, state)
    deletes = [c for c in changes if c.action is Action.DELETE]
    if not desired and deletes and not destroy and not targets:
        # An empty or mistyped specs folder must not read as "delete everything".
        raise errors.PlanError(
            f"no workload specs were found, so this plan would delete all {len(deletes)} "
            "workloads in the state. Check the specs folder; to delete them deliberately, "
            "plan or apply with --destroy.")


def _refuse_protected(changes: Sequence[plans.ResourceChange],
                      desired: Sequence[DesiredWorkload], state: State) -> None:
    """`errors.PlanError` naming each change that would delete or replace a protected
    resource (`protected`), and what it would take with it (`takes_with`), if any."""
    found = protected(changes, desired, state)
    blocked = [f"  {rc.address} ({rc.action.value}): {found[rc.address]}"
               + (f"\n    it would take with it: {', '.join(rc.takes_with)}"
                  if rc.takes_with else "")
               for rc in changes if rc.address in found]
    if blocked:
        raise errors.PlanError(
            "the plan would delete or replace protected resources:\n" + "\n".join(blocked))
