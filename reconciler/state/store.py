"""State stores: the `StateStore` interface, the local JSON file and an in-memory twin.

    store.read()            -> State   (a missing file is a new, empty state)
    store.write(state)                 (serial + 1 when content changed; refuses a stale
                                        or foreign state)
    with store.lock(op): ...           (one writer at a time; the error names the holder)

`LocalFileStore` writes atomically (temp file in the same directory, fsync, rename,
fsync the directory), mode 0600, and keeps the file as it was before this store's
first write in `<path>.backup` (Terraform's rule: the backup is the state before this
command ran, not one write ago). `MemoryStore` has the same semantics without a disk,
for tests; `peer()` gives a second handle on the same storage, like a second process.

A shared backend for teams can follow by implementing the same three methods.
Callers: the CLI (opens the store, holds the lock around plan/apply/state rm), the
planner's caller (reads) and the executor (writes after each action).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Protocol, runtime_checkable

from reconciler.errors import StateError
from reconciler.state.locking import FileLock, LockInfo, locked_error, POLL_INTERVAL
from reconciler.state.model import State


@runtime_checkable
class StateStore(Protocol):
    def read(self) -> State: ...

    def write(self, state: State) -> None: ...

    def lock(self, operation: str) -> contextlib.AbstractContextManager[LockInfo]: ...


def dumps(state: State, *, serial: int | None = None) -> bytes:
    """The file's bytes: keys sorted and indented so that state diffs read well."""
    doc = state.to_json()
    if serial is not None:
        doc["serial"] = serial
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def loads(raw: bytes, where: str) -> State:
    """Parse stored bytes; StateError naming `where` when they are not a valid state."""
    hint = "it was left unchanged; fix it or restore it from its .backup"
    if not raw.strip():
        raise StateError(f"state file {where} is empty; {hint}")
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise StateError(f"state file {where} is not UTF-8 text; {hint}") from None
    except json.JSONDecodeError as exc:
        raise StateError(
            f"state file {where} is not valid JSON (line {exc.lineno} column {exc.colno}: "
            f"{exc.msg}); {hint}") from None
    try:
        return State.from_json(data)
    except StateError as exc:
        raise StateError(f"state file {where} is not a valid state: {exc}; {hint}") from None


class _Store:
    """read/write shared by both stores over raw bytes (`_load`, `_save`)."""

    where: str

    def __init__(self) -> None:
        self._mutex = threading.RLock()  # the executor may write from several threads
        self._backed_up = False
        self._held: object | None = None
        self._held_info: LockInfo | None = None
        self._depth = 0

    def _load(self) -> bytes | None:
        raise NotImplementedError

    def _save(self, data: bytes, backup: bytes | None) -> None:
        raise NotImplementedError

    def read(self) -> State:
        with self._mutex:
            raw = self._load()
        return State() if raw is None else loads(raw, self.where)

    def write(self, state: State) -> None:
        with self._mutex:
            raw = self._load()
            stored = None if raw is None else loads(raw, self.where)
            if stored is not None:
                if stored.lineage != state.lineage:
                    raise StateError(
                        f"refusing to write state {self.where}: it belongs to another "
                        f"lineage ({stored.lineage}) than the state being written "
                        f"({state.lineage}); is --state pointing at the right file?")
                if stored.serial > state.serial:
                    raise StateError(
                        f"refusing to write state {self.where}: it was changed by someone "
                        f"else since it was read (serial {stored.serial} on disk, "
                        f"{state.serial} when read); run the command again")
                if stored.same_content(state):
                    return
            serial = state.serial + 1
            backup = raw if not self._backed_up else None
            self._save(dumps(state, serial=serial), backup)
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

    def _acquire(self, operation: str) -> tuple[object, LockInfo]:
        raise NotImplementedError

    def _release(self, handle: object) -> None:
        raise NotImplementedError


class LocalFileStore(_Store):
    """The state as a JSON file on local disk, locked through `<path>.lock`."""

    def __init__(self, path: str | os.PathLike[str], *, lock_timeout: float = 0.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        super().__init__()
        self.path = Path(path)
        self.backup_path = self.path.with_name(self.path.name + ".backup")
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.lock_timeout = lock_timeout
        self._clock, self._sleep = clock, sleep
        self.where = str(self.path)

    def read_backup(self) -> State | None:
        """The state as it was before this store's first write (None when there is none)."""
        try:
            raw = self.backup_path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError(f"cannot read {self.backup_path}: {exc.strerror}") from exc
        return loads(raw, str(self.backup_path))

    def _load(self) -> bytes | None:
        try:
            return self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StateError(f"cannot read the state file {self.path}: {exc.strerror}") from exc

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

    def _acquire(self, operation: str) -> tuple[object, LockInfo]:
        lock = FileLock(self.lock_path, timeout=self.lock_timeout,
                        clock=self._clock, sleep=self._sleep)
        return lock, lock.acquire(operation)

    def _release(self, handle: object) -> None:
        assert isinstance(handle, FileLock)
        handle.release()


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
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


class _MemoryBacking:
    def __init__(self) -> None:
        self.data: bytes | None = None
        self.backup: bytes | None = None
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

    def _save(self, data: bytes, backup: bytes | None) -> None:
        if backup is not None:
            self._backing.backup = backup
        self._backing.data = data

    def _acquire(self, operation: str) -> tuple[object, LockInfo]:
        deadline = self._clock() + max(0.0, self.lock_timeout)
        while True:
            with self._backing.mutex:
                holder = self._backing.holder
                if holder is None:
                    info = LockInfo.new(operation)
                    self._backing.holder = info
                    return info, info
            remaining = deadline - self._clock()
            if remaining <= 0:
                raise locked_error(holder, self.where)
            self._sleep(min(POLL_INTERVAL, remaining))

    def _release(self, handle: object) -> None:
        with self._backing.mutex:
            if self._backing.holder is handle:
                self._backing.holder = None
