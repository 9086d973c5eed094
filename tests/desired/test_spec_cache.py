"""The spec cache (`desired.cache`): a second load of an unchanged folder parses nothing and
gives what a load from the files gives; it never serves a stale spec (a file or a
`_defaults.yaml` edited in place, same size and time), and a damaged, foreign or
unwritable cache is not used and never fails a load."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from reconciler.desired import cache as spec_cache
from reconciler.desired.background import start_loading
from reconciler.desired.cache import SpecCache
from reconciler.desired.loader import load_specs
from reconciler.errors import SpecError
from tests.helpers.files import edit_in_place

ROOT = pathlib.Path(__file__).resolve().parents[2]
DDP = (ROOT / "specs" / "training" / "bert-ddp.yaml").read_text()
CLUSTER = "71f69d83-ba66-4822-adf5-55ce55efd210"


@pytest.fixture
def cache_home(tmp_path, monkeypatch) -> pathlib.Path:
    home = tmp_path / "cache-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.delenv(spec_cache.ENV, raising=False)
    return home


def _load(root, processes=0):
    """One load through a fresh SpecCache (as each plan makes), saved as plan saves it;
    (workloads, files parsed)."""
    cache = SpecCache.for_folder(root)
    pending = start_loading(root, processes=processes, cache=cache)
    try:
        return pending.result(), pending.parsed
    finally:
        pending.save_cache()


def _folder(specdir, n=3):
    for i in range(n):
        specdir.write(f"team/w{i}.yaml", DDP.replace("name: bert-ddp", f"name: ddp-{i}"))
    specdir.write("team/_defaults.yaml", "lifecycle:\n  ignoreChanges: [spec.numWorkers]\n")
    return specdir.root


def test_a_second_load_parses_nothing_and_gives_the_same_workloads(specdir, cache_home):
    root = _folder(specdir)
    first, parsed = _load(root)
    assert parsed == 4  # three specs and their _defaults.yaml
    assert first == load_specs(root)
    again, parsed = _load(root)
    assert parsed == 0
    assert again == first
    assert [w.source for w in again] == [w.source for w in first]
    assert again[0].lifecycle.ignore_changes == ("spec.numWorkers",)
    (path,) = cache_home.rglob("*.cache")
    assert path.stat().st_mode & 0o777 == 0o600  # it holds what the specs hold


@pytest.mark.parametrize("processes", [0, 2])
def test_a_file_edited_in_place_is_read_again(specdir, cache_home, processes):
    root = _folder(specdir)
    _load(root)
    edit_in_place(root / "team" / "w1.yaml", "numWorkers: 4", "numWorkers: 7")
    got, parsed = _load(root, processes=processes)
    assert parsed == 1
    assert got == load_specs(root)
    assert got[1].body["spec"]["numWorkers"] == 7


def test_a_defaults_file_edited_in_place_reloads_the_specs_below_it(specdir, cache_home):
    root = _folder(specdir)
    specdir.write("other/w9.yaml", DDP.replace("name: bert-ddp", "name: ddp-9"))
    _load(root)
    edit_in_place(root / "team" / "_defaults.yaml", "spec.numWorkers", "spec.workingDir")
    got, parsed = _load(root)
    assert parsed == 4  # not other/w9.yaml
    assert got == load_specs(root)
    assert {w.lifecycle.ignore_changes for w in got if "team" in w.source} == {
        ("spec.workingDir",)}


def test_a_spec_that_became_bad_is_reported_and_a_bad_load_is_not_kept(specdir, cache_home):
    root = _folder(specdir)
    _load(root)
    edit_in_place(root / "team" / "w0.yaml", "numWorkers: 4", "numWorkers: x")
    with pytest.raises(SpecError) as first:
        _load(root)
    assert any("w0.yaml" in p and "numWorkers" in p for p in first.value.problems)
    with pytest.raises(SpecError) as again:
        _load(root)
    assert again.value.problems == first.value.problems


def test_warnings_come_back_from_the_cache(specdir, cache_home):
    specdir.write("w.yaml", DDP.replace("largeShmRequest: true", "largeShmRequest: yes"))
    first, _ = _load(specdir.root)
    assert first[0].warnings and "yes" in first[0].warnings[0]
    again, parsed = _load(specdir.root)
    assert parsed == 0 and again == first
    assert [w.warnings for w in again] == [w.warnings for w in load_specs(specdir.root)]


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "identity", "empty"])
def test_a_damaged_cache_file_is_not_used(specdir, cache_home, damage):
    root = _folder(specdir)
    expected, _ = _load(root)
    (path,) = cache_home.rglob("*.cache")
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-10] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "garbage":
        data = bytearray(os.urandom(len(data)))
    elif damage == "identity":  # written by another version of the tool
        start = len(spec_cache._MAGIC)
        data[start] ^= 0xFF
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    got, parsed = _load(root)
    assert parsed == 4 and got == expected
    got, parsed = _load(root)  # and it was written again, whole
    assert parsed == 0 and got == expected


def test_an_unusable_cache_folder_never_fails_a_load(specdir, tmp_path, monkeypatch):
    root = _folder(specdir)
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # mkdir under a file fails
    for _ in range(2):
        got, parsed = _load(root)
        assert parsed == 4 and got == load_specs(root)
    home = tmp_path / "home2"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    cache = SpecCache.for_folder(root)
    cache.path.mkdir(parents=True)  # where the cache file goes, a folder: unreadable
    got, parsed = _load(root)
    assert parsed == 4 and got == load_specs(root)


def test_turned_off_there_is_no_cache(specdir, cache_home, monkeypatch):
    monkeypatch.setenv(spec_cache.ENV, "off")
    assert SpecCache.for_folder(specdir.root) is None


def test_the_cli_uses_the_cache_and_sees_an_edit(specdir, tmp_path):
    """Through the CLI as a user runs it: validate fills the cache, a same-size edit in
    place is reported; RUNAI_RECONCILE_SPEC_CACHE=off writes no cache."""
    root = _folder(specdir)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"), NO_COLOR="1")
    env.pop(spec_cache.ENV, None)

    def validate(extra=None):
        return subprocess.run([sys.executable, "-m", "reconciler.cli", "validate", str(root)],
                              env=dict(env, **(extra or {})), capture_output=True, text=True,
                              timeout=60)

    ok = validate()
    assert ok.returncode == 0, ok.stderr
    assert list((tmp_path / "xdg").rglob("*.cache"))
    edit_in_place(root / "team" / "w2.yaml", "numWorkers: 4", "numWorkers: x")
    bad = validate()
    assert bad.returncode == 1 and "w2.yaml" in bad.stderr and "numWorkers" in bad.stderr
    off = validate({spec_cache.ENV: "off", "XDG_CACHE_HOME": str(tmp_path / "xdg-off")})
    assert off.returncode == 1
    assert not (tmp_path / "xdg-off").exists()


def test_a_served_spec_takes_the_state_body_only_when_it_is_exactly_the_same(specdir, cache_home):
    """`share_bodies`: a body equal as JSON (keys in another order) is taken; one that
    Python calls equal but JSON does not (4.0 for 4, true for 1) is not."""
    root = _folder(specdir)
    first, _ = _load(root)
    same = {w.address: _reordered(w.body) for w in first}
    other = dict(same)
    a0, a1, a2 = (w.address for w in first)
    other[a1] = _reordered(first[1].body)
    other[a1]["spec"]["numWorkers"] = 4.0
    other[a2] = _reordered(first[2].body)
    other[a2]["spec"]["compute"]["largeShmRequest"] = 1
    cache = SpecCache.for_folder(root)
    pending = start_loading(root, processes=0, cache=cache)
    pending.share_bodies(other)
    got = pending.result()
    assert got == first  # the same workloads, whatever body objects they hold
    assert got[0].body is other[a0]
    assert got[1].body is not other[a1] and got[1].body["spec"]["numWorkers"] == 4
    assert type(got[1].body["spec"]["numWorkers"]) is int
    assert got[2].body is not other[a2]


def _reordered(body):
    """A copy with every mapping's keys in reverse order (as a state file sorts them)."""
    if isinstance(body, dict):
        return {k: _reordered(body[k]) for k in reversed(list(body))}
    if isinstance(body, list):
        return [_reordered(x) for x in body]
    return body


