"""Load and validate every spec under a directory: `load_specs(dir) -> [DesiredWorkload]`.

Reads the files (`sources`), merges each document over its folder defaults (`defaults`),
picks its model by `kind` (`models.MODELS`), validates it, checks the `lifecycle` paths
against the model, refuses (or warns of, in `DesiredWorkload.warnings`) numbers and
booleans written in a YAML 1.1 form (and a `projectId` number written other than as plain
digits), does not count a document with a duplicate key as a valid workload, and refuses
duplicate addresses and names. Every
problem in every file is collected and raised at once as one `SpecError`, each line
naming the file the value came from, the YAML line, the field path and the bad value
(as written).
`load_share`, `workload_keys` and `cross_file_problems` are the same steps one by one
(after `sources.find_files`), for `background`, which loads a big folder in child
processes.
Callers: the CLI (`validate`, `plan`, `apply`), `background` and tests.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import types
import typing
from typing import Any

import orjson
from pydantic import BaseModel, ValidationError

from reconciler import kinds, masking
from reconciler.desired import defaults, fields, models, parsing, references, sources, values
from reconciler.desired.sources import Path_, Problem, RawDocument
from reconciler.desired.types import DesiredWorkload, Lifecycle, duplicate_addresses
from reconciler.errors import SpecError

_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)|\[([^\[\]]+)\]")
_HEAD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def load_specs(directory: str | os.PathLike) -> list[DesiredWorkload]:
    """Every workload declared under `directory`, in file order.

    Raises SpecError listing all problems when any file or document is invalid. An
    existing directory without spec files gives an empty list.
    """
    files, problems = sources.find_files(directory)
    workloads, file_problems = load_share(files)
    problems.extend(file_problems)
    problems.extend(cross_file_problems(workload_keys(workloads)))
    if problems:
        raise SpecError(sources.problem_lines(problems), valid=len(workloads))
    return references.resolve(workloads)


# A share of the files loads on its own (`load_share`) and the checks across files run on
# the shares' results (`cross_file_problems`): `background` splits a folder between
# processes this way. load_specs is exactly find_files + load_share(all) + the checks.

def load_share(files: list[sources.Found]) -> tuple[list[DesiredWorkload], list[Problem]]:
    """The valid workloads of `files` and the problems of each file, in file order (a
    file's problems by line). Blind to the other files: no check across files (the
    folder defaults a spec takes are read for it, their own problems are reported where
    the `_defaults.yaml` is listed)."""
    workloads: list[DesiredWorkload] = []
    problems: list[Problem] = []
    folders = defaults.Folders()
    for path, display, chain in files:
        if path.name.lower() == defaults.NAME:
            problems.extend(defaults.read(path, display)[1])
            continue
        docs, file_problems = sources.read_documents(path, display)
        found: list[Problem] = list(file_problems)
        lower = folders.layer(chain) if chain else None
        if chain and lower is None:
            docs = []  # a broken _defaults.yaml above: its problems say why
        for doc in docs:
            layered = doc if lower is None else defaults.Layered(doc, lower)
            workload, doc_problems = _load_document(layered)
            found.extend(doc_problems)
            if workload is not None and not doc.flawed:  # a duplicate key: not valid
                workloads.append(workload)
        found.sort(key=lambda p: (p.specs != (), p.line is None, p.line or 0))
        problems.extend(found)
    return workloads, problems


def workload_keys(workloads: list[DesiredWorkload]) -> list[tuple[str, str, int | None]]:
    """(address, source, line) of each workload: the input of cross_file_problems."""
    return [(w.address, w.source, w.line) for w in workloads]


def cross_file_problems(keys: list[tuple[str, str, int | None]]) -> list[Problem]:
    """The problems that span files, given every valid workload's key in file order:
    an address defined twice, or a name used by two kinds in one project, naming both
    places."""
    return [Problem(source, line, "", message)
            for source, line, message in duplicate_addresses(keys)]


def _load_document(doc: RawDocument | defaults.Layered,
                   ) -> tuple[DesiredWorkload | None, list[Problem]]:
    def problem(path: Path_, message: str) -> Problem:
        file, line, there = doc.locate(path)
        specs = (doc.file,) if file != doc.file else ()  # a folder default's value
        return Problem(file, line, _dotted(there), message, specs)

    data = doc.data
    if not isinstance(data, dict):
        return None, [problem((), f"a spec document must be a mapping, not {_type_name(data)}")]
    if not doc.clean:
        data = _drop_nulls(data)
    kind = data.get("kind")
    if kind is None:
        return None, [problem(("kind",), "required field is missing (one of "
                              + ", ".join(sorted(models.MODELS)) + ")")]
    model = models.MODELS.get(kind) if isinstance(kind, str) else None
    if model is None:
        return None, [problem(("kind",), _unknown_kind(kind))]

    found: list[Problem] = []
    sensitive = _sensitive_paths(data)
    failed: set[tuple] = set()
    withheld = _placeholders(data) if _may_hold_placeholder(data) else []
    found.extend(problem(loc, "is a sensitive value that export did not write: supply "
                         "the value itself (export --include-secrets)") for loc in withheld)
    try:
        validated = model.model_validate(data)
    except ValidationError as exc:
        validated = None
        secrets: list[str] | None = None
        for err in exc.errors(include_url=False):
            if any(tuple(err["loc"])[:len(w)] == w for w in withheld):
                continue  # said above
            failed.add(tuple(err["loc"]))
            err["input"] = masking.mask_at(_diff_path(data, err["loc"]), err.get("input"),
                                           sensitive)
            written = None if err["input"] == masking.MASK else doc.written(tuple(err["loc"]))
            path, message = _translate(err, model, written)
            if err["type"] == "rule":  # a rule's own words may quote a value
                if secrets is None:
                    secrets = _secret_texts(data, masking.mask_body(data, sensitive))
                for text in secrets:
                    message = message.replace(text, masking.MASK)
            found.append(problem(path, message))
    found.extend(problem(p, m) for p, m in _lifecycle_problems(data.get("lifecycle"), model))
    carried = model.KIND.manifest(data)
    if carried is not None:
        for path, what, value in values.manifest_problems(carried):
            at = (*model.KIND.hooks.manifest_path, *path)
            masked = masking.is_masked(_diff_path(data, at), sensitive)
            found.append(problem(at, f"{what}, got {masking.MASK if masked else _show(value)}"))
    if getattr(model, "IN_PROJECT", True):
        found.extend(problem(p, m) for p, m in _project_problems(data))
    pid = data.get("projectId")
    if type(pid) is int and doc.surprising and ("projectId",) not in failed:
        unquoted = _unquoted_project_id(pid, doc.written(("projectId",)))
        if unquoted is not None:
            failed.add(("projectId",))  # its YAML 1.1 form, if any, is said here
            found.append(problem(("projectId",), unquoted))
    warnings: list[Problem] = []
    if doc.surprising:
        for path, text, form in _yaml11_forms(doc, data):
            if path in failed:
                continue  # its type error quotes it as written
            masked = masking.is_masked(_diff_path(data, path), sensitive)
            refused, message = _yaml11_message(text, _value_at(data, path), form, masked)
            p = problem(path, message)
            if refused:
                found.append(p)
            else:  # a folder default's warning is the same for every spec: said once
                p.specs = ()
                warnings.append(p)
    if validated is None or found:
        return None, found
    unknown_type = None if carried is None else model.KIND.hooks.manifest_warning(
        model.KIND, carried)
    if unknown_type is not None:
        warnings.append(problem((*model.KIND.hooks.manifest_path, "kind"), unknown_type))

    lc = validated.lifecycle or models.Lifecycle()
    body: dict[str, Any] = {"name": validated.name}
    if validated.projectId is not None:
        body["projectId"] = validated.projectId
    body["clusterId"] = validated.clusterId
    if validated.templateId is not None:
        body["templateId"] = validated.templateId
    for key in model.KIND.body_keys:
        if key in data:
            body[key] = data[key]
    project_at = None  # a folder default's `project:` (lines are worked out only then)
    if validated.project is not None and isinstance(doc, defaults.Layered):
        origin, sub = doc.resolve(("project",))
        if origin.file != doc.file:
            project_at = (origin.file, origin.line_of(sub))
    return DesiredWorkload(
        kind=model.KIND.name, name=validated.name, project_id=validated.projectId or "",
        project_name=validated.project, project_at=project_at,
        cluster_id=validated.clusterId, body=body,
        desired_phase=validated.desiredPhase or "Running",
        lifecycle=Lifecycle(prevent_destroy=(model.KIND.prevent_destroy
                                             if lc.preventDestroy is None
                                             else lc.preventDestroy),
                            ignore_changes=tuple(lc.ignoreChanges or ()),
                            sensitive=tuple(lc.sensitive or ())),
        source=doc.file, line=doc.line,
        warnings=tuple(str(w) for w in sorted(warnings, key=lambda w: (w.file != doc.file,
                                                                       w.file, w.line or 0)))), []


# --- YAML 1.1 forms (parsing.yaml11_form) ----------------------------------------------

def _yaml11_forms(doc: RawDocument | defaults.Layered, data: Any,
                  ) -> list[tuple[Path_, str, str]]:
    """(path, text as written, form) of each number or boolean of `data` written in a
    form that YAML 1.2 reads otherwise."""
    out = []
    stack: list[tuple[Path_, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((path + (k,), v) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((path + (i,), v) for i, v in enumerate(value))
        elif isinstance(value, (bool, int, float)):
            text = doc.written(path)
            form = parsing.yaml11_form_of(value, text) if text is not None else None
            if form is not None:
                out.append((path, text, form))
    return out


def _yaml11_message(text: str, value: Any, form: str, masked: bool) -> tuple[bool, str]:
    """(refused, message) for a value written in a YAML 1.1 form: refused when YAML 1.2
    reads another value (octal, base-60), else a warning."""
    shown, read = (masking.MASK, masking.MASK) if masked else (text, _show(value))
    if form == "octal":
        decimal = masking.MASK if masked else str(int(text, 10))
        return True, (f"{shown} is an octal number in YAML 1.1 ({read}) but a decimal one in "
                      f"YAML 1.2 ({decimal}): write the number meant without a leading zero")
    if form == "base-60":
        return True, (f"{shown} is a base-60 number in YAML 1.1 ({read}) but text in YAML "
                      "1.2: write the number meant, or quote the text")
    return False, (f"{shown} is read as {read} here but as text by YAML 1.2 and most "
                   f"tools: write {read}")


def _value_at(data: Any, path: Path_) -> Any:
    for seg in path:
        data = data[seg]
    return data


_PLACEHOLDER_JSON = orjson.dumps(masking.SECRET_PLACEHOLDER)


def _may_hold_placeholder(data: Any) -> bool:
    """Whether `data` may hold `export`'s placeholder (`_placeholders`): its JSON has the
    placeholder's (orjson's C encoder is many times quicker than the walk, which builds a
    path per value, and almost no spec has one)."""
    try:
        return _PLACEHOLDER_JSON in orjson.dumps(data)
    except (TypeError, orjson.JSONEncodeError):  # a value JSON cannot hold: walk it
        return True


def _placeholders(data: Any, loc: tuple = ()) -> list[tuple]:
    """Where `data` holds `export`'s placeholder for a withheld value, but an environment
    variable's `value` (its model refuses that one, with its own words)."""
    if data == masking.SECRET_PLACEHOLDER:
        env_value = len(loc) >= 3 and loc[-1] == "value" and loc[-3] == "environmentVariables"
        return [] if env_value else [loc]
    if isinstance(data, dict):
        return [w for k, v in data.items() for w in _placeholders(v, (*loc, k))]
    if isinstance(data, list):
        return [w for i, v in enumerate(data) for w in _placeholders(v, (*loc, i))]
    return []


