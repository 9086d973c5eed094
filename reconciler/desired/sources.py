"""Spec files on disk → raw documents, each with a map from field path to line number.

Finds `*.yaml`, `*.yml` and `*.json` under a directory (any depth, sorted, hidden files
and folders skipped; each with the `_defaults.yaml` files above it), reads them, and
parses YAML (several documents per file, empty ones skipped) or JSON (one object, or a
list of them), keeping for the messages each number's or boolean's text as written.
Problems (unreadable file, syntax error, duplicate key) are returned, never raised.
Callers: `reconciler.desired.loader` and `defaults`.

A path is a tuple of keys and list indexes, e.g. ("spec", "environmentVariables", 2).
"""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

SUFFIXES = (".yaml", ".yml", ".json")
# A folder's defaults for the specs at or below it (reconciler.desired.defaults).
DEFAULTS_NAME = "_defaults.yaml"
# An alias-heavy document ("billion laughs") expands past this many nodes: refuse it.
MAX_NODES = 100_000
MAX_DEPTH = 100
# Python refuses to read a longer integer from text (sys.get_int_max_str_digits()).
MAX_INT_DIGITS = 4300
# A spec file larger than this is refused before it is read (docs/specs.md, "Spec files").
MAX_FILE_BYTES = 10 * 1024 * 1024
_MB = MAX_FILE_BYTES // (1024 * 1024)

Path_ = tuple[str | int, ...]


@dataclass
class Problem:
    file: str
    line: int | None
    path: str  # dotted field path, "" for the document or the file as a whole
    message: str
    # the specs a folder default with this problem was merged into (file is the default's)
    specs: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        text = f"{where}: {self.path}: {self.message}" if self.path else f"{where}: {self.message}"
        if self.specs:
            shown = ", ".join(self.specs[:3])
            more = len(self.specs) - 3
            text += f" (a default for {shown}{f' and {more} more' if more > 0 else ''})"
        return text


def problem_lines(problems: list[Problem]) -> list[str]:
    """The problems as text, in order; a folder default's problem met in several specs
    is one line naming them."""
    merged: dict[tuple, Problem] = {}
    for p in problems:
        key = (p.file, p.line, p.path, p.message) if p.specs else (id(p),)
        if key in merged:
            merged[key].specs += p.specs
        else:
            merged[key] = Problem(p.file, p.line, p.path, p.message, p.specs)
    return [str(p) for p in merged.values()]


class RawDocument:
    """One parsed document: its data, the line of its first key, and a map from field
    path to line number (`lines`), worked out only when asked for: problems need it,
    a clean load does not.

    `clean` says the data holds no null and no subtree twice (no alias), so the loader
    may take it as it is instead of copying it without nulls. `texts` maps the path of
    each plain scalar that YAML read as a number, a boolean or null to the text as
    written (worked out with `lines`); `surprising` says one of them has a YAML 1.1 form
    (`yaml11_form`)."""

    __slots__ = ("file", "data", "line", "clean", "surprising", "_lines", "_texts",
                 "_find_lines", "flawed")

    def __init__(self, file: str, data: Any, lines: dict[Path_, int] | None = None,
                 line: int | None = None, *, clean: bool = False, surprising: bool = False,
                 texts: dict[Path_, str] | None = None,
                 find_lines: Callable[[], tuple[dict[Path_, int], dict[Path_, str]]] | None = None):
        self.file = file  # as the user should see it: the directory they gave joined with the file
        self.data = data
        self.line = line  # line of the document's first key
        self.clean = clean
        self.surprising = surprising
        self._lines = lines
        self._texts = texts
        self._find_lines = find_lines
        # A problem of the file lies in this document (a duplicate key): it is reported
        # with the file's problems, and the document is no valid workload.
        self.flawed = False

    @property
    def lines(self) -> dict[Path_, int]:
        if self._lines is None:
            self._lines, self._texts = (self._find_lines() if self._find_lines is not None
                                        else ({}, {}))
        return self._lines

    @property
    def texts(self) -> dict[Path_, str]:
        if self._texts is None:
            self.lines
        return self._texts or {}

    def line_of(self, path: Path_) -> int | None:
        """The line of `path`, or of its nearest ancestor that the file shows."""
        lines = self.lines
        for n in range(len(path), -1, -1):
            if path[:n] in lines:
                return lines[path[:n]]
        return self.line

    def locate(self, path: Path_) -> tuple[str, int | None, Path_]:
        """The file, line and path (here: this file's own) of the value at `path`."""
        return self.file, self.line_of(path), path

    def written(self, path: Path_) -> str | None:
        """The text of the scalar at `path` as written, when YAML read it as no text."""
        return self.texts.get(path)


