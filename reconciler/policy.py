"""Policy rules on a finished plan (pure): the rules as models, and their evaluation.

A policy file is a YAML mapping with `rules`, each a `name`, exactly one rule key, an
optional `enforcement` (`deny`, the default, or `warn`) and an optional `match`:

    rules:
      - name: gpu-cap
        maxGpusPerWorkload: 16
      - name: registries
        allowedImages: ["nvcr.io/*", "registry.example.com/*"]
        enforcement: warn
        match: {kinds: [Inference, DistributedInference], projects: ["team-a"]}

A rule may also say `scope` and `onUnknown`:
- `scope: changed` (the default): a per-workload rule fails the plan only for workloads it
  creates, updates, replaces or resumes; what the others break is listed as pre-existing
  (`RuleResult.preexisting`), and a project rule only for projects whose GPUs the plan
  raises. `scope: all`: every workload of the plan, and every project over its limit.
- `onUnknown: fail` (the default): what the rule cannot check (a project's quota that
  could not be read, or was not: `--no-refresh`) fails the plan like a violation, saying
  which read failed; `onUnknown: warn`: a note, and the rule lets it pass.

The quota rules judge the quota a project has after apply: `withinProjectQuota` the one
its `Project` spec leaves it where the plan holds one (a quota the plan lowers below what
the project holds breaks it too), `quotaNotBelowHeld` a quota the plan lowers below what
the project's workloads hold.

`PolicyFile` validates one (the reader, `reconciler.desired.documents`, gives it file,
line and field errors); `evaluate(rules, plan)` checks them on a plan whose GPU impact is
made: the workloads as they will be after apply (every change but a delete, no-ops
included) and the actions. It returns a `plans.Report` of one `plans.RuleResult` per
rule, each with its `plans.Violation`s; a deny rule with a violation fails the plan
(`Report.passed`). Caller: the planning operation, which finishes a plan with it (plan,
apply, apply of a saved plan with `--policy`); the renderers read the report it puts on
the plan.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator

from reconciler import gpus, kinds, masking
from reconciler.desired.fields import Strict, rule_error
from reconciler import plans
from reconciler.plans import Action, Plan, ResourceChange, project_words

Enforcement = plans.Enforcement
Scope = Literal["changed", "all"]
OnUnknown = Literal["fail", "warn"]
KindName = Literal[tuple(kinds.KINDS)]  # type: ignore[valid-type]
NonEmpty = Annotated[str, StringConstraints(min_length=1)]
Limit = Annotated[float, Field(ge=0)]


class Match(Strict):
    """Which workloads a rule looks at: all of these that are given must hold."""
    kinds: list[KindName] | None = None
    projects: list[NonEmpty] | None = None  # project ids or names
    names: list[NonEmpty] | None = None  # globs on the workload's name


# The rule keys, in the order results are listed; a rule entry has exactly one of them.
CHECKS = ("maxGpusPerWorkload", "maxGpusPerProject", "withinProjectQuota", "quotaNotBelowHeld",
          "allowedImages", "requiredLabels", "forbidLatestTag", "maxDestructive")


class Rule(Strict):
    name: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    enforcement: Enforcement = "deny"
    # changed: only what the plan changes can break it (what it leaves alone is listed as
    # pre-existing); all: every workload of the plan, and every project over its limit.
    scope: Scope = "changed"
    # fail: what it cannot check (a quota that could not be read) counts as a violation;
    # warn: a note, and the rule lets it pass.
    onUnknown: OnUnknown = "fail"
    description: str | None = None
    match: Match | None = None
    maxGpusPerWorkload: Limit | None = None
    # project id or name -> the most GPUs its workloads may hold; "*": every other project
    maxGpusPerProject: dict[NonEmpty, Limit] | None = None
    withinProjectQuota: bool | None = None
    # A project's quota the plan lowers may not fall below the GPUs its workloads hold.
    quotaNotBelowHeld: bool | None = None
    allowedImages: Annotated[list[NonEmpty], Field(min_length=1)] | None = None
    requiredLabels: Annotated[list[NonEmpty], Field(min_length=1)] | None = None
    forbidLatestTag: bool | None = None
    maxDestructive: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _one_check(cls, data: Any) -> Any:
        # Before the fields: the keys in the file's order, so the error points at the second.
        if isinstance(data, dict):
            given = [k for k in data if k in CHECKS]
            if not given and set(data) <= set(cls.model_fields):  # else: an unknown rule
                raise rule_error("a rule needs one of " + ", ".join(CHECKS))
            if len(given) > 1:
                raise rule_error(f"a rule has one rule key, this one has {', '.join(given)} "
                                 "(make them separate rules)", given[1])
        return data

    @property
    def check(self) -> str:
        return self.given(*CHECKS)[0]

    @property
    def limit(self) -> Any:
        return getattr(self, self.check)


class PolicyFile(Strict):
    rules: list[Rule]


# --- results (data: `plans`, which a finished plan carries) ---------------------------

Violation, RuleResult, Report = plans.Violation, plans.RuleResult, plans.Report


@dataclass(frozen=True)
class Source:
    """A rule and where it comes from (what the reader returns, what `evaluate` takes)."""
    rule: Rule
    file: str = ""
    line: int | None = None


def sources_of(file: str, doc: PolicyFile, line_of) -> list[Source]:
    """The rules of one file, each with the line `line_of(path)` gives for it."""
    return [Source(rule, file, line_of(("rules", i))) for i, rule in enumerate(doc.rules)]


def duplicate_names(rules: Sequence[Source]) -> list[tuple[str, int | None, str]]:
    """(file, line, message) for each rule whose name an earlier rule (of any file) took."""
    first: dict[str, Source] = {}
    found = []
    for s in rules:
        other = first.setdefault(s.rule.name, s)
        if other is not s:
            where = other.file + (f":{other.line}" if other.line is not None else "")
            found.append((s.file, s.line, f"duplicate rule name {s.rule.name!r}: already "
                                          f"defined at {where}"))
    return found


def problem_words(path: str, message: str) -> str:
    """A key unknown in a rule entry is an unknown rule (the loader says "field")."""
    if message.startswith("unknown field") and path.startswith("rules[") \
            and path.count(".") == 1:
        return "unknown rule" + message[len("unknown field"):]
    return message


# --- evaluation ---------------------------------------------------------------------

def evaluate(rules: Sequence[Source], plan: Plan, *, files: Sequence[str] = ()) -> Report:
    """Check each rule on `plan`, whose GPU impact is made already (`Plan.gpu_impact`, the
    first half of finishing a plan): the GPUs before and after apply and the projects'
    quotas come from it (a project the plan holds: its planned quota). A quota it does not
    know fails `withinProjectQuota` where the plan raises the project's GPUs, naming the
    read that failed (`onUnknown: warn`: a note instead)."""
    found = plan.impact
    names = {p.project_id: p.project_name for p in found.projects if p.project_name}
    for rc in plan.changes:
        if rc.project_name:
            names.setdefault(rc.project_id, rc.project_name)
    # Why each quota that is None is unknown; one the reads gave as None without a reason
    # sets no limit (a negative `deserved`).
    unknown = {p.project_id: p.unknown for p in found.projects if p.unknown}
    if not found.quotas_read:  # but a project the plan holds gives its quota itself
        unknown = {p.project_id: "not read: the plan was made with --no-refresh"
                   for p in found.projects if p.quota is None and not p.pools}
    ctx = _Context(plan, {p.project_id: p.quota for p in found.projects}, names,
                   {w.address: (w.before, w.after) for w in found.workloads}, unknown,
                   {p.project_id for p in found.projects if p.lowered})
    return Report(rules=tuple(_result(s, ctx) for s in rules), files=tuple(files))


@dataclass
class _Context:
    plan: Plan
    quotas: dict[str, float | None]
    names: dict[str, str]
    moves: dict[str, tuple[gpus.Gpus, gpus.Gpus]]  # address -> GPUs before, after apply
    unknown: dict[str, str]  # project id -> why its quota is unknown
    lowered: set[str]  # the projects whose quota the plan lowers

    def gpus_of(self, rc: ResourceChange) -> tuple[gpus.Gpus, gpus.Gpus]:
        found = self.moves.get(rc.address)
        return found if found is not None else gpus.change_gpus(rc)

    def project(self, pid: str) -> str:
        return project_words(pid, self.names.get(pid))


# The actions that make a workload what the rules judge: what else the plan holds is left
# as it runs (a no-op, an adoption, a suspend, a delete), so its violations pre-exist.
CHANGING = (Action.CREATE, Action.UPDATE, Action.REPLACE, Action.RESUME)


class _Found:
    """What one rule's check finds: `violated`, `preexisting`, `unknown` and `note`."""

    def __init__(self, rule: Rule):
        self.rule = rule
        self.head = f"rule {rule.name} ({describe(rule.check, rule.limit)})"
        self.violations: list[Violation] = []
        self.preexisting: list[Violation] = []
        self.notes: list[str] = []

    def violated(self, address: str, what: str, shown: str | None = None, *,
                 changed: bool = True) -> None:
        """A violation at `address` (`shown`: how the message names it, when not the
        address); one by a workload or project the plan leaves as it is (`changed`
        False) pre-exists, unless the rule has `scope: all`."""
        v = Violation(address, f"{shown or address}: {self.head}: {what}")
        if changed or self.rule.scope == "all":
            self.violations.append(v)
        else:
            self.preexisting.append(v)

    def unknown(self, address: str, what: str, shown: str | None = None) -> None:
        """Could not be checked at `address`: a violation (`onUnknown: fail`), or a note."""
        if self.rule.onUnknown == "warn":
            self.notes.append(f"{shown or address}: {what}; not checked")
        else:
            self.violations.append(Violation(
                address, f"{shown or address}: {self.head}: could not be checked: {what}",
                unknown=True))

    def note(self, text: str) -> None:
        self.notes.append(text)


