"""State stores: the `StateStore` interface, the local JSON file and an in-memory twin.

    store.read()            -> State   (a missing file is a new, empty state; the
                                        journal, when there is one, replayed over it)
    store.read_with_pending() -> (State, [journal.Intent])   the same, plus the intents
                                        still open (in flight when a run died)
    store.append(entries, lineage)     append journal entries: one write, one fsync
    store.write(state)                 (serial + 1 when content changed; refuses a stale
                                        or foreign state; folds the journal in: compaction)
    with store.lock(op): ...           (one writer at a time; the error names the holder)
    store.force_unlock(lock_id)        drop a lock whose holder is gone
    store.history() -> [Version]       the versions kept, newest first (a file: the state
                                        and its backup; PostgreSQL: every version)
    store.read_version(serial) -> State   one of them
    store.has_journal() -> bool        a journal exists (a run died, or one is under way)
    store.where, store.journal_where   how messages name the state and its journal
    store.keeps_every_version          whether `history` lists every version
    store.local_file                   the state file's path (None: not a local file)

The journal (`<path>.journal`, see `journal`) is what keeps an apply's cost per action
O(1): the executor appends a line per step and the state file is rewritten once, at the
end of the run (and at the start of the next one when a run died).

`LocalFileStore` writes atomically (temp file in the same directory, fsync, rename,
fsync the directory), mode 0600, and keeps the file as it was before this store's
first write in `<path>.backup` (Terraform's rule: the backup is the state before this
command ran, not one write ago). `MemoryStore` has the same semantics without a disk,
for tests; `peer()` gives a second handle on the same storage, like a second process.

`postgres.PostgresStore` is the shared backend for teams, over the same methods; the
`open_store` factory picks the store from `--state`.
Callers: the CLI (opens the store, holds the lock around plan/apply/state rm), the
planner's caller (reads) and the executor (journals each action, compacts at the end).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Hashable, Iterator, Protocol, runtime_checkable

import orjson

from reconciler.errors import StateError
from reconciler.state import journal
from reconciler.state.locking import FileLock, LockInfo, take_or_wait
from reconciler.state.model import State


@runtime_checkable
class StateStore(Protocol):
    """What the engine asks of a state backend: every member its callers use (the CLI,
    `operations`, the executor), and nothing else. docs/state-backends.md says how to add
    one; `_Store` below implements all but the storage itself, over raw bytes."""

    where: str  # the state as messages name it (a path, a URL without its password)
    journal_where: str  # the journal as messages name it
    keeps_every_version: bool  # `history` lists every version ever written (else a few)
    local_file: Path | None  # the state file on this machine; None for a database

    def read(self) -> State: ...

    def read_with_pending(self) -> tuple[State, list[journal.Intent]]: ...

    def version_stamp(self) -> Hashable | None: ...

    def has_journal(self) -> bool: ...

    def append(self, entries: list[dict], lineage: str) -> None: ...

    def write(self, state: State, *, force: bool = False) -> None: ...

    def lock(self, operation: str) -> contextlib.AbstractContextManager[LockInfo]: ...

    def force_unlock(self, lock_id: str) -> LockInfo: ...

    def history(self) -> list[Version]: ...

    def read_version(self, serial: int) -> State: ...


@dataclass(frozen=True)
class Version:
    """One version of a state as `state history` lists it (None: not recorded)."""

    serial: int
    written_at: str | None  # ISO 8601, UTC, to the second
    written_by: str | None  # user@host pid N
    operation: str | None
    workloads: int

    def to_json(self) -> dict:
        return asdict(self)


def dumps(state: State, *, serial: int | None = None) -> bytes:
    """The file's bytes: keys sorted and indented so that state diffs read well.

    orjson writes the same bytes as `json.dumps(doc, indent=2, sort_keys=True,
    ensure_ascii=False)`, much faster (json's C encoder does not indent; figures in
    docs/performance.md); json remains for what orjson refuses (an integer beyond 64 bits)."""
    doc = state.to_json()
    if serial is not None:
        doc["serial"] = serial
    return _encode(doc)


def _encode(doc: dict) -> bytes:
    try:
        return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
                            | orjson.OPT_APPEND_NEWLINE)
    except orjson.JSONEncodeError:
        return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


_HINT = "it was left unchanged; fix it or restore it from its .backup"


def loads(raw: bytes | list[bytes], where: str) -> State:
    """Parse stored bytes; StateError naming `where` when they are not a valid state.

    `raw` may come in a one-item list that the caller gives up: the bytes are then let go
    once decoded, so that a large state's bytes and text are not both held while it is
    parsed (a third of the peak memory of a plan of 10,000)."""
    hint = _HINT
    if isinstance(raw, list):
        raw = raw.pop()
    if not raw or raw.isspace():  # not strip(): that copies the whole state
        raise StateError(f"state file {where} is empty; {hint}")
    try:
        text = raw.decode("utf-8")
        del raw
        data = json.loads(text)
    except UnicodeDecodeError:
        raise StateError(f"state file {where} is not UTF-8 text; {hint}") from None
    except json.JSONDecodeError as exc:
        raise StateError(
            f"state file {where} is not valid JSON (line {exc.lineno} column {exc.colno}: "
            f"{exc.msg}); {hint}") from None
    except ValueError:  # an integer too long for Python
        raise StateError(f"state file {where} is not valid JSON (an integer in it is too "
                         f"long); {hint}") from None
    return _from_json(data, where)


def _from_json(data: object, where: str) -> State:
    try:
        return State.from_json(data)
    except StateError as exc:
        raise StateError(f"state file {where} is not a valid state: {exc}; {_HINT}") from None


def load(f: BinaryIO, where: str) -> State:
    """`loads` of an open state file. A file as `dumps` lays it out is read a part at a
    time, so that its whole text is never held beside the objects made of it (docs/
    performance.md); each part is parsed by `json.loads` itself, so the state is the one
    `loads` gives. A file laid out otherwise, or one that `json.loads` refuses, is read
    again whole by `loads`, which gives its state or its message."""
    try:
        try:
            data = _parse_by_parts(f)
        except (ValueError, RecursionError):  # not UTF-8, not valid JSON, an int too long
            data = None
        if data is None:
            f.seek(0)
            return loads([f.read()], where)
    except OSError as exc:
        raise StateError(f"cannot read the state file {where}: {exc.strerror}") from exc
    return _from_json(data, where)


# How `dumps` lays out a state with workloads: its resources open on a line of their own,
# each record ends on a line of 4 spaces and a brace, and the resources on one of 2.
_RESOURCES = b'\n  "resources": {\n'
_BETWEEN = b'\n    },\n    "'  # the end of one record, its comma, the start of the next
_COMMA = _BETWEEN.index(b",")
_AFTER = b"\n  }"
_PART = 1 << 20  # bytes read at a time
_HEAD = 1 << 16  # the members before the resources (a lineage, a key) are far shorter
_SPACE = " \t\n\r"  # JSON's whitespace (str.strip's is wider)


def _parse_by_parts(f: BinaryIO) -> dict | None:
    """The document of a state file as `dumps` lays it out, or None when it is laid out
    otherwise. The file is cut where the layout says that one record ends and the next
    begins: the comma and the newline there become a brace that closes a part and one that
    opens the next, and each part is decoded and parsed by `json.loads`. When every part
    is a valid object, the file is the object of all their members, in order (JSON's
    grammar has one parse), and json.loads of the whole would give the same; a cut made
    elsewhere leaves a part that is not valid (ValueError). The cuts are ASCII bytes, which
    UTF-8 never uses within a character: the parts decode as the whole would."""
    buf = bytearray()
    start = -1
    while start < 0 and len(buf) < _HEAD:
        part = f.read(_PART)
        if not part:
            return None
        buf += part
        start = buf.find(_RESOURCES, max(len(buf) - len(part) - len(_RESOURCES), 0))
    if start < 0 or not buf.startswith(b"{"):
        return None
    head = _decode(buf, 1, start)  # the members before the resources, and a comma
    if not head.endswith(",") or not head[:-1].strip(_SPACE):
        return None
    data = json.loads("{" + head[:-1] + "}")
    resources: dict = {}
    del buf[:start + len(_RESOURCES) - 2]  # from the resources' own brace
    searched = 0  # `buf` before this holds no mark
    while True:
        cut = buf.rfind(_BETWEEN, searched)
        if cut >= 0:  # the records before it: a part (the end is after the last record)
            buf[cut + _COMMA:cut + _COMMA + 2] = b"}{"  # the comma and the newline after it
            resources.update(json.loads(_decode(buf, 0, cut + _COMMA + 1)))
            del buf[:cut + _COMMA + 1]
            searched = 0
        end = buf.find(_AFTER, searched)
        if end >= 0:
            resources.update(json.loads(_decode(buf, 0, end + len(_AFTER))))
            break
        part = f.read(_PART)
        if not part:
            return None
        searched = max(len(buf) - len(_BETWEEN), 0)
        buf += part
    del buf[:end + len(_AFTER)]
    buf += f.read()
    tail = _decode(buf, 0, len(buf)).lstrip(_SPACE)
    data["resources"] = resources
    if tail.startswith(",") and not tail[1:].lstrip(_SPACE).startswith("}"):
        data.update(json.loads("{" + tail[1:]))  # the members after, the closing brace
    elif tail.rstrip(_SPACE) != "}":
        return None
    return data


def _decode(buf: bytearray, start: int, end: int) -> str:
    """buf[start:end] decoded as bytes.decode does, without copying the bytes first."""
    with memoryview(buf) as view:
        return str(view[start:end], "utf-8")


class _Store:
    """read/write/journal shared by both stores over raw bytes (`_load`, `_save`,
    `_load_journal`, `_append_journal`, `_drop_journal`)."""

    where: str
    journal_where: str
    local_file: Path | None = None

    def __init__(self) -> None:
        self._mutex = threading.RLock()  # the executor may write from several threads
        self._backed_up = False
        self._held: object | None = None
        self._held_info: LockInfo | None = None
        self._depth = 0
        self._journal_lineage: str | None = None  # known once this store has checked it

    def _load(self) -> bytes | None:
        raise NotImplementedError

    def _save(self, data: bytes, backup: bytes | None) -> None:
        raise NotImplementedError

    def _load_journal(self) -> bytes | None:
        raise NotImplementedError

    def _append_journal(self, data: bytes) -> None:
        raise NotImplementedError

    def _drop_journal(self) -> None:
        raise NotImplementedError

    def _load_both(self) -> tuple[bytes | BinaryIO | None, bytes | None]:
        """The state's bytes (or its file, open) and the journal's, as of one moment."""
        with self._mutex:
            return self._load(), self._load_journal()

    def read(self) -> State:
        return self.read_with_pending()[0]

    def read_with_pending(self) -> tuple[State, list[journal.Intent]]:
        """The state with the journal replayed, and the journal's intents still open."""
        raw, jraw = self._load_both()
        if raw is None:
            state = State()
            if jraw and b"\n" in jraw:  # a first run died before its state file was written
                state.lineage = journal.lineage_of(jraw, self.journal_where)
        elif isinstance(raw, bytes):
            given = [raw]
            del raw
            state = loads(given, self.where)
        else:
            with raw:
                state = load(raw, self.where)
        if not jraw:
            return state, []
        return state, journal.replay(state, jraw, self.journal_where)

    def version_stamp(self) -> Hashable | None:
        """A cheap value that changes whenever the state or its journal does, so that a
        reader polling the state (watch) reads it again only then; None when the store
        cannot tell (read it every time). Take it before the read it vouches for."""
        return None

    def has_journal(self) -> bool:
        with self._mutex:
            return bool(self._load_journal())

    def append(self, entries: list[dict], lineage: str) -> None:
        """Append journal entries for the state of `lineage`: one write, flushed and fsynced."""
        if not entries:
            return
        with self._mutex:
            if self._journal_lineage is None:
                existing = self._load_journal()
                if existing and b"\n" in existing:
                    found = journal.lineage_of(existing, self.journal_where)
                    if found != lineage:
                        raise StateError(
                            f"journal {self.journal_where} belongs to another state (lineage "
                            f"{found}); it was left unchanged")
                else:
                    if existing:
                        self._drop_journal()  # only a torn header: nothing was recorded
                    entries = [journal.header(lineage), *entries]
                self._journal_lineage = lineage
            elif self._journal_lineage != lineage:
                raise StateError(f"journal {self.journal_where}: entries of another lineage")
            self._append_journal(journal.encode(entries))

    def write(self, state: State, *, force: bool = False) -> None:
        """Write the whole state (atomically) and drop the journal it now includes.

        `force` raises the serial even when the content is the same (a saved plan
        applied: the serial must move so that it cannot be applied twice)."""
        with self._mutex:
            self._write(state, force)
            # Dropped without reading it first (an apply's journal holds every create's
            # body; docs/performance.md): dropping a journal that is not there does nothing.
            self._drop_journal()
            self._journal_lineage = None

    def _write(self, state: State, force: bool) -> None:
        with self._mutex:
            raw = self._load()
            if raw is not None:
                stored = loads(raw, self.where)
                lineage, serial = stored.lineage, stored.serial
                same = stored.same_content(state)
                del stored
                if lineage != state.lineage:
                    raise StateError(
                        f"refusing to write state {self.where}: it belongs to another "
                        f"lineage ({lineage}) than the state being written "
                        f"({state.lineage}); is --state pointing at the right file?")
                if serial > state.serial:
                    raise StateError(
                        f"refusing to write state {self.where}: it was changed by someone "
                        f"else since it was read (serial {serial} on disk, "
                        f"{state.serial} when read); run the command again")
                if same and not force:
                    return
            serial = state.serial + 1
            backup = raw if not self._backed_up else None
            del raw
            doc = state.to_json()
            doc["serial"] = serial
            data = _encode(doc)
            del doc
            self._save(data, backup)
            self._backed_up = True
            state.serial = serial

    @contextlib.contextmanager
    def lock(self, operation: str) -> Iterator[LockInfo]:
        """Hold the state lock for `operation`; re-entrant for this store object."""
        with self._mutex:
            if self._held is not None:
                self._depth += 1
                info = self._held_info
            else:
                info = None
        if info is not None:
            try:
                yield info
            finally:
                with self._mutex:
                    self._depth -= 1
            return
        handle, info = self._acquire(operation)
        with self._mutex:
            self._held, self._held_info = handle, info
        try:
            yield info
        finally:
            with self._mutex:
                self._held = self._held_info = None
            self._release(handle)

    # A store of files (or their memory twin) keeps the state and its backup only.
    keeps_every_version = False

    def _kept(self) -> Iterator[tuple[bytes, str, str | None]]:
        """(bytes, where, when written) of the state and of its backup, when they exist."""
        raise NotImplementedError

    def history(self) -> list[Version]:
        """The versions kept, newest first: here the state and the one before it."""
        versions: dict[int, Version] = {}
        for raw, where, when in self._kept():
            state = loads(raw, where)
            versions.setdefault(state.serial, Version(state.serial, when, None, None,
                                                      len(state.resources)))
        return sorted(versions.values(), key=lambda v: -v.serial)

    def read_version(self, serial: int) -> State:
        """The kept version `serial`; StateError naming the serials kept otherwise."""
        for raw, where, _ in self._kept():
            state = loads(raw, where)
            if state.serial == serial:
                return state
        kept = ", ".join(str(v.serial) for v in self.history()) or "none"
        raise StateError(f"{self.where} keeps no version with serial {serial} (it keeps "
                         f"the state and the one before it: serials {kept})")

    def _acquire(self, operation: str) -> tuple[object, LockInfo]:
        raise NotImplementedError

    def _release(self, handle: object) -> None:
        raise NotImplementedError

    def force_unlock(self, lock_id: str) -> LockInfo:
        """Remove the lock `lock_id` left by a holder that is gone; StateError when the id
        does not match or the holder is still alive. Returns the removed lock's info."""
        raise NotImplementedError