def _sensitive_paths(data: dict) -> tuple[str, ...]:
    lifecycle = data.get("lifecycle")
    paths = lifecycle.get("sensitive") if isinstance(lifecycle, dict) else None
    return tuple(p for p in paths if isinstance(p, str)) if isinstance(paths, list) else ()


def _secret_texts(data: Any, masked: Any) -> list[str]:
    """The text of every scalar in `data` that `masked` (its masked copy) hides, longest
    first."""
    out: set[str] = set()

    def walk(value: Any, hidden: bool) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v, hidden)
        elif isinstance(value, list):
            for v in value:
                walk(v, hidden)
        elif hidden and value is not None:
            out.add(_scalar_text(value))

    def compare(value: Any, copy: Any) -> None:
        if copy == masking.MASK and value != masking.MASK:
            walk(value, True)
        elif isinstance(value, dict) and isinstance(copy, dict):
            for k, v in value.items():
                compare(v, copy.get(k))
        elif isinstance(value, list) and isinstance(copy, list):
            for v, c in zip(value, copy):
                compare(v, c)

    compare(data, masked)
    return sorted((t for t in out if t), key=len, reverse=True)


def _diff_path(data: Any, loc: tuple) -> str:
    """`loc` (keys and list indexes into `data`) as the diff and `lifecycle.sensitive`
    name it: a keyed list item by its key (`spec.environmentVariables[DB_PASSWORD]`)."""
    out, node, field = "", data, ""
    for seg in loc:
        if isinstance(seg, int) and isinstance(node, list) and 0 <= seg < len(node):
            node = node[seg]
            key = kinds.item_key(field, node)
            out += f"[{key if key is not None else seg}]"
        else:
            node = node.get(seg) if isinstance(node, dict) else None
            field = str(seg)
            out += f".{seg}" if out else field
    return out


