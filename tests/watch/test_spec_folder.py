"""The watch's specs folder (`operations.specfolder.SpecsFolder`) parses the specs only
when a file changed; a watch cycle reads them, the state and the control plane and plans
between the program's collector hooks (`operations.memory`: the CLI pauses the cycle
collector there), and resumes it after a cycle, failed or not."""

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


def test_an_unchanged_folder_is_not_parsed_again_and_a_broken_file_fails_each_read(tmp_path):
    (tmp_path / "job-0.yaml").write_text(SPEC.format(i=0))
    folder = SpecsFolder(str(tmp_path))
    workloads, parsed = folder.get()
    assert parsed and [w.address for w in workloads] == ["Training/7/job-0"]
    assert folder.get() == (workloads, False)
    (tmp_path / "job-0.yaml").write_text("kind: Training\nname: [\n")
    for _ in range(2):
        with pytest.raises(SpecError):
            folder.get()


def _collector_seen(tmp_path, monkeypatch, *args: str) -> tuple[list, object]:
    """`watch --max-cycles 3` in this process under the program's collector hooks
    (`cli._tune_collector`), each hook and each list page read noted with whether the
    collector ran just after: (what was noted, the CLI's answer)."""
    import gc

    from reconciler import cli
    from reconciler.api.client import RunaiClient
    from tests.helpers.cli import invoke

    monkeypatch.setattr(memory, "hooks", memory.Hooks())
    cli._tune_collector()
    real, noted = memory.hooks, []

    def noting(name):
        def hook():
            getattr(real, name)()
            noted.append((name, gc.isenabled()))
        return hook

    monkeypatch.setattr(memory, "hooks", memory.Hooks(
        **{name: noting(name) for name in ("loading", "planned", "cycle_planned", "settled")}))
    list_page = RunaiClient.list_workloads

    async def noting_list(self, **kw):
        noted.append(("list page", gc.isenabled()))
        return await list_page(self, **kw)

    monkeypatch.setattr(RunaiClient, "list_workloads", noting_list)
    try:
        answer = invoke(tmp_path, "--sim", "--state", "state.json", "watch", "specs",
                        "--mode", "heal", "--interval", "0.01s", "--max-cycles", "3",
                        "--full-refresh-every", "10", "--listen", "off", *args)
    finally:
        gc.enable()
        gc.unfreeze()
    return noted, answer


def test_a_watch_cycle_reads_and_plans_with_the_collector_paused_and_resumes_it(
        tmp_path, monkeypatch):
    (tmp_path / "specs").mkdir()
    for i in range(3):
        (tmp_path / "specs" / f"job-{i}.yaml").write_text(SPEC.format(i=i))
    noted, answer = _collector_seen(tmp_path, monkeypatch)
    assert answer.returncode == 0 and answer.stderr.count("result=ok") == 3, answer.stderr
    hooks = [name for name, _ in noted if name != "list page"]
    # Cycle 1 parses the specs (what exists then is frozen once it went well); 2 and 3 not.
    assert hooks == ["loading", "cycle_planned", "settled"] + ["loading", "cycle_planned"] * 2
    pages = [running for name, running in noted if name == "list page"]
    assert pages and not any(pages)  # the list read with the collector paused
    assert all(running for name, running in noted if name in ("cycle_planned", "settled"))


def test_a_failed_watch_cycle_resumes_the_collector(tmp_path, monkeypatch):
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "job-0.yaml").write_text("kind: Training\nname: [\n")
    noted, answer = _collector_seen(tmp_path, monkeypatch)
    assert answer.returncode == 0 and "job-0.yaml" in answer.stderr, answer.stderr
    assert noted == [("loading", False), ("cycle_planned", True)] * 3


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