def _replace_cache_file(cache_home, how, tmp_path):
    """Put `how` in the place of the folder's cache file (one load wrote it)."""
    (path,) = cache_home.rglob("*.cache")
    good = path.read_bytes()
    path.unlink()
    if how == "fifo":
        os.mkfifo(path, 0o600)
    elif how == "link to /dev/zero":
        path.symlink_to("/dev/zero")
    elif how == "link to a good file":  # even a good file is not read through a link
        (tmp_path / "elsewhere.cache").write_bytes(good)
        os.chmod(tmp_path / "elsewhere.cache", 0o600)
        path.symlink_to(tmp_path / "elsewhere.cache")
    elif how == "huge":  # the right header, then a gigabyte (sparse: no disk is used)
        with open(path, "wb") as f:
            f.write(good)
            f.truncate(1 << 30)
        os.chmod(path, 0o600)
    elif how == "mode 0644":
        path.write_bytes(good)
        os.chmod(path, 0o644)
    elif how == "another owner":
        path.write_bytes(good)
        os.chmod(path, 0o600)
        os.chown(path, 4242, 4242)
    return path


UNTRUSTED = {"fifo": "not a regular file", "link to /dev/zero": "symbolic link",
             "link to a good file": "symbolic link", "huge": "1073741824 bytes",
             "mode 0644": "mode is 0644", "another owner": "owned by user 4242"}


