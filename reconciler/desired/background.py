"""Load the spec files in forked child processes, so the caller can work meanwhile.

    pending = start_loading("specs")       # forks (or loads here when that does not pay)
    ...                                    # e.g. refresh from the state file
    workloads = await pending.wait()       # or pending.result(); SpecError as load_specs
    pending.cancel()                       # kills the children still running (idempotent)

A big folder is split between K children (one per CPU, at most `MAX_PROCESSES`, at least
`FILES_PER_PROCESS` files each), each loading a contiguous share of the files with
`loader.load_share`. The first child, the leader, lists the files (`sources.find_files`,
the one place that decides which files are specs) and sends the listing to the others
through a socket pair each, so that every child loads from the same list; each of the
others sends back the (address, source, line) of its workloads, and the leader runs the
checks across files (`loader.cross_file_problems`) on all of them. The parent joins the
shares in order: the result is exactly `load_specs(directory)`'s, SpecError included.
The parent never imports the pydantic models or yaml.

Each child sends its result through its own pipe as length-prefixed frames: chunks of
workloads (`marshal` of plain dicts, pickle only if a value is not plain data), or its
share's problems as text; the leader then the problems across files; then an end mark.
Or a failure's text. A child that dies before its end mark is an error in the parent,
never a hang, and so is a failure of any one child: the first one settles the outcome and
the other children are killed. A child that lost a peer (the peer died) says so and
leaves the verdict to the peer's own end. The children ignore SIGINT (the parent
decides), write nothing to stdout or stderr, are daemons (multiprocessing ends them at
exit) and are reaped by `cancel()` or once the result is read.

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
import socket
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
# One more child for every this many files. Each child imports the models (~0.45 CPU-s)
# and the parent decodes ~0.06 CPU-s per 1,000 workloads whatever the split. Measured on
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

    __slots__ = ("process", "fd", "buffer", "eof", "workloads", "problems", "checks",
                 "ended", "peer_lost", "error")

    def __init__(self, process: Any, fd: int) -> None:
        self.process: Any = process  # multiprocessing.Process until reaped
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
        if process is not None:
            process.join(timeout=5)
            code = process.exitcode
            if code is not None and code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"signal {-code}"
                return f"the loader process was killed ({name})"
            if code is not None:
                return f"the loader process exited with status {code} before sending the specs"
        return "the loader process stopped before sending the specs"

    def close(self, kill: bool) -> None:
        """Close the pipe and wait for the child, which exits right after its last frame
        (killed first when `kill`)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        process = self.process
        if process is not None:
            if kill and process.exitcode is None:
                process.kill()
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
        pairs = []
        for _ in range(count - 1):
            a, b = socket.socketpair()
            pairs.append((a.detach(), b.detach()))
        # SIGINT stays pending in the parent while the children are forked, so that it
        # never reaches a child before the child ignores it.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for index in range(count):
                peers = [a for a, _ in pairs] if index == 0 else [pairs[index - 1][1]]
                read_fd, write_fd = os.pipe()
                # The fds made here that the child must not keep: the others' pipes
                # and socket ends (a kept end would hide a peer's death from its reader).
                foreign = [c.fd for c in pending._children] + [read_fd] + [
                    fd for pair in pairs for fd in pair if fd not in peers]
                process = context.Process(
                    target=_child,
                    args=(os.fspath(directory), index, count, write_fd, peers, foreign),
                    name=f"runai-reconcile spec loader {index + 1}/{count}", daemon=True)
                try:
                    process.start()
                except BaseException:
                    os.close(read_fd)
                    raise
                finally:
                    os.close(write_fd)
                os.set_blocking(read_fd, False)
                pending._children.append(_Child(process, read_fd))
        except BaseException:
            for child in pending._children:
                child.close(kill=True)
            raise
        finally:
            for a, b in pairs:
                os.close(a)
                os.close(b)
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
        """The process ids of the children not yet reaped."""
        return [c.process.pid for c in self._children if c.process is not None]

    def done(self) -> bool:
        """Whether the outcome is known (result() would not block)."""
        return self._workloads is not None or self._error is not None

    def result(self) -> list[DesiredWorkload]:
        """The workloads, in file order; blocks until the children have sent them.

        Raises SpecError as load_specs would, or ReconcileError when a child failed.
        """
        while not self.done():
            waiting = [c.fd for c in self._children
                       if c.fd is not None and not c.eof and not c.finished()]
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
                child.take(tag, payload)
                if child.error is not None:
                    self._error = child.error
        if not self.done():
            self._settle()
        return more and not self.done()

    def _settle(self) -> None:
        """The outcome, once a child failed or died, or every child has ended."""
        for child in self._children:
            if child.died():
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
        for child in self._children:
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


