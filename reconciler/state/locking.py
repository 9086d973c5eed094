"""Who holds the state: lock info, and the OS lock on `<state>.lock` that carries it.

`FileLock` takes `fcntl.flock` on the lock file (the kernel drops it when its process
dies, so a `kill -9` never leaves a stale lock: the next locker simply gets it and
overwrites the dead holder's info) and writes a `LockInfo` into the same file so that a
second writer's error names the holder. `break_stale` is `force-unlock` for the local
file: it clears lock info whose holder is gone, and refuses while the holder lives.
`take_or_wait` is every store's wait for `--lock-timeout`: it polls on an injected clock
(so tests run instantly) and says once that it waits. Callers: `store.LocalFileStore`;
`LockInfo` and `take_or_wait` also serve `store.MemoryStore` and `postgres.PostgresStore`.
"""

from __future__ import annotations

import datetime as _dt
import errno
import fcntl
import getpass
import json
import logging
import os
import socket
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, TypeVar

from reconciler.errors import StateError

log = logging.getLogger(__name__)

T = TypeVar("T")

POLL_INTERVAL = 0.1  # seconds between attempts while waiting for --lock-timeout


@dataclass(frozen=True)
class LockInfo:
    id: str
    operation: str
    who: str  # user@host pid N
    created: str  # ISO 8601, UTC

    @classmethod
    def new(cls, operation: str) -> "LockInfo":
        return cls(id=str(uuid.uuid4()), operation=operation, who=_who(),
                   created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"))

    def to_json(self) -> dict[str, str]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: object) -> "LockInfo | None":
        """None when `data` is not a lock info (an empty or half-written lock file)."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(**{k: str(data[k]) for k in ("id", "operation", "who", "created")})
        except KeyError:
            return None


def identity() -> tuple[str, str, int]:
    """(user, host, pid) of this process, as a lock holder names itself."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry, no LOGNAME (containers)
        user = f"uid {os.getuid()}"
    return user, socket.gethostname(), os.getpid()


def who(user: str, host: str, pid: int) -> str:
    return f"{user}@{host} pid {pid}"


def _who() -> str:
    return who(*identity())


def take_or_wait(attempt: Callable[[], T | None], holder: Callable[[], LockInfo | None],
                 where: str, timeout: float, clock: Callable[[], float],
                 sleep: Callable[[float], None]) -> T:
    """`attempt()` until it returns something, for up to `timeout` seconds: the wait is said
    once on stderr (through logging), and the error at the end names the `holder()`."""
    deadline = clock() + max(0.0, timeout)
    said = False
    while True:
        got = attempt()
        if got is not None:
            return got
        remaining = deadline - clock()
        if remaining <= 0:
            raise locked_error(holder(), where)
        if not said:
            who = holder()
            by = ("another process" if who is None else
                  f"{who.who} (operation {who.operation} since {who.created})")
            log.warning("state %s is locked by %s; waiting up to %g s for it (--lock-timeout)",
                        where, by, timeout)
            said = True
        sleep(min(POLL_INTERVAL, remaining))


def locked_error(holder: LockInfo | None, where: str) -> StateError:
    if holder is None:
        who = "another process (its lock info is unreadable)"
    else:
        who = (f"{holder.who} (operation {holder.operation} since {holder.created}, "
               f"lock id {holder.id})")
    return StateError(f"state is locked by {who}: {where}; try again when it finishes, "
                      "or wait longer with --lock-timeout")


class FileLock:
    """An exclusive `flock` on `path` that records `LockInfo` inside the file."""

    def __init__(self, path: Path, *, timeout: float = 0.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self.path = Path(path)
        self.timeout = max(0.0, float(timeout))
        self._clock = clock
        self._sleep = sleep
        self._fd: int | None = None
        self.info: LockInfo | None = None

    def acquire(self, operation: str) -> LockInfo:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise StateError(f"cannot open the lock file {self.path}: {exc.strerror}") from exc

        def attempt() -> bool | None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise StateError(f"cannot lock {self.path}: {exc.strerror}") from exc
                return None

        try:
            take_or_wait(attempt, self._read_holder, str(self.path), self.timeout,
                         self._clock, self._sleep)
            info = LockInfo.new(operation)
            data = (json.dumps(info.to_json(), indent=2, sort_keys=True) + "\n").encode()
            os.ftruncate(fd, 0)
            os.pwrite(fd, data, 0)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd, self.info = fd, info
        return info

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd, self.info = self._fd, None, None
        try:
            os.ftruncate(fd, 0)  # the file stays: unlinking a flocked file races with waiters
        finally:
            os.close(fd)  # closing drops the flock

    def break_stale(self, lock_id: str) -> LockInfo:
        """Clear the lock info `lock_id` when its holder is gone; StateError otherwise."""
        try:
            fd = os.open(self.path, os.O_RDWR)
        except FileNotFoundError:
            raise StateError(f"{self.path} does not exist: the state is not locked") from None
        except OSError as exc:
            raise StateError(f"cannot open the lock file {self.path}: {exc.strerror}") from exc
        try:
            holder = self._read_holder()
            if holder is None:
                raise StateError(f"the state is not locked ({self.path} holds no lock info)")
            if holder.id != lock_id:
                raise StateError(f"refusing to unlock: the lock in {self.path} has id {holder.id}, "
                                 f"not {lock_id}")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise StateError(
                        f"refusing to unlock: lock {lock_id} is held by a live process "
                        f"({holder.who}, operation {holder.operation} since {holder.created}); "
                        "wait for it to finish or stop it") from None
                raise StateError(f"cannot lock {self.path}: {exc.strerror}") from exc
            os.ftruncate(fd, 0)
            os.fsync(fd)
            return holder
        finally:
            os.close(fd)

    def _read_holder(self) -> LockInfo | None:
        try:
            return LockInfo.from_json(json.loads(self.path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            return None
