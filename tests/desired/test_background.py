"""start_loading: the specs loaded in a forked child give what load_specs gives, errors
included, and the child never outlives its use, hangs the parent or prints."""

from __future__ import annotations

import asyncio
import datetime
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from reconciler.desired import background, loader, sources
from reconciler.desired.background import start_loading
from reconciler.desired.loader import load_specs
from reconciler.desired.types import DesiredWorkload
from reconciler.errors import ReconcileError, SpecError

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import specgen  # noqa: E402

EXAMPLES = ROOT / "specs"
GENERATED = 120

pytestmark = pytest.mark.skipif(not background._fork_available(), reason="needs fork (Linux)")


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> tuple[pathlib.Path, list[DesiredWorkload]]:
    root = tmp_path_factory.mktemp("generated")
    specgen.write_specs(root, GENERATED)
    return root, load_specs(root)


@pytest.fixture
def bad_specs(specdir) -> pathlib.Path:
    specdir.write("a-good.yaml", (EXAMPLES / "training" / "bert-ddp.yaml").read_text())
    specdir.write("b-bad.yaml", """
        kind: DistributedTraining
        name: Bad_Name
        projectId: 7
        clusterId: 71f69d83-ba66-4822-adf5-55ce55efd210
        spec:
          imagee: x
        """)
    specdir.write("c-broken.yaml", "kind: [unclosed\n")
    specdir.write("d-copy.yaml", (EXAMPLES / "training" / "bert-ddp.yaml").read_text())
    return specdir.root


def _blocking_loader(monkeypatch) -> None:
    """The children (forked after this) load forever, so that they are surely running."""
    def forever(files):
        signal.pause()
    monkeypatch.setattr(loader, "load_share", forever)


