"""The state file read a part at a time (`store.load`) gives what `store.loads` of its
whole bytes gives: the same State, to each value's type (an integer beyond 64 bits, a
float, a string's every character), or the same StateError message."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.errors import StateError
from reconciler.state import LocalFileStore, ResourceState, State
from reconciler.state import store as store_module
from reconciler.state.store import dumps, load, loads

from tests.helpers.cli import invoke
from tests.helpers.constants import ROOT
from tests.helpers.state import resource

WHERE = "st.json"


def outcome(read) -> tuple[str, str]:
    """What a read gave: the state in full (repr tells 1 from 1.0 and True, -0.0 from 0.0,
    and shows every character), or the error's message."""
    try:
        state = read()
    except StateError as exc:
        return "error", str(exc)
    return "state", repr((state.to_json(), state.version))


def both(raw: bytes) -> tuple[tuple[str, str], tuple[str, str]]:
    return (outcome(lambda: load(io.BytesIO(raw), WHERE)),
            outcome(lambda: loads(raw, WHERE)))


def by_parts(raw: bytes) -> bool:
    """Whether the file is read by parts (not again whole)."""
    return store_module._parse_by_parts(io.BytesIO(raw)) is not None


@pytest.fixture(params=[64, 1000, 1 << 18], ids=["64 B", "1000 B", "256 KiB"])
def part(request, monkeypatch):
    """The bytes read at a time: small ones cut records, keys, numbers and the UTF-8 of
    one character across two reads."""
    monkeypatch.setattr(store_module, "_PART", request.param)
    return request.param


def with_records(*records: ResourceState, **top) -> State:
    state = State(lineage="6b0c5a52-9f57-4b5b-9d3c-7c2b1a0e4d11", serial=4, **top)
    for rs in records:
        state.set(rs)
    return state


def body(name: str, **spec) -> ResourceState:
    rs = resource(name)
    rs.applied["spec"].update(spec)
    return rs


HASH = "hmac-sha256:" + "3f" * 32
VARIED = {
    "one record": with_records(resource("a")),
    "records": with_records(*(resource(f"w{i:03d}") for i in range(40))),
    "secrets": with_records(
        body("a", environmentVariables=[{"name": "HF_TOKEN", "value": HASH}]),
        body("b", token=HASH), hmac_key="q83vEjRWeJASNFZ4kBI0VniQEjRWeJASNFZ4kBI0Vng=",
        specs_folder={"git": "specs", "state": "../specs", "path": "/srv/specs"}),
    "big integers": with_records(body("a", n=2 ** 64, m=-(2 ** 100), k=10 ** 400),
                                 body("b", n=2 ** 63 - 1, m=-(2 ** 63))),
    "floats": with_records(body("a", f=[0.1, -0.0, 1e300, 5e-324, 1.7976931348623157e308,
                                        3.0, 1e16, 123456789.123456789])),
    "unicode": with_records(body("a", s="café 日本語 😀 \x00\x1f\u2028\u2029 \\ \" /",
                                 **{"ключ": "значение", "😀": ["\U0010ffff"]}),
                            body("b", s="ascii"), body("c", s="é" * 3000)),
    "specs folder, no record": with_records(specs_folder={"git": "specs"}),
    "empty": with_records(),
}


@pytest.mark.parametrize("name", VARIED)
def test_varied_states_read_by_parts_as_whole(name, part):
    raw = dumps(VARIED[name])
    a, b = both(raw)
    assert a == b and a[0] == "state"
    assert by_parts(raw) == bool(VARIED[name].resources)  # none: resources written {}


def test_the_examples_applied_read_by_parts_as_whole(tmp_path, part):
    shutil.copytree(ROOT / "specs", tmp_path / "specs")
    res = invoke(tmp_path, "--sim", "--state", "st.json", "apply", "specs", "--auto-approve")
    assert res.returncode == 0, res.stderr
    raw = (tmp_path / "st.json").read_bytes()
    assert by_parts(raw) and len(json.loads(raw)["resources"]) > 10
    a, b = both(raw)
    assert a == b and a[0] == "state"


# Texts as dumps lays them out that dumps would not write: a hand's edits.
def laid_out(resources: str, head: str = '"lineage": "x",', tail: str = '"serial": 1,\n'
             '  "version": 1') -> bytes:
    return (f'{{\n  {head}\n  "resources": {{\n{resources}\n  }},\n  {tail}\n}}\n').encode()


RECORD = ('    "DistributedTraining/7/{n}": {{\n      "applied": {{"v": {v}}},\n'
          '      "cluster_id": null,\n      "kind": "DistributedTraining",\n'
          '      "name": "{n}",\n      "project_id": "7",\n      "workload_id": null\n    }}')


def records(*values: str) -> str:
    return ",\n".join(RECORD.format(n=f"w{i}", v=v) for i, v in enumerate(values))


