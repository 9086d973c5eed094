"""The documents of the commands that do not print a plan: export, import, and the state's
list, show and history (pure).

Each takes what its operation returned (read by its attributes: the renderers sit below
the operations) and returns the text to print, lines ending in a newline, or a JSON
document: the CLI prints it and picks the exit code. What goes to stderr (an empty
state's note) stays with the CLI. Caller: the CLI's `export`, `import`, `state list`,
`state show` and `state history`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from reconciler.render import words


def _lines(lines: Sequence[str]) -> str:
    return "".join(f"{line}\n" for line in lines)


# --- export ---------------------------------------------------------------------------


def export_json(result) -> str:
    """`export --format json`: the files written, the `_defaults.yaml` files, the skips."""
    return json.dumps({
        "exported": [{"address": e.address, "file": e.path, "workloadId": e.workload_id,
                      "secrets": e.secrets} for e in result.exported],
        "defaultsFiles": result.defaults_files, "skipped": result.skipped}, indent=2) + "\n"


def export_text(result, out_dir: str) -> str:
    """`export`: each file and its address, the skips, the placeholders to fill in."""
    n = len(result.exported)
    lines = [f"Exported {n} workload{'s' if n != 1 else ''} to {out_dir}/ (no API write)."]
    lines += [f"  {e.path}  {e.address}" for e in result.exported]
    lines += [f"  {path}  (the fields its folder's specs share)" for path in result.defaults_files]
    skipped = [f"{count} {why}" for why, count in result.skipped.items() if count]
    if skipped:
        lines.append(f"Skipped {' and '.join(skipped)} (deleted workloads, completed trainings and jobs).")
    needing = [e for e in result.exported if e.secrets]
    if needing:
        lines.append(f"{len(needing)} file{'s hold' if len(needing) != 1 else ' holds'} a "
                     "placeholder instead of a secret's value; validate refuses it until you "
                     "supply a Kubernetes secret reference (secret: {name: ..., key: ...}) or "
                     "the value:")
        lines += [f"  {e.path}: {', '.join(e.secrets)}" for e in needing]
    return _lines(lines)


# --- import ---------------------------------------------------------------------------


def _noun(addresses, n: int) -> str:
    """"workload(s)", or "resource(s)" when one of `addresses` is no workload."""
    return words.resources_noun([a.split("/", 1)[0] for a in addresses], n)


def imported_one(result, where: str) -> str:
    """`import ADDR WORKLOAD_ID`."""
    (address, workload_id), = result.adopted
    return _lines([f"Adopted {address} (workload {workload_id}) into {where}, serial "
                   f"{result.serial}, with no API write. `runai-reconcile plan` shows where "
                   "its spec differs from it."])


def imported_all(result, where: str) -> str:
    """`import --all`: each adoption, each spec not found live or not adopted, a total."""
    lines = [f"Adopted {address} ({_noun([address], 1)} {workload_id})"
             for address, workload_id in result.adopted]
    lines += [f"Not found live: {address}" for address in result.not_found]
    lines += [f"Not adopted: {address}: {why}" for address, why in result.skipped]
    n = len(result.adopted)
    noun = _noun([address for address, _ in result.adopted], n)
    head = (f"Adopted {n} {noun} into {where} (serial "
            f"{result.serial})" if n else f"Nothing adopted; {where} is unchanged")
    lines.append(f"{head}: {len(result.not_found)} not found live, {len(result.skipped)} not "
                 f"adopted, {result.known} in the state already. No API write was made.")
    return _lines(lines)


# --- state ----------------------------------------------------------------------------


def state_list(rows: Sequence[tuple[str, str | None, str | None]]) -> str:
    """`state list`: one address a line, with a Manifest's own kind and its project's name
    when known: `Manifest/7/gpt-pretrain (PyTorchJob, project team-a)`."""
    return _lines([addr + words.address_note(kind, name) for addr, name, kind in rows])


def state_show(record, *, show_sensitive: bool = False) -> str:
    """`state show ADDR`: the record as JSON, its applied body masked unless asked."""
    doc: dict[str, Any] = dict(record.to_json())
    if not show_sensitive:
        doc["applied"] = words.mask_body(record.applied, tuple(record.sensitive))
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def state_history_json(versions, where: str, every: bool) -> str:
    """`state history --format json`."""
    return json.dumps({"state": where, "keeps": "every version" if every
                       else "one previous version",
                       "versions": [v.to_json() for v in versions]}, indent=2) + "\n"


def state_history_text(versions, where: str, every: bool) -> str:
    """`state history`: a table of the versions kept, and what a state file keeps. A column
    no version has a value for (a state file records no author or operation) is left out,
    and said below; a single value not recorded says so."""
    if not versions:
        return _lines([f"No versions: nothing was written to {where} yet."])
    columns = [("SERIAL", lambda v: str(v.serial)), ("WHEN", lambda v: v.written_at),
               ("WHO", lambda v: v.written_by), ("OPERATION", lambda v: v.operation),
               ("WORKLOADS", lambda v: str(v.workloads))]
    columns = [(head, get) for head, get in columns if any(get(v) for v in versions)]
    rows = [[head for head, _ in columns]] + [
        [get(v) or "not recorded" for _, get in columns] for v in versions]
    widths = [max(len(r[i]) for r in rows) for i in range(len(columns) - 1)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]
    if not every:
        lines += ["", "A state file keeps one previous version (its .backup; when that version "
                      "was written is not recorded), and records neither who wrote a version "
                      "nor with which command; a PostgreSQL --state keeps every version, with "
                      "both."]
    return _lines(lines)