def _gone(pid: int) -> bool:
    """No such process: neither running nor a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")} if os.path.isdir("/proc/self/fd") else set()


def test_example_specs_load_in_the_child_as_in_process():
    pending = start_loading(EXAMPLES, background=True)
    assert pending.in_background
    assert pending.result() == load_specs(EXAMPLES)


def test_few_spec_files_load_in_process_and_are_done_at_once():
    pending = start_loading(EXAMPLES)
    assert not pending.in_background and pending.pid is None and pending.done()
    assert pending.result() == load_specs(EXAMPLES)


def test_a_generated_folder_loads_in_the_background_with_the_same_workloads_in_order(generated):
    root, expected = generated
    pending = start_loading(root)
    assert pending.in_background
    pid = pending.pid
    got = pending.result()
    assert [w.address for w in got] == [w.address for w in expected]
    assert got == expected
    assert _gone(pid)
    assert pending.result() == expected  # asked again: the same answer


@pytest.mark.parametrize("in_background", [True, False], ids=["child", "in-process"])
def test_bad_specs_give_the_same_spec_error_problems(bad_specs, in_background):
    with pytest.raises(SpecError) as expected:
        load_specs(bad_specs)
    pending = start_loading(bad_specs, background=in_background)
    assert pending.in_background is in_background
    with pytest.raises(SpecError) as got:
        pending.result()
    assert got.value.problems == expected.value.problems
    assert str(got.value) == str(expected.value)
    assert len(got.value.problems) >= 4  # field errors, a syntax error, a duplicate


def test_a_missing_directory_is_the_same_spec_error(tmp_path):
    with pytest.raises(SpecError) as expected:
        load_specs(tmp_path / "nowhere")
    with pytest.raises(SpecError) as got:
        start_loading(tmp_path / "nowhere", background=True).result()
    assert got.value.problems == expected.value.problems == [f"{tmp_path / 'nowhere'}: no such directory"]


def test_the_choice_counts_spec_files_as_the_loader_finds_them(tmp_path):
    assert background._SUFFIXES == sources.SUFFIXES
    n = background.BACKGROUND_MIN_FILES
    (tmp_path / ".hidden").mkdir()
    for i in range(n):
        (tmp_path / ".hidden" / f"w{i}.yaml").write_text("")
    for i in range(n - 1):
        (tmp_path / f"w{i}.yml").write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert not background._holds_spec_files(tmp_path, n)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "last.JSON").write_text("")
    assert background._holds_spec_files(tmp_path, n)
    assert not background._holds_spec_files(tmp_path / "sub" / "last.JSON", n)


def test_cancel_stops_the_child_and_leaves_no_process_or_pipe(monkeypatch, generated):
    before = _open_fds()
    _blocking_loader(monkeypatch)
    pending = start_loading(generated[0], background=True)
    pid = pending.pid
    assert pid is not None and not _gone(pid)
    pending.cancel()
    pending.cancel()
    assert _gone(pid)
    assert _open_fds() == before
    with pytest.raises(ReconcileError, match="cancelled"):
        pending.result()


def test_cancel_after_the_result_keeps_the_result(generated):
    root, expected = generated
    pending = start_loading(root, background=True)
    assert pending.result() == expected
    pending.cancel()
    assert pending.result() == expected


def test_wait_lets_other_tasks_run_while_the_child_loads(monkeypatch, generated):
    root, expected = generated
    real = loader.load_share

    def slow(files):
        time.sleep(0.3)
        return real(files)

    monkeypatch.setattr(loader, "load_share", slow)  # in the children, forked after this

    async def main():
        ticks = 0
        stop = asyncio.Event()

        async def ticker():
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.002)

        task = asyncio.create_task(ticker())
        pending = start_loading(root, background=True)
        got = await pending.wait()
        stop.set()
        await task
        return got, ticks, pending

    before = _open_fds()
    got, ticks, pending = asyncio.run(main())
    assert got == expected
    assert ticks >= 10  # the child takes 0.3 s or more: 10 ticks of 2 ms fit easily
    assert _open_fds() == before


def test_wait_raises_the_spec_error(bad_specs):
    with pytest.raises(SpecError) as expected:
        load_specs(bad_specs)
    with pytest.raises(SpecError) as got:
        asyncio.run(start_loading(bad_specs, background=True).wait())
    assert got.value.problems == expected.value.problems


@pytest.mark.timeout(30)
@pytest.mark.parametrize("waiting", ["result", "wait"])
def test_a_killed_child_is_a_clear_error_not_a_hang(monkeypatch, generated, waiting):
    _blocking_loader(monkeypatch)
    pending = start_loading(generated[0], background=True)
    os.kill(pending.pid, signal.SIGKILL)
    with pytest.raises(ReconcileError, match=r"the loader process was killed \(SIGKILL\)") as err:
        pending.result() if waiting == "result" else asyncio.run(pending.wait())
    assert not isinstance(err.value, SpecError)


@pytest.mark.timeout(30)
def test_an_unexpected_failure_in_the_child_comes_back_without_output(monkeypatch, capfd, generated):
    def broken(files):
        print("noise on stdout")
        print("noise on stderr", file=sys.stderr)
        os.write(2, b"noise on fd 2\n")
        raise RuntimeError("the loader broke")

    monkeypatch.setattr(loader, "load_share", broken)
    with pytest.raises(ReconcileError, match="could not load the specs: RuntimeError: the loader broke") as err:
        start_loading(generated[0], background=True).result()
    assert "Traceback" in err.value.child_traceback
    assert capfd.readouterr() == ("", "")


def test_the_child_ignores_ctrl_c(capfd, generated):
    root, expected = generated
    pending = start_loading(root, background=True)
    os.kill(pending.pid, signal.SIGINT)
    assert pending.result() == expected
    assert capfd.readouterr() == ("", "")


def test_values_marshal_cannot_carry_still_come_back(monkeypatch, tmp_path):
    odd = [DesiredWorkload(kind="TrainingWorkload", name="a", project_id="1", cluster_id="c",
                           body={"spec": {"when": datetime.date(2024, 1, 2), "tags": {1, 2}}})]
    monkeypatch.setattr(loader, "load_share", lambda files: (odd, []))
    assert start_loading(tmp_path, background=True).result() == odd


def test_the_parent_imports_no_models_prints_once_and_leaves_no_orphan(tmp_path, generated):
    """A real CLI-like process: it never imports pydantic, its buffered output is not
    written twice by the child, and a child still loading when it exits is killed."""
    script = textwrap.dedent(f"""
        import signal, sys
        from reconciler.desired import start_loading
        sys.stdout.write("parent output, once\\n")   # buffered: stdout is a pipe
        pending = start_loading({str(generated[0])!r})
        assert pending.in_background
        workloads = pending.result()
        assert len(workloads) == {GENERATED}, len(workloads)
        assert "pydantic" not in sys.modules and "yaml" not in sys.modules, "models imported"
        import reconciler.desired.loader as loader
        loader.load_share = lambda files: signal.pause()
        left = start_loading({str(generated[0])!r}, background=True, processes=2)
        print("children", *left.pids)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert run.stdout.count("parent output, once") == 1
    pids = [int(p) for p in run.stdout.split("children ")[1].split()]
    assert len(pids) == 2 and all(_gone(pid) for pid in pids)


