"""Spec values kept out of the files: `${env:NAME}` and `${file:PATH}`, resolved when a
command runs.

A string value that is exactly `${env:NAME}` (an environment variable) or `${file:PATH}`
(a file's text, one trailing newline dropped) is replaced by what it names, after the
specs are loaded (and after the spec cache, which keeps the reference, never the value).
The path of each reference is added to the workload's `lifecycle.sensitive`, so the value
is masked in every output and hashed in the state wherever in the spec it is. `$${...}`
is the text `${...}` itself. An unset variable, an empty value or a file that cannot be
read is a `SpecError` naming the spec's file and line and the field; every such problem
is reported at once.
Callers: `background.PendingSpecs` (plan, apply, drift, validate, watch) and
`loader.load_specs` (which `apply FILE` uses to read a saved plan's values again).
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from typing import Any

import orjson

from reconciler import kinds
from reconciler.desired.sources import Problem, problem_lines
from reconciler.desired.types import DesiredWorkload, Lifecycle
from reconciler.errors import SpecError

REFERENCE = re.compile(r"\$\{(?P<source>env|file):(?P<name>[^}]*)\}")
_ESCAPED = re.compile(r"\$\$\{(?:env|file):[^}]*\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_FILE_BYTES = 1 << 20  # a secret file larger than 1 MiB is refused, not sent


def is_reference(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("${") and bool(REFERENCE.fullmatch(value))


def references(body: Any) -> list[tuple[tuple, str, str]]:
    """(location in `body`, dotted path as `lifecycle.sensitive` names it, reference text)
    of each reference in `body`."""
    out: list[tuple[tuple, str, str]] = []

    def walk(value: Any, loc: tuple, path: str, field: str) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, (*loc, k), f"{path}.{k}" if path else str(k), str(k))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                key = kinds.item_key(field, item)
                walk(item, (*loc, i), f"{path}[{key if key is not None else i}]", "")
        elif is_reference(value):
            out.append((loc, path, value))
        elif isinstance(value, str) and value.startswith("$${") and _ESCAPED.fullmatch(value):
            out.append((loc, "", value))  # an escaped one: unescaped, not sensitive

    walk(body, (), "", "")
    return out


def read_reference(text: str, environ: Mapping[str, str] | None = None,
                   read_file: Callable[[str], bytes] | None = None) -> str:
    """The value `text` (a reference) names; ValueError saying why there is none."""
    m = REFERENCE.fullmatch(text)
    assert m is not None
    source, name = m.group("source"), m.group("name")
    if source == "env":
        if not _ENV_NAME.fullmatch(name):
            raise ValueError(f"{text}: {name!r} is not an environment variable name")
        env = os.environ if environ is None else environ
        if name not in env:
            raise ValueError(f"{text}: the environment variable {name} is not set")
        if env[name] == "":
            raise ValueError(f"{text}: the environment variable {name} is empty")
        return env[name]
    if not name:
        raise ValueError(f"{text}: no file named")
    try:
        data = (read_file or _read_file)(name)
    except OSError as exc:
        raise ValueError(f"{text}: cannot read {name}: {exc.strerror or exc}") from None
    try:
        value = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{text}: {name} is not UTF-8 text") from None
    value = value[:-2] if value.endswith("\r\n") else value[:-1] if value.endswith("\n") else value
    if value == "":
        raise ValueError(f"{text}: {name} is empty")
    return value


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        data = f.read(MAX_FILE_BYTES + 1)
    if len(data) > MAX_FILE_BYTES:
        raise OSError(0, f"larger than {MAX_FILE_BYTES} bytes")
    return data


def resolve(workloads: list[DesiredWorkload], environ: Mapping[str, str] | None = None,
            ) -> list[DesiredWorkload]:
    """`workloads` with every reference replaced by its value and its path added to the
    workload's `lifecycle.sensitive`; those without one are returned as they are.
    Raises SpecError with every reference that cannot be resolved."""
    out: list[DesiredWorkload] = []
    problems: list[Problem] = []
    failed: set[str] = set()
    for w in workloads:
        found = references(w.body) if _may_hold(w.body) else []
        if not found:
            out.append(w)
            continue
        body = _copy_along(w.body, [loc for loc, _, _ in found])
        sensitive = list(w.lifecycle.sensitive)
        for loc, path, text in found:
            if not path:  # `$${...}`: the text `${...}`
                _put(body, loc, text[1:])
                continue
            try:
                _put(body, loc, read_reference(text, environ))
            except ValueError as exc:
                problems.append(Problem(w.source, _line_of(w, text), path, str(exc)))
                failed.add(w.address)
            if not kinds.under_any(path, sensitive):
                sensitive.append(path)
        lc = w.lifecycle
        out.append(dataclasses.replace(w, body=body, lifecycle=Lifecycle(
            lc.prevent_destroy, lc.ignore_changes, tuple(sensitive))))
    if problems:
        raise SpecError(problem_lines(problems), valid=len(workloads) - len(failed))
    return out


def _may_hold(body: Any) -> bool:
    """Whether `body` may hold a reference: its JSON has `${` (orjson's C encoder is many
    times quicker than walking the body, and almost no body has one)."""
    try:
        return b"${" in orjson.dumps(body)
    except (TypeError, orjson.JSONEncodeError):  # a value JSON cannot hold: walk it
        return True


def _copy_along(body: Any, locs: list[tuple]) -> Any:
    """A copy of `body` in which the containers on the way to each of `locs` are new
    (the rest is shared): the loaded body, maybe the cache's or the state's, is not
    changed."""
    def copy(node: Any, tails: list[tuple]) -> Any:
        if not tails or not isinstance(node, (dict, list)):
            return node
        heads: dict[Any, list[tuple]] = {}
        for t in tails:
            if t:
                heads.setdefault(t[0], []).append(t[1:])
        new = dict(node) if isinstance(node, dict) else list(node)
        for head, rest in heads.items():
            new[head] = copy(node[head], rest)
        return new
    return copy(body, locs)


def _put(body: Any, loc: tuple, value: Any) -> None:
    for seg in loc[:-1]:
        body = body[seg]
    body[loc[-1]] = value


def _line_of(w: DesiredWorkload, text: str) -> int | None:
    """The line of `text` in the spec's file at or after its document's first line (the
    document's line when not found there: a folder default's, say)."""
    try:
        with open(w.source, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return w.line
    start = (w.line or 1) - 1
    for i in range(start, len(lines)):
        if text in lines[i]:
            return i + 1
    return w.line
