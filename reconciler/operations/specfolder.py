"""The specs folder a watch reads: its specs re-read only when a file under it changed,
and then only the changed files parsed (`SpecsFolder`, over the spec cache kept in
memory); with `--pull`, the git tree fast-forwarded first (`pull`, through the git command
line) and its commit noted.

Caller: the package's `watching`.
"""

from __future__ import annotations

import os
import subprocess

from reconciler import errors

GIT_TIMEOUT_S = 120.0
_SUFFIXES = (".yaml", ".yml", ".json")  # the files a spec may be in


class Loaded:
    """The specs already loaded, in the shape `make_plan` takes (a PendingSpecs')."""

    in_background = False

    def __init__(self, workloads) -> None:
        self._workloads = workloads

    async def wait(self):
        return self._workloads


class SpecsFolder:
    """The specs of a folder, read again only when a file under it changed (its path,
    size, modification time or inode); then only the files whose content changed are
    parsed (the spec cache, kept in memory between cycles; `parsed` counts them)."""

    def __init__(self, directory: str) -> None:
        from reconciler.desired.cache import SpecCache

        self.directory = directory
        self._seen: tuple | None = None
        self._workloads: list | None = None
        self.cache = SpecCache.for_folder(directory) or SpecCache()
        self.parsed = 0  # files parsed by the last read

    def _fingerprint(self) -> tuple:
        """(path, size, modification time, inode) of each spec file, in name order, as
        `os.walk` would find them (a linked folder not entered, `.git` skipped): read from
        `os.scandir`'s entries, whose paths and types come from the listing itself."""
        out: list[tuple] = []
        folders = [self.directory]
        while folders:
            try:
                with os.scandir(folders.pop()) as found:
                    entries = sorted(found, key=lambda e: e.name)
            except OSError:
                continue
            inner = []
            for entry in entries:
                try:
                    if entry.name.endswith(_SUFFIXES) and not entry.is_dir():
                        st = entry.stat()
                        out.append((entry.path, st.st_size, st.st_mtime_ns, st.st_ino))
                    elif entry.name != ".git" and entry.is_dir(follow_symlinks=False):
                        inner.append(entry.path)
                except OSError:
                    pass
            folders += reversed(inner)  # depth first, in name order
        return tuple(out)

    def get(self) -> tuple[list, bool]:
        """The workloads, and whether they were parsed again for this call."""
        seen = self._fingerprint()
        if seen == self._seen and self._workloads is not None:
            return self._workloads, False
        from reconciler.desired import start_loading

        self._workloads, self._seen = None, None
        pending = start_loading(self.directory, processes=0, cache=self.cache)
        workloads = pending.result()
        pending.save_cache()
        self.parsed = pending.parsed
        self._workloads, self._seen = workloads, seen
        return workloads, True


def git(directory: str, *args: str) -> str:
    done = subprocess.run(["git", "-C", directory, *args], capture_output=True, text=True,
                          timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise errors.ReconcileError(f"git {' '.join(args)} in {directory} failed: "
                                    + (lines[-1].strip() if lines else f"exit {done.returncode}"))
    return done.stdout.strip()


def pull(directory: str) -> str:
    """Fast-forward the git tree at `directory` (`git pull --ff-only`); its HEAD commit."""
    git(directory, "pull", "--ff-only", "--quiet")
    return git(directory, "rev-parse", "HEAD")
