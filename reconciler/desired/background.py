"""Load a big folder of specs in child processes while the caller works.

    pending = start_loading("specs")   # forks when it pays, else loads here, now
    ...                                # e.g. read the state and the live workloads
    workloads = await pending.wait()   # or pending.result(): SpecError as load_specs
    pending.cancel()                   # kills the children still running (idempotent)

The parent lists the files (`sources.find_files`) and forks one `multiprocessing.Process`
per share of them; each runs `loader.load_share` and sends back its workloads (`PART` at a
time, each part's bodies that are the state's replaced by the state's objects as it
arrives), problems and keys through a pipe. A busy caller (plan, apply) keeps a CPU for
its own work, which ends long before the load: the first child, once it has imported the
models, forks a helper for half its share (`_helper`), which Linux kills if that child
dies. When the user's spec cache (`desired.cache`)
has a file of this tool for the folder, one child (the indexer) does the cache's work
instead: it hashes the files, reads and checks the cache file and loads the files it
lacks, and sends back the keys and the entries too (`PART` entries at a time, before its
reply); the parent makes the workloads of the files served (as each part arrives, when
the state's bodies are known). After a load without problems that changes the cache, the
indexer saves it (the checks across files are still the parent's, made from the cache's
keys as from a load's). The parent joins the shares in file order and checks across
files, so the outcome is exactly `load_specs(directory)`'s; a child that fails or dies
is one ReconcileError and the others are killed. The parent imports the pydantic models
only when two workloads share an address (for the message naming both places).
Callers: the CLI (`validate`, `plan`, `apply`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
from typing import Any

import orjson

from reconciler import timeline
from reconciler.desired import references, sources
from reconciler.desired.cache import SpecCache
from reconciler.desired.types import DesiredWorkload
from reconciler.errors import ReconcileError, SpecError

__all__ = ["EVERY_CPU_FILES", "FILES_PER_PROCESS", "MAX_PROCESSES", "MIN_FILES", "PendingSpecs",
           "start_loading"]

MIN_FILES = 100  # below, loading here is as fast: a child's start would eat the gain
FILES_PER_PROCESS = 200  # one more child for every this many files
# From this many files to load the caller's own work (the state, the refresh) is short
# beside the load: the children take every CPU, the caller's too.
EVERY_CPU_FILES = 2000
MAX_PROCESSES = 4
# A child sends its workloads this many at a time before its reply: the parent holds one
# part's pickled bytes at once, and a part's bodies that are the state's give way to the
# state's objects as it arrives (`PendingSpecs.share_bodies`).
PART = 500


def start_loading(directory: str | os.PathLike, *, caller_busy: bool = True,
                  processes: int | None = None, cache: SpecCache | None = None) -> PendingSpecs:
    """Start loading the specs under `directory`; the outcome is `load_specs(directory)`'s.

    `caller_busy`: the caller works meanwhile (plan, apply), so one CPU is left to it
    below EVERY_CPU_FILES files to load; False when it only waits (validate).
    `processes` overrides how many children share the files (0: load here, now). They
    load here, at once, below MIN_FILES files, off Linux (fork is not safe elsewhere),
    with one CPU or with other threads running.
    `cache`: the files it holds (by content) are taken from it, the others loaded; after
    a load without problems it keeps them (`PendingSpecs.save_cache`). When its file is
    on disk and MIN_FILES are listed, its work is an indexer child's (`_start_indexing`)
    unless `processes` is given."""
    files, listed = sources.find_files(directory)
    if processes is None and cache is not None and len(files) >= MIN_FILES \
            and _can_fork() and cache.on_disk():
        try:
            return _start_indexing(files, listed, cache, caller_busy)
        except OSError:  # no fork to be had (resources): all of it here instead
            pass
    served: dict[str, bytes] = {}  # display -> its cache entry's key
    keys: dict[str, bytes] = {}
    if cache is not None:
        keys = cache.keys(files)
        served = {display: key for display, key in keys.items()
                  if cache.lookup(key) is not None}
    to_load = [f for f in files if f[1] not in served] if served else files
    if processes is None:
        processes = _processes(len(to_load), caller_busy)
    processes = min(processes, len(to_load))
    pending = PendingSpecs([], listed)
    pending._files, pending._served, pending._keys, pending._cache = files, served, keys, cache
    pending._count_parsed(len(to_load))
    if processes > 0 and sys.platform.startswith("linux"):
        try:
            pending._children = _start(_works(to_load, processes, caller_busy), "spec loader")
            pending._replies = [None] * len(pending._children)
            return pending
        except OSError:  # no fork to be had (resources): load here instead
            pass
    pending._load_here(to_load)
    return pending


def _processes(count: int, caller_busy: bool) -> int:
    """How many children share `count` files to load (0: load them here)."""
    if count < MIN_FILES or not _can_fork():
        return 0
    busy = caller_busy and count < EVERY_CPU_FILES
    return max(1, min(_cpus() - busy, MAX_PROCESSES, count // FILES_PER_PROCESS))


def _helper(count: int, caller_busy: bool) -> bool:
    """Whether the first loader of `count` files, once it has imported the models, forks a
    helper for half its share: the CPU the caller kept (`_processes`) is free by then
    (its own work is short), and a helper forked then needs no import of its own."""
    if not caller_busy or count >= EVERY_CPU_FILES or count < MIN_FILES or not _can_fork():
        return False
    return min(_cpus(), MAX_PROCESSES, count // FILES_PER_PROCESS) > _processes(count, True)


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _can_fork() -> bool:
    """Whether child processes can work beside this one: on Linux (fork is not safe
    elsewhere), with a second CPU (nothing to overlap with one), and no other thread
    running (forking them is unsafe)."""
    return sys.platform.startswith("linux") and _cpus() >= 2 and threading.active_count() == 1


def _start_indexing(files: list[sources.Found], listed: list[sources.Problem],
                    cache: SpecCache, caller_busy: bool) -> PendingSpecs:
    """A load whose cache work is a child's (`_index`): it hashes the files, reads the
    cache file and loads the files the cache lacks, while the caller reads the state and
    the live workloads; the parent then takes the cache's entries (`_adopt_index`)."""
    pending = PendingSpecs([], listed)
    pending._files, pending._cache, pending._indexing = files, cache, True
    pending._children = _start([(_index, (files, cache, caller_busy))], "spec indexer")
    pending._replies = [None]
    return pending