def _child(directory: str, index: int, count: int, write_fd: int, peers: list[int],
           foreign: list[int]) -> None:
    """Runs in a forked child: load its share, send the frames, return (multiprocessing
    exits). Child 0 (the leader) lists the files for all and checks across files."""
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
    for fd in foreign:
        os.close(fd)
    sockets = [socket.socket(fileno=fd) for fd in peers]
    try:
        out = open(write_fd, "wb")
    except OSError:
        return
    try:
        _silence()
        try:
            signal.set_wakeup_fd(-1)  # the parent's event loop owns its wake-up pipe
        except ValueError:
            pass
        if index == 0:
            _lead(directory, count, sockets, out)
        else:
            _help(index, count, sockets[0], out)
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
        _send(out, [_failure_frame(exc)])
    finally:
        for sock in sockets:
            sock.close()
        try:
            out.close()
        except OSError:
            pass  # the parent has gone or cancelled


def _lead(directory: str, count: int, helpers: list[socket.socket], out) -> None:
    from reconciler.desired import sources

    files, listed_problems = sources.find_files(directory)
    listing = marshal.dumps([(os.fspath(path), display) for path, display in files])
    lost = False
    for sock in helpers:
        try:
            # The helpers read the listing once they have imported the models: let it
            # wait in the socket rather than block the leader (best effort, as the
            # system allows: the default holds ~2,000 files' listing).
            if len(listing) * 2 > sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, len(listing) * 2)
            sock.sendall(listing)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            lost = True
    from reconciler.desired import loader

    workloads, problems = loader.load_share(_share(files, 0, count))
    _send(out, _share_frames(workloads, listed_problems + problems))
    keys = loader.workload_keys(workloads)
    for sock in helpers:
        theirs = _receive(sock)
        if theirs is None:
            lost = True
        else:
            keys += theirs
    if lost:
        _send(out, [_frame(_PEER_LOST, b"")])
        return
    checks = [str(p) for p in loader.cross_file_problems(keys)]
    _send(out, [_frame(_CHECKS, marshal.dumps(checks)), _frame(_END, b"")])


def _help(index: int, count: int, leader: socket.socket, out) -> None:
    from pathlib import Path

    from reconciler.desired import loader  # meanwhile the leader lists the files

    listing = _receive(leader)
    if listing is None:
        _send(out, [_frame(_PEER_LOST, b"")])
        return
    files = [(Path(path), display) for path, display in listing]
    workloads, problems = loader.load_share(_share(files, index, count))
    try:
        leader.sendall(marshal.dumps(loader.workload_keys(workloads)))
        leader.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the leader has gone: the parent hears of it from the leader's pipe
    _send(out, _share_frames(workloads, problems) + [_frame(_END, b"")])


def _share(files: list, index: int, count: int) -> list:
    n = len(files)
    return files[index * n // count:(index + 1) * n // count]


def _receive(sock: socket.socket) -> Any:
    """Everything the peer sends until it shuts its side, unmarshalled; None when the
    peer stopped before sending it all."""
    chunks = []
    try:
        while True:
            data = sock.recv(1 << 20)
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
