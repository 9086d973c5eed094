"""Load a big folder of specs in child processes while the caller works.

    pending = start_loading("specs")   # forks when it pays, else loads here, now
    ...                                # e.g. read the state and the live workloads
    workloads = await pending.wait()   # or pending.result(): SpecError as load_specs
    pending.cancel()                   # kills the children still running (idempotent)

The parent lists the files (`sources.find_files`) and starts one forked
`multiprocessing.Process` per share of them (`FILES_PER_PROCESS` files or more each, one
per CPU); each runs `loader.load_share` on its share and sends back its workloads, its
problems and its workloads' keys through a pipe. The parent joins the shares in file
order and runs the checks across files on the keys, so the outcome is exactly
`load_specs(directory)`'s. A child that fails or dies is one ReconcileError, and the
others are killed. The parent imports no pydantic model unless two workloads share an
address (the check across files then names both places).

Below `MIN_FILES` files, without fork (not Linux), with one CPU or with other threads
running, the specs load here at once (the PendingSpecs is already done).
Callers: the CLI (`validate`, `plan`, `apply`, `drift`).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
from typing import Any

from reconciler.desired import sources
from reconciler.desired.types import DesiredWorkload
from reconciler.errors import ReconcileError, SpecError

__all__ = ["FILES_PER_PROCESS", "MAX_PROCESSES", "MIN_FILES", "PendingSpecs", "start_loading"]

MIN_FILES = 100  # fewer spec files load here: a child would not pay for its start
FILES_PER_PROCESS = 200  # one more child for every this many files, one CPU left to the caller
MAX_PROCESSES = 4
CHILD_NICENESS = 10  # the parent's own reads go first when the cores are short


def start_loading(directory: str | os.PathLike, *, processes: int | None = None) -> PendingSpecs:
    """Start loading the specs under `directory`; the outcome is `load_specs(directory)`'s.

    `processes` is how many children share the files: None for as many as pay (none for
    a small folder), 0 to load here and now."""
    files, listed = sources.find_files(directory)
    if processes is None:
        processes = _processes_for(len(files))
    processes = min(processes, len(files))
    if processes > 0 and _fork_available():
        try:
            return PendingSpecs(_start(files, processes), [str(p) for p in listed])
        except OSError:  # no fork to be had (resources): load here instead
            pass
    return PendingSpecs.loaded_here(directory)


class PendingSpecs:
    """The outcome of one `start_loading`: the workloads, or the error to raise."""

    def __init__(self, children: list[tuple[Any, Any]], listed: list[str]) -> None:
        self._children = children  # (process, read end of its pipe), in share order
        self._replies: list[tuple | None] = [None] * len(children)
        self._listed = listed  # the listing's problems, as text
        self._workloads: list[DesiredWorkload] | None = None
        self._error: BaseException | None = None

    @classmethod
    def loaded_here(cls, directory: str | os.PathLike) -> PendingSpecs:
        from reconciler.desired.loader import load_specs

        pending = cls([], [])
        try:
            pending._workloads = load_specs(directory)
        except Exception as exc:  # noqa: BLE001 - raised by result(), as from a child
            pending._error = exc
        return pending

    @property
    def in_background(self) -> bool:
        """Whether child processes were started for this load."""
        return bool(self._children)

    @property
    def pids(self) -> list[int]:
        """The process ids of the children not yet reaped, in share order."""
        return [process.pid for process, _ in self._children if process.exitcode is None]

    def done(self) -> bool:
        """Whether the outcome is known (result() would not block)."""
        return self._workloads is not None or self._error is not None

    def result(self) -> list[DesiredWorkload]:
        """The workloads, in file order; blocks until the children have sent them.
        Raises SpecError as load_specs would, or ReconcileError when a child failed."""
        while not self.done():
            self._receive(multiprocessing.connection.wait(self._waiting()))
        return self._outcome()

    async def wait(self) -> list[DesiredWorkload]:
        """result() without blocking the running event loop. Cancelling the await
        leaves the children running (cancel() stops them)."""
        loop = asyncio.get_running_loop()
        while not self.done():
            readable = loop.create_future()
            fds = [conn.fileno() for conn in self._waiting()]
            for fd in fds:
                loop.add_reader(fd, lambda: readable.done() or readable.set_result(None))
            try:
                await readable
            finally:
                for fd in fds:
                    loop.remove_reader(fd)
            self._receive(multiprocessing.connection.wait(self._waiting(), 0))
        return self._outcome()

    def cancel(self) -> None:
        """Kill the children still running and close the pipes. Idempotent; a load
        already done keeps its outcome, else result() raises ReconcileError."""
        if not self.done():
            self._error = ReconcileError("loading the specs was cancelled")
        self._reap()

    def _waiting(self) -> list[Any]:
        return [conn for (_, conn), reply in zip(self._children, self._replies) if reply is None]

    def _receive(self, ready: list[Any]) -> None:
        for index, (process, conn) in enumerate(self._children):
            if conn not in ready:
                continue
            try:
                reply = conn.recv()
            except (EOFError, OSError):
                reply = (None, None, None, _death(process))
            self._replies[index] = reply
            if reply[3] is not None:
                self._error = ReconcileError(f"could not load the specs: {reply[3]}")
                self._reap()
                return
        if all(reply is not None for reply in self._replies):
            self._settle()

    def _settle(self) -> None:
        problems = self._listed + [p for _, share, _, _ in self._replies for p in share]
        keys = [key for _, _, share, _ in self._replies for key in share]
        if len({address for address, _, _ in keys}) < len(keys):  # an address twice
            from reconciler.desired import loader

            problems += [str(p) for p in loader.cross_file_problems(keys)]
        if problems:
            self._error = SpecError(problems)
        else:
            self._workloads = [w for share, _, _, _ in self._replies for w in share]
        self._reap()

    def _outcome(self) -> list[DesiredWorkload]:
        if self._error is not None:
            raise self._error
        assert self._workloads is not None
        return self._workloads

    def _reap(self) -> None:
        """Close the pipes and wait for the children; kill those still running unless
        the load succeeded (they exit once their reply is sent)."""
        for process, conn in self._children:
            conn.close()
            if self._workloads is None and process.exitcode is None:
                process.kill()
            process.join()
            process.close()
        self._children = []


def _start(files: list, count: int) -> list[tuple[Any, Any]]:
    """Fork `count` children, each loading its share of `files`; their (process, pipe)."""
    children: list[tuple[Any, Any]] = []
    # Ctrl-C stays pending while forking, so that it never reaches a child before the
    # child ignores it (the parent decides what it means).
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        try:
            for index in range(count):
                share = files[index * len(files) // count:(index + 1) * len(files) // count]
                children.append(_fork(share, f"{index + 1}/{count}", [c for _, c in children]))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a pending Ctrl-C is raised here
    except BaseException:
        PendingSpecs(children, [])._reap()
        raise
    return children


def _fork(share: list, which: str, others: list[Any]) -> tuple[Any, Any]:
    context = multiprocessing.get_context("fork")
    receive, send = context.Pipe(duplex=False)
    process = context.Process(target=_child, args=(share, send, others), daemon=True,
                              name=f"runai-reconcile spec loader {which}")
    try:
        process.start()
    except BaseException:
        receive.close()
        raise
    finally:
        send.close()
    return process, receive


def _child(share: list, send: Any, others: list[Any]) -> None:
    """In a child: load `share`, send (workloads, problems, keys, failure) and exit."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    for conn in others:
        conn.close()  # the parent alone reads the other children's pipes
    try:
        os.nice(CHILD_NICENESS)
    except OSError:
        pass
    try:
        from reconciler.desired import loader

        workloads, problems = loader.load_share(share)
        reply = ([] if problems else workloads, [str(p) for p in problems],
                 loader.workload_keys(workloads), None)
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
        reply = (None, None, None, f"{type(exc).__name__}: {exc}")
    try:
        send.send(reply)
    except OSError:
        pass  # the parent has cancelled


def _death(process: Any) -> str:
    """Why a child stopped before its reply, for the error message."""
    process.join(5)
    code = process.exitcode
    if code is not None and code < 0:
        try:
            return f"the loader process was killed ({signal.Signals(-code).name})"
        except ValueError:
            return f"the loader process was killed (signal {-code})"
    return f"the loader process exited with status {code} before sending the specs"


def _processes_for(files: int) -> int:
    """How many children pay for `files` spec files: none below MIN_FILES, else one
    per FILES_PER_PROCESS files, at least one, at most one per CPU but the caller's."""
    cpus = _cpus()
    if files < MIN_FILES or cpus < 2 or threading.active_count() > 1:
        return 0  # one CPU: nothing to overlap; other threads: forking them is unsafe
    return max(1, min(cpus - 1, MAX_PROCESSES, files // FILES_PER_PROCESS))


def _fork_available() -> bool:
    # fork without exec is only safe on Linux (macOS' system libraries are not fork-safe).
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1