def _index(files: list[sources.Found], cache: SpecCache, caller_busy: bool) -> tuple:
    """In a child: `_load`'s reply for the files the cache lacks (shared with children
    of its own as `start_loading` would share them: `_load_shared`), then the files' cache
    keys and whether this child saved the cache. Before it, when the cache served a file,
    the cache file's checked entries go to the parent `PART` at a time ("entries", part,
    whether the load had no problems): the parent holds one part's bytes at once, never
    the whole file's. After a load without problems that changes the cache (files loaded,
    or entries no file uses), this child keeps and saves it: the parent, which then has no
    save to make, needs no entry's bytes."""
    keys = cache.keys(files)
    to_load = [f for f in files if f[1] not in keys or cache.lookup(keys[f[1]]) is None]
    reply = _load_shared(to_load, caller_busy)
    good = reply[3] is None and not reply[1]
    if reply[3] is None and len(to_load) < len(files):
        for part in cache.parts(PART):
            _to_parent.send(("entries", part, good))
    saved = good and (bool(to_load) or not cache.all_used())
    if saved:
        _keep(cache, to_load, keys, reply[0], {})
        cache.save()
    return (*reply, keys, saved)


def _load_shared(files: list[sources.Found], caller_busy: bool) -> tuple:
    """`_load(files)`, in the indexer child: when `start_loading` would have shared as
    many files among children (every spec changed since the cache was written), they are
    shared the same way: the first share loaded here, each other one by a child of this
    one (`_load_helped`)."""
    count = min(_processes(len(files), caller_busy) + _helper(len(files), caller_busy),
                len(files))
    if count < 2:
        return _load(files)
    return _load_helped([share for _, (share,) in _shares(files, count)])


def _works(files: list[sources.Found], count: int, caller_busy: bool) -> list[tuple[Any, tuple]]:
    """The work of each of `count` loader children: its share of `files` (`_shares`); the
    first one's two shares, the second for its helper, when `_helper` says so."""
    if not _helper(len(files), caller_busy):
        return _shares(files, count)
    (_, (first,)), (_, (second,)), *others = _shares(files, count + 1)
    return [(_load_helped, ([first, second],)), *others]


def _load_helped(shares: list[list[sources.Found]]) -> tuple:
    """In a child: `_load` of every one of `shares`, their replies joined in file order;
    the first share loaded here, each other one by a helper (a child of this one) forked
    once the models are imported, so that none imports them again."""
    from reconciler.desired import loader  # noqa: F401 - the helpers are forked with it

    # Its parent still sees this child as daemonic (killed with it); here the flag only
    # keeps it from having children, which are daemonic and go with it.
    multiprocessing.current_process().daemon = False
    try:
        helpers = _start([(_load_as_helper, (share, os.getpid())) for share in shares[1:]],
                         "spec loader helper")
    except OSError:  # no fork to be had: all of it here
        return _load([file for share in shares for file in share])
    try:
        replies = [_load(shares[0])] + [_received(*helper) for helper in helpers]
    finally:
        PendingSpecs(helpers, [])._reap()
    failed = next((r[3] for r in replies if r[3] is not None), None)
    if failed is not None:
        return None, None, None, failed
    problems = [p for r in replies for p in r[1]]
    return ([] if problems else [w for r in replies for w in r[0]], problems,
            [k for r in replies for k in r[2]], None)


