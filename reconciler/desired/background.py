"""Load the spec files in forked child processes, so the caller can work meanwhile.

    pending = start_loading("specs")       # forks (or loads here when that does not pay)
    ...                                    # e.g. refresh from the state file
    workloads = await pending.wait()       # or pending.result(); SpecError as load_specs
    pending.cancel()                       # kills the children still running (idempotent)

A big folder is split between K children (one per CPU, at most `MAX_PROCESSES`, at least
`FILES_PER_PROCESS` files each), each loading a contiguous share of the files with
`loader.load_share`. The parent forks one child, the leader; the leader lists the files
(`sources.find_files`, the one place that decides which files are specs), imports the
models, and only then forks the K - 1 helpers (a zygote): they inherit the listing and
the built models and go straight to loading their share. Each helper sends the (address,
source, line) of its workloads to the leader through a pipe, and the leader runs the
checks across files (`loader.cross_file_problems`) on all of them. The parent joins the
shares in order: the result is exactly `load_specs(directory)`'s, SpecError included.
The parent never imports the pydantic models or yaml.

Every child writes to the parent through its own pipe, made by the parent before the
leader is forked (the leader hands each helper its write end), as length-prefixed
frames: chunks of workloads (`marshal` of plain dicts, pickle only if a value is not
plain data), or its share's problems as text; the leader first the helpers' pids, then
the problems across files; then an end mark. Or a failure's text. A child that dies
before its end mark is an error in the parent, never a hang, and so is a failure of any
one child: the first one settles the outcome and the loaders are stopped. The leader
reaps its helpers and reports on its pipe how each one that died ended; when a helper
dies, the leader kills the others, reaps them and ends (its pipe's end is when the
parent knows why). The parent stops the loaders by SIGTERM to the leader, which kills
and reaps its helpers; a leader killed outright takes its helpers with it
(PR_SET_PDEATHSIG). The children ignore SIGINT (the parent decides), write nothing to
stdout or stderr, the leader is a daemon (multiprocessing ends it at exit) and is reaped
by `cancel()` or once the result is read.

Loading runs in-process (the PendingSpecs is already done) without fork (not Linux),
with one CPU, with other threads running (forking them is unsafe), or for fewer than
`BACKGROUND_MIN_FILES` spec files. Callers: the CLI (`plan`, `apply`, `drift`).
"""

from __future__ import annotations

import asyncio
import marshal
import os
import pickle
import select
import signal
import struct
import sys
import threading
from typing import Any

from reconciler.desired.types import DesiredWorkload, Lifecycle
from reconciler.errors import ReconcileError, SpecError

__all__ = ["BACKGROUND_MIN_FILES", "FILES_PER_PROCESS", "MAX_PROCESSES", "PendingSpecs",
           "start_loading"]

# Below this many files the child's work is mostly the model import (~0.4 s) and the
# caller's own work (a refresh of as many GETs) covers little of it: the gain is within
# noise. Measured on 2 cores, medians of 8, load then vs start_loading with the caller
# working 2 ms per spec: waiting on the network 50 files 0.57 -> 0.52 s, 100 files
# 0.71 -> 0.53 s, 200 files 1.00 -> 0.73 s; busy on the CPU with the other core taken,
# 100 files 0.75 -> 0.79 s, 200 files 1.07 -> 1.02 s.
BACKGROUND_MIN_FILES = 100
CHILD_NICENESS = 10  # added to the children's nice value (lower priority than the CLI)
# One more child for every this many files. Measured when each child imported the models
# (~0.45 CPU-s; the helpers now inherit them from the leader) and the parent decodes ~0.06 CPU-s per 1,000 workloads whatever the split. Measured on
# 2 cores shared with other work (load 1.2-1.6), start_loading().result(), medians of 9,
# 1 child -> 2 children: 100 files 0.60 -> 0.57 s, 200 files 0.76 -> 0.65 s, 400 files
# 1.10 -> 0.80 s, 1,000 files 2.00 -> 1.43 s (medians of 7). With the parent itself
# busy on the CPU meanwhile (1.2 s for 1,000 files, 0.5 s for 400) both took the same
# time: a second child pays only when the caller waits.
FILES_PER_PROCESS = 200
MAX_PROCESSES = 4  # the listing, the checks and the parent's decoding do not split

