"""The spec indexer (`desired.background`): with the user's spec cache on disk, a big folder's
hashing, cache read and loading of what the cache lacks is one child's work, and the outcome
is exactly a load from the files': the same workloads in order, the same problems, edits
seen, a damaged cache file not used, a dead indexer one clear error and nothing left behind."""

from __future__ import annotations

import json
import os
import pathlib
import pickle
import signal
import sys
import time

import pytest

from reconciler.desired import cache as spec_cache
from reconciler.desired.background import MIN_FILES, start_loading
from reconciler.desired.cache import SpecCache
from reconciler.desired.loader import load_specs
from reconciler.errors import ReconcileError, SpecError
from tests.helpers.files import edit_in_place

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import specgen  # noqa: E402

GENERATED = MIN_FILES + 20

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only"),
    pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: loads in process"),
    pytest.mark.timeout(60)]


@pytest.fixture
def folder(tmp_path, monkeypatch) -> pathlib.Path:
    """A generated folder above MIN_FILES whose cache file is on disk (one load made it)."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache-home"))
    monkeypatch.delenv(spec_cache.ENV, raising=False)
    root = tmp_path / "specs"
    specgen.write_specs(root, GENERATED)
    _, parsed, indexed = _load(root)
    assert parsed == GENERATED and not indexed  # no cache file yet: the loaders' way
    return root


def _load(root):
    """One plan's load: (workloads, files parsed, whether the indexer did the work)."""
    cache = SpecCache.for_folder(root)
    pending = start_loading(root, cache=cache)
    indexed = pending._indexing
    try:
        return pending.result(), pending.parsed, indexed
    finally:
        pending.cancel()
        pending.save_cache()


def _first_spec(root: pathlib.Path) -> pathlib.Path:
    return sorted(p for p in root.rglob("*.yaml") if not p.name.startswith("_"))[0]


def test_an_unchanged_folder_is_indexed_in_a_child_and_parses_nothing(folder):
    got, parsed, indexed = _load(folder)
    assert indexed and parsed == 0
    assert got == load_specs(folder)
    assert [w.source for w in got] == [w.source for w in load_specs(folder)]


def test_an_edit_in_place_is_seen_and_only_that_file_parsed(folder):
    path = _first_spec(folder)
    edit_in_place(path, "TRAIN_OPTION_00", "TRAIN_OPTION_99")
    got, parsed, indexed = _load(folder)
    assert indexed and parsed == 1
    assert got == load_specs(folder)
    (edited,) = [w for w in got if w.source.endswith(path.name)]
    assert "TRAIN_OPTION_99" in str(edited.body)
    again, parsed, _ = _load(folder)  # the edit is now cached too
    assert parsed == 0 and again == got


@pytest.mark.parametrize("edited", [False, True])
def test_the_cache_comes_in_parts_and_an_unchanged_fleet_is_held_once(
        folder, monkeypatch, edited):
    """The indexer sends the cache file's entries a few at a time, so the parent never
    holds the whole file's bytes; a served workload whose body is exactly the state's
    takes the state's object, one that only compares equal (1 for true) keeps its own.
    With a file edited, the indexer itself saves the cache (the parent, holding no
    entry's bytes, has nothing to save): the next load parses nothing."""
    from reconciler.desired import background

    if edited:
        edit_in_place(_first_spec(folder), "TRAIN_OPTION_00", "TRAIN_OPTION_99")

    monkeypatch.setattr(background, "PART", 7)  # the indexer is forked: it sees it
    sizes = []
    plain_message = background._message

    def noting(process, conn):
        message = plain_message(process, conn)
        sizes.append(len(pickle.dumps(message)))
        return message

    monkeypatch.setattr(background, "_message", noting)
    expected = load_specs(folder)
    state = {w.address: json.loads(json.dumps(w.body)) for w in expected}
    loose = next(w for w in expected if w.body.get("masterSpecSameAsWorker") is True)
    state[loose.address]["masterSpecSameAsWorker"] = 1
    (path,) = pathlib.Path(os.environ["XDG_CACHE_HOME"]).rglob("*.cache")
    before = path.read_bytes()
    pending = start_loading(folder, cache=SpecCache.for_folder(folder))
    assert pending._indexing
    pending.share_bodies(state)
    try:
        got = pending.result()
    finally:
        pending.cancel()
    assert got == expected and pending.parsed == int(edited)
    assert [w.body is state[w.address] for w in got] == [
        w.address != loose.address for w in got]
    assert len(sizes) > GENERATED // 7 and max(sizes) < len(before) / 5
    assert (path.read_bytes() != before) is edited  # saved by the indexer, if at all
    written = path.stat().st_mtime_ns
    pending.save_cache()
    assert path.stat().st_mtime_ns == written
    assert _load(folder)[1] == 0