def _received(process: Any, conn: Any) -> tuple:
    """A child's reply (its parts put together), or its death as a failure."""
    parts: list[DesiredWorkload] = []
    while True:
        message = _message(process, conn)
        if type(message[0]) is not str:
            return _joined(parts, message)
        parts.extend(message[1])


def _message(process: Any, conn: Any) -> tuple:
    """The next message of a child (`_child`): a part ("part", workloads) with more to
    come, its reply, or its death as a failure's reply."""
    try:
        return conn.recv()
    except (EOFError, OSError):
        return None, None, None, _death(process)


def _joined(parts: list[DesiredWorkload], reply: tuple) -> tuple:
    """A child's reply with the workloads of the parts it sent before it first (a
    failure's as it is)."""
    return reply if reply[0] is None else (parts + reply[0], *reply[1:])


def _keep(cache: SpecCache, files: list[sources.Found], keys: dict[str, bytes],
          loaded: list[DesiredWorkload], served: dict[str, bytes]) -> None:
    """Give `cache` the workloads of each of `files` loaded (not `served`)."""
    loaded_of: dict[str, list] = {}
    for w in loaded:
        loaded_of.setdefault(w.source, []).append(w)
    for _, display, _ in files:
        key = keys.get(display)
        if key is not None and display not in served:
            cache.put(key, loaded_of.get(display, ()))


def _load_as_helper(share: list[sources.Found], loader_pid: int) -> tuple:
    """`_load(share)` in a helper, which is killed when the loader that forked it
    (`loader_pid`) dies: a cancel kills that loader, and its helper would otherwise load
    on, an orphan, until its reply met a closed pipe."""
    _die_with(loader_pid)
    return _load(share)