# sources.SUFFIXES, not imported from there: that would import yaml into the parent.
_SUFFIXES = (".yaml", ".yml", ".json")
_CHUNK = 100  # workloads per frame: the parent decodes one frame per event-loop callback
_HEADER = struct.Struct("!cI")  # tag, payload length
_WORKLOADS, _WORKLOADS_PICKLED, _PROBLEMS = b"W", b"P", b"S"
_CHECKS, _END, _PEER_LOST, _FAILED = b"D", b"E", b"L", b"F"
_PIDS, _HELPER_ENDED = b"I", b"H"  # from the leader: its helpers' pids; how one ended


def start_loading(directory: str | os.PathLike, *, background: bool | None = None,
                  processes: int | None = None) -> "PendingSpecs":
    """Start loading the specs under `directory`; the result is `load_specs(directory)`'s.

    `background=None` forks when it pays (see the module docstring); True forks whenever
    fork is available; False loads here, now. `processes` is how many children share the
    files (default: as many as pay, see `FILES_PER_PROCESS`).
    """
    if background is None:
        background = _background_pays(directory)
    if background and _fork_available():
        if processes is None:
            processes = _processes_for(directory)
        return PendingSpecs._forked(directory, max(1, processes))
    return PendingSpecs._loaded_here(directory)