# --- several children, each loading a share of the files ------------------------------

@pytest.mark.parametrize("processes", [2, 3])
def test_shares_loaded_by_several_children_join_into_the_same_workloads_in_order(generated, processes):
    root, expected = generated
    pending = start_loading(root, background=True, processes=processes)
    pids = pending.pids
    assert len(pids) == processes and len(set(pids)) == processes
    assert pending.result() == expected
    assert all(_gone(pid) for pid in pids)


@pytest.mark.parametrize("processes", [1, 2, 3, 6])
def test_bad_specs_split_between_children_give_the_same_problems_in_the_same_order(
        specdir, processes):
    """Field errors in several shares, a syntax error, and duplicate addresses both
    inside one share and across shares: the same SpecError as load_specs."""
    ddp = (EXAMPLES / "training" / "bert-ddp.yaml").read_text()
    specdir.write("a-good.yaml", ddp)
    specdir.write("b-bad.yaml", "kind: DistributedTraining\nname: Bad_Name\nprojectId: 7\n")
    specdir.write("c-copy.yaml", ddp)
    specdir.write("d-broken.yaml", "kind: [unclosed\n")
    specdir.write("e-copy-twice.yaml", ddp + "\n---\n" + ddp)
    specdir.write("f-bad.yaml", "kind: Training\n")
    with pytest.raises(SpecError) as expected:
        load_specs(specdir.root)
    duplicates = [p for p in expected.value.problems if "duplicate address" in p]
    assert len(duplicates) == 3 and expected.value.problems[-3:] == duplicates
    with pytest.raises(SpecError) as got:
        start_loading(specdir.root, background=True, processes=processes).result()
    assert got.value.problems == expected.value.problems


def test_a_duplicate_across_shares_alone_is_found(specdir):
    ddp = (EXAMPLES / "training" / "bert-ddp.yaml").read_text()
    specdir.write("a.yaml", ddp)
    specdir.write("b.yaml", ddp)
    with pytest.raises(SpecError) as expected:
        load_specs(specdir.root)
    with pytest.raises(SpecError) as got:
        asyncio.run(start_loading(specdir.root, background=True, processes=2).wait())
    assert got.value.problems == expected.value.problems
    assert len(got.value.problems) == 1 and "a.yaml" in got.value.problems[0]


def test_only_the_first_child_lists_the_files_and_the_others_load_from_its_list(
        monkeypatch, tmp_path, generated):
    """Every child loads from one listing, even if the folder changes meanwhile."""
    root, expected = generated
    calls = tmp_path / "calls"
    real = sources.find_files

    def find_files(directory):
        with calls.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return real(directory)

    monkeypatch.setattr(sources, "find_files", find_files)
    assert start_loading(root, background=True, processes=3).result() == expected
    assert len(calls.read_text().split()) == 1


@pytest.mark.timeout(30)
@pytest.mark.parametrize("waiting", ["result", "wait"])
def test_a_killed_helper_is_an_error_and_the_other_child_is_stopped(monkeypatch, generated, waiting):
    before = _open_fds()
    _blocking_loader(monkeypatch)
    pending = start_loading(generated[0], background=True, processes=2)
    leader, helper = pending.pids
    os.kill(helper, signal.SIGKILL)
    with pytest.raises(ReconcileError, match=r"the loader process was killed \(SIGKILL\)"):
        pending.result() if waiting == "result" else asyncio.run(pending.wait())
    assert _gone(leader) and _gone(helper)
    assert _open_fds() == before


@pytest.mark.timeout(30)
@pytest.mark.parametrize("failing", ["first", "last"])
def test_one_child_failing_while_the_other_succeeds_is_an_error(monkeypatch, generated, failing):
    root, _ = generated
    real = loader.load_share
    files, _ = sources.find_files(root)
    target = files[0][1] if failing == "first" else files[-1][1]

    def fails_on_one_share(share):
        if any(display == target for _, display in share):
            raise OSError("disk on fire")
        return real(share)

    monkeypatch.setattr(loader, "load_share", fails_on_one_share)
    pending = start_loading(root, background=True, processes=2)
    pids = pending.pids
    with pytest.raises(ReconcileError, match="could not load the specs: OSError: disk on fire"):
        pending.result()
    assert all(_gone(pid) for pid in pids)


