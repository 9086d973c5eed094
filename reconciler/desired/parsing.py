"""Spec text → raw documents: YAML (several documents per file, empty ones skipped) or
JSON (one object, or a list of them), each with a map from field path to line number
worked out when a problem needs it, and each number's or boolean's text as written.

Callers: `sources.read_documents` (which imports this module, and PyYAML with it, only
when a file is read) and `loader` (`yaml11_form_of`). Problems (syntax error, duplicate
key, a document too large) are returned, never raised.
"""

from __future__ import annotations

import json
import re
from typing import Any, Callable

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reconciler.desired.sources import Path_, Problem, RawDocument, dotted

# An alias-heavy document ("billion laughs") expands past this many nodes: refuse it.
MAX_NODES = 100_000
MAX_DEPTH = 100
# Python refuses to read a longer integer from text (sys.get_int_max_str_digits()).
MAX_INT_DIGITS = 4300


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
        if kind is ScalarNode:
            if implicit[0]:
                tag = self._tags.get(value)
                if tag is None:
                    if len(self._tags) > 50_000:
                        self._tags.clear()
                    tag = self._tags[value] = super().resolve(kind, value, implicit)
                return tag
            return _STR_TAG  # quoted, or `!`: text (as PyYAML's resolver says)
        return _MAP_TAG if kind is MappingNode else _SEQ_TAG

    # The composer calls these around every node for path resolvers, which this loader
    # never has (`yaml_path_resolvers` is empty): nothing to do.
    def descend_resolver(self, current_node, current_index):
        pass

    def ascend_resolver(self):
        pass

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

def _duplicate_keys(node: MappingNode) -> list[tuple[str, int]]:
    seen: set[str] = set()
    found = []
    for key_node, _ in node.value:
        if isinstance(key_node, ScalarNode) and key_node.tag != _MERGE_TAG:
            if key_node.value in seen:
                found.append((key_node.value, key_node.start_mark.line + 1))
            seen.add(key_node.value)
    return found


def yaml_documents(text: str, display: str) -> tuple[list[RawDocument], list[Problem]]:
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

def json_documents(text: str, display: str) -> tuple[list[RawDocument], list[Problem]]:
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