class _Child:
    """One child process, its pipe, and what it has sent so far."""

    __slots__ = ("process", "pid", "status", "fd", "buffer", "eof", "workloads", "problems",
                 "checks", "ended", "peer_lost", "error")

    def __init__(self, process: Any, fd: int) -> None:
        self.process: Any = process  # the leader's multiprocessing.Process until reaped
        self.pid: int | None = process.pid if process is not None else None  # a helper's: from the leader
        self.status: int | None = None  # a helper's wait status, from the leader, if it died
        self.fd: int | None = fd  # read end of its pipe until closed
        self.buffer = bytearray()
        self.eof = False
        self.workloads: list[DesiredWorkload] = []
        self.problems: list[str] = []
        self.checks: list[str] = []
        self.ended = False  # its end mark (or its peer-lost mark) arrived
        self.peer_lost = False
        self.error: ReconcileError | None = None

    def read(self) -> bool:
        """Append what the pipe holds to the buffer; False when nothing more is there now
        (or ever: `eof`)."""
        if self.fd is None or self.eof:
            return False
        try:
            data = os.read(self.fd, 1 << 20)
        except BlockingIOError:
            return False
        if not data:
            self.eof = True
            return False
        self.buffer += data
        return True

    def next_frame(self) -> tuple[bytes, bytes] | None:
        buffer = self.buffer
        if len(buffer) < _HEADER.size:
            return None
        tag, size = _HEADER.unpack_from(buffer)
        end = _HEADER.size + size
        if len(buffer) < end:
            return None
        payload = bytes(memoryview(buffer)[_HEADER.size:end])
        del buffer[:end]
        return tag, payload

    def take(self, tag: bytes, payload: bytes) -> None:
        if tag == _WORKLOADS:
            self.workloads.extend(_decode(marshal.loads(payload)))
        elif tag == _WORKLOADS_PICKLED:
            self.workloads.extend(_decode(pickle.loads(payload)))
        elif tag == _PROBLEMS:
            self.problems = marshal.loads(payload)
        elif tag == _CHECKS:
            self.checks = marshal.loads(payload)
        elif tag == _END:
            self.ended = True
        elif tag == _PEER_LOST:
            self.ended = self.peer_lost = True
        elif tag == _FAILED:
            kind, message, trace = marshal.loads(payload)
            error = ReconcileError(f"could not load the specs: {kind}: {message}")
            error.child_traceback = trace  # type: ignore[attr-defined]
            self.error = error
        else:
            self.error = ReconcileError(f"could not load the specs: the loader sent {tag!r}")

    def finished(self) -> bool:
        return self.ended or self.error is not None or (self.eof and len(self.buffer) < _HEADER.size)

    def died(self) -> bool:
        """At the end of its pipe without an end mark, with no whole frame left."""
        return (self.eof and not self.ended and self.error is None
                and self.next_frame_size() is None)

    def next_frame_size(self) -> int | None:
        if len(self.buffer) < _HEADER.size:
            return None
        _, size = _HEADER.unpack_from(self.buffer)
        return size if len(self.buffer) >= _HEADER.size + size else None

    def death(self) -> str:
        """Why the child stopped before its result, for the error message."""
        process = self.process
        code = None
        if process is not None:
            process.join(timeout=5)
            code = process.exitcode
        elif self.status is not None:
            code = os.waitstatus_to_exitcode(self.status)
        if code is not None:
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"signal {-code}"
                return f"the loader process was killed ({name})"
            return f"the loader process exited with status {code} before sending the specs"
        return "the loader process stopped before sending the specs"

    def close(self, kill: bool) -> None:
        """Close the pipe and, for the leader, wait for it: it exits once its last frame
        is sent and its helpers are reaped (when `kill`, SIGTERM first: it kills and reaps
        its helpers and dies)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        process = self.process
        if process is not None:
            if kill and process.exitcode is None:
                process.terminate()
            process.join(timeout=5)
            if process.exitcode is None:
                process.kill()
                process.join()
            process.close()
            self.process = None


class PendingSpecs:
    """The outcome of one `start_loading`: the workloads, or the error to raise."""

    def __init__(self) -> None:
        self._children: list[_Child] = []
        self._workloads: list[DesiredWorkload] | None = None
        self._error: BaseException | None = None

    @classmethod
    def _loaded_here(cls, directory: str | os.PathLike) -> "PendingSpecs":
        from reconciler.desired.loader import load_specs

        pending = cls()
        try:
            pending._workloads = load_specs(directory)
        except Exception as exc:  # noqa: BLE001 - raised by result(), as from the child
            pending._error = exc
        return pending

    @classmethod
    def _forked(cls, directory: str | os.PathLike, count: int) -> "PendingSpecs":
        import multiprocessing

        context = multiprocessing.get_context("fork")
        pending = cls()
        pipes: list[tuple[int, int]] = []
        # SIGINT stays pending in the parent while the leader is forked, so that it never
        # reaches a loader before the loader ignores it.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for _ in range(count):
                pipes.append(os.pipe())
            read_fds = [r for r, _ in pipes]
            process = context.Process(
                target=_leader, args=(os.fspath(directory), count, [w for _, w in pipes], read_fds),
                name=f"runai-reconcile spec loader 1/{count}", daemon=True)
            process.start()
            for fd in read_fds:
                os.set_blocking(fd, False)
            pending._children = [_Child(process if i == 0 else None, fd)
                                 for i, fd in enumerate(read_fds)]
        except BaseException:
            for r, _ in pipes:
                os.close(r)
            raise
        finally:
            for _, w in pipes:
                os.close(w)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        return pending

    @property
    def in_background(self) -> bool:
        """Whether child processes were started for this load."""
        return bool(self._children)

    @property
    def pid(self) -> int | None:
        """The (first) child's process id (None when loaded in-process)."""
        pids = self.pids
        return pids[0] if pids else None

    @property
    def pids(self) -> list[int]:
        """The process ids of the loaders not yet reaped, the leader's first. Blocks until
        the leader has forked its helpers (after its import of the models) or stopped."""
        children = self._children
        if not children or children[0].process is None:
            return []
        leader = children[0]
        while (len(children) > 1 and children[1].pid is None and not self.done()
               and leader.fd is not None and not leader.eof):
            poll = select.poll()
            poll.register(leader.fd, select.POLLIN)
            poll.poll()
            while leader.read():
                pass
            self._decode()
        return [c.pid for c in children if c.pid is not None]

    def done(self) -> bool:
        """Whether the outcome is known (result() would not block)."""
        return self._workloads is not None or self._error is not None

    def result(self) -> list[DesiredWorkload]:
        """The workloads, in file order; blocks until the children have sent them.

        Raises SpecError as load_specs would, or ReconcileError when a child failed.
        """
        while not self.done():
            # Not only the unfinished: a helper's death is told at the leader's end.
            waiting = [c.fd for c in self._children if c.fd is not None and not c.eof]
            if waiting:
                poll = select.poll()  # not select.select: a busy caller's fds pass 1024
                for fd in waiting:
                    poll.register(fd, select.POLLIN)
                poll.poll()
            for child in self._children:
                while child.read():
                    pass
            self._decode()
        self._reap()
        return self._outcome()

    async def wait(self) -> list[DesiredWorkload]:
        """result() without blocking the running event loop: the pipes are read when
        readable, and one frame (100 workloads) is decoded per loop callback. Cancelling
        the await leaves the children running (cancel() stops them)."""
        if not self.done() and self._children:
            loop = asyncio.get_running_loop()
            finished = loop.create_future()
            watched: set[int] = set()
            scheduled = False

            def unwatch(fd: int) -> None:
                if fd in watched:
                    watched.discard(fd)
                    loop.remove_reader(fd)

            def settle(exc: BaseException | None) -> None:
                for fd in list(watched):
                    unwatch(fd)
                if not finished.done():
                    if exc is None:
                        finished.set_result(None)
                    else:
                        finished.set_exception(exc)

            def step() -> None:
                nonlocal scheduled
                scheduled = False
                if finished.done():
                    return
                try:
                    more = self._decode(frames=1)
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                    settle(exc)
                    return
                if self.done():
                    settle(None)
                elif more:
                    scheduled = True
                    loop.call_soon(step)

            def readable(child: _Child) -> None:
                try:
                    while child.read():
                        pass
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                    settle(exc)
                    return
                if child.eof and child.fd is not None:
                    unwatch(child.fd)
                if not scheduled:
                    step()

            for child in self._children:
                if child.fd is not None and not child.eof:
                    watched.add(child.fd)
                    loop.add_reader(child.fd, readable, child)
            try:
                step()  # what an earlier, cancelled wait() read and left undecoded
                await finished
            finally:
                for fd in list(watched):
                    unwatch(fd)
        await self._reaped()
        return self._outcome()

    def cancel(self) -> None:
        """Stop the children still running and release the pipes. Idempotent; a load
        already done keeps its outcome, else result() raises ReconcileError."""
        if not self.done():
            self._error = ReconcileError("loading the specs was cancelled")
        self._reap()

    # --- reading the pipes -----------------------------------------------------------

    def _decode(self, frames: int | None = None) -> bool:
        """Decode the complete frames in the buffers, at most `frames` of them; whether
        more complete frames wait. Then settle the outcome if it is known."""
        more = False
        for child in self._children:
            while not self.done():
                if child.next_frame_size() is None:
                    break
                if frames is not None:
                    if frames == 0:
                        more = True
                        break
                    frames -= 1
                tag, payload = child.next_frame()  # type: ignore[misc]
                if tag == _PIDS:
                    for helper, pid in zip(self._children[1:], marshal.loads(payload)):
                        helper.pid = pid
                elif tag == _HELPER_ENDED:
                    index, status = marshal.loads(payload)
                    self._children[index].status = status
                else:
                    child.take(tag, payload)
                if child.error is not None:
                    self._error = child.error
        if not self.done():
            self._settle()
        return more and not self.done()

    def _settle(self) -> None:
        """The outcome, once a child failed or died, or every child has ended."""
        leader = self._children[0]
        dead = [child for child in self._children if child.died()]
        if dead:
            if leader not in dead and not (leader.eof and leader.next_frame_size() is None):
                return  # the leader tells how its helpers ended, then ends
            # The leader kills the other helpers once one died: name the one that died.
            told = [child for child in dead if child is leader or child.status is not None]
            child = (told or dead)[0]
            self._error = ReconcileError(f"could not load the specs: {child.death()}")
            return
        if not all(child.ended for child in self._children):
            return
        if any(child.peer_lost for child in self._children):
            self._error = ReconcileError("could not load the specs: a loader process "
                                         "stopped before sending its share")
            return
        problems = [p for child in self._children for p in child.problems]
        problems += self._children[0].checks
        if problems:
            self._error = SpecError(problems)
        else:
            self._workloads = [w for child in self._children for w in child.workloads]

    def _outcome(self) -> list[DesiredWorkload]:
        if self._error is not None:
            raise self._error
        assert self._workloads is not None
        return self._workloads

    # --- the children's end ----------------------------------------------------------

    def _reap(self) -> None:
        """Close the pipes and wait for the children: those still running when the
        outcome is a failure (or a cancel) are killed."""
        failed = self._workloads is None
        for child in reversed(self._children):  # the helpers' pipes closed, then the leader
            child.close(kill=failed)

    async def _reaped(self) -> None:
        if self._workloads is None:
            self._reap()  # a failure: the others are killed, nothing to wait for
            return
        loop = asyncio.get_running_loop()
        for child in self._children:
            process = child.process
            if process is not None and process.exitcode is None:
                exited = loop.create_future()
                sentinel = process.sentinel
                loop.add_reader(sentinel, lambda f=exited: f.done() or f.set_result(None))
                try:
                    await exited
                finally:
                    loop.remove_reader(sentinel)
        self._reap()


