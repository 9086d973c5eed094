"""Load the spec files in a forked child process, so the caller can work meanwhile.

    pending = start_loading("specs")       # forks (or loads here when that does not pay)
    ...                                    # e.g. refresh from the state file
    workloads = await pending.wait()       # or pending.result(); SpecError as load_specs
    pending.cancel()                       # kills the child if still running (idempotent)

The child imports the pydantic models and runs `loader.load_specs`; the parent never
imports them. The result comes back through a pipe as length-prefixed frames: chunks of
workloads (`marshal` of plain dicts, pickle only if a value is not plain data), then an
end mark; or the `problems` of a SpecError (the exception itself does not pickle back to
the same problems); or a failure's text. A child that dies before the end mark is an
error in the parent, never a hang. The child ignores SIGINT (the parent decides), writes
nothing to stdout or stderr, is a daemon (multiprocessing ends it at exit) and is reaped
by `cancel()` or once its result is read.

Loading runs in-process (the PendingSpecs is already done) without fork (not Linux),
with one CPU, with other threads running (forking them is unsafe), or for fewer than
`BACKGROUND_MIN_FILES` spec files. Callers: the CLI (`plan`, `apply`, `drift`).
"""

from __future__ import annotations

import asyncio
import marshal
import os
import pickle
import signal
import struct
import sys
import threading
from typing import Any

from reconciler.desired.types import DesiredWorkload, Lifecycle
from reconciler.errors import ReconcileError, SpecError

__all__ = ["BACKGROUND_MIN_FILES", "PendingSpecs", "start_loading"]

# Below this many files the child's work is mostly the model import (~0.4 s) and the
# caller's own work (a refresh of as many GETs) covers little of it: the gain is within
# noise. Measured on 2 cores, medians of 8, load then vs start_loading with the caller
# working 2 ms per spec: waiting on the network 50 files 0.57 -> 0.52 s, 100 files
# 0.71 -> 0.53 s, 200 files 1.00 -> 0.73 s; busy on the CPU with the other core taken,
# 100 files 0.75 -> 0.79 s, 200 files 1.07 -> 1.02 s.
BACKGROUND_MIN_FILES = 100

# sources.SUFFIXES, not imported from there: that would import yaml into the parent.
_SUFFIXES = (".yaml", ".yml", ".json")
_CHUNK = 100  # workloads per frame: the parent decodes one frame per event-loop callback
_HEADER = struct.Struct("!cI")  # tag, payload length
_WORKLOADS, _WORKLOADS_PICKLED, _END, _PROBLEMS, _FAILED = b"W", b"P", b"E", b"S", b"F"


def start_loading(directory: str | os.PathLike, *, background: bool | None = None) -> "PendingSpecs":
    """Start loading the specs under `directory`; the result is `load_specs(directory)`'s.

    `background=None` forks when it pays (see the module docstring); True forks whenever
    fork is available; False loads here, now.
    """
    if background is None:
        background = _background_pays(directory)
    if background and _fork_available():
        return PendingSpecs._forked(directory)
    return PendingSpecs._loaded_here(directory)


