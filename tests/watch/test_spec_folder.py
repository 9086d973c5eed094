"""The watch's specs folder (`operations.specfolder.SpecsFolder`) parses the specs between
the program's collector hooks (`operations.memory`: the CLI pauses the cycle collector
there), and only when a file changed."""

from __future__ import annotations

import pytest

from reconciler.errors import SpecError
from reconciler.operations import memory
from reconciler.operations.specfolder import SpecsFolder

SPEC = """kind: Training
name: job-{i}
projectId: "7"
clusterId: 71f69d83-ba66-4822-adf5-55ce55efd210
spec:
  image: nvcr.io/nvidia/pytorch:24.05-py3
  compute: {{gpuDevicesRequest: 1}}
"""


def test_a_parse_runs_between_the_programs_hooks_and_an_unchanged_folder_calls_none(
        tmp_path, monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(memory, "hooks", memory.Hooks(
        loading=lambda: calls.append("loading"), planned=lambda: calls.append("planned"),
        parsed=lambda: calls.append("parsed"), settled=lambda: calls.append("settled")))
    (tmp_path / "job-0.yaml").write_text(SPEC.format(i=0))
    folder = SpecsFolder(str(tmp_path))
    workloads, parsed = folder.get()
    assert parsed and [w.address for w in workloads] == ["Training/7/job-0"]
    assert calls == ["loading", "parsed"]
    assert folder.get() == (workloads, False) and calls == ["loading", "parsed"]
    (tmp_path / "job-0.yaml").write_text("kind: Training\nname: [\n")
    with pytest.raises(SpecError):
        folder.get()
    assert calls == ["loading", "parsed"] * 2  # resumed after a failed parse too


def test_the_folder_reads_again_after_an_edit_in_place_or_a_file_added_below_it(tmp_path):
    import os

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "job-0.yaml").write_text(SPEC.format(i=0))
    (tmp_path / ".git").mkdir()
    folder = SpecsFolder(str(tmp_path))
    assert folder.get()[1] and not folder.get()[1]
    (tmp_path / ".git" / "x.yaml").write_text("not a spec")  # neither .git nor other files
    (tmp_path / "a" / "notes.txt").write_text("count")
    assert not folder.get()[1]
    path = tmp_path / "a" / "job-0.yaml"
    before = path.stat()
    path.write_text(SPEC.format(i=1))  # the same size, in place
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1))
    workloads, parsed = folder.get()
    assert parsed and [w.name for w in workloads] == ["job-1"]
    (tmp_path / "a" / "b").mkdir()
    (tmp_path / "a" / "b" / "job-2.yaml").write_text(SPEC.format(i=2))
    workloads, parsed = folder.get()
    assert parsed and sorted(w.name for w in workloads) == ["job-1", "job-2"]