# A spec file: its path, its name as the user should see it, and the `_defaults.yaml`
# files (path, name) of its folder and those above it under the root, outermost first.
# A `_defaults.yaml` is listed too (its own problems are reported there), with itself last.
Found = tuple[Path, str, tuple[tuple[Path, str], ...]]


def find_files(root: str | os.PathLike) -> tuple[list[Found], list[Problem]]:
    """Every spec file under `root` (or `root` itself if a file), sorted by path."""
    shown = os.fspath(root)
    base = Path(root)
    if base.is_file():
        return [(base, shown, ())], []
    if not base.is_dir():
        if os.path.lexists(base):  # a FIFO or a device: read_documents refuses it
            return [(base, shown, ())], []
        return [], [Problem(shown, None, "", "no such directory")]
    problems: list[Problem] = []

    def on_error(exc: OSError) -> None:
        problems.append(Problem(str(Path(shown) / Path(exc.filename).relative_to(base))
                                if exc.filename else shown, None, "", f"cannot read: {exc.strerror}"))

    found = []
    chains: dict[Path, tuple[tuple[Path, str], ...]] = {}
    for dirpath, dirnames, filenames in os.walk(base, onerror=on_error):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        folder = Path(dirpath)
        chain = chains.get(folder.parent, ())
        # pathlib once a folder; a file's sort key and display name are joined as text
        rel = folder.relative_to(base)
        key_prefix = f"{rel.as_posix()}/" if rel.parts else ""
        shown_folder = str(Path(shown) / rel)
        shown_prefix = "" if shown_folder == "." else os.path.join(shown_folder, "")
        here = []
        for name in filenames:
            lower = name.lower()
            if name.startswith(".") or not lower.endswith(SUFFIXES):
                continue
            path = folder / name
            display = shown_prefix + name
            if lower == DEFAULTS_NAME:
                chain = chain + ((path, display),)
            elif lower.startswith("_defaults."):
                problems.append(Problem(display, None, "", f"folder defaults must be named "
                                        f"{DEFAULTS_NAME}: this file is not read"))
                continue
            here.append((key_prefix + name, path, display))
        chains[folder] = chain
        found.extend((*entry, chain) for entry in here)
    found.sort()
    return [(p, d, c) for _, p, d, c in found], problems


