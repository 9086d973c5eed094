"""Writing spec files: every file of a set, or none (`write_all`), for `export`.

Caller: the package's `exporting`.
"""

from __future__ import annotations

import contextlib
import os

from reconciler import errors


def write_all(files: dict[str, str], *, force: bool, mode: int) -> None:
    """Write every file, or none when one exists and not `force`: each goes to a sibling
    temporary file first, and only when all of them are written are they renamed into
    place, with SIGINT and SIGTERM held off, so that an interrupt or a failure (a folder
    that is a file, a full disk) leaves no file behind nor any folder made for one.

    Durable as the state is (`state.store`): each file is fsync'd before its rename, and
    each folder that gained an entry after them, so that a crash after the command said
    "written" cannot leave empty or missing files."""
    import pathlib
    import signal
    import tempfile

    taken = [p for p in files if os.path.lexists(p)]
    if taken and not force:
        raise errors.ReconcileError(
            f"{len(taken)} file{'s' if len(taken) != 1 else ''} exist already "
            f"({', '.join(sorted(taken)[:3])}{', ...' if len(taken) > 3 else ''}); nothing was "
            "written: pass --force to overwrite them")
    not_files = [p for p in taken if not os.path.isfile(p) or os.path.islink(p)]
    if not_files:
        raise errors.ReconcileError(f"{not_files[0]} is not a regular file; nothing was written")
    made: list[pathlib.Path] = []  # folders this call created, outermost first
    written: list[tuple[str, pathlib.Path]] = []  # (temporary file, its target)
    done = False
    try:
        for path, text in files.items():
            target = pathlib.Path(path)
            try:
                missing = [d for d in (target.parent, *target.parent.parents)
                           if not os.path.lexists(d)]
                target.parent.mkdir(parents=True, exist_ok=True)
                made.extend(reversed(missing))
                fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.",
                                           suffix=".tmp")
                written.append((tmp, target))
                with os.fdopen(fd, "wb") as f:
                    f.write(text.encode())
                    f.flush()
                    os.fsync(f.fileno())
                os.chmod(tmp, mode)
            except OSError as exc:
                raise errors.ReconcileError(f"cannot write {path}: {exc.strerror or exc}; "
                                            "nothing was written") from None
        held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        try:
            for tmp, target in written:
                os.replace(tmp, target)
            done = True
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
        _sync_folders({t.parent for _, t in written} | {d.parent for d in made})
    finally:
        if not done:
            for tmp, _ in written:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
            for folder in reversed(made):
                with contextlib.suppress(OSError):
                    folder.rmdir()


def _sync_folders(folders) -> None:
    """fsync each folder (its new entries), deepest first. The files are in place by
    then: a folder that cannot be synced (a file system without it) is left as it is."""
    for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
        with contextlib.suppress(OSError):
            fd = os.open(folder, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