def _unquoted_project_id(value: Any, written: str | None) -> str | None:
    """`projectId: 7`, unquoted, is the project "7" (docs/spec-values.md);
    any other way to write a number (`0x7`, `7_0`, `+7`, `1:30`) is refused with the
    quoting hint: YAML reads it as another text than the one written."""
    if not isinstance(value, int) or isinstance(value, bool) or written is None:
        return None
    if written == str(value) or (written.isdigit() and written.startswith("0")):
        return None  # plain digits; a leading zero is refused as an octal number already
    return (f"must be a project id, a string of digits, got {written} (YAML reads it as "
            f"the number {value}; quote the id meant, e.g. \"{value}\")")


def _project_problems(data: dict) -> list[tuple[Path_, str]]:
    """Exactly one of projectId and project (the project's name) must be given."""
    if "projectId" in data and "project" in data:
        return [(("project",), "give either project (the project's name) or projectId, "
                               "not both")]
    if "projectId" not in data and "project" not in data:
        return [(("projectId",), "required field is missing (or give project: with the "
                                 "project's name)")]
    return []


def _drop_nulls(value: Any) -> Any:
    """null means absent: drop null mapping values at every depth (list items stay, so
    that an empty `- ` item is reported rather than silently skipped)."""
    if isinstance(value, dict):
        return {k: _drop_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_nulls(v) for v in value]
    return value


