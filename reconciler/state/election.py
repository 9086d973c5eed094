"""One active `watch` per state: the controller lock, apart from the state's write lock.

A controller that held the state's write lock for its whole life would block a person's
`apply`; so the active controller holds a second, long-lived lock per state and takes the
ordinary write lock only for the moments it writes (a cycle that acts), as any apply does.
- a state file: `flock` on the sibling `<state>.controller.lock` (the kernel drops it when
  the holder dies, `kill -9` included; one machine, as the state file itself);
- PostgreSQL: a session advisory lock on one 64-bit key derived from the schema and the
  state name (a key space apart from the write lock's two-key form), in a database session
  of its own, which the server ends, releasing the lock, when the holder dies;
- a `MemoryStore` (tests): a flag on the stored state every peer shares.
`try_acquire()` never waits; a standby calls it once per cycle, so it takes over within
about one interval of the holder's end. `still_held()` says whether the holder's session
is still alive (a PostgreSQL connection that broke lost the lock with it).
Caller: `operations.watching`.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import threading
from pathlib import Path

from reconciler.errors import StateError
from reconciler.state.locking import LockInfo


class FileControllerLock:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._fd: int | None = None

    @property
    def where(self) -> str:
        return str(self.path)

    def try_acquire(self) -> bool:
        if self._fd is not None:
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StateError(f"cannot open the controller lock {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return False
            raise StateError(f"cannot lock {self.path}: {exc.strerror}") from None
        info = LockInfo.new("watch")
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(info.to_json(), sort_keys=True) + "\n").encode(), 0)
        self._fd = fd
        return True

    def still_held(self) -> bool:
        return self._fd is not None

    def holder(self) -> str | None:
        try:
            info = LockInfo.from_json(json.loads(self.path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return None
        return None if info is None else info.who

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
            finally:
                os.close(fd)


class PostgresControllerLock:
    def __init__(self, store) -> None:
        self._store = store
        digest = hashlib.sha256(
            f"runai-reconcile controller {store.schema} {store.name}".encode()).digest()
        self.key = int.from_bytes(digest[:8], "big", signed=True)
        self._conn = None
        self.where = f"{store.where} controller lock"

    def _connect(self):
        import psycopg

        conn = self._store._connect_plain()
        return conn, psycopg

    def try_acquire(self) -> bool:
        if self.still_held():
            return True
        self.release()
        conn, psycopg = self._connect()
        try:
            got, = conn.execute("SELECT pg_try_advisory_lock(%s::int8)", (self.key,)).fetchone()
        except psycopg.Error as exc:
            conn.close()
            raise StateError(f"{self.where}: cannot take the controller lock: "
                             f"{type(exc).__name__}") from None
        if not got:
            conn.close()
            return False
        self._conn = conn
        return True

    def still_held(self) -> bool:
        if self._conn is None or self._conn.closed:
            return False
        import psycopg

        try:
            self._conn.execute("SELECT 1").fetchone()
        except psycopg.Error:
            self.release()
            return False
        return True

    def holder(self) -> str | None:
        return None

    def release(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            conn.close()  # ending the session drops the lock


class MemoryControllerLock:
    _guard = threading.Lock()

    def __init__(self, backing) -> None:
        self._backing = backing
        self._mine = False
        self.where = "(memory) controller lock"

    def try_acquire(self) -> bool:
        with self._guard:
            if self._mine:
                return True
            if getattr(self._backing, "controller", False):
                return False
            self._backing.controller = self._mine = True
            return True

    def still_held(self) -> bool:
        return self._mine

    def holder(self) -> str | None:
        return None

    def release(self) -> None:
        with self._guard:
            if self._mine:
                self._backing.controller = self._mine = False


def controller_lock(store):
    """The controller lock of `store`'s state (see the module's docstring)."""
    from reconciler.state.store import LocalFileStore, MemoryStore

    if isinstance(store, LocalFileStore):
        return FileControllerLock(store.path.with_name(store.path.name + ".controller.lock"))
    if isinstance(store, MemoryStore):
        return MemoryControllerLock(store._backing)
    if hasattr(store, "_connect_plain"):
        return PostgresControllerLock(store)
    raise StateError(f"watch cannot elect a controller on the state {store.where}")