def read_documents(path: Path, display: str) -> tuple[list[RawDocument], list[Problem]]:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):  # a FIFO blocks, a device reads without end
            return [], [Problem(display, None, "", "is not a regular file (a pipe, a device "
                                "or a socket?): refused without reading it")]
        too_big = [Problem(display, None, "", f"is larger than the {_MB} MB a spec file may "
                           "be: refused without reading it all")]
        if info.st_size > MAX_FILE_BYTES:
            return [], too_big
        with path.open("rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)  # it may have grown since the stat
        if len(raw) > MAX_FILE_BYTES:
            return [], too_big
    except OSError as exc:
        return [], [Problem(display, None, "", f"cannot read: {exc.strerror or exc}")]
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        return [], [Problem(display, None, "", "is not UTF-8 text")]
    if path.name.lower().endswith(".json"):
        return _json_documents(text, display)
    return _yaml_documents(text, display)


# --- YAML ----------------------------------------------------------------------------

_STR_TAG = "tag:yaml.org,2002:str"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_INT_TAG = "tag:yaml.org,2002:int"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_NULL_TAG = "tag:yaml.org,2002:null"
_MERGE_TAG = "tag:yaml.org,2002:merge"
_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):
    """SafeLoader whose mapping keys are always the key's text (`on:` stays "on",
    `8:` stays "8"), and that notes duplicate keys instead of keeping the last silently.

    libyaml parses when it is installed. Plain maps, lists, strings, decimal integers,
    booleans and nulls are built directly rather than through PyYAML's generator-based
    constructor; other tags go to the constructor as before. After `construct_document`,
    `shared` tells whether a node was reached twice (an alias or a merge key) or a
    tagged collection went to the constructor (either way `count` and `depth`, how many
    nodes the build visited and how deep, fall short of the document's real size),
    `nulls` whether it made a None, and `surprising` whether a scalar has a YAML 1.1
    form (`yaml11_form`) or is an integer written otherwise than as plain digits."""

    # Resolving a plain scalar's tag runs a few regular expressions; the same few
    # thousand keys and values recur in every spec, so remember the answers.
    _tags: dict[str, str] = {}

    def __init__(self, stream):
        super().__init__(stream)
        self.duplicates: list[tuple[str, int]] = []
        self.shared = self.nulls = self.surprising = False
        self.count = self.depth = 0

    def resolve(self, kind, value, implicit):
        if kind is ScalarNode and implicit[0] and not self.yaml_path_resolvers:
            tag = self._tags.get(value)
            if tag is None:
                if len(self._tags) > 50_000:
                    self._tags.clear()
                tag = self._tags[value] = super().resolve(kind, value, implicit)
            return tag
        return super().resolve(kind, value, implicit)

    def construct_document(self, node):
        built: dict[int, Any] = {}  # an alias is the same node: build it once, share it
        duplicates = self.duplicates
        bools = self.bool_values
        self.shared = self.nulls = self.surprising = False
        self.count = self.depth = 0
        deepest = 0

        def build(n, depth):
            nonlocal deepest
            self.count += 1
            if depth > deepest:
                deepest = depth
            tag = n.tag
            cls = n.__class__
            if cls is ScalarNode:
                if tag == _STR_TAG:
                    return n.value
                value = n.value
                if tag == _INT_TAG and value.isdigit() and (value[0] != "0" or value == "0"):
                    if len(value) > MAX_INT_DIGITS:
                        raise _TooLong(None, None, _too_long(value), n.start_mark)
                    return int(value)
                if tag == _BOOL_TAG and value.lower() in bools:
                    if value.lower() not in _PLAIN_BOOLS:
                        self.surprising = True
                    return bools[value.lower()]
                if yaml11_form(tag, value) is not None or (tag == _INT_TAG
                                                           and not value.isdigit()):
                    self.surprising = True  # (`0x7`, `-5`: for projectId's check)
                if tag == _NULL_TAG:
                    self.nulls = True
                    return None
            key = id(n)
            if key in built:
                self.shared = True
                return built[key]
            if tag == _MAP_TAG and cls is MappingNode:
                pairs = n.value
                for key_node, _ in pairs:
                    if key_node.__class__ is not ScalarNode or key_node.tag == _MERGE_TAG:
                        return build_merged(n, depth)
                mapping: dict = {}
                built[key] = mapping
                at = len(duplicates)
                for key_node, value_node in pairs:
                    mapping[key_node.value] = build(value_node, depth + 1)
                if len(mapping) != len(pairs):
                    duplicates[at:at] = _duplicate_keys(n)
                return mapping
            if tag == _SEQ_TAG and cls is SequenceNode:
                items: list = []
                built[key] = items
                depth += 1
                items.extend([build(item, depth) for item in n.value])
                return items
            if cls is not ScalarNode:
                self.shared = True  # a tagged collection: the counts above miss its nodes
            try:
                value = self.construct_object(n, deep=True)
            except (KeyError, ValueError, TypeError, AttributeError) as exc:
                # PyYAML's own constructors fail this way on e.g. `!!bool maybe`
                what = tag.rsplit(":", 1)[-1]
                raise ConstructorError(None, None, f"not a valid {what}: {n.value!r}"[:200],
                                       n.start_mark) from exc
            built[key] = value
            if value is None:
                self.nulls = True
            return value

        def build_merged(n, depth):
            """A map with merge keys (`<<: *base`) or a key that is not text."""
            duplicates.extend(_duplicate_keys(n))
            self.flatten_mapping(n)
            mapping: dict = {}
            built[id(n)] = mapping
            for key_node, value_node in n.value:
                if not isinstance(key_node, ScalarNode):
                    raise ConstructorError(None, None, "a key must be a plain string, not a "
                                           "list or a mapping", key_node.start_mark)
                mapping[key_node.value] = build(value_node, depth + 1)
            return mapping

        try:
            return build(node, 0)
        finally:
            build = build_merged = None  # the closures refer to each other: free them now
            self.depth = deepest
            self.constructed_objects = {}
            self.recursive_objects = {}
            self.state_generators = []

    def construct_mapping(self, node, deep=False):
        if not isinstance(node, MappingNode):
            raise ConstructorError(None, None, "expected a mapping", node.start_mark)
        self.duplicates.extend(_duplicate_keys(node))
        self.flatten_mapping(node)
        mapping = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode):
                raise ConstructorError(None, None, "a key must be a plain string, not a "
                                       "list or a mapping", key_node.start_mark)
            mapping[key_node.value] = self.construct_object(value_node, deep=deep)
        return mapping


class _TooLong(ConstructorError):
    """An integer too long for Python to read."""


def _too_long(digits: str) -> str:
    return f"an integer of {len(digits)} digits is too long (at most {MAX_INT_DIGITS})"


_PLAIN_BOOLS = ("true", "false")
_PLAIN_INT = re.compile(r"[-+]?(0|[1-9][0-9]*)")