def _result(source: Source, ctx: _Context) -> RuleResult:
    rule = source.rule
    chosen = [rc for rc in ctx.plan.changes if _matches(rule.match, rc, ctx.names)]
    found = _Found(rule)
    checked = _CHECKERS[rule.check](rule, chosen, ctx, found) is not False
    return RuleResult(name=rule.name, check=rule.check, limit=_plain(rule.limit),
                      enforcement=rule.enforcement, source=source.file,
                      violations=tuple(found.violations), notes=tuple(found.notes),
                      checked=checked, preexisting=tuple(found.preexisting),
                      scope=rule.scope, on_unknown=rule.onUnknown,
                      description=describe(rule.check, rule.limit))


def _matches(match: Match | None, rc: ResourceChange, names: Mapping[str, str]) -> bool:
    if match is None:
        return True
    if match.kinds is not None and rc.kind not in match.kinds:
        return False
    if match.projects is not None:
        known = {rc.project_id, rc.project_name or names.get(rc.project_id)}
        if not known & set(match.projects):
            return False
    if match.names is not None and not any(fnmatch.fnmatchcase(rc.name, g) for g in match.names):
        return False
    return True


def _matches_project(match: Match | None, unit: ResourceChange, p: plans.ProjectImpact) -> bool:
    """Whether `match` holds for the project `p` of the plan's `unit` (its spec): its kind,
    its name against `names`, its id or name against `projects`."""
    if match is None:
        return True
    return ((match.kinds is None or unit.kind in match.kinds)
            and (match.projects is None
                 or bool({p.project_id, p.project_name, unit.name} & set(match.projects)))
            and (match.names is None
                 or any(fnmatch.fnmatchcase(unit.name, g) for g in match.names)))