def test_cancel_stops_every_child_and_leaves_no_process_or_pipe(monkeypatch, generated):
    before = _open_fds()
    _blocking_loader(monkeypatch)
    pending = start_loading(generated[0], background=True, processes=3)
    pids = pending.pids
    assert len(pids) == 3 and not any(_gone(pid) for pid in pids)
    pending.cancel()
    assert all(_gone(pid) for pid in pids)
    assert _open_fds() == before
    with pytest.raises(ReconcileError, match="cancelled"):
        pending.result()


def test_every_child_ignores_ctrl_c(capfd, generated):
    root, expected = generated
    pending = start_loading(root, background=True, processes=2)
    for pid in pending.pids:
        os.kill(pid, signal.SIGINT)
    assert pending.result() == expected
    assert capfd.readouterr() == ("", "")


def test_wait_with_several_children_leaves_no_pipe(generated):
    root, expected = generated
    before = _open_fds()
    assert asyncio.run(start_loading(root, background=True, processes=2).wait()) == expected
    assert _open_fds() == before


def test_the_children_are_one_per_cpu_when_each_gets_enough_files(monkeypatch, tmp_path):
    per = background.FILES_PER_PROCESS
    for i in range(2 * per - 1):
        (tmp_path / f"w{i}.yaml").write_text("")
    monkeypatch.setattr(background, "_cpus", lambda: 8)
    assert background._processes_for(tmp_path) == 1
    (tmp_path / "last.yaml").write_text("")
    assert background._processes_for(tmp_path) == 2
    monkeypatch.setattr(background, "_cpus", lambda: 1)
    assert background._processes_for(tmp_path) == 1
    monkeypatch.setattr(background, "_cpus", lambda: 2)
    for i in range(10 * per):
        (tmp_path / f"more{i}.yaml").write_text("")
    assert background._processes_for(tmp_path) == 2
    monkeypatch.setattr(background, "_cpus", lambda: 64)
    assert background._processes_for(tmp_path) == background.MAX_PROCESSES


def test_a_failed_fork_of_the_leader_leaves_no_pipe(monkeypatch, generated):
    import multiprocessing.process

    before = _open_fds()

    def start(self):
        raise OSError("fork: resource temporarily unavailable")

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    with pytest.raises(OSError, match="fork"):
        start_loading(generated[0], background=True, processes=3)
    assert _open_fds() == before


@pytest.mark.timeout(30)
def test_a_failed_fork_of_a_helper_is_an_error_and_stops_the_loaders_started(
        monkeypatch, tmp_path, generated):
    """The leader forks the helpers: when its second fork fails, the first helper and the
    leader are stopped and reaped, and the parent hears of the failure."""
    before = _open_fds()
    forks = tmp_path / "forks"
    forks.write_text("")
    real_fork = os.fork

    def fork():
        if len(forks.read_text().split()) >= 2:  # the leader and one helper forked
            raise OSError("fork: resource temporarily unavailable")
        pid = real_fork()
        if pid:
            with forks.open("a") as f:
                f.write(f"{pid}\n")
        return pid

    _blocking_loader(monkeypatch)
    monkeypatch.setattr(os, "fork", fork)
    pending = start_loading(generated[0], background=True, processes=3)
    with pytest.raises(ReconcileError, match="could not load the specs: OSError: fork"):
        pending.result()
    pids = [int(p) for p in forks.read_text().split()]
    assert len(pids) == 2 and all(_gone(pid) for pid in pids)
    assert _open_fds() == before


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _stopped(pid: int) -> bool:
    """Gone, or dead and waiting for whoever adopted it to reap it."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_the_helpers_are_forked_from_the_leader(generated):
    """A zygote: the helpers inherit the models the leader built instead of importing
    them again."""
    root, expected = generated
    pending = start_loading(root, background=True, processes=3)
    leader, *helpers = pending.pids
    assert [_parent_of(pid) for pid in helpers] == [leader, leader]
    assert pending.result() == expected


@pytest.mark.timeout(30)
@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_killed_leader_is_an_error_and_takes_its_helpers_with_it(monkeypatch, generated):
    before = _open_fds()
    _blocking_loader(monkeypatch)
    pending = start_loading(generated[0], background=True, processes=3)
    leader, *helpers = pending.pids
    os.kill(leader, signal.SIGKILL)
    with pytest.raises(ReconcileError, match=r"the loader process was killed \(SIGKILL\)"):
        pending.result()
    deadline = time.monotonic() + 10
    while not all(_stopped(pid) for pid in helpers) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _gone(leader) and all(_stopped(pid) for pid in helpers)
    assert _open_fds() == before