def _unknown_kind(kind: Any) -> str:
    allowed = sorted(models.MODELS)
    message = f"unknown kind {_show(kind)}"
    # Kinds are case-sensitive in a spec: another case of one is the closest.
    close = next((k for k in kinds.spelled(kind) if k), None) if isinstance(kind, str) else None
    if close:
        return f"{message} (did you mean '{close}'?)"
    return f"{message}: expected one of {', '.join(allowed)}"


# --- pydantic errors → short human messages -------------------------------------------

def _translate(err: dict, model: type[BaseModel], written: str | None = None,
               ) -> tuple[Path_, str]:
    """The path and message of one pydantic error; `written`: the value's text as the
    file has it, when YAML read it as a number or a boolean (`12:30` read as 750)."""
    loc = tuple(err["loc"])
    kind = err["type"]
    ctx = err.get("ctx") or {}
    value = err.get("input")
    shown = written if written is not None else _show(value)
    if kind == "rule":
        return loc + tuple(ctx.get("at") or ()), ctx["message"]
    if kind == "extra_forbidden":
        allowed = _fields_at(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1, cutoff=0.6)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        return loc, f"unknown field{hint}"
    if kind == "missing":
        return loc, "required field is missing"
    if kind == "literal_error":
        return loc, f"must be one of {ctx.get('expected', '')}, got {shown}"
    if kind == "string_pattern_mismatch":
        hint = fields.PATTERN_HINTS.get(ctx.get("pattern"), f"must match {ctx.get('pattern')}")
        if loc == ("name",) and ctx.get("pattern") == fields.DNS_LABEL_RE:
            hint = fields.PATTERN_HINTS[fields.DNS_LABEL_RE] + " (Kubernetes names the pods after it)"
        return loc, f"{hint}, got {shown}"
    if kind == "string_too_short":
        if ctx.get("min_length") == 1:
            return loc, "must not be empty"
        return loc, f"must be at least {ctx.get('min_length')} characters, got {shown}"
    if kind == "string_too_long":
        return loc, f"must be at most {ctx.get('max_length')} characters, got {shown}"
    if kind == "string_type":
        hint = ""
        if isinstance(value, (int, float, bool)):
            text = written if written is not None else _scalar_text(value)
            read = f"YAML reads it as {_show(value)}; " if text != _scalar_text(value) else ""
            hint = f" ({read}quote it: \"{text}\")"
        return loc, f"must be a string, got {shown}{hint}"
    if kind in ("int_type", "int_from_float", "int_parsing"):
        return loc, f"must be an integer, got {shown}"
    if kind in ("float_type", "float_parsing"):
        return loc, f"must be a number, got {shown}"
    if kind == "finite_number":
        return loc, f"must be a finite number, got {shown}"
    if kind in ("bool_type", "bool_parsing"):
        return loc, f"must be true or false, got {shown}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return loc, f"must be a mapping of fields, got {shown}"
    if kind == "list_type":
        return loc, f"must be a list, got {shown}"
    bounds = {"greater_than_equal": (">=", "ge"), "less_than_equal": ("<=", "le"),
              "greater_than": (">", "gt"), "less_than": ("<", "lt")}
    if kind in bounds:
        op, key = bounds[kind]
        return loc, f"must be {op} {ctx.get(key)}, got {shown}"
    message = err.get("msg", kind)
    message = message.removeprefix("Value error, ")
    return loc, f"{message[:1].lower()}{message[1:]}, got {shown}"


