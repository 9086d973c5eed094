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

`PolicyFile` validates one (the reader, `reconciler.desired.documents`, gives it file,
line and field errors); `evaluate(rules, plan, quotas=...)` checks them on the plan: the
workloads as they will be after apply (every change but a delete, no-ops included) and
the actions. It returns a `Report` of one `RuleResult` per rule, each with its
`Violation`s; a deny rule with a violation fails the plan (`Report.passed`).
Callers: `operations` (plan, apply, apply of a saved plan), `planfile` (records the
report), `render/*` (show it).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import Field, StringConstraints, model_validator

from reconciler import gpus, kinds, masking
from reconciler.desired.fields import Strict, rule_error
from reconciler.plans import Action, Plan, ResourceChange

Enforcement = Literal["deny", "warn"]
KindName = Literal[tuple(kinds.KINDS)]  # type: ignore[valid-type]
NonEmpty = Annotated[str, StringConstraints(min_length=1)]
Limit = Annotated[float, Field(ge=0)]


class Match(Strict):
    """Which workloads a rule looks at: all of these that are given must hold."""
    kinds: list[KindName] | None = None
    projects: list[NonEmpty] | None = None  # project ids or names
    names: list[NonEmpty] | None = None  # globs on the workload's name


# The rule keys, in the order results are listed; a rule entry has exactly one of them.
CHECKS = ("maxGpusPerWorkload", "maxGpusPerProject", "withinProjectQuota", "allowedImages",
          "requiredLabels", "forbidLatestTag", "maxDestructive")


class Rule(Strict):
    name: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    enforcement: Enforcement = "deny"
    description: str | None = None
    match: Match | None = None
    maxGpusPerWorkload: Limit | None = None
    # project id or name -> the most GPUs its workloads may hold; "*": every other project
    maxGpusPerProject: dict[NonEmpty, Limit] | None = None
    withinProjectQuota: bool | None = None
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


# --- results ------------------------------------------------------------------------

@dataclass(frozen=True)
class Violation:
    address: str  # a workload's address, `project <id>` or `plan`
    message: str  # the whole line: "<address>: rule <name> (<check> <limit>): <what>"


@dataclass(frozen=True)
class RuleResult:
    name: str
    check: str  # the rule key, e.g. maxGpusPerWorkload
    limit: Any  # its value as the file gave it
    enforcement: Enforcement
    source: str = ""  # the file that defines it
    violations: tuple[Violation, ...] = ()
    notes: tuple[str, ...] = ()  # what it could not check, or let pass, and why
    checked: bool = True  # False: it had nothing it could check (every quota unknown)

    @property
    def description(self) -> str:
        return describe(self.check, self.limit)

    @property
    def status(self) -> str:
        """passed | failed (deny, violated) | warned (warn, violated) | unchecked."""
        if not self.violations:
            return "passed" if self.checked else "unchecked"
        return "failed" if self.enforcement == "deny" else "warned"


@dataclass(frozen=True)
class Report:
    rules: tuple[RuleResult, ...] = ()
    files: tuple[str, ...] = ()  # the policy files, as given

    @property
    def passed(self) -> bool:
        """No deny rule was broken: apply may go ahead."""
        return not self.failed

    @property
    def failed(self) -> list[RuleResult]:
        return [r for r in self.rules if r.status == "failed"]

    @property
    def warned(self) -> list[RuleResult]:
        return [r for r in self.rules if r.status == "warned"]

    def ordered(self) -> list[RuleResult]:
        """Failures first, then warnings, then the rules that passed (file order within)."""
        rank = {"failed": 0, "warned": 1, "unchecked": 2, "passed": 3}
        return sorted(self.rules, key=lambda r: rank[r.status])

    def summary(self) -> str:
        """`2 rules: 1 failed, 1 passed` (the words every renderer uses)."""
        n = len(self.rules)
        counts = [(sum(r.status == s for r in self.rules), s)
                  for s in ("failed", "warned", "unchecked", "passed")]
        return (f"{n} rule{'s' if n != 1 else ''}: "
                + ", ".join(f"{k} {word}" for k, word in counts if k))


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
    """Check each rule on `plan`. GPUs before and after apply, and the projects' quotas
    (unknown ones: `withinProjectQuota` notes them and lets them pass), come from the
    plan's GPU impact (`gpus.impact_of`)."""
    impact = gpus.impact_of(plan)
    names = {p.project_id: p.project_name for p in impact.projects if p.project_name}
    for rc in plan.changes:
        if rc.project_name:
            names.setdefault(rc.project_id, rc.project_name)
    ctx = _Context(plan, {p.project_id: p.quota for p in impact.projects}, names,
                   {w.address: (w.before, w.after) for w in impact.workloads})
    return Report(rules=tuple(_result(s, ctx) for s in rules), files=tuple(files))