def yaml11_form(tag: str, text: str) -> str | None:
    """How a plain scalar that YAML 1.1 read as a number or a boolean is written, when
    YAML 1.2 (and JSON, and most other tools) read it otherwise: "octal" (`017`: 15 here,
    17 there), "base-60" (`12:30`: 750 here, text there), "binary" (`0b11`),
    "underscores" (`1_000`), "word" (`yes`, `no`, `on`, `off`); None for a form every
    YAML reads alike (`17`, `-5`, `0x10`, `1.5`, `true`)."""
    if tag == _BOOL_TAG:
        return None if text.lower() in _PLAIN_BOOLS else "word"
    if tag == _INT_TAG:
        if _PLAIN_INT.fullmatch(text):
            return None
        digits = text.lstrip("+-")
        if ":" in digits:
            return "base-60"
        if digits.startswith("0b"):
            return "binary"
        if "_" in digits:
            return "underscores"
        if digits.startswith("0x"):
            return None
        return "octal" if digits.startswith("0") else None
    if tag == _FLOAT_TAG:
        return "base-60" if ":" in text else "underscores" if "_" in text else None
    return None


def yaml11_form_of(value: Any, text: str) -> str | None:
    """`yaml11_form` of a value YAML read from `text` as a boolean or a number."""
    tag = _BOOL_TAG if isinstance(value, bool) else _INT_TAG if isinstance(value, int) else _FLOAT_TAG
    return yaml11_form(tag, text)


def _path_at_line(root: Node, line: int) -> str:
    """The dotted path of the deepest field that starts on `line`, "" if none."""
    paths = [p for p, n in (_node_lines(root) or {}).items() if n == line]
    if not paths:
        return ""
    return dotted(max(paths, key=len))


def dotted(path: Path_) -> str:
    """("spec", "ports", 0, "container") → "spec.ports[0].container"."""
    out = ""
    for seg in path:
        out += f"[{seg}]" if isinstance(seg, int) else (f".{seg}" if out else str(seg))
    return out


def _duplicate_keys(node: MappingNode) -> list[tuple[str, int]]:
    seen: set[str] = set()
    found = []
    for key_node, _ in node.value:
        if isinstance(key_node, ScalarNode) and key_node.tag != _MERGE_TAG:
            if key_node.value in seen:
                found.append((key_node.value, key_node.start_mark.line + 1))
            seen.add(key_node.value)
    return found


def _yaml_documents(text: str, display: str) -> tuple[list[RawDocument], list[Problem]]:
    docs: list[RawDocument] = []
    problems: list[Problem] = []
    finder = _LineFinder(text)
    loader = node = None
    try:
        loader = _Loader(text)
        ordinal = -1
        while loader.check_node():
            node = loader.get_node()
            ordinal += 1
            if node is None:
                continue
            data = loader.construct_document(node)
            flawed = bool(loader.duplicates)
            for key, line in loader.duplicates:
                problems.append(Problem(display, line, key, "duplicate key"))
            loader.duplicates.clear()
            if data is None:
                continue
            plain = not loader.shared and loader.count <= MAX_NODES and loader.depth <= MAX_DEPTH
            if not plain and _node_lines(node) is None:
                problems.append(Problem(display, node.start_mark.line + 1, "",
                                        "document is too large or too deeply nested (aliases?)"))
                continue
            docs.append(RawDocument(display, data, None, _first_line(node),
                                    clean=plain and not loader.nulls,
                                    surprising=loader.surprising,
                                    find_lines=finder.lines_for(ordinal)))
            docs[-1].flawed = flawed
    except _TooLong as exc:
        line = exc.problem_mark.line + 1
        problems.append(Problem(display, line, _path_at_line(node, line) if node else "",
                                exc.problem))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        what = " ".join(s for s in (getattr(exc, "context", None), getattr(exc, "problem", None)) if s)
        problems.append(Problem(display, line, "", f"invalid YAML: {what or exc}"))
    except RecursionError:
        problems.append(Problem(display, None, "", "invalid YAML: nested too deeply"))
    finally:
        if loader is not None:
            loader.dispose()
    return docs, problems