def _remaining(changes: Iterable[ResourceChange]) -> list[ResourceChange]:
    """The workloads that exist after apply: not deleted, with a spec."""
    return [rc for rc in changes if rc.action is not Action.DELETE and rc.after is not None]


def _max_gpus_per_workload(rule, chosen, ctx, found) -> None:
    # The workload's size when it runs, whatever its phase: a cap on what it asks for.
    # What it holds after apply is that size unless its phase makes it nothing.
    for rc in _remaining(chosen):
        size = ctx.gpus_of(rc)[1]
        if size == gpus.NONE:
            size = gpus.held(rc.kind, rc.after)
        if size.high > rule.maxGpusPerWorkload:
            found.violated(rc.address, f"{_gpus(size)} GPUs", changed=rc.action in CHANGING)
        elif size.unknown:
            # A GPU count it could not read is no count of 0: the cap is not known to hold.
            what = f"its GPUs could not be read ({_gpus(size)} counted)"
            if rc.action in CHANGING or rule.scope == "all":
                found.unknown(rc.address, what)
            else:
                found.note(f"{rc.address}: {what}; not changed by this plan")


def _project_totals(chosen, ctx, rule) -> dict[str, list[float]]:
    """Project id -> [GPUs before apply, after apply] (the most, for autoscaled ranges);
    with --target, a rule without `match` counts the projects' other workloads too."""
    totals: dict[str, list[float]] = {}
    for rc in chosen:
        if not gpus.in_project(rc.kind):
            continue  # an organisation unit: no workload of a project
        before, after = ctx.gpus_of(rc)
        entry = totals.setdefault(rc.project_id, [0.0, 0.0])
        # GPUs are never finer than 1e-9: drop the binary noise of summed portions.
        entry[0] = round(entry[0] + before.high, 9)
        entry[1] = round(entry[1] + after.high, 9)
    elsewhere = ctx.plan.gpu_elsewhere if rule.match is None else None
    for pid, entry in totals.items():
        other = (elsewhere or {}).get(pid, [0, 0])[1]
        entry[0], entry[1] = round(entry[0] + other, 9), round(entry[1] + other, 9)
    return dict(sorted(totals.items(), key=lambda item: (len(item[0]), item[0])))


