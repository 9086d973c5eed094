"""start_loading: the specs loaded in forked children give what load_specs gives, errors
included; a child that fails or dies is one clear error, and no child or pipe outlives
the load, a cancel or a Ctrl-C."""

from __future__ import annotations

import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from reconciler.desired import background, loader
from reconciler.desired.background import start_loading
from reconciler.desired.loader import load_specs
from reconciler.desired.types import DesiredWorkload
from reconciler.errors import ReconcileError, SpecError

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import specgen  # noqa: E402

EXAMPLES = ROOT / "specs"
GENERATED = 120  # above background.MIN_FILES
DDP = (EXAMPLES / "training" / "bert-ddp.yaml").read_text()

pytestmark = [pytest.mark.skipif(not sys.platform.startswith("linux"), reason="forks on Linux only"),
              pytest.mark.timeout(60)]


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> tuple[pathlib.Path, list[DesiredWorkload]]:
    root = tmp_path_factory.mktemp("generated")
    specgen.write_specs(root, GENERATED)
    return root, load_specs(root)


@pytest.fixture
def bad_specs(specdir) -> pathlib.Path:
    """Field errors in several files, a syntax error, an unknown kind, and duplicate
    addresses both inside one file and across files."""
    specdir.write("a-good.yaml", DDP)
    specdir.write("b-bad.yaml", "kind: DistributedTraining\nname: Bad_Name\nprojectId: 7\n")
    specdir.write("c-copy.yaml", DDP)
    specdir.write("d-broken.yaml", "kind: [unclosed\n")
    specdir.write("e-copy-twice.yaml", DDP + "\n---\n" + DDP)
    specdir.write("f-bad.yaml", "kind: DistributedTrainin\n")
    return specdir.root