def _die_with(parent: int) -> None:
    """Have Linux kill this process when its parent dies (`PR_SET_PDEATHSIG`), and exit
    at once if it already has (its parent is no longer `parent`)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # no prctl to be had: the closed pipe stops it later
        pass
    if os.getppid() != parent:
        os._exit(0)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _load(share: list[sources.Found]) -> tuple:
    """(workloads, problems, their keys, None) of the files of `share` (in a child, or
    here)."""
    if not share:  # all served by the cache: the models need not even be imported
        return [], [], [], None
    from reconciler.desired import loader

    workloads, problems = loader.load_share(share)
    return [] if problems else workloads, problems, loader.workload_keys(workloads), None


class PendingSpecs:
    """The outcome of one `start_loading`: the workloads, or the error to raise."""

    def __init__(self, children: list[tuple[Any, Any]], listed: list[sources.Problem]) -> None:
        self._children = children  # (process, read end of its pipe), in share order
        self._replies: list[tuple | None] = [None] * len(children)
        self._listed = listed  # the listing's problems
        self._workloads: list[DesiredWorkload] | None = None
        self._error: BaseException | None = None
        self._ok = False  # settled without problems (the workloads made when asked for)
        self._loaded: list[DesiredWorkload] = []  # those loaded (not from the cache)
        self._share: Any = None  # address -> the state's body (`share_bodies`)
        # Every file listed, those the cache served (display -> its key), the cache's
        # keys, and the cache (None: none).
        self._files: list[sources.Found] = []
        self._served: dict[str, bytes] = {}
        self._keys: dict[str, bytes] = {}
        self._cache: SpecCache | None = None
        self._indexing = False  # the one child is `_index`: its reply is adopted first
        self._saved = False  # the indexer kept and saved the cache
        self._parts: dict[int, list[DesiredWorkload]] = {}  # a child's workloads so far
        self.parsed = 0  # files loaded (not served by the cache)

    @classmethod
    def loaded_here(cls, directory: str | os.PathLike) -> PendingSpecs:
        """`load_specs(directory)`'s outcome, loaded here and now."""
        return start_loading(directory, processes=0)

    def _load_here(self, files: list[sources.Found]) -> None:
        try:
            self._replies = [_load(files)]
            self._settle()
        except Exception as exc:  # noqa: BLE001 - raised by result(), as from a child
            self._error = exc

    def _count_parsed(self, count: int) -> None:
        self.parsed = count
        if self._cache is not None:
            self._cache.parsed += count

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
        return self._ok or self._error is not None

    def failed(self) -> bool:
        """Whether the outcome is known to be an error (result() would raise now)."""
        return self._error is not None

    def share_bodies(self, bodies: Any) -> None:
        """Before the workloads are asked for: address -> the body the state last
        applied. A workload the cache serves (`cache.SpecCache.workloads`) or a child sends
        from then on (`_shared`) whose body is exactly that one takes that object: an
        unchanged fleet is held once."""
        self._share = bodies

    def _shared(self, workloads: list[DesiredWorkload]) -> list[DesiredWorkload]:
        """`workloads` (a child's part, or its whole reply), each whose body is exactly
        the state's (`share_bodies`: the same JSON, types and all) taking that object."""
        share = self._share
        if not share:
            return workloads
        out = []
        for w in workloads:
            other = share.get(w.address)
            if other is not None and other == w.body and _same_json(other, w.body):
                w = dataclasses.replace(w, body=other)
            out.append(w)
        return out

    def result(self) -> list[DesiredWorkload]:
        """The workloads in file order, once the children sent them; SpecError as
        load_specs would, or ReconcileError when a child failed."""
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
        """Kill the children still running, close the pipes (idempotent); unless the
        load was done, result() then raises ReconcileError."""
        if not self.done():
            self._error = ReconcileError("loading the specs was cancelled")
        self._reap()

    def _waiting(self) -> list[Any]:
        return [conn for (_, conn), reply in zip(self._children, self._replies) if reply is None]

    def _receive(self, ready: list[Any]) -> None:
        for index, (process, conn) in enumerate(self._children):
            if conn not in ready:
                continue
            message = _message(process, conn)
            if message[0] == "entries":  # the indexer's: a part of the cache file's
                # A good load's served workloads are made now, their bytes let go.
                self._cache.adopt(message[1], self._share if message[2] else None)
                continue
            if type(message[0]) is str:  # ("part", workloads): more to come
                self._parts.setdefault(index, []).extend(self._shared(message[1]))
                continue
            reply = _joined(self._parts.pop(index, []), message if message[0] is None
                            else (self._shared(message[0]), *message[1:]))
            self._replies[index] = reply
            if reply[3] is not None:
                self._error = ReconcileError(f"could not load the specs: {reply[3]}")
                self._reap()
                return
        if all(reply is not None for reply in self._replies):
            self._settle()

    def _adopt_index(self) -> None:
        """The indexer's reply (`_index`) as a loader's: the cache has taken the entries
        it read (in parts, before the reply), and the files it served are those its
        entries hold."""
        self._indexing = False
        *reply, keys, self._saved = self._replies[0]
        cache = self._cache
        cache.adopt({})  # the disk file is read: its entries, if any, came before
        self._keys = keys
        self._served = {display: key for display, key in keys.items()
                        if cache.lookup(key) is not None}
        self._count_parsed(len(self._files) - len(self._served))
        self._replies = [tuple(reply)]

    def _settle(self) -> None:
        if self._indexing:
            self._adopt_index()
        problems = self._listed + [p for _, share, _, _ in self._replies for p in share]
        keys = [key for _, _, share, _ in self._replies for key in share]
        loaded = [w for share, _, _, _ in self._replies for w in share]
        if self._served:  # in file order, the cache's and the loaded ones together
            keys = self._merged_keys(keys)
        if len({address.split("/", 1)[1] for address, _, _ in keys}) < len(keys):
            from reconciler.desired import loader  # an address, or a name in a project, twice

            problems += loader.cross_file_problems(keys)
        if problems:
            self._error = SpecError(sources.problem_lines(problems), valid=len(keys))
        else:
            self._ok, self._loaded = True, loaded
            self._keep()
        self._reap()

    def _merged_keys(self, keys: list) -> list:
        """The keys of every file's workloads in file order: the cache's for the files it
        served, the loaded ones for the others (a key's source is its file)."""
        keys_of: dict[str, list] = {}
        for key in keys:
            keys_of.setdefault(key[1], []).append(key)
        out: list = []
        for _, display, _ in self._files:
            served = self._served.get(display)
            if served is not None:
                out.extend(self._cache.lookup(served))
            else:
                out.extend(keys_of.get(display, ()))
        return out

    def _made(self) -> list[DesiredWorkload]:
        """The workloads in file order: the cache's, made now (sharing the state's
        bodies), and the loaded ones (a workload's source is its file)."""
        if not self._served:
            return self._loaded
        loaded_of: dict[str, list] = {}
        for w in self._loaded:
            loaded_of.setdefault(w.source, []).append(w)
        out: list[DesiredWorkload] = []
        for _, display, _ in self._files:
            served = self._served.get(display)
            if served is not None:
                out.extend(self._cache.workloads(served, self._share))
            else:
                out.extend(loaded_of.get(display, ()))
        return out

    def _keep(self) -> None:
        """Give the cache the workloads of each file loaded (a load without problems),
        unless the indexer kept and saved them."""
        if self._cache is not None and not self._saved:
            _keep(self._cache, self._files, self._keys, self._loaded, self._served)

    def save_cache(self) -> None:
        """Save the cache this load used, after a load without problems, unless the
        indexer saved it (the disk's failures are the cache's own: never raised)."""
        if self._cache is not None and self._ok and not self._saved:
            self._cache.save()

    def _outcome(self) -> list[DesiredWorkload]:
        if self._error is not None:
            raise self._error
        if self._workloads is None:
            try:
                self._workloads = references.resolve(self._made())
            except SpecError as exc:
                self._error = exc
                raise
            self._loaded = []
            timeline.mark("specs", "end")
        return self._workloads

    def _reap(self) -> None:
        """Close the pipes and reap the children, killed first unless the load succeeded
        (then they exit once their reply is sent)."""
        for process, conn in self._children:
            conn.close()
            if self._ok:
                process.join(5)  # it exits once its reply is sent; never wait on it for ever
            if process.exitcode is None:
                process.kill()
            process.join()
            process.close()
        self._children = []