HAND = {
    "a lone surrogate": laid_out(records('"\\ud800"', '"\\udc00x"', '"\\ud83d\\ude00"')),
    "escapes": laid_out(records('"\\u00e9\\/\\b\\f\\n\\r\\t"', '"\\u0000"')),
    "NaN and infinities": laid_out(records("NaN", "Infinity", "-Infinity", "1e400")),
    "a number at a cut": laid_out(records("12345678901234567890123", "-0", "0.5e-3")),
    "a key twice": laid_out(records('{"a": 1, "a": 2}', "1", "3").replace("w2", "w0")),
    "the resources twice": laid_out(records("1"), tail='"resources": {},\n  "serial": 1,\n'
                                    '  "version": 1'),
    "a key before twice": laid_out(records("1"), head='"lineage": "x",\n  "lineage": "y",'),
    "a closing brace after": laid_out(records("1")) + b"}",
    "trailing data": laid_out(records("1")) + b"x",
    "a second document": laid_out(records("1")) * 2,
    "a comma after the head": laid_out(records("1"), head='"lineage": "x",,'),
    "nothing before": laid_out(records("1"), head="").replace(b"{\n  \n", b"{\n"),
    "a comma before the end": laid_out(records("1"), tail=""),
    "a brace too many at the end": laid_out(records("1"), tail="}"),
    "a comma at the end": laid_out(records("1"), tail='"serial": 1,'),
    "an integer too long": laid_out(records("1", "9" * 5000)),
    "no version": laid_out(records("1"), tail='"serial": 1'),
    "an unknown field": laid_out(records("1").replace('"name"', '"nam"')),
    "an address that is not its own": laid_out(records("1").replace('"w0": {', '"w9": {')),
    "a control character": laid_out(records('"a\tb"')),
    "a missing comma": laid_out(records("1", "2").replace("},\n", "}\n")),
    "an extra brace": laid_out(records("1", "2").replace("},\n", "}},\n")),
    "a record cut short": laid_out(records("1", "2").replace('"workload_id": null\n    },',
                                                            '"workload_id": null,')),
    "not UTF-8 in a record": laid_out(records('"ÿ"')).replace("ÿ".encode(), b"\xff"),
    "a BOM": b"\xef\xbb\xbf" + laid_out(records("1")),
    "whitespace first": b" \n" + laid_out(records("1")),
    "carriage returns": laid_out(records("1", "2")).replace(b"\n", b"\r\n"),
    "indented by 4": json.dumps(json.loads(laid_out(records("1", "2"))), indent=4).encode(),
    "on one line": json.dumps(json.loads(laid_out(records("1", "2")))).encode(),
    "empty": b"",
    "blank": b" \n\t ",
    "not UTF-8": b"\xff\xfe\x00",
    "a list": b"[]",
}


@pytest.mark.parametrize("name", HAND)
def test_hand_edited_files_read_as_whole(name, part):
    a, b = both(HAND[name])
    assert a == b


def test_a_hand_edit_in_the_layout_is_still_read_by_parts():
    raw = HAND["a lone surrogate"]
    assert by_parts(raw)
    assert load(io.BytesIO(raw), WHERE).resources["DistributedTraining/7/w0"].applied == {
        "v": "\ud800"}


@pytest.mark.parametrize("step", [1, 7, 61])
def test_a_file_cut_short_anywhere_reads_as_whole(step, monkeypatch):
    monkeypatch.setattr(store_module, "_PART", 97)
    raw = dumps(VARIED["unicode"])
    for end in range(0, len(raw), step * 13):
        a, b = both(raw[:end])
        assert a == b, end


def test_a_byte_changed_anywhere_gives_what_the_whole_read_gives(monkeypatch):
    monkeypatch.setattr(store_module, "_PART", 101)
    raw = dumps(with_records(resource("a"), resource("b"), body("c", s="é😀")))
    for i in range(0, len(raw), 3):
        for byte in (b"x", b",", b"}", b"\n", b'"', b"\xff"):
            a, b = both(raw[:i] + byte + raw[i + 1:])
            assert a == b, (i, byte)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=8)


@settings(max_examples=60, deadline=None)
@given(bodies=st.lists(st.dictionaries(st.text(min_size=1), json_values, max_size=5),
                       max_size=6), size=st.sampled_from([16, 64, 333, 1 << 18]))
def test_any_recorded_content_reads_by_parts_as_whole(bodies, size):
    state = with_records(*(ResourceState(
        kind="DistributedTraining", name=f"w{i}", project_id="7", cluster_id=None,
        workload_id=None, applied=b) for i, b in enumerate(bodies)))
    try:
        raw = dumps(state)
    except UnicodeEncodeError:  # a lone surrogate: no state holding one can be written
        return
    old = store_module._PART
    store_module._PART = size
    try:
        a, b = both(raw)
    finally:
        store_module._PART = old
    assert a == b and a[0] == "state"
    assert by_parts(raw) == bool(bodies)


def test_the_file_store_reads_by_parts_and_closes_the_file(tmp_path, monkeypatch):
    path = tmp_path / "state.json"
    store = LocalFileStore(path)
    state = store.read()
    for n in ("a", "b", "c"):
        state.set(resource(n))
    store.write(state)

    def whole(*_):
        raise AssertionError("read whole")

    opened = []

    def by_parts(f, where):
        opened.append(f)
        return load(f, where)

    monkeypatch.setattr(store_module, "loads", whole)
    monkeypatch.setattr(store_module, "load", by_parts)
    back, pending = LocalFileStore(path).read_with_pending()
    assert back == state and pending == []
    assert len(opened) == 1 and opened[0].closed