@dataclass
class _Context:
    plan: Plan
    quotas: dict[str, float | None]
    names: dict[str, str]
    moves: dict[str, tuple[gpus.Gpus, gpus.Gpus]]  # address -> GPUs before, after apply

    def gpus_of(self, rc: ResourceChange) -> tuple[gpus.Gpus, gpus.Gpus]:
        found = self.moves.get(rc.address)
        return found if found is not None else gpus.change_gpus(rc)

    def project(self, pid: str) -> str:
        name = self.names.get(pid)
        return f"project {pid} ({name})" if name else f"project {pid}"


def _result(source: Source, ctx: _Context) -> RuleResult:
    rule = source.rule
    chosen = [rc for rc in ctx.plan.changes if _matches(rule.match, rc, ctx.names)]
    violations: list[Violation] = []
    notes: list[str] = []
    head = f"rule {rule.name} ({describe(rule.check, rule.limit)})"

    def violated(address: str, what: str, shown: str | None = None) -> None:
        # `shown`: how the message names it (a project with its name), when not `address`.
        violations.append(Violation(address, f"{shown or address}: {head}: {what}"))

    checked = _CHECKERS[rule.check](rule, chosen, ctx, violated, notes) is not False
    return RuleResult(name=rule.name, check=rule.check, limit=_plain(rule.limit),
                      enforcement=rule.enforcement, source=source.file,
                      violations=tuple(violations), notes=tuple(notes), checked=checked)


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


def _remaining(changes: Iterable[ResourceChange]) -> list[ResourceChange]:
    """The workloads that exist after apply: not deleted, with a spec."""
    return [rc for rc in changes if rc.action is not Action.DELETE and rc.after is not None]


def _max_gpus_per_workload(rule, chosen, ctx, violated, notes) -> None:
    # The workload's size when it runs, whatever its phase: a cap on what it asks for.
    # What it holds after apply is that size unless its phase makes it nothing.
    for rc in _remaining(chosen):
        size = ctx.gpus_of(rc)[1]
        if size == gpus.NONE:
            size = gpus.held(rc.kind, rc.after)
        if size.high > rule.maxGpusPerWorkload:
            violated(rc.address, f"{_gpus(size)} GPUs")


def _project_totals(chosen, ctx, rule) -> dict[str, list[float]]:
    """Project id -> [GPUs before apply, after apply] (the most, for autoscaled ranges);
    with --target, a rule without `match` counts the projects' other workloads too."""
    totals: dict[str, list[float]] = {}
    for rc in chosen:
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


def _over(pid: str, total: list[float], limit: float, ctx, violated, notes, what: str) -> None:
    """A violation when the plan takes the project past `limit`, or further past it; a
    note when it stays past it without this plan raising its total."""
    before, after = total
    if after <= limit:
        return
    where = ctx.project(pid)
    text = f"{_num(after)} GPUs planned (now {_num(before)}), {what} {_num(limit)}"
    if after > before:
        violated(f"project {pid}", text, where)
    else:
        notes.append(f"{where}: {text}; not raised by this plan")


def _max_gpus_per_project(rule, chosen, ctx, violated, notes) -> None:
    limits = rule.maxGpusPerProject
    for pid, total in _project_totals(chosen, ctx, rule).items():
        # By id, else by name, else "*".
        limit = next((limits[k] for k in (pid, ctx.names.get(pid), "*") if k in limits), None)
        if limit is not None:
            _over(pid, total, limit, ctx, violated, notes, "limit")


def _within_project_quota(rule, chosen, ctx, violated, notes) -> bool:
    """False when no project's quota is known: nothing could be checked."""
    if not rule.withinProjectQuota:
        return True
    totals = _project_totals(chosen, ctx, rule)
    for pid, total in totals.items():
        quota = ctx.quotas.get(pid)
        if quota is None:
            notes.append(f"{ctx.project(pid)}: quota unknown (not read: --no-refresh, or "
                         "the API did not say); not checked")
            continue
        _over(pid, total, quota, ctx, violated, notes, "quota")
    return not totals or any(ctx.quotas.get(pid) is not None for pid in totals)