def _start(works: list[tuple[Any, tuple]], name: str) -> list[tuple[Any, Any]]:
    """Fork a child for each (function, arguments) of `works`; their (process, pipe). A
    child sends back what its function returns."""
    children: list[tuple[Any, Any]] = []
    # Ctrl-C stays pending while forking, so that it never reaches a child before the
    # child ignores it (the parent decides what it means).
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        try:
            for index, work in enumerate(works):
                which = f"{name} {index + 1}/{len(works)}" if len(works) > 1 else name
                children.append(_fork(work, which, [c for _, c in children]))
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, blocked)  # a pending Ctrl-C is raised here
    except BaseException:
        PendingSpecs(children, [])._reap()
        raise
    return children


def _shares(files: list, count: int) -> list[tuple[Any, tuple]]:
    """`count` loaders (`_load`), each of its share of `files`."""
    return [(_load, (files[index * len(files) // count:(index + 1) * len(files) // count],))
            for index in range(count)]


def _fork(work: tuple[Any, tuple], which: str, others: list[Any]) -> tuple[Any, Any]:
    context = multiprocessing.get_context("fork")  # the child inherits what is imported
    receive, send = context.Pipe(duplex=False)
    # The child closes its copy of the read end too: were it kept, a child whose parent
    # died would block for ever writing to a pipe that still has a reader (itself). A
    # child's child closes its parent's pipe to the first process: were it kept, that
    # process would not see the pipe close when its child dies.
    inherited = [] if _to_parent is None else [_to_parent]
    process = context.Process(target=_child,
                              args=(work, send, [*others, receive, *inherited]),
                              daemon=True, name=f"runai-reconcile {which}")
    try:
        process.start()
    except BaseException:
        receive.close()
        raise
    finally:
        send.close()
    return process, receive


# In a child: its pipe to its parent (`_child`), which a child of its own closes.
_to_parent: Any = None


def _child(work: tuple[Any, tuple], send: Any, others: list[Any]) -> None:
    """In a child: run `work`, send its reply (a failure as the reply's fourth item) and
    exit."""
    global _to_parent
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    for conn in others:
        conn.close()  # the parent alone reads the pipes (this child's own included)
    _to_parent = send
    function, args = work
    try:
        reply = function(*args)
    except BaseException as exc:  # noqa: BLE001 - every failure goes back to the parent
        reply = (None, None, None, f"{type(exc).__name__}: {exc}")
    try:
        workloads = reply[0]
        if workloads and len(workloads) > PART:
            for at in range(0, len(workloads), PART):
                send.send(("part", workloads[at:at + PART]))
            reply = ([], *reply[1:])  # the parent puts the parts together
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
        except ValueError:  # a real-time signal
            return f"the loader process was killed (signal {-code})"
    return f"the loader process exited with status {code} before sending the specs"


def _same_json(a: Any, b: Any) -> bool:
    """Whether two bodies are the same JSON, types and all (`==` also has True == 1):
    orjson's text, keys sorted."""
    try:
        return orjson.dumps(a, option=orjson.OPT_SORT_KEYS) == orjson.dumps(
            b, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:  # not JSON data (an integer beyond 64 bits): not shared
        return False