def _decode(items: list[dict[str, Any]]) -> list[DesiredWorkload]:
    return [DesiredWorkload(**{**item, "lifecycle": Lifecycle(**item["lifecycle"])})
            for item in items]


def _encode(workloads: list[DesiredWorkload]) -> list[dict[str, Any]]:
    items = []
    for w in workloads:
        item = dict(vars(w))
        item["lifecycle"] = dict(vars(w.lifecycle))
        items.append(item)
    return items


# --- deciding ------------------------------------------------------------------------

def _fork_available() -> bool:
    # fork without exec is only safe and supported on Linux (macOS' system libraries
    # are not fork-safe; Windows has no fork).
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _background_pays(directory: str | os.PathLike) -> bool:
    if not _fork_available() or threading.active_count() > 1:
        return False
    return _cpus() > 1 and _holds_spec_files(directory, BACKGROUND_MIN_FILES)


def _processes_for(directory: str | os.PathLike) -> int:
    """How many children pay: one per CPU, at most MAX_PROCESSES, FILES_PER_PROCESS
    files or more each; at least one."""
    most = min(_cpus(), MAX_PROCESSES)
    if most < 2:
        return 1
    return max(1, min(most, _count_spec_files(directory, most * FILES_PER_PROCESS)
                      // FILES_PER_PROCESS))


def _holds_spec_files(directory: str | os.PathLike, at_least: int) -> bool:
    """Whether `directory` holds at least `at_least` spec files, counted as
    `sources.find_files` finds them (hidden files and folders skipped); stops early."""
    return _count_spec_files(directory, at_least) >= at_least


def _count_spec_files(directory: str | os.PathLike, at_most: int) -> int:
    """How many spec files `directory` holds, counted as `sources.find_files` finds
    them; stops counting at `at_most`."""
    if not os.path.isdir(directory):
        return 0
    count = 0
    for _, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        count += sum(1 for name in filenames
                     if not name.startswith(".") and name.lower().endswith(_SUFFIXES))
        if count >= at_most:
            return at_most
    return count


# --- the children --------------------------------------------------------------------

_kept_streams: list[Any] = []


class _HelperLost(BaseException):
    """In the leader: a helper died, or closed its pipe to the leader without its keys."""


def _leader(directory: str, count: int, write_fds: list[int], read_fds: list[int]) -> None:
    """Runs in the forked leader: list, import, fork the helpers, load its share, check
    across files, reap the helpers; return (multiprocessing exits)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    try:
        # The parent meanwhile reads live workloads, which wait on the network and its
        # CPU: it goes first when the cores are short (plan of 1,000 at 32 in flight,
        # median of 4: 3.3 -> 3.05 s), and the loading has the cores when it is not.
        os.nice(CHILD_NICENESS)
    except OSError:
        pass
    for fd in read_fds:
        os.close(fd)
    try:
        out = open(write_fds[0], "wb")
    except OSError:
        return
    try:
        _silence()
        try:
            signal.set_wakeup_fd(-1)  # the parent's event loop owns its wake-up pipe
        except ValueError:
            pass
        _lead(directory, count, write_fds[1:], out)
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
        _send(out, [_failure_frame(exc)])
    finally:
        try:
            out.close()
        except OSError:
            pass  # the parent has gone or cancelled


def _lead(directory: str, count: int, helper_fds: list[int], out) -> None:
    from reconciler.desired import loader, sources

    files, listed_problems = sources.find_files(directory)
    prctl = _prctl()
    pids: list[int] = []  # the helpers', in order
    helpers: dict[int, int] = {}  # pid -> index, until reaped
    statuses: dict[int, int] = {}  # index -> wait status, once reaped
    killed: set[int] = set()  # indexes the leader killed
    key_fds: list[int] = []  # read ends of the helpers' pipes to the leader
    armed = True  # whether a helper's death interrupts the leader's work
    masked = {signal.SIGCHLD, signal.SIGTERM}

    def reap(block: bool) -> None:
        for pid, index in list(helpers.items()):
            try:
                got, status = os.waitpid(pid, 0 if block else os.WNOHANG)
            except ChildProcessError:
                got, status = pid, 0
            if got:
                del helpers[pid]
                statuses[index] = status

    def on_child(signum, frame) -> None:
        nonlocal armed
        reap(block=False)
        if armed and any(status != 0 for status in statuses.values()):
            armed = False
            raise _HelperLost

    def on_term(signum, frame) -> None:
        for pid in list(helpers):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in list(helpers):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)

    def send(frames: list[bytes]) -> None:
        # A helper's death must not cut a frame in two (SIGTERM may: the parent has
        # given up on the frames).
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        try:
            _send(out, frames)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGCHLD, on_child)
    lost = stop = False
    try:
        leader = os.getpid()
        for index, write_fd in enumerate(helper_fds, 1):
            old = signal.pthread_sigmask(signal.SIG_BLOCK, masked)
            try:
                key_read, key_write = os.pipe()
                pid = os.fork()
                if pid == 0:
                    _helper(leader, prctl, files, index, count, write_fd, key_write,
                            [out.fileno(), key_read, *key_fds, *helper_fds[index:]])
                pids.append(pid)
                helpers[pid] = index
                key_fds.append(key_read)
                os.close(key_write)
                os.close(write_fd)
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
        send([_frame(_PIDS, marshal.dumps(pids))])
        workloads, problems = loader.load_share(_share(files, 0, count))
        send(_share_frames(workloads, listed_problems + problems))
        keys = loader.workload_keys(workloads)
        for fd in key_fds:
            theirs = _receive(fd)
            if theirs is None:
                raise _HelperLost
            keys += theirs
        checks = [str(p) for p in loader.cross_file_problems(keys)]
        armed = False
        send([_frame(_CHECKS, marshal.dumps(checks)), _frame(_END, b"")])
    except _HelperLost:
        armed = False
        lost = stop = True
    except BaseException:
        armed = False
        stop = True
        raise
    finally:
        armed = False
        # SIGTERM stays deliverable: the parent may give up while the helpers still
        # send their frames (on_term kills and reaps them).
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
        if stop:
            for pid, index in helpers.items():
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.add(index)
                except OSError:
                    pass
        reap(block=True)
        for fd in key_fds:
            os.close(fd)
        for fd in helper_fds[len(key_fds):]:
            os.close(fd)  # the pipes of helpers never forked
        told = [_frame(_HELPER_ENDED, marshal.dumps((index, status)))
                for index, status in sorted(statuses.items())
                if status != 0 and index not in killed]
        _send(out, told + ([_frame(_PEER_LOST, b"")] if lost else []))


def _helper(leader: int, prctl: Any, files: list, index: int, count: int, write_fd: int,
            key_fd: int, foreign: list[int]) -> None:
    """Runs in a helper forked from the leader (the models already built): load its
    share, send its keys to the leader and its frames to the parent, exit."""
    try:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        if prctl is not None:
            prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the leader
        if os.getppid() != leader:
            os._exit(1)  # the leader died before the line above
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGCHLD, signal.SIGTERM})
        for fd in foreign:
            os.close(fd)
        out = open(write_fd, "wb")
        try:
            from reconciler.desired import loader

            workloads, problems = loader.load_share(_share(files, index, count))
            keys = marshal.dumps(loader.workload_keys(workloads))
            with open(key_fd, "wb") as to_leader:
                to_leader.write(keys)
            _send(out, _share_frames(workloads, problems) + [_frame(_END, b"")])
        except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
            _send(out, [_failure_frame(exc)])
    finally:
        os._exit(0)


def _prctl() -> Any:
    """libc's prctl, or None where it cannot be had."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None


def _share(files: list, index: int, count: int) -> list:
    n = len(files)
    return files[index * n // count:(index + 1) * n // count]


def _receive(fd: int) -> Any:
    """Everything the helper writes to its pipe until it closes it, unmarshalled; None
    when it stopped before writing it all."""
    chunks = []
    try:
        while True:
            data = os.read(fd, 1 << 20)
            if not data:
                break
            chunks.append(data)
        return marshal.loads(b"".join(chunks))
    except (OSError, EOFError, ValueError, TypeError):
        return None


def _send(out, frames: list[bytes]) -> None:
    for frame in frames:
        out.write(frame)
    out.flush()


def _silence() -> None:
    """Point fds 1 and 2 and sys.stdout/stderr at /dev/null. The parent's stream objects
    are kept alive, never flushed: their buffers hold the parent's unwritten output."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    _kept_streams.extend((sys.stdout, sys.stderr))
    sys.stdout = sys.stderr = open(os.devnull, "w")


def _share_frames(workloads: list[DesiredWorkload], problems: list) -> list[bytes]:
    """A share's workloads, or its problems as text when it has any."""
    if problems:
        return [_frame(_PROBLEMS, marshal.dumps([str(p) for p in problems]))]
    frames = []
    for start in range(0, len(workloads), _CHUNK):
        items = _encode(workloads[start:start + _CHUNK])
        try:
            frames.append(_frame(_WORKLOADS, marshal.dumps(items)))
        except ValueError:  # a value marshal cannot carry
            frames.append(_frame(_WORKLOADS_PICKLED, pickle.dumps(items, protocol=5)))
    return frames


def _failure_frame(exc: BaseException) -> bytes:
    import traceback

    try:
        message = str(exc)
    except Exception:  # noqa: BLE001
        message = repr(type(exc))
    trace = "".join(traceback.format_exception(exc))
    return _frame(_FAILED, marshal.dumps((type(exc).__name__, message, trace)))


def _frame(tag: bytes, payload: bytes) -> bytes:
    return _HEADER.pack(tag, len(payload)) + payload