def _over(pid: str, total: list[float], limit: float, ctx, found, what: str,
          lowered: bool = False) -> None:
    """A violation when the plan takes the project past `limit`, or further past it, or
    lowers the limit (`lowered`: a quota) below what it holds; when it stays past it
    without this plan raising its total, a note (`scope: all`: a violation)."""
    before, after = total
    if after <= limit:
        return
    where = ctx.project(pid)
    text = f"{_num(after)} GPUs planned (now {_num(before)}), {what} {_num(limit)}"
    if lowered:
        text += " as planned (lowered by this plan)"
    if after > before or lowered or found.rule.scope == "all":
        found.violated(f"project {pid}", text, where)
    else:
        found.note(f"{where}: {text}; not raised by this plan")


def _unreadable(pid: str, limit: float, total: list[float], chosen, ctx, found,
                what: str) -> None:
    """Within `limit` by what could be counted, but a workload of the project holds a GPU
    count that could not be read: the limit is not known to hold."""
    if total[1] > limit:
        return  # said by `_over`
    unread = [rc for rc in chosen if rc.project_id == pid and ctx.gpus_of(rc)[1].unknown]
    if not unread:
        return
    text = (f"the GPUs of {', '.join(rc.address for rc in unread)} could not be read; "
            f"{_num(total[1])} GPUs counted, {what} {_num(limit)}")
    if any(rc.action in CHANGING for rc in unread) or found.rule.scope == "all":
        found.unknown(f"project {pid}", text, ctx.project(pid))
    else:
        found.note(f"{ctx.project(pid)}: {text}; not changed by this plan")


def _max_gpus_per_project(rule, chosen, ctx, found) -> None:
    limits = rule.maxGpusPerProject
    for pid, total in _project_totals(chosen, ctx, rule).items():
        # By id, else by name, else "*".
        limit = next((limits[k] for k in (pid, ctx.names.get(pid), "*") if k in limits), None)
        if limit is not None:
            _over(pid, total, limit, ctx, found, "limit")
            _unreadable(pid, limit, total, chosen, ctx, found, "limit")


def _within_project_quota(rule, chosen, ctx, found) -> bool:
    """False when no project's quota is known: nothing could be checked. A project whose
    quota is unknown and whose GPUs the plan raises could break it: it could not be
    checked (`found.unknown`); one the plan does not raise cannot (`scope: all`: it
    could, and is not checked either)."""
    if not rule.withinProjectQuota:
        return True
    totals = _project_totals(chosen, ctx, rule)
    for pid, total in totals.items():
        quota = ctx.quotas.get(pid)
        if quota is not None:  # as planned, where the plan changes it
            _over(pid, total, quota, ctx, found, "quota", pid in ctx.lowered)
            _unreadable(pid, quota, total, chosen, ctx, found, "quota")
            continue
        why = ctx.unknown.get(pid)
        if why is None and pid in ctx.quotas:
            found.note(f"{ctx.project(pid)}: no GPU quota limit (a negative deserved); passed")
            continue
        why = why or "not read"
        before, after = total
        what = f"its GPU quota is unknown ({why}); {_num(after)} GPUs planned (now {_num(before)})"
        if after > before or (rule.scope == "all" and after > 0):
            found.unknown(f"project {pid}", what, ctx.project(pid))
        else:
            found.note(f"{ctx.project(pid)}: quota unknown ({why}); not raised by this plan")
    return not totals or any(pid not in ctx.unknown and pid in ctx.quotas for pid in totals)


def _quota_not_below_held(rule, chosen, ctx, found) -> None:
    """Each project whose quota the plan lowers (a `Project` spec: `ProjectImpact.lowered`)
    to less than its workloads hold after apply (at their most pods). Always the plan's
    doing, so never pre-existing; a GPU count that could not be read leaves it unknown."""
    if not rule.quotaNotBelowHeld:
        return
    units = {rc.address: rc for rc in ctx.plan.changes}
    for p in ctx.plan.impact.projects:
        if not p.lowered or p.planned_by not in units \
                or not _matches_project(rule.match, units[p.planned_by], p):
            continue
        where = ctx.project(p.project_id) if p.project_id else f"project {p.project_name}"
        text = (f"quota lowered from {_num(p.quota_before or 0)} to {_num(p.quota or 0)} "
                f"GPUs, below the {_num(p.after.high)} GPUs its workloads hold")
        if p.below_held:
            found.violated(p.planned_by, text, where)
        elif p.after.unknown:
            found.unknown(p.planned_by, f"quota lowered to {_num(p.quota or 0)} GPUs; the GPUs "
                          f"its workloads hold could not be read ({_gpus(p.after)} counted)",
                          where)