@pytest.mark.timeout(30)
@pytest.mark.parametrize("how", list(UNTRUSTED))
def test_a_cache_file_this_tool_did_not_write_is_not_read(specdir, cache_home, tmp_path,
                                                          caplog, how):
    """A FIFO would block the load for ever, /dev/zero or a huge file would be read until
    memory runs out, a file others may write could feed it anything: none is read; one
    warning names the file and why, and the specs load as with the cache off."""
    if how == "another owner" and os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    root = _folder(specdir)
    expected, _ = _load(root)
    path = _replace_cache_file(cache_home, how, tmp_path)
    got, parsed = _load(root)
    assert parsed == 4 and got == expected
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1, warned
    assert str(path) in warned[0] and UNTRUSTED[how] in warned[0]
    assert "loaded without it" in warned[0]
    if how in ("huge", "mode 0644"):  # a file of the user's: the save replaced it
        assert path.stat().st_size < 1 << 20 and path.stat().st_mode & 0o777 == 0o600
        caplog.clear()
        got, parsed = _load(root)
        assert parsed == 0 and got == expected and not caplog.records
    else:  # anything else is left where it is, and the cache stays off
        assert os.path.islink(path) or not path.is_file() or path.stat().st_uid != os.getuid()


def test_the_cli_is_not_held_by_a_fifo_in_the_cache_files_place(specdir, tmp_path):
    """`validate` (as `plan` loads specs) with a FIFO where its cache file goes ends at
    once with one warning, instead of waiting for ever for a writer."""
    root = _folder(specdir)
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"), NO_COLOR="1")
    env.pop(spec_cache.ENV, None)
    cmd = [sys.executable, "-m", "reconciler.cli", "validate", str(root)]
    assert subprocess.run(cmd, env=env, capture_output=True, timeout=60).returncode == 0
    (path,) = (tmp_path / "xdg").rglob("*.cache")
    path.unlink()
    os.mkfifo(path, 0o600)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 1 and str(path) in warnings[0] and "not a regular file" in warnings[0]
