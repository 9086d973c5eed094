"""Other YAML (or JSON) files the reconciler reads, checked against a pydantic model the
caller gives: `read_model(path, model)`.

The spec loader's machinery, reused: `sources.read_documents` (file limits, YAML with
duplicate keys noted, a line for every field path) and the loader's messages for
pydantic's errors (unknown fields with did-you-mean, types, ranges, rules), so a problem
reads as a spec's does: `policy.yaml:7: rules[1].maxGpusPerWorkload: must be >= 0, got -1`.
The model is a parameter: the layers above (`reconciler.policy`'s models) stay unknown here.
Callers: `operations` (policy files).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from reconciler.desired import sources
from reconciler.desired.sources import Problem, RawDocument

M = TypeVar("M", bound=BaseModel)


def read_model(path: str | os.PathLike, model: type[M],
               ) -> tuple[M | None, RawDocument | None, list[Problem]]:
    """The one document of the file at `path` validated as `model`, its raw document (for
    `line_of`), and every problem (the model is None when there is one)."""
    from reconciler.desired import loader  # the spec models come with it: only when used

    shown = os.fspath(path)
    if not os.path.lexists(shown):
        return None, None, [Problem(shown, None, "", "no such file")]
    if os.path.isdir(shown):
        return None, None, [Problem(shown, None, "", "is a folder, not a file")]
    docs, problems = sources.read_documents(Path(shown), shown)
    if problems:
        return None, None, problems
    if len(docs) != 1:
        return None, None, [Problem(shown, docs[1].line if docs else None, "",
                                    "must hold one document" + ("" if docs else ", it is empty"))]
    doc = docs[0]
    if not isinstance(doc.data, dict):
        return None, doc, [Problem(shown, doc.line, "", "must be a mapping of fields, got "
                                   + loader._type_name(doc.data))]
    data: Any = loader._drop_nulls(doc.data)
    try:
        return model.model_validate(data), doc, []
    except ValidationError as exc:
        found = []
        for err in exc.errors(include_url=False):
            at, message = loader._translate(err, model)
            found.append(Problem(shown, doc.line_of(at), sources.dotted(at), message))
        found.sort(key=lambda p: (p.line is None, p.line or 0))
        return None, doc, found
