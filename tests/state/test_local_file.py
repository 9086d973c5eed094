"""What only the local file store does: the bytes on disk, permissions, atomicity, the OS lock."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap

import pytest

from reconciler.errors import StateError
from reconciler.state import LocalFileStore, State, journal

from tests.helpers.state import resource


@pytest.fixture
def path(tmp_path):
    return tmp_path / "state" / "state.json"


def written(path, *names):
    store = LocalFileStore(path)
    state = store.read()
    for n in names:
        state.set(resource(n))
    store.write(state)
    return store, state


def test_creates_parent_dirs_and_files_readable_only_by_the_owner(path):
    store, state = written(path, "a")
    state.set(resource("b"))
    LocalFileStore(path).write(state)  # second run: makes a backup
    with store.lock("apply"):
        pass
    for p in (path, path.with_name("state.json.backup"), path.with_name("state.json.lock")):
        assert stat.S_IMODE(p.stat().st_mode) == 0o600, p


def test_file_is_sorted_indented_json_ending_in_a_newline(path):
    written(path, "b", "a")
    text = path.read_text()
    doc = json.loads(text)
    assert text == json.dumps(doc, indent=2, sort_keys=True) + "\n"
    assert list(doc["resources"]) == ["DistributedTraining/7/a", "DistributedTraining/7/b"]
    assert doc["version"] == 1 and doc["serial"] == 1


@pytest.mark.parametrize("value", ["déjà vu ✓", 0.1, 1e-07, -2.5e300, 2**70, None, [], {}])
def test_file_bytes_are_jsons_indented_form_whatever_the_values(path, value):
    # orjson writes the file; it must give json.dumps' bytes (2**70 is beyond orjson)
    store = LocalFileStore(path)
    state = store.read()
    res = resource("a")
    res.applied["spec"]["odd"] = value
    state.set(res)
    store.write(state)
    text = path.read_text(encoding="utf-8")
    expected = json.dumps(json.loads(text), indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    if not isinstance(value, float):  # floats may spell the exponent otherwise (1e-7)
        assert text == expected
    read = LocalFileStore(path).read().resources["DistributedTraining/7/a"].applied["spec"]["odd"]
    assert read == value and type(read) is type(value)  # 2**70 == float(2**70): the type tells


def test_no_temp_files_are_left_behind(path):
    written(path, "a")
    LocalFileStore(path).write(State.from_json(json.loads(path.read_text())))
    assert sorted(p.name for p in path.parent.iterdir()) == ["state.json"]


def test_a_failed_rename_leaves_the_old_file_whole(path, monkeypatch):
    _, state = written(path, "a")
    before = path.read_bytes()
    state.set(resource("b"))

    def crash(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(StateError, match="cannot write the state file .*No space left"):
        LocalFileStore(path).write(state)
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]
    assert state.serial == 1  # not advanced by a write that did not happen


@pytest.mark.parametrize("content, says", [
    (b"", "is empty"),
    (b'{"version": 1, "lineage": "x", "ser', "not valid JSON (line 1 column"),
    (b"\xff\xfe\x00", "not UTF-8"),
    (b"[]", "expected a JSON object"),
    (b'{"version": 4, "lineage": "x", "serial": 0, "resources": {}}',
     "version 4 was written by a newer runai-reconcile"),
    (b'{"version": 1, "lineage": "x", "serial": -1, "resources": {}}', "serial"),
])
def test_an_unreadable_file_is_an_error_naming_it_and_is_never_overwritten(path, content, says):
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    store = LocalFileStore(path)
    with pytest.raises(StateError) as err:
        store.read()
    assert str(path) in str(err.value) and says in str(err.value)
    with pytest.raises(StateError):
        store.write(State())
    assert path.read_bytes() == content


def test_a_directory_in_place_of_the_file_is_a_clear_error(path):
    path.mkdir(parents=True)
    with pytest.raises(StateError, match="cannot read the state file"):
        LocalFileStore(path).read()


HOLDER = textwrap.dedent("""
    import sys, time
    from reconciler.state import LocalFileStore
    with LocalFileStore(sys.argv[1]).lock("apply"):
        print("locked", flush=True)
        time.sleep(60)
""")


def test_the_os_lock_names_another_process_and_dies_with_it(path):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "locked"
        with pytest.raises(StateError) as err:
            with LocalFileStore(path).lock("plan"):
                pass
        assert f"pid {proc.pid}" in str(err.value)
        assert "operation apply since" in str(err.value)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    with LocalFileStore(path).lock("plan") as info:  # kill -9 left no stale lock
        assert info.operation == "plan"


def test_writing_the_state_drops_its_journal_without_reading_it_back(path, monkeypatch):
    store, state = written(path, "a")
    b = resource("b")
    state.set(b)
    store.append([journal.set_entry(b.address, b)], state.lineage)
    assert store.has_journal()

    def no_reading(*_):
        raise AssertionError("the journal was read back to be dropped")

    monkeypatch.setattr(store, "_load_journal", no_reading)
    store.write(state)
    monkeypatch.undo()
    assert not store.has_journal()
    assert sorted(LocalFileStore(path).read().resources) == sorted(state.resources)