def _fields_at(model: type[BaseModel], loc: Path_) -> list[str]:
    target = _model_at(model, loc)
    return list(target.model_fields) if target is not None else []


def _model_at(model: type[BaseModel], loc: Path_) -> type[BaseModel] | None:
    t: Any = model
    for seg in loc:
        t = _unwrap(t)
        if isinstance(seg, int):
            if typing.get_origin(t) is not list:
                return None
            t = typing.get_args(t)[0]
        else:
            if not (isinstance(t, type) and issubclass(t, BaseModel)) or seg not in t.model_fields:
                return None
            t = t.model_fields[seg].annotation
    t = _unwrap(t)
    return t if isinstance(t, type) and issubclass(t, BaseModel) else None


def _unwrap(t: Any) -> Any:
    """Strip Annotated[...] and `| None` until a model, a list or a plain type remains."""
    while True:
        origin = typing.get_origin(t)
        if origin is typing.Annotated:
            t = typing.get_args(t)[0]
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(t) if a is not type(None)]
            if len(args) != 1:
                return t
            t = args[0]
        else:
            return t


# --- lifecycle paths -----------------------------------------------------------------

def _lifecycle_problems(lifecycle: Any, model: type[models.Document]) -> list[tuple[Path_, str]]:
    if not isinstance(lifecycle, dict):
        return []
    out = []
    for key in ("ignoreChanges", "sensitive"):
        paths = lifecycle.get(key)
        if not isinstance(paths, list):
            continue
        for i, text in enumerate(paths):
            if isinstance(text, str):
                message = _check_path(text, model)
                if message:
                    out.append((("lifecycle", key, i), message))
    return out


def _check_path(text: str, model: type[models.Document]) -> str | None:
    """Why `text` is not a dotted path into the kind's body, or None when it is."""
    body_keys = model.KIND.body_keys
    starts = ", ".join(body_keys)
    head = _HEAD.match(text)
    if head is None or head.group() not in body_keys:
        return f"must be a dotted path starting with one of {starts}; got {_show(text)}"
    segments: list[str | None] = [head.group()]
    pos = head.end()
    while pos < len(text):
        m = _SEGMENT.match(text, pos)
        if m is None:
            return (f"is not a dotted path such as spec.compute.gpuDevicesRequest or "
                    f"spec.environmentVariables[NAME], got {_show(text)}")
        segments.append(m.group(1))  # None for an item selector [..]
        pos = m.end()
    t: Any = model
    for i, seg in enumerate(segments):
        t = _unwrap(t)
        if typing.get_origin(t) is dict:
            return None  # a free-form object (a Manifest's manifest): any path under it
        if seg is None:
            if typing.get_origin(t) is not list:
                return f"{_dotted_text(segments[:i])} is not a list, got {_show(text)}"
            t = typing.get_args(t)[0]
            continue
        if not (isinstance(t, type) and issubclass(t, BaseModel)):
            return f"{_dotted_text(segments[:i])} has no field {seg!r}, got {_show(text)}"
        if seg not in t.model_fields:
            close = difflib.get_close_matches(seg, list(t.model_fields), n=1, cutoff=0.6)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            return f"unknown field {seg!r} in {_show(text)}{hint}"
        t = t.model_fields[seg].annotation
    return None


def _dotted_text(segments: list[str | None]) -> str:
    return "".join(f".{s}" if s is not None else "[]" for s in segments).lstrip(".")


# --- formatting ----------------------------------------------------------------------

_dotted = sources.dotted


def _show(value: Any) -> str:
    if value == masking.MASK:
        return value
    if isinstance(value, (dict, list)):
        text = json.dumps(value, default=str)
    elif isinstance(value, str):
        text = json.dumps(value, ensure_ascii=False)
    elif value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    else:
        text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _scalar_text(value: Any) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _type_name(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the text {_show(value)}"
    return _show(value)