class LocalFileStore(_Store):
    """The state as a JSON file on local disk, locked through `<path>.lock`."""

    def __init__(self, path: str | os.PathLike[str], *, lock_timeout: float = 0.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        super().__init__()
        self.path = self.local_file = Path(path)
        self.backup_path = self.path.with_name(self.path.name + ".backup")
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.journal_path = self.path.with_name(self.path.name + ".journal")
        self.lock_timeout = lock_timeout
        self._clock, self._sleep = clock, sleep
        self.where = str(self.path)
        self.journal_where = str(self.journal_path)
        self._journal_fd: int | None = None
        problem = _not_a_folder(self.path)
        if problem:
            raise StateError(f"--state {self.path}: {problem}; nothing was read or written")

    def read_backup(self) -> State | None:
        """The state as it was before this store's first write (None when there is none)."""
        raw = _read_or_none(self.backup_path, f"{self.backup_path}")
        return None if raw is None else loads(raw, str(self.backup_path))

    def _load(self) -> bytes | None:
        return _read_or_none(self.path, f"the state file {self.path}")

    def _load_both(self) -> tuple[BinaryIO | None, bytes | None]:
        """The state file open, not read (`load` reads it a part at a time; it stays the
        version opened whatever is written meanwhile: a write replaces the file), and the
        journal's bytes."""
        with self._mutex:
            f = _open_or_none(self.path, f"the state file {self.path}")
            try:
                return f, self._load_journal()
            except BaseException:
                if f is not None:
                    f.close()
                raise

    def version_stamp(self) -> Hashable | None:
        """The state file's and the journal's inode, size and times: a write replaces the
        file (a new inode), an append grows the journal."""
        return _file_stamp(self.path), _file_stamp(self.journal_path)

    def _kept(self) -> Iterator[tuple[bytes, str, str | None]]:
        # The state file's mtime is when it was written; the backup's is when it became
        # the backup (the next command's first write), so its version's time is unknown.
        for path, when in ((self.path, _mtime(self.path)), (self.backup_path, None)):
            raw = _read_or_none(path, str(path))
            if raw is not None:
                yield raw, str(path), when

    def _save(self, data: bytes, backup: bytes | None) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if backup is not None:
                _atomic_write(self.backup_path, backup)
            _atomic_write(self.path, data)
        except OSError as exc:
            raise StateError(
                f"cannot write the state file {self.path}: {exc.strerror or exc}; "
                "the previous version is unchanged") from exc

    def _load_journal(self) -> bytes | None:
        return _read_or_none(self.journal_path, f"the journal {self.journal_path}")

    def _append_journal(self, data: bytes) -> None:
        try:
            if self._journal_fd is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
                self._journal_fd = fd
                _fsync_dir(self.path.parent)  # the new file's name survives a crash too
            view = memoryview(data)
            while view:
                view = view[os.write(self._journal_fd, view):]
            os.fsync(self._journal_fd)
        except OSError as exc:
            raise StateError(f"cannot append to the journal {self.journal_path}: "
                             f"{exc.strerror or exc}") from exc

    def _drop_journal(self) -> None:
        if self._journal_fd is not None:
            fd, self._journal_fd = self._journal_fd, None
            os.close(fd)
        try:
            self.journal_path.unlink()
            _fsync_dir(self.path.parent)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StateError(f"cannot remove the journal {self.journal_path} after writing "
                             f"the state: {exc.strerror}") from exc

    def _acquire(self, operation: str) -> tuple[object, LockInfo]:
        lock = FileLock(self.lock_path, timeout=self.lock_timeout,
                        clock=self._clock, sleep=self._sleep)
        return lock, lock.acquire(operation)

    def _release(self, handle: object) -> None:
        assert isinstance(handle, FileLock)
        handle.release()

    def force_unlock(self, lock_id: str) -> LockInfo:
        return FileLock(self.lock_path).break_stale(lock_id)


def _not_a_folder(path: Path) -> str | None:
    """What is in the way of the state file `path`: an ancestor that exists and is not a
    folder (None when none is)."""
    for parent in reversed(path.parents):
        if os.path.lexists(parent) and not parent.is_dir():
            return f"{parent} is a file, not a folder"
    return None


def _read_or_none(path: Path, what: str) -> bytes | None:
    """The file's bytes, None when it does not exist; StateError naming `what` otherwise."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read {what}: {exc.strerror}") from exc


def _open_or_none(path: Path, what: str) -> BinaryIO | None:
    """The file, open for reading; None when it does not exist; StateError naming `what`
    otherwise (as `_read_or_none`)."""
    try:
        return path.open("rb")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read {what}: {exc.strerror}") from exc


def _file_stamp(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateError(f"cannot read {path}: {exc.strerror}") from exc
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _mtime(path: Path) -> str | None:
    try:
        when = datetime.datetime.fromtimestamp(path.stat().st_mtime, datetime.timezone.utc)
    except OSError:
        return None
    return when.isoformat(timespec="seconds")


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    dfd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class _MemoryBacking:
    def __init__(self) -> None:
        self.data: bytes | None = None
        self.backup: bytes | None = None
        self.journal: list[bytes] | None = None
        self.holder: LockInfo | None = None
        self.mutex = threading.Lock()


class MemoryStore(_Store):
    """The same contract as `LocalFileStore`, held in memory (for tests)."""

    def __init__(self, initial: State | None = None, *, lock_timeout: float = 0.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep,
                 _backing: _MemoryBacking | None = None):
        super().__init__()
        self._backing = _backing or _MemoryBacking()
        if initial is not None:
            self._backing.data = dumps(initial)
        self.lock_timeout = lock_timeout
        self._clock, self._sleep = clock, sleep
        self.where = "(memory)"
        self.journal_where = "(memory).journal"

    def peer(self, *, lock_timeout: float | None = None) -> "MemoryStore":
        """Another handle on the same stored state, as a second process would have."""
        return MemoryStore(lock_timeout=self.lock_timeout if lock_timeout is None
                           else lock_timeout, clock=self._clock, sleep=self._sleep,
                           _backing=self._backing)

    def read_backup(self) -> State | None:
        raw = self._backing.backup
        return None if raw is None else loads(raw, self.where + ".backup")

    def _load(self) -> bytes | None:
        return self._backing.data

    def _kept(self) -> Iterator[tuple[bytes, str, str | None]]:
        for raw, where in ((self._backing.data, self.where),
                           (self._backing.backup, self.where + ".backup")):
            if raw is not None:
                yield raw, where, None

    def _save(self, data: bytes, backup: bytes | None) -> None:
        if backup is not None:
            self._backing.backup = backup
        self._backing.data = data

    def _load_journal(self) -> bytes | None:
        chunks = self._backing.journal
        return None if chunks is None else b"".join(chunks)

    def version_stamp(self) -> Hashable | None:
        return self._backing.data, tuple(self._backing.journal or ())

    def _append_journal(self, data: bytes) -> None:
        if self._backing.journal is None:
            self._backing.journal = []
        self._backing.journal.append(data)

    def _drop_journal(self) -> None:
        self._backing.journal = None

    def force_unlock(self, lock_id: str) -> LockInfo:
        """In memory there is no process to outlive: the holder is dropped when ids match
        (as a shared backend would do)."""
        with self._backing.mutex:
            holder = self._backing.holder
            if holder is None:
                raise StateError(f"state {self.where} is not locked; nothing to unlock")
            if holder.id != lock_id:
                raise StateError(f"refusing to unlock {self.where}: the lock id is {holder.id}, "
                                 f"not {lock_id}")
            self._backing.holder = None
            return holder

    def _acquire(self, operation: str) -> tuple[object, LockInfo]:
        def attempt() -> LockInfo | None:
            with self._backing.mutex:
                if self._backing.holder is not None:
                    return None
                self._backing.holder = LockInfo.new(operation)
                return self._backing.holder

        info = take_or_wait(attempt, lambda: self._backing.holder, self.where,
                            self.lock_timeout, self._clock, self._sleep)
        return info, info

    def _release(self, handle: object) -> None:
        with self._backing.mutex:
            if self._backing.holder is handle:
                self._backing.holder = None