def _made_bad(folder: pathlib.Path, path: pathlib.Path) -> list[str]:
    """`path` given an unknown field: the indexed load's problems, which are a load from
    the files' and name it."""
    path.write_text(path.read_text() + "\nunknownField: 1\n")
    with pytest.raises(SpecError) as indexed:
        _load(folder)
    with pytest.raises(SpecError) as plain:
        load_specs(folder)
    assert indexed.value.problems == plain.value.problems
    return indexed.value.problems


def test_a_spec_made_bad_gives_the_problems_a_load_from_the_files_gives(folder):
    path = _first_spec(folder)
    assert any(path.name in p for p in _made_bad(folder, path))


def test_a_workload_defined_twice_gives_a_load_from_the_files_problems_each_time(folder):
    """A copy of a spec under another name: the indexer loads it and may keep it, but the
    check across files is the parent's, from the cache's keys as from a load."""
    path = _first_spec(folder)
    (path.parent / "copy.yaml").write_bytes(path.read_bytes())
    with pytest.raises(SpecError) as plain:
        load_specs(folder)
    for _ in range(2):  # the copy loaded, then served by the cache
        with pytest.raises(SpecError) as indexed:
            _load(folder)
        assert indexed.value.problems == plain.value.problems
    assert any("already defined at" in p for p in plain.value.problems)


def test_a_damaged_cache_file_is_not_used_and_written_again(folder):
    (path,) = pathlib.Path(os.environ["XDG_CACHE_HOME"]).rglob("*.cache")
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF  # the header still says this tool: the checksum tells
    path.write_bytes(bytes(data))
    got, parsed, indexed = _load(folder)
    assert indexed and parsed == GENERATED
    assert got == load_specs(folder)
    _, parsed, _ = _load(folder)
    assert parsed == 0


def test_another_tools_cache_file_is_not_given_to_an_indexer(folder):
    (path,) = pathlib.Path(os.environ["XDG_CACHE_HOME"]).rglob("*.cache")
    data = bytearray(path.read_bytes())
    data[len(spec_cache._MAGIC)] ^= 0xFF  # another version's identity
    path.write_bytes(bytes(data))
    got, parsed, indexed = _load(folder)
    assert not indexed and parsed == GENERATED  # the loaders' way, as without a cache
    assert got == load_specs(folder)


def test_a_fifo_in_the_cache_files_place_is_not_given_to_an_indexer(folder):
    """Neither the parent's look at the header nor an indexer waits on a FIFO."""
    (path,) = pathlib.Path(os.environ["XDG_CACHE_HOME"]).rglob("*.cache")
    path.unlink()
    os.mkfifo(path, 0o600)
    got, parsed, indexed = _load(folder)
    assert not indexed and parsed == GENERATED
    assert got == load_specs(folder)


def test_a_huge_cache_file_is_not_read_by_the_indexer_and_is_written_again(folder):
    """The header is this tool's, so the indexer is started; it reads nothing beyond the
    bound for these specs, loads them all, and the parent's save replaces the file."""
    (path,) = pathlib.Path(os.environ["XDG_CACHE_HOME"]).rglob("*.cache")
    with open(path, "r+b") as f:
        f.truncate(1 << 30)  # sparse: a gigabyte read, none of it on disk
    got, parsed, indexed = _load(folder)
    assert indexed and parsed == GENERATED
    assert got == load_specs(folder)
    assert path.stat().st_size < 1 << 20
    _, parsed, _ = _load(folder)
    assert parsed == 0


