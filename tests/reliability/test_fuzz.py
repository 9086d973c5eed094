"""Fuzzing the readers through the CLI: random and mutated state files, journals and spec
files give exit 0 or exit 1 with a message naming the file, never a traceback, and a
state file that could not be read is never overwritten."""

from __future__ import annotations

import json
import pathlib
import tempfile
import uuid

from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.cli import main
from reconciler.state import journal

CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"
LINEAGE = str(uuid.UUID(int=7))

VALID = {
    "version": 1, "lineage": LINEAGE, "serial": 3,
    "resources": {
        "DistributedTraining/7/bert": {
            "kind": "DistributedTraining", "name": "bert", "project_id": "7",
            "cluster_id": CLUSTER, "workload_id": str(uuid.UUID(int=1)),
            "applied": {"name": "bert", "projectId": "7", "clusterId": CLUSTER,
                        "spec": {"image": "x", "numWorkers": 2}},
            "desired_phase": "Running", "last_phase": "Running",
            "prevent_destroy": False, "completed": False,
        },
    },
}

SETTINGS = settings(max_examples=120, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=6)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))


@st.composite
def mutated_states(draw) -> bytes:
    doc = json.loads(json.dumps(VALID))
    for _ in range(draw(st.integers(1, 3))):
        paths = [p for p in _paths(doc) if p]
        path = draw(st.sampled_from(paths))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        op = draw(st.sampled_from(["replace", "delete", "add"]))
        if op == "replace":
            parent[path[-1]] = draw(values)
        elif op == "delete":
            del parent[path[-1]]
        else:
            parent[draw(st.text(min_size=1, max_size=6))] = draw(values)
    raw = json.dumps(doc).encode()
    if draw(st.booleans()):
        cut = draw(st.integers(0, len(raw)))
        raw = raw[:cut]  # truncated, as by a full disk or a crash of another tool
    return raw


def run_cli(state_path: pathlib.Path, *args: str):
    return CliRunner().invoke(main, ["--state", str(state_path), *args],
                              env={"NO_COLOR": "1", "RUNAI_URL": None, "RUNAI_TOKEN": None},
                              catch_exceptions=False)


def check_reader(raw: bytes, journal_raw: bytes | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        state_path = root / "state.json"
        state_path.write_bytes(raw)
        journal_path = root / "state.json.journal"
        if journal_raw is not None:
            journal_path.write_bytes(journal_raw)
        (root / "specs").mkdir()
        readable = None
        for args in (("state", "list"), ("plan", str(root / "specs"), "--no-refresh"),
                     ("apply", str(root / "specs"), "--auto-approve")):
            res = run_cli(state_path, *args)  # a traceback would raise here
            assert res.exit_code in (0, 1), (args, res.output)
            if readable is None:
                readable = res.exit_code == 0
            if not readable:
                assert res.exit_code == 1
                [line] = [x for x in res.stderr.splitlines() if x.startswith("Error:")]
                assert str(state_path) in line, line  # names the file (or its journal)
                assert state_path.read_bytes() == raw  # never overwritten
                if journal_raw is not None:
                    assert journal_path.read_bytes() == journal_raw


@SETTINGS
@given(raw=st.binary(max_size=300))
def test_random_bytes_as_the_state_file(raw):
    check_reader(raw)


@SETTINGS
@given(raw=mutated_states())
def test_mutated_and_truncated_state_files(raw):
    check_reader(raw)


def test_a_state_from_a_newer_version_is_refused_naming_the_file():
    raw = json.dumps(dict(VALID, version=99)).encode()
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "state.json"
        path.write_bytes(raw)
        res = run_cli(path, "state", "list")
        assert res.exit_code == 1 and "written by a newer runai-reconcile" in res.stderr
        assert str(path) in res.stderr and path.read_bytes() == raw


GOOD_JOURNAL = journal.encode([
    journal.header(LINEAGE),
    journal.set_entry("DistributedTraining/7/bert", None),
])


@SETTINGS
@given(tail=st.binary(max_size=200), cut=st.integers(0, len(GOOD_JOURNAL)))
def test_garbled_journals(tail, cut):
    check_reader(json.dumps(VALID).encode(), GOOD_JOURNAL[:cut] + tail)


@SETTINGS
@given(text=st.text(max_size=300))
def test_random_spec_files_through_validate(text):
    with tempfile.TemporaryDirectory() as tmp:
        specs = pathlib.Path(tmp) / "specs"
        specs.mkdir()
        spec = specs / "w.yaml"
        spec.write_text(text, encoding="utf-8")
        res = CliRunner().invoke(main, ["validate", str(specs)], catch_exceptions=False)
        assert res.exit_code in (0, 1), res.output
        if res.exit_code == 1:
            assert str(spec) in res.stderr or "w.yaml" in res.stderr, res.stderr