class PendingSpecs:
    """The outcome of one `start_loading`: the workloads, or the error to raise."""

    def __init__(self) -> None:
        self._process: Any = None  # multiprocessing.Process while the child is ours
        self._fd: int | None = None  # read end of the pipe
        self._buffer = bytearray()
        self._eof = False
        self._received: list[DesiredWorkload] = []
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
    def _forked(cls, directory: str | os.PathLike) -> "PendingSpecs":
        import multiprocessing

        pending = cls()
        read_fd, write_fd = os.pipe()
        process = multiprocessing.get_context("fork").Process(
            target=_child, args=(os.fspath(directory), read_fd, write_fd),
            name="runai-reconcile spec loader", daemon=True)
        # SIGINT stays pending in the parent while the child is forked, so that it never
        # reaches the child before the child ignores it.
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            process.start()
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        os.set_blocking(read_fd, False)
        pending._process, pending._fd = process, read_fd
        return pending

    @property
    def in_background(self) -> bool:
        """Whether a child process was started for this load."""
        return self._process is not None

    @property
    def pid(self) -> int | None:
        """The child's process id (None when loaded in-process)."""
        return self._process.pid if self._process is not None else None

    def done(self) -> bool:
        """Whether the outcome is known (result() would not block)."""
        return self._workloads is not None or self._error is not None

    def result(self) -> list[DesiredWorkload]:
        """The workloads, in file order; blocks until the child has sent them.

        Raises SpecError as load_specs would, or ReconcileError when the child failed.
        """
        fd = self._fd
        if not self.done() and fd is not None:
            os.set_blocking(fd, True)
            try:
                while not self.done():
                    self._read(fd)
                    self._decode()
            finally:
                if self._fd is not None:
                    os.set_blocking(fd, False)
        self._reap()
        return self._outcome()

    async def wait(self) -> list[DesiredWorkload]:
        """result() without blocking the running event loop: the pipe is read when it is
        readable, and one frame (100 workloads) is decoded per loop callback. Cancelling
        the await leaves the child running (cancel() stops it)."""
        fd = self._fd
        if not self.done() and fd is not None:
            loop = asyncio.get_running_loop()
            finished = loop.create_future()
            scheduled = False

            def settle(exc: BaseException | None) -> None:
                loop.remove_reader(fd)
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

            def readable() -> None:
                try:
                    while self._read(fd):
                        pass
                except BaseException as exc:  # noqa: BLE001 - handed to the awaiting task
                    settle(exc)
                    return
                if self._eof:
                    loop.remove_reader(fd)
                if not scheduled:
                    step()

            loop.add_reader(fd, readable)
            try:
                await finished
            finally:
                if self._fd is not None:
                    loop.remove_reader(fd)
        await self._reaped()
        return self._outcome()

    def cancel(self) -> None:
        """Stop the child if it is still running and release the pipe. Idempotent; a load
        already done keeps its outcome, else result() raises ReconcileError."""
        process = self._process
        if process is not None and process.exitcode is None:
            process.kill()
        self._reap()
        if not self.done():
            self._error = ReconcileError("loading the specs was cancelled")

    # --- reading the pipe ----------------------------------------------------------

    def _read(self, fd: int) -> bool:
        """Append what the pipe holds to the buffer; False when nothing more is there now
        (or ever: `_eof`)."""
        try:
            data = os.read(fd, 1 << 20)
        except BlockingIOError:
            return False
        if not data:
            self._eof = True
            return False
        self._buffer += data
        return True

    def _decode(self, frames: int | None = None) -> bool:
        """Decode the complete frames in the buffer, at most `frames` of them; whether
        more complete frames wait. At the end of the pipe without an outcome, the child
        died: that is the error."""
        buffer = self._buffer
        while not self.done() and len(buffer) >= _HEADER.size:
            tag, size = _HEADER.unpack_from(buffer)
            end = _HEADER.size + size
            if len(buffer) < end:
                break
            if frames is not None:
                if frames == 0:
                    return True
                frames -= 1
            payload = bytes(memoryview(buffer)[_HEADER.size:end])
            del buffer[:end]
            self._take(tag, payload)
        if self._eof and not self.done():
            self._error = ReconcileError(f"could not load the specs: {self._death()}")
        return False

    def _take(self, tag: bytes, payload: bytes) -> None:
        if tag == _WORKLOADS:
            self._received.extend(_decode(marshal.loads(payload)))
        elif tag == _WORKLOADS_PICKLED:
            self._received.extend(_decode(pickle.loads(payload)))
        elif tag == _END:
            self._workloads = self._received
        elif tag == _PROBLEMS:
            self._error = SpecError(marshal.loads(payload))
        elif tag == _FAILED:
            kind, message, trace = marshal.loads(payload)
            error = ReconcileError(f"could not load the specs: {kind}: {message}")
            error.child_traceback = trace  # type: ignore[attr-defined]
            self._error = error
        else:
            self._error = ReconcileError(f"could not load the specs: the loader sent {tag!r}")

    def _death(self) -> str:
        """Why the child stopped before its result, for the error message."""
        process = self._process
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

    def _outcome(self) -> list[DesiredWorkload]:
        if self._error is not None:
            raise self._error
        assert self._workloads is not None
        return self._workloads

    # --- the child's end -----------------------------------------------------------

    def _reap(self) -> None:
        """Close the pipe and wait for the child, which exits right after its last frame."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        process = self._process
        if process is not None:
            process.join(timeout=5)
            if process.exitcode is None:
                process.kill()
                process.join()
            process.close()
            self._process = None

    async def _reaped(self) -> None:
        process = self._process
        if process is not None and process.exitcode is None:
            loop = asyncio.get_running_loop()
            exited = loop.create_future()
            sentinel = process.sentinel
            loop.add_reader(sentinel, lambda: exited.done() or exited.set_result(None))
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


def _background_pays(directory: str | os.PathLike) -> bool:
    if not _fork_available() or threading.active_count() > 1:
        return False
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return cpus > 1 and _holds_spec_files(directory, BACKGROUND_MIN_FILES)


def _holds_spec_files(directory: str | os.PathLike, at_least: int) -> bool:
    """Whether `directory` holds at least `at_least` spec files, counted as
    `sources.find_files` finds them (hidden files and folders skipped); stops early."""
    if not os.path.isdir(directory):
        return False
    count = 0
    for _, dirnames, filenames in os.walk(directory):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        count += sum(1 for name in filenames
                     if not name.startswith(".") and name.lower().endswith(_SUFFIXES))
        if count >= at_least:
            return True
    return False


# --- the child -----------------------------------------------------------------------

_kept_streams: list[Any] = []


def _child(directory: str, read_fd: int, write_fd: int) -> None:
    """Runs in the forked child: load, send the frames, return (multiprocessing exits)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    os.close(read_fd)
    try:
        _silence()
        try:
            signal.set_wakeup_fd(-1)  # the parent's event loop owns its wake-up pipe
        except ValueError:
            pass
        from reconciler.desired.loader import load_specs

        frames = _workload_frames(load_specs(directory))
    except SpecError as exc:
        frames = [_frame(_PROBLEMS, marshal.dumps([str(p) for p in exc.problems]))]
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
        frames = [_failure_frame(exc)]
    try:
        with open(write_fd, "wb") as out:
            for frame in frames:
                out.write(frame)
    except OSError:
        pass  # the parent has gone or cancelled


def _silence() -> None:
    """Point fds 1 and 2 and sys.stdout/stderr at /dev/null. The parent's stream objects
    are kept alive, never flushed: their buffers hold the parent's unwritten output."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    os.close(devnull)
    _kept_streams.extend((sys.stdout, sys.stderr))
    sys.stdout = sys.stderr = open(os.devnull, "w")


def _workload_frames(workloads: list[DesiredWorkload]) -> list[bytes]:
    frames = []
    for start in range(0, len(workloads), _CHUNK):
        items = _encode(workloads[start:start + _CHUNK])
        try:
            frames.append(_frame(_WORKLOADS, marshal.dumps(items)))
        except ValueError:  # a value marshal cannot carry
            frames.append(_frame(_WORKLOADS_PICKLED, pickle.dumps(items, protocol=5)))
    frames.append(_frame(_END, b""))
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