def _gone(pid: int) -> bool:
    """No such process: neither running nor a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def _open_fds() -> set[int]:
    return {int(n) for n in os.listdir("/proc/self/fd")}


def _spec_error(load) -> SpecError:
    with pytest.raises(SpecError) as caught:
        load()
    return caught.value


# --- the same outcome as load_specs ---------------------------------------------------

@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: loads in process")
def test_a_big_folder_loads_in_one_child_with_the_same_workloads_in_order(generated):
    root, expected = generated
    pending = start_loading(root)
    assert pending.in_background and len(pending.pids) == 1  # fewer than 2 * FILES_PER_PROCESS
    pids = pending.pids
    got = pending.result()
    assert [w.address for w in got] == [w.address for w in expected]
    assert got == expected
    assert all(_gone(pid) for pid in pids)
    assert pending.result() == expected  # asked again: the same answer


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one CPU: loads in process")
def test_a_busy_caller_keeps_a_cpu_unless_the_folder_is_big(monkeypatch, generated):
    """Below EVERY_CPU_FILES the caller (plan, apply) keeps a CPU for its own work; from
    there the load is the long pole, and the children take every CPU."""
    root, expected = generated
    cpus = len(os.sched_getaffinity(0))
    monkeypatch.setattr(background, "FILES_PER_PROCESS", 10)  # 120 files: up to 12 children
    monkeypatch.setattr(background, "MAX_PROCESSES", 8)
    monkeypatch.setattr(background, "EVERY_CPU_FILES", GENERATED + 1)
    pending = start_loading(root)
    assert len(pending.pids) == min(cpus - 1, 8)
    assert pending.result() == expected
    monkeypatch.setattr(background, "EVERY_CPU_FILES", GENERATED)
    pending = start_loading(root)
    assert len(pending.pids) == min(cpus, 8)
    assert pending.result() == expected
    waiting_only = start_loading(root, caller_busy=False)  # validate: it only waits
    assert len(waiting_only.pids) == min(cpus, 8)
    assert waiting_only.result() == expected


def test_few_spec_files_load_in_process_and_are_done_at_once():
    pending = start_loading(EXAMPLES)
    assert not pending.in_background and pending.pids == [] and pending.done()
    assert pending.result() == load_specs(EXAMPLES)


def test_the_choice_counts_spec_files_as_the_loader_finds_them(tmp_path):
    n = background.MIN_FILES
    (tmp_path / ".hidden").mkdir()
    for i in range(n):
        (tmp_path / ".hidden" / f"w{i}.yaml").write_text("")
        (tmp_path / f"notes{i}.txt").write_text("")
    for i in range(n - 1):
        (tmp_path / f"w{i}.yml").write_text("")
    assert not start_loading(tmp_path).in_background
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "last.JSON").write_text("[]")
    pending = start_loading(tmp_path)
    assert pending.in_background is (len(os.sched_getaffinity(0)) > 1)
    assert pending.result() == [] == load_specs(tmp_path)


@pytest.mark.parametrize("processes", [0, 1, 2, 3, 6])
def test_bad_specs_split_between_children_give_the_same_problems_in_the_same_order(
        bad_specs, processes):
    expected = _spec_error(lambda: load_specs(bad_specs))
    duplicates = [p for p in expected.problems if "duplicate address" in p]
    assert len(duplicates) == 3 and expected.problems[-3:] == duplicates
    assert any("did you mean 'DistributedTraining'" in p for p in expected.problems)
    pending = start_loading(bad_specs, processes=processes)
    assert pending.in_background is (processes > 0)
    got = _spec_error(pending.result)
    assert got.problems == expected.problems
    assert str(got) == str(expected)


@pytest.mark.parametrize("processes", [1, 2])
def test_shares_join_into_the_same_workloads_in_order(generated, processes):
    root, expected = generated
    pending = start_loading(root, processes=processes)
    pids = pending.pids
    assert len(set(pids)) == processes
    assert pending.result() == expected
    assert all(_gone(pid) for pid in pids)


@pytest.mark.parametrize(("processes", "part"), [(1, 7), (2, 7), (1, background.PART)])
def test_children_send_their_workloads_in_parts_that_take_the_states_identical_bodies(
        monkeypatch, generated, processes, part):
    """A child's workloads come in parts (a few at a time, so the parent never holds the
    whole folder twice), and a body exactly the state's becomes the state's object as
    its part arrives: an unchanged fleet is held once. One that only compares equal
    (`true` for 1) keeps its own."""
    root, expected = generated
    monkeypatch.setattr(background, "PART", part)  # the children are forked: they see it
    state = {w.address: json.loads(json.dumps(w.body)) for w in expected}
    odd = expected[3]
    state[odd.address]["spec"] = dict(state[odd.address]["spec"], odd=1)
    loose = next(w for w in expected if w.body.get("masterSpecSameAsWorker") is True)
    state[loose.address]["masterSpecSameAsWorker"] = 1  # == True, not the same JSON
    pending = start_loading(root, processes=processes)
    pending.share_bodies(state)
    got = pending.result()
    assert got == expected  # every workload, in file order
    for w in got:
        assert (w.body is state[w.address]) is (w.address not in (odd.address, loose.address))
    assert got[3].body["spec"].get("odd") is None
    assert next(w for w in got if w.address == loose.address).body[
        "masterSpecSameAsWorker"] is True


def test_a_duplicate_across_shares_alone_is_found(specdir):
    specdir.write("a.yaml", DDP)
    specdir.write("b.yaml", DDP)
    expected = _spec_error(lambda: load_specs(specdir.root))
    got = _spec_error(lambda: asyncio.run(start_loading(specdir.root, processes=2).wait()))
    assert got.problems == expected.problems
    assert len(got.problems) == 1 and "already defined at" in got.problems[0]


def test_a_missing_directory_is_the_same_spec_error(tmp_path):
    expected = _spec_error(lambda: load_specs(tmp_path / "nowhere"))
    got = _spec_error(start_loading(tmp_path / "nowhere", processes=2).result)
    assert got.problems == expected.problems == [f"{tmp_path / 'nowhere'}: no such directory"]


def test_wait_lets_other_tasks_run_while_the_children_load(generated):
    root, expected = generated
    before = _open_fds()

    async def main():
        pending = start_loading(root, processes=2)
        ticks = 0

        async def ticker():
            nonlocal ticks
            while not pending.done():
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        got = await pending.wait()
        await task
        return got, ticks

    got, ticks = asyncio.run(main())
    assert got == expected
    assert ticks >= 2
    assert _open_fds() == before


def test_wait_raises_the_spec_error(bad_specs):
    expected = _spec_error(lambda: load_specs(bad_specs))
    got = _spec_error(lambda: asyncio.run(start_loading(bad_specs, processes=2).wait()))
    assert got.problems == expected.problems


# --- a helper for the CPU the caller kept --------------------------------------------

@pytest.fixture
def noted(monkeypatch, tmp_path):
    """Each `loader.load_share` (in whichever process: the children are forked with the
    patch) noted as (its process, that process's parent, its share's size); `slow`
    makes each one sleep once noted."""
    notes = tmp_path / "loads"
    real = loader.load_share
    slow = []

    def noting(share):
        with open(notes, "a") as f:
            f.write(f"{os.getpid()} {os.getppid()} {len(share)}\n")
        if slow:
            time.sleep(60)
        return real(share)

    monkeypatch.setattr(loader, "load_share", noting)

    def read() -> list[tuple[int, int, int]]:
        text = notes.read_text() if notes.exists() else ""
        return [tuple(map(int, line.split())) for line in text.splitlines()]

    read.slow = slow
    return read


def _exited(pid: int) -> bool:
    """Gone, or a zombie nobody has reaped yet (an orphan's new parent may never)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.parametrize(("cpus", "caller_busy", "worth", "children", "helped"), [
    (2, True, 2, 1, True),    # plan on 2 CPUs: one child now, its helper once the models are in
    (2, False, 2, 2, False),  # validate: every CPU from the start
    (4, True, 2, 2, False),   # a CPU to spare: two children at once
    (4, True, 4, 3, True),    # three children now, the first one's helper later
    (8, True, 4, 4, False),
])
def test_the_cpu_a_busy_caller_kept_is_taken_by_a_helper_of_the_first_child(
        monkeypatch, generated, noted, cpus, caller_busy, worth, children, helped):
    """Below EVERY_CPU_FILES a busy caller (plan, apply) keeps a CPU, yet its own work
    (the state, the token, the list pages) ends long before the load: the first child,
    once it has imported the models, forks a helper that loads the second half of its
    share. The outcome is the same workloads in file order."""
    root, expected = generated
    monkeypatch.setattr(background, "_cpus", lambda: cpus)
    monkeypatch.setattr(background, "FILES_PER_PROCESS", GENERATED // worth)  # processes' worth
    pending = start_loading(root, caller_busy=caller_busy)
    pids = pending.pids
    try:
        assert len(pids) == children
        assert pending.result() == expected
    finally:
        pending.cancel()
    loads = noted()
    assert sorted(n for *_, n in loads) == [GENERATED // worth] * worth  # one share each
    parents = {pid: parent for pid, parent, _ in loads}
    assert {parents[pid] for pid in pids} == {os.getpid()}  # the parent loaded nothing
    helpers = set(parents) - set(pids)
    assert [parents[helper] for helper in helpers] == ([pids[0]] if helped else [])
    assert all(_exited(pid) for pid in parents)


def test_bad_specs_split_between_a_child_and_its_helper_give_the_same_problems(
        monkeypatch, bad_specs, noted):
    monkeypatch.setattr(background, "_cpus", lambda: 2)
    monkeypatch.setattr(background, "MIN_FILES", 2)
    monkeypatch.setattr(background, "FILES_PER_PROCESS", 3)  # 6 files: two processes' worth
    expected = _spec_error(lambda: load_specs(bad_specs))
    pending = start_loading(bad_specs)
    [child] = pending.pids
    got = _spec_error(pending.result)
    assert got.problems == expected.problems
    assert sorted((parent == child, n) for pid, parent, n in noted()
                  if pid != os.getpid()) == [(False, 3), (True, 3)]


def test_a_cancel_while_the_helper_loads_stops_it_too(monkeypatch, generated, noted):
    """The helper is the child's child: a cancel kills the child, and Linux the helper
    with it (it would otherwise load on, an orphan)."""
    monkeypatch.setattr(background, "_cpus", lambda: 2)
    monkeypatch.setattr(background, "FILES_PER_PROCESS", GENERATED // 2)
    noted.slow.append(True)
    before = _open_fds()
    pending = start_loading(generated[0])
    deadline = time.monotonic() + 30
    while len(noted()) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    loads = noted()
    assert len(loads) == 2, "the child and its helper did not both start loading"
    pending.cancel()
    deadline = time.monotonic() + 10
    while not all(_exited(pid) for pid, _, _ in loads) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(_exited(pid) for pid, _, _ in loads)
    assert _open_fds() == before


def test_a_killed_helper_is_one_clear_error(monkeypatch, generated):
    monkeypatch.setattr(background, "_cpus", lambda: 2)
    monkeypatch.setattr(background, "FILES_PER_PROCESS", GENERATED // 2)
    real = loader.load_share
    parent = os.getpid()

    def dying_in_the_helper(share):
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(share)

    monkeypatch.setattr(loader, "load_share", dying_in_the_helper)
    pending = start_loading(generated[0])
    [child] = pending.pids
    with pytest.raises(ReconcileError, match=r"^could not load the specs: the loader process "
                                             r"was killed \(SIGKILL\)$"):
        pending.result()
    assert _exited(child)


def test_no_helper_to_be_had_leaves_the_child_loading_its_whole_share(
        monkeypatch, generated, noted):
    import multiprocessing.process

    root, expected = generated
    monkeypatch.setattr(background, "_cpus", lambda: 2)
    monkeypatch.setattr(background, "FILES_PER_PROCESS", GENERATED // 2)
    parent = os.getpid()
    real_start = multiprocessing.process.BaseProcess.start

    def start(self):
        if os.getpid() != parent:  # in the child: its helper cannot be forked
            raise OSError("fork: resource temporarily unavailable")
        return real_start(self)

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    pending = start_loading(root)
    [child] = pending.pids
    assert pending.result() == expected
    assert noted() == [(child, parent, GENERATED)]


# --- failures, cancel, Ctrl-C ---------------------------------------------------------

@pytest.mark.parametrize("waiting", ["result", "wait"])
def test_a_killed_child_is_a_clear_error_and_the_other_is_stopped(generated, waiting):
    before = _open_fds()
    pending = start_loading(generated[0], processes=2)
    first, second = pending.pids
    os.kill(second, signal.SIGKILL)  # still loading: it was forked a moment ago
    with pytest.raises(ReconcileError, match=r"could not load the specs: the loader process "
                                             r"was killed \(SIGKILL\)") as caught:
        pending.result() if waiting == "result" else asyncio.run(pending.wait())
    assert not isinstance(caught.value, SpecError)
    assert _gone(first) and _gone(second)
    assert _open_fds() == before


def test_an_unexpected_failure_in_a_child_is_one_error(monkeypatch, generated):
    root, _ = generated
    real = loader.load_share
    last = loader.sources.find_files(root)[0][-1]

    def fails_on_the_last_share(share):
        if last in share:
            raise OSError("disk on fire")
        return real(share)

    monkeypatch.setattr(loader, "load_share", fails_on_the_last_share)  # forked with it
    pending = start_loading(root, processes=2)
    pids = pending.pids
    with pytest.raises(ReconcileError, match="^could not load the specs: OSError: disk on fire$"):
        pending.result()
    assert all(_gone(pid) for pid in pids)


@pytest.mark.parametrize("processes", [1, 3])
def test_cancel_stops_the_children_and_leaves_no_process_or_pipe(generated, processes):
    before = _open_fds()
    pending = start_loading(generated[0], processes=processes)
    pids = pending.pids
    assert len(pids) == processes and not any(_gone(pid) for pid in pids)
    pending.cancel()
    pending.cancel()
    assert all(_gone(pid) for pid in pids)
    assert _open_fds() == before
    with pytest.raises(ReconcileError, match="cancelled"):
        pending.result()


def test_cancel_after_the_result_keeps_the_result(generated):
    root, expected = generated
    pending = start_loading(root, processes=2)
    assert pending.result() == expected
    pending.cancel()
    assert pending.result() == expected


def test_the_children_ignore_ctrl_c(capfd, generated):
    root, expected = generated
    pending = start_loading(root, processes=2)
    for pid in pending.pids:
        os.kill(pid, signal.SIGINT)
    assert pending.result() == expected
    assert capfd.readouterr() == ("", "")


def test_a_failed_fork_loads_in_process_and_leaves_no_pipe(monkeypatch, generated):
    import multiprocessing.process

    root, expected = generated
    before = _open_fds()

    def start(self):
        raise OSError("fork: resource temporarily unavailable")

    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", start)
    pending = start_loading(root, processes=3)
    assert not pending.in_background and pending.result() == expected
    assert _open_fds() == before


def _run(script: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, cwd=ROOT, timeout=60)


def test_the_parent_imports_no_models_prints_once_and_leaves_no_orphan(generated):
    """A real CLI-like process: it never imports pydantic, its buffered output is not
    written again by a child, and children still loading when it exits are killed."""
    run = _run(f"""
        import sys
        from reconciler.desired import start_loading
        sys.stdout.write("parent output, once\\n")   # buffered: stdout is a pipe
        pending = start_loading({str(generated[0])!r})
        assert pending.in_background
        assert len(pending.result()) == {GENERATED}
        assert "pydantic" not in sys.modules, "models imported"
        print("children", *start_loading({str(generated[0])!r}, processes=2).pids)
    """)
    assert run.returncode == 0, run.stderr
    assert run.stderr == ""
    assert run.stdout.count("parent output, once") == 1
    pids = [int(p) for p in run.stdout.split("children ")[1].split()]
    assert len(pids) == 2 and all(_gone(pid) for pid in pids)


def _children_of(pid: int) -> list[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            return [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return []


@pytest.mark.parametrize("command", ["validate", "plan"])
def test_ctrl_c_during_loading_leaves_no_process_and_no_traceback(tmp_path, command):
    """Ctrl-C as a terminal sends it, to the whole process group, while the specs of a
    big folder load: the CLI stops, its children are gone, nothing but its message."""
    specs = tmp_path / "specs"
    specgen.write_specs(specs, 400)
    args = [command, str(specs)] if command == "validate" else [
        "--sim", "--state", str(tmp_path / "state.json"), "plan", "--no-refresh", str(specs)]
    # As a terminal's foreground job: Ctrl-C not ignored, even when these tests run in a
    # background job (whose commands start with SIGINT ignored, and so would the CLI).
    proc = subprocess.Popen([sys.executable, "-m", "reconciler.cli", *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 30
    while not _children_of(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert _children_of(proc.pid), "no loader was started"
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode in (1, 130), (out, err)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    # No process of the group is left: the children exit on their own once the CLI has
    # gone (a loaded machine may take a moment to schedule their exit).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    with pytest.raises(ProcessLookupError):
        os.killpg(proc.pid, 0)


def test_loaders_whose_parent_is_killed_exit_and_leave_nothing_behind(tmp_path):
    """kill -9 of the CLI while its children load: each child's reply then meets a pipe
    nobody reads, and the child exits (it keeps no read end of its own pipe) instead of
    blocking for ever."""
    specs = tmp_path / "specs"
    specgen.write_specs(specs, 400)
    proc = subprocess.Popen([sys.executable, "-m", "reconciler.cli", "validate", str(specs)],
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + 30
    while not _children_of(proc.pid) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    children = _children_of(proc.pid)
    assert children, "no loader was started"
    proc.kill()
    proc.wait(timeout=30)
    def exited(pid: int) -> bool:  # gone, or a zombie its new parent has not reaped yet
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except (FileNotFoundError, ProcessLookupError):
            return True

    deadline = time.monotonic() + 30
    while not all(exited(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = [c for c in children if not exited(c)]
    for c in left:
        os.kill(c, signal.SIGKILL)
    assert not left, f"loader processes {left} outlived their parent"
