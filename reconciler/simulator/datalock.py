"""One owner per simulator data file: an OS lock on `<data file>.lock`, held for the life
of the process that serves the data (`sim serve --data`, or a command run with `--sim`).

    release = hold(path)   # raises DataInUse naming the holder (its pid and command)
    ...
    release()              # or let the process end

Two processes serving one data file would each write it whole after their own writes
and silently undo the other's, so the second is refused. The lock is `flock` on the lock
file (it dies with its process, `kill -9` included); the file holds the holder's pid and
command line for the message. A process may hold it for several apps (re-entrant: it is
let go when every hold is released, or when the process ends); commands run one after the
other each take and release it.
Where a holder is stopping (a `sim serve` just sent SIGTERM), the lock is waited for a
moment before the refusal. Callers: `command` (`sim serve --data`) and the CLI's `--sim`.
"""

from __future__ import annotations

import os
import pathlib
import sys
import time
from typing import Callable

from reconciler.simulator.store import SimulatorDataError

try:
    import fcntl
except ImportError:  # not a POSIX system: no lock (the simulator still runs)
    fcntl = None  # type: ignore[assignment]

__all__ = ["DataInUse", "hold", "WAIT_SECONDS"]

WAIT_SECONDS = 2.0  # how long a lock being released is waited for
_held: dict[str, list[int]] = {}  # real path of a lock file -> [descriptor, holds], here
_HIDDEN = ("--client-secret",)  # options whose values the holder's message never shows


class DataInUse(SimulatorDataError):
    """Another process serves the data file."""


def hold(data_path: str | os.PathLike) -> Callable[[], None]:
    """Take the lock of the data file `data_path` for this process (once more, if it
    holds it); the function that releases this hold. DataInUse, naming the process that
    holds it, when another does; SimulatorDataError when it cannot be locked."""
    if fcntl is None:
        return lambda: None
    path = pathlib.Path(data_path)
    lock_path = path.with_name(path.name + ".lock")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        key = os.path.realpath(lock_path)
        if key in _held:
            _held[key][1] += 1
            return _releaser(key)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise SimulatorDataError(f"cannot lock simulator data {path}: "
                                 f"{exc.strerror or exc}") from None
    deadline = time.monotonic() + WAIT_SECONDS
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() >= deadline:
                holder = _holder(fd)
                os.close(fd)
                raise DataInUse(
                    f"simulator data {path} is in use by {holder}: one process serves a "
                    "data file at a time (stop it, or give this one another data file)"
                ) from None
            time.sleep(0.05)
        except OSError as exc:
            os.close(fd)
            raise SimulatorDataError(f"cannot lock simulator data {path}: "
                                     f"{exc.strerror or exc}") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()} {_command()}\n".encode("utf-8", "replace"), 0)
    _held[key] = [fd, 1]
    return _releaser(key)


def _releaser(key: str) -> Callable[[], None]:
    done = False

    def release() -> None:
        nonlocal done
        if done or key not in _held:
            return
        done = True
        _held[key][1] -= 1
        if _held[key][1] == 0:
            fd, _ = _held.pop(key)
            os.close(fd)  # the lock goes with it (the file stays: its holder's line is stale)

    return release


def _holder(fd: int) -> str:
    """`process <pid> (<command>)` from the lock file, or what is known of it."""
    try:
        text = os.pread(fd, 4096, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    pid, _, command = text.partition(" ")
    if not pid.isdigit():
        return "another process (it has not said which yet)"
    return f"process {pid} ({command})" if command else f"process {pid}"


def _command() -> str:
    """This process's command line as the user typed it, secrets left out."""
    args = list(sys.argv)
    name = os.path.basename(args[0]) if args else "python"
    if name in ("__main__.py", "cli.py"):
        name = "runai-reconcile"
    shown = [name]
    hide = False
    for arg in args[1:]:
        if hide:
            shown.append("***")
            hide = False
        elif arg in _HIDDEN:
            shown.append(arg)
            hide = True
        elif arg.startswith(tuple(f"{o}=" for o in _HIDDEN)):
            shown.append(arg.split("=", 1)[0] + "=***")
        else:
            shown.append(arg)
    return " ".join(shown)