def test_a_killed_indexer_is_one_clear_error_and_leaves_nothing(folder, monkeypatch):
    def stuck(self):  # the child is forked with it: it waits for the kill
        time.sleep(60)

    monkeypatch.setattr(SpecCache, "payload", stuck)
    pending = start_loading(folder, cache=SpecCache.for_folder(folder))
    assert pending._indexing
    (pid,) = pending.pids
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ReconcileError, match="could not load the specs: the loader process "
                                             "was killed \\(SIGKILL\\)"):
        pending.result()
    pending.cancel()
    assert pending.pids == []
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_an_indexer_killed_while_it_sends_the_cache_is_one_clear_error(folder, monkeypatch):
    """Killed after the first part of the cache's entries: the parent, which has taken
    that part, says the loader was killed (not a load missing workloads) and saves
    nothing; the next load is served by the cache file as it was."""
    from reconciler.desired import background

    monkeypatch.setattr(background, "PART", 7)
    plain_parts = SpecCache.parts

    def dying(self, size):
        parts = plain_parts(self, size)
        yield next(parts)
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(SpecCache, "parts", dying)
    (path,) = pathlib.Path(os.environ["XDG_CACHE_HOME"]).rglob("*.cache")
    before = path.read_bytes()
    pending = _killed_while_indexing(folder)
    pending.save_cache()
    assert pending.pids == [] and path.read_bytes() == before
    monkeypatch.setattr(SpecCache, "parts", plain_parts)
    got, parsed, indexed = _load(folder)
    assert indexed and parsed == 0 and got == load_specs(folder)


def _killed_while_indexing(folder):
    """A load by the indexer whose process (or child) a test kills: one clear error, every
    child reaped; the load, cancelled."""
    pending = start_loading(folder, cache=SpecCache.for_folder(folder))
    assert pending._indexing
    with pytest.raises(ReconcileError, match="could not load the specs: the loader process "
                                             "was killed \\(SIGKILL\\)"):
        pending.result()
    pending.cancel()
    return pending


@pytest.fixture
def shared(monkeypatch):
    """Loads of this many files shared between two processes, as a big folder's are."""
    from reconciler.desired import background

    monkeypatch.setattr(background, "FILES_PER_PROCESS", 40)
    monkeypatch.setattr(background, "EVERY_CPU_FILES", 50)


def _every_spec_changed(root: pathlib.Path) -> list[pathlib.Path]:
    paths = sorted(p for p in root.rglob("*.yaml") if not p.name.startswith("_"))
    for path in paths:
        path.write_text(path.read_text() + "# changed\n")
    return paths


def test_every_spec_changed_is_loaded_by_the_indexer_and_a_child_of_its_own(
        folder, shared, monkeypatch, tmp_path):
    """With every file changed since the cache was written, the indexer shares the load
    as the loaders would have: half of it in a child of its own. The outcome is the load
    from the files': the same workloads in file order; the next load parses nothing."""
    from reconciler.desired import background

    loaded_by = tmp_path / "pids"
    plain_load = background._load

    def noting(share):
        with open(loaded_by, "a") as f:
            f.write(f"{os.getpid()} {len(share)}\n")
        return plain_load(share)

    monkeypatch.setattr(background, "_load", noting)
    _every_spec_changed(folder)
    got, parsed, indexed = _load(folder)
    assert indexed and parsed == GENERATED
    assert got == load_specs(folder)
    assert [w.source for w in got] == [w.source for w in load_specs(folder)]
    shares = [line.split() for line in loaded_by.read_text().splitlines()]
    assert len({pid for pid, _ in shares}) == 2 and str(os.getpid()) not in dict(shares)
    assert sum(int(n) for _, n in shares) == GENERATED
    _, parsed, _ = _load(folder)
    assert parsed == 0


def test_a_bad_spec_in_the_indexers_childs_share_gives_the_same_problems(folder, shared):
    last = _every_spec_changed(folder)[-1]  # in the second share: the child's
    assert any(last.name in p and "unknownField" in p for p in _made_bad(folder, last))


def test_a_killed_child_of_the_indexer_is_one_clear_error(folder, shared, monkeypatch):
    from reconciler.desired import background

    paths = _every_spec_changed(folder)
    plain_load = background._load

    def dying(share):
        if any(found[1].endswith(paths[-1].name) for found in share):
            os.kill(os.getpid(), signal.SIGKILL)
        return plain_load(share)

    monkeypatch.setattr(background, "_load", dying)
    pending = _killed_while_indexing(folder)
    assert pending.pids == []