class _LineFinder:
    """The line and text tables of one YAML file's documents, by their place in the file:
    the file is composed again (with merge keys flattened as the build did) the first time
    one is asked for, which only a problem (or a YAML 1.1 form) in that file does."""

    def __init__(self, text: str):
        self.text = text
        self.tables: dict[int, tuple[dict[Path_, int], dict[Path_, str]]] | None = None

    def lines_for(self, ordinal: int) -> Callable[[], tuple[dict[Path_, int], dict[Path_, str]]]:
        return lambda: self._tables().get(ordinal) or ({}, {})

    def _tables(self) -> dict[int, tuple[dict[Path_, int], dict[Path_, str]]]:
        if self.tables is None:
            self.tables = {}
            loader = _Loader(self.text)
            try:
                ordinal = -1
                while loader.check_node():
                    node = loader.get_node()
                    ordinal += 1
                    if node is not None:
                        loader.construct_document(node)
                        texts: dict[Path_, str] = {}
                        self.tables[ordinal] = (_node_lines(node, texts) or {}, texts)
            except (yaml.YAMLError, RecursionError):
                pass
            finally:
                loader.dispose()
        return self.tables


def _first_line(node: Node) -> int:
    if isinstance(node, MappingNode) and node.value:
        return node.value[0][0].start_mark.line + 1
    return node.start_mark.line + 1


def _node_lines(root: Node, texts: dict[Path_, str] | None = None) -> dict[Path_, int] | None:
    """Path → line of the key (or list item) that introduces it; None past MAX_NODES
    nodes or MAX_DEPTH levels (aliases can make a document huge or even recursive).
    `texts`, when given, receives path → text of every plain scalar not read as text."""
    lines: dict[Path_, int] = {}
    stack: list[tuple[Node, Path_]] = [(root, ())]
    count = 0
    while stack:
        node, path = stack.pop()
        count += 1
        if count > MAX_NODES or len(path) > MAX_DEPTH:
            return None
        if isinstance(node, MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, ScalarNode):
                    sub = path + (key_node.value,)
                    lines[sub] = key_node.start_mark.line + 1
                    stack.append((value_node, sub))
        elif isinstance(node, SequenceNode):
            for i, item in enumerate(node.value):
                sub = path + (i,)
                lines[sub] = item.start_mark.line + 1
                stack.append((item, sub))
        elif texts is not None and node.tag != _STR_TAG and not node.style:  # plain
            texts[path] = node.value
    return lines


# --- JSON ----------------------------------------------------------------------------

def _json_documents(text: str, display: str) -> tuple[list[RawDocument], list[Problem]]:
    duplicates: list[str] = []

    def pairs(items):
        obj = {}
        for k, v in items:
            if k in obj:
                duplicates.append(k)
            obj[k] = v
        return obj

    def no_constant(name):
        raise ValueError(f"{name} is not valid JSON")

    try:
        data = json.loads(text, object_pairs_hook=pairs, parse_constant=no_constant)
    except json.JSONDecodeError as exc:
        return [], [Problem(display, exc.lineno, "", f"invalid JSON: {exc.msg}")]
    except (ValueError, RecursionError) as exc:
        message = str(exc)
        if "int_max_str_digits" in message:  # not Python's advice: the user's mistake
            message = f"an integer is too long (at most {MAX_INT_DIGITS} digits)"
        return [], [Problem(display, None, "", f"invalid JSON: {message}")]
    # Lines come from reading the same text as YAML, when YAML reads it the same way.
    lines: list[dict[Path_, int]] = []
    texts: list[dict[Path_, str]] = []
    firsts: list[int | None] = []
    dup_lines: list[tuple[str, int]] = []
    try:
        node = _Loader(text).get_single_node()
        reader = _Loader(text)
        if node is not None and reader.get_single_data() == data:
            dup_lines = reader.duplicates
            items = node.value if isinstance(data, list) else [node]
            for i, item in enumerate(items):
                written: dict[Path_, str] = {}
                table = _node_lines(item, written) or {}
                lines.append(table)
                texts.append(written)
                firsts.append(_first_line(item))
    except (yaml.YAMLError, RecursionError):
        pass
    if [k for k, _ in dup_lines] == duplicates:
        problems = [Problem(display, line, k, "duplicate key") for k, line in dup_lines]
    else:
        problems = [Problem(display, None, k, "duplicate key") for k in duplicates]
    docs = data if isinstance(data, list) else [data]
    out = []
    for i, doc in enumerate(docs):
        table = lines[i] if i < len(lines) else {}
        first = firsts[i] if i < len(firsts) else None
        out.append(RawDocument(display, doc, table, first,
                               texts=texts[i] if i < len(texts) else {}))
    # Which documents hold a duplicate key: by its line where YAML gave the lines (each
    # document runs to the next one's first line), else every document of the file.
    starts = [d.line for d in out]
    for p in problems:
        if p.line is None or None in starts:
            for d in out:
                d.flawed = True
            break
        at = [i for i, start in enumerate(starts) if start <= p.line]
        out[at[-1] if at else 0].flawed = True
    return out, problems