def containers(body: Mapping[str, Any], kind: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(path, container) of every container of a create body of `kind`: where its entry
    says they sit (`kinds.Kind.containers`: spec, masterSpec, spec.leader, spec.worker)."""
    return kinds.containers(kinds.get(kind), body)


def _per_container(chosen, found, problem) -> None:
    """One violation per workload after apply, naming what `problem(path, container,
    shown)` finds wrong with each of its containers (None: nothing); `shown(path, value)`
    is the value to quote, `(sensitive)` under a `lifecycle.sensitive` path. A workload the
    plan does not change (`CHANGING`) has its violation listed as pre-existing."""
    for rc in _remaining(chosen):
        def shown(path: str, value: str, rc: ResourceChange = rc) -> str:
            return masking.MASK if masking.is_masked(path, rc.sensitive) else _quote(value)

        wrong = [p for p in (problem(path, c, shown) for path, c in containers(rc.after, rc.kind)) if p]
        if wrong:
            found.violated(rc.address, "; ".join(wrong), changed=rc.action in CHANGING)


def _allowed_images(rule, chosen, ctx, found) -> None:
    def problem(path, c, shown):
        image = c.get("image")
        if isinstance(image, str) and not any(fnmatch.fnmatchcase(image, g)
                                              for g in rule.allowedImages):
            return f"{path}.image {shown(f'{path}.image', image)}"
        return None

    _per_container(chosen, found, problem)


def _required_labels(rule, chosen, ctx, found) -> None:
    # Each set of labels the workload's pods carry (`kinds.labels`: a container's, or a
    # manifest's pod template's).
    for rc in _remaining(chosen):
        wrong = []
        for path, have in kinds.labels(kinds.get(rc.kind), rc.after):
            missing = [name for name in rule.requiredLabels if name not in have]
            if missing:
                wrong.append(f"{path} lacks {', '.join(missing)}")
        if wrong:
            found.violated(rc.address, "; ".join(wrong), changed=rc.action in CHANGING)


def image_tag(image: str) -> str | None:
    """The tag of an image reference (None without one; a digest pins it: "@")."""
    if "@" in image:
        return "@"
    last = image.rsplit("/", 1)[-1]  # a registry's port (host:5000/x) is not a tag
    return last.rsplit(":", 1)[1] if ":" in last else None


def _forbid_latest_tag(rule, chosen, ctx, found) -> None:
    def problem(path, c, shown):
        image = c.get("image")
        if not isinstance(image, str):
            return None
        tag = image_tag(image)
        if tag is None:
            return f"{path}.image {shown(f'{path}.image', image)} has no tag (latest)"
        return f"{path}.image {shown(f'{path}.image', image)}" if tag == "latest" else None

    if rule.forbidLatestTag:
        _per_container(chosen, found, problem)


def _max_destructive(rule, chosen, ctx, found) -> None:
    gone = [rc.address for rc in chosen if rc.action in (Action.DELETE, Action.REPLACE)]
    if len(gone) > rule.maxDestructive:
        named = ", ".join(gone[:10]) + (f" and {len(gone) - 10} more" if len(gone) > 10 else "")
        found.violated("plan", f"{len(gone)} deletes and replaces ({named})")


_CHECKERS = {
    "maxGpusPerWorkload": _max_gpus_per_workload,
    "maxGpusPerProject": _max_gpus_per_project,
    "withinProjectQuota": _within_project_quota,
    "quotaNotBelowHeld": _quota_not_below_held,
    "allowedImages": _allowed_images,
    "requiredLabels": _required_labels,
    "forbidLatestTag": _forbid_latest_tag,
    "maxDestructive": _max_destructive,
}


# --- words --------------------------------------------------------------------------

def describe(check: str, value: Any) -> str:
    """`maxGpusPerWorkload 16`, `allowedImages nvcr.io/*, ...`, `forbidLatestTag`."""
    if isinstance(value, bool):
        return check
    if isinstance(value, list):
        return f"{check} {', '.join(map(str, value))}"
    if isinstance(value, dict):
        return f"{check} " + ", ".join(f"{k}: {_num(v)}" for k, v in value.items())
    return f"{check} {_num(value)}"


def _plain(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def _gpus(g: gpus.Gpus) -> str:
    return f"{_num(g.low)}..{_num(g.high)}" if g.low != g.high else _num(g.high)


def _quote(text: str) -> str:
    return '"' + text.replace('"', '\\"') + '"'