def containers(body: Mapping[str, Any], kind: str) -> list[tuple[str, Mapping[str, Any]]]:
    """(path, container) of every container of a create body of `kind`: where its entry
    says they sit (`kinds.Kind.containers`: spec, masterSpec, spec.leader, spec.worker)."""
    return kinds.containers(kinds.get(kind), body)


def _per_container(chosen, violated, problem) -> None:
    """One violation per workload after apply, naming what `problem(path, container,
    shown)` finds wrong with each of its containers (None: nothing); `shown(path, value)`
    is the value to quote, `(sensitive)` under a `lifecycle.sensitive` path."""
    for rc in _remaining(chosen):
        def shown(path: str, value: str, rc: ResourceChange = rc) -> str:
            return masking.MASK if masking.is_masked(path, rc.sensitive) else _quote(value)

        found = [p for p in (problem(path, c, shown) for path, c in containers(rc.after, rc.kind)) if p]
        if found:
            violated(rc.address, "; ".join(found))


def _allowed_images(rule, chosen, ctx, violated, notes) -> None:
    def problem(path, c, shown):
        image = c.get("image")
        if isinstance(image, str) and not any(fnmatch.fnmatchcase(image, g)
                                              for g in rule.allowedImages):
            return f"{path}.image {shown(f'{path}.image', image)}"
        return None

    _per_container(chosen, violated, problem)


def _required_labels(rule, chosen, ctx, violated, notes) -> None:
    def problem(path, c, shown):
        have = {item.get("name") for item in c.get("labels") or () if isinstance(item, dict)}
        missing = [name for name in rule.requiredLabels if name not in have]
        return f"{path}.labels lacks {', '.join(missing)}" if missing else None

    _per_container(chosen, violated, problem)


def image_tag(image: str) -> str | None:
    """The tag of an image reference (None without one; a digest pins it: "@")."""
    if "@" in image:
        return "@"
    last = image.rsplit("/", 1)[-1]  # a registry's port (host:5000/x) is not a tag
    return last.rsplit(":", 1)[1] if ":" in last else None


def _forbid_latest_tag(rule, chosen, ctx, violated, notes) -> None:
    def problem(path, c, shown):
        image = c.get("image")
        if not isinstance(image, str):
            return None
        tag = image_tag(image)
        if tag is None:
            return f"{path}.image {shown(f'{path}.image', image)} has no tag (latest)"
        return f"{path}.image {shown(f'{path}.image', image)}" if tag == "latest" else None

    if rule.forbidLatestTag:
        _per_container(chosen, violated, problem)


def _max_destructive(rule, chosen, ctx, violated, notes) -> None:
    gone = [rc.address for rc in chosen if rc.action in (Action.DELETE, Action.REPLACE)]
    if len(gone) > rule.maxDestructive:
        named = ", ".join(gone[:10]) + (f" and {len(gone) - 10} more" if len(gone) > 10 else "")
        violated("plan", f"{len(gone)} deletes and replaces ({named})")


_CHECKERS = {
    "maxGpusPerWorkload": _max_gpus_per_workload,
    "maxGpusPerProject": _max_gpus_per_project,
    "withinProjectQuota": _within_project_quota,
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


# --- as JSON (the plan's `policy` object, docs/plan-format.md; saved plans) -----------

def report_document(report: Report) -> dict[str, Any]:
    return {
        "passed": report.passed,
        "summary": report.summary(),
        "files": list(report.files),
        "rules": [{"name": r.name, "check": r.check, "limit": r.limit,
                   "enforcement": r.enforcement, "source": r.source, "status": r.status,
                   "violations": [{"address": v.address, "message": v.message}
                                  for v in r.violations],
                   "notes": list(r.notes)} for r in report.ordered()],
    }


def report_from_document(doc: Mapping[str, Any]) -> Report:
    """`report_document`'s inverse (the derived fields are worked out again)."""
    return Report(files=tuple(str(f) for f in doc["files"]), rules=tuple(
        RuleResult(name=str(r["name"]), check=str(r["check"]), limit=r["limit"],
                   enforcement=_enforcement(r["enforcement"]), source=str(r["source"]),
                   violations=tuple(Violation(str(v["address"]), str(v["message"]))
                                    for v in r["violations"]),
                   notes=tuple(str(n) for n in r["notes"]), checked=r["status"] != "unchecked")
        for r in doc["rules"]))


def _enforcement(value: Any) -> Enforcement:
    if value not in ("deny", "warn"):
        raise ValueError(f"enforcement: expected deny or warn, got {value!r:.40}")
    return value
