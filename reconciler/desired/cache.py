"""A cache of loaded specs: each spec file's validated workloads, found again by content.

    cache = SpecCache.for_folder("specs")     # None when turned off
    keys = cache.keys(files)                  # reads and hashes every listed file
    cache.lookup(keys[display])               # the file's workloads' (address, source, line)s, or None
    cache.workloads(keys[display], share)     # its workloads, made when first asked for
    cache.put(keys[display], workloads)       # after a load without any problem
    cache.save()                              # to the user's cache folder, if anything changed

An entry is one spec file's `DesiredWorkload`s. Its key hashes everything the loader's
result for that file depends on: the tool (its version, the size and time of each of
its modules, Python's version, PyYAML's and pydantic's files), the file's name as the
user sees it (the messages and `source` carry it), the file's bytes, and the name and
bytes of every `_defaults.yaml` that applies to it. A file edited in place, whatever its
size and time, is read again; so is every spec below an edited `_defaults.yaml`. Only a
load without any problem is stored, so the messages of a bad spec always come from a
real load.

An entry keeps its workloads' keys (address, source, line: enough for the checks across
files) apart from the workloads themselves, which are made only when asked for, and
with a digest of each body's JSON. Asked with `share` (address -> the body the state
last applied), a workload whose body is that one exactly (the same JSON, keys sorted)
takes the state's body object instead of a copy of its own: an unchanged fleet's
bodies are held once, not twice.

On disk: one file per specs folder (by its absolute path) under
`$XDG_CACHE_HOME/runai-reconcile/specs/` (else `~/.cache/...`), holding the entries of
that folder's files at its last load: a header (the format, the tool's identity and a
hash of the payload) and the entries in `marshal` form, which keeps every value's type
as the loader made it. A cache file that is unreadable, of another tool or damaged is
not used; a folder that cannot be written leaves the cache unsaved: neither ever fails a
load. `RUNAI_RECONCILE_SPEC_CACHE=off` turns the cache off.

The cache file is only trusted as a file this tool wrote: it is opened without following
a link and without blocking, and read only when it is a regular file owned by the user,
readable by nobody else (mode 0600, as it is written) and no larger than `limit` (a
bound in proportion to the specs it can hold, `_bound`). Anything else in its place (a
FIFO, a link to a device, a file of another user or one others may read, a huge file)
is not read: one warning says why, and the load runs as with the cache off. A regular
file of the user's that is only too large or too open is replaced at the next save;
anything else is left as it is and the cache stays off.

A long-lived process (`watch`) keeps its `SpecCache`: the entries stay in memory between
loads, and only the files whose key changed are loaded again.
Callers: `background.start_loading` (plan, apply, validate, watch), through
`operations`.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import logging
import marshal
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson

from reconciler.desired.sources import MAX_FILE_BYTES
from reconciler.desired.types import DesiredWorkload, Lifecycle

__all__ = ["ENV", "SpecCache", "cache_folder"]

ENV = "RUNAI_RECONCILE_SPEC_CACHE"  # "off" (or 0, false, no): no cache
_OFF = {"off", "0", "false", "no"}
_MAGIC = b"runai-reconcile spec cache 3\n"
_DIGEST = 32
# A cache file may hold, per spec file, its workloads' bodies (which carry the
# `_defaults.yaml` above it) twice over (keys and marshalled bodies): the bound on its
# size is this many times the bytes of each spec file and its defaults, plus a floor.
_BOUND_FACTOR = 8
_BOUND_FLOOR = 1024 * 1024
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_CLOEXEC", 0))

log = logging.getLogger("reconciler.desired.cache")


def cache_folder() -> Path | None:
    """Where spec caches live, or None when the cache is turned off."""
    if os.environ.get(ENV, "").strip().lower() in _OFF:
        return None
    base = os.environ.get("XDG_CACHE_HOME") or ""
    if not os.path.isabs(base):  # the XDG rule: a relative path is ignored
        home = os.path.expanduser("~")
        if home == "~":
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "runai-reconcile" / "specs"


_identity: bytes | None = None


def tool_identity() -> bytes:
    """A digest of what the loader's results depend on besides the files: this tool's
    version and modules, Python's version, and the YAML and pydantic libraries."""
    global _identity
    if _identity is None:
        import reconciler

        h = hashlib.blake2b(digest_size=_DIGEST)
        h.update(f"{reconciler.__version__}\0{sys.version}\0{sys.hexversion}\0".encode())
        package = Path(reconciler.__file__).parent
        for root, dirs, names in os.walk(package):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(names):
                if name.endswith(".py"):
                    _stamp(h, os.path.join(root, name))
        for library in ("yaml", "_yaml", "pydantic", "pydantic_core"):
            spec = importlib.util.find_spec(library)
            if spec is not None and spec.origin:
                _stamp(h, spec.origin)
        _identity = h.digest()
    return _identity


def _stamp(h: Any, path: str) -> None:
    try:
        st = os.stat(path)
    except OSError:
        h.update(f"{path}\0-\0".encode())
        return
    h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())


class SpecCache:
    """Entries (key -> a file's workloads) in memory, read from and saved to `path`
    (None: memory only). `parsed` counts the files the loads through it have loaded
    (not served from it): what a long-lived process shows of its reuse."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path
        # key -> (the workloads' (address, source, line)s, their marshalled form or None,
        # the workloads once made or None)
        self._entries: dict[bytes, list] = {}
        self._read = path is None  # the disk file is read at the first lookup
        self._used: set[bytes] = set()
        self._dirty = False
        self.parsed = 0
        # The largest cache file read (`_bound` of the files `keys` was given), None until
        # then; whether the file was refused (warned once), and whether it is left alone.
        self.limit: int | None = None
        self._refused = False
        self._left_alone = False

    @classmethod
    def for_folder(cls, directory: str | os.PathLike) -> SpecCache | None:
        """The cache of the specs folder `directory` in the user's cache folder, or None
        when the cache is turned off (`RUNAI_RECONCILE_SPEC_CACHE=off`)."""
        folder = cache_folder()
        if folder is None:
            return None
        root = os.path.abspath(os.fspath(directory))
        name = hashlib.blake2b(root.encode("utf-8", "surrogateescape"),
                               digest_size=16).hexdigest()
        return cls(folder / f"{name}.cache")

    # --- keys ------------------------------------------------------------------------

    def keys(self, files: Iterable[tuple[Path, str, tuple]]) -> dict[str, bytes]:
        """display -> key, for each of `files` (`sources.Found`) that could be read."""
        identity = tool_identity()
        digests: dict[Path, bytes | None] = {}  # of each _defaults.yaml, read once

        def digest(path: Path) -> bytes | None:
            if path not in digests:
                digests[path] = _content_digest(path, sizes)
            return digests[path]

        out: dict[str, bytes] = {}
        sizes: dict[Path, int] = {}
        for path, display, chain in files:
            content = _content_digest(path, sizes)
            if content is None:
                continue
            h = hashlib.blake2b(identity, digest_size=_DIGEST)
            h.update(display.encode("utf-8", "surrogateescape") + b"\0" + content)
            for lower_path, lower_display in chain:
                if lower_path == path:
                    continue
                lower = digest(lower_path)
                if lower is None:
                    break
                h.update(b"\0" + lower_display.encode("utf-8", "surrogateescape")
                         + b"\0" + lower)
            else:
                out[display] = h.digest()
        self.limit = _bound(files, sizes)
        return out

    # --- entries ---------------------------------------------------------------------

    def lookup(self, key: bytes) -> tuple[tuple[str, str, int | None], ...] | None:
        """The (address, source, line) of each workload of the entry `key`, or None
        when the cache has no such entry."""
        if not self._read:
            self._read = True
            self._entries.update(self._load())
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._used.add(key)
        return entry[0]

    def workloads(self, key: bytes, share: Mapping[str, Any] | None = None,
                  ) -> tuple[DesiredWorkload, ...]:
        """The workloads of the entry `key` (found by `lookup`); with `share`, those whose
        body is exactly `share[address]` take that object as their body."""
        entry = self._entries[key]
        if entry[2] is None:
            made = []
            for plain in marshal.loads(entry[1]):
                body_digest = plain[-1]
                body = None
                if share and body_digest is not None:
                    other = share.get(plain[0])
                    if other is not None and _body_digest(other) == body_digest:
                        body = other
                made.append(_from_plain(plain, body))
            entry[2] = tuple(made)
            if not self._dirty:
                entry[1] = None  # a save keeps the file as it is
        return entry[2]

    def put(self, key: bytes, workloads: Iterable[DesiredWorkload]) -> None:
        made = tuple(workloads)
        self._entries[key] = [tuple((w.address, w.source, w.line) for w in made), None, made]
        self._used.add(key)
        self._dirty = True

    def forget_unused(self) -> None:
        """Keep only the entries the last load used (a file gone or changed leaves its
        old entry behind otherwise); start counting use afresh."""
        if len(self._used) != len(self._entries):
            self._entries = {k: v for k, v in self._entries.items() if k in self._used}
            self._dirty = True
        self._used = set()

    # --- disk ------------------------------------------------------------------------

    def save(self) -> None:
        """Write the entries the last load used, if they changed; never raises for the
        disk (a read-only or full cache folder leaves the cache unsaved)."""
        self.forget_unused()
        if not self._dirty or self.path is None or self._left_alone:
            return
        self._dirty = False
        try:
            payload = marshal.dumps({
                k: (keys, packed if packed is not None else marshal.dumps(
                    tuple(_to_plain(w) for w in made)))
                for k, (keys, packed, made) in self._entries.items()})
        except ValueError:  # a value marshal cannot keep (an exotic YAML tag): not cached
            return
        # The header and the entries written apart: never a copy of them together.
        header = _MAGIC + tool_identity() + hashlib.blake2b(
            payload, digest_size=_DIGEST).digest()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(header)
                    f.write(payload)
                os.replace(tmp, self.path)
            except BaseException:
                with _quiet():
                    os.unlink(tmp)
                raise
        except OSError:
            pass

    def on_disk(self) -> bool:
        """Whether the disk file is one of this tool's (its header), without reading the
        entries: what makes reading them on another core worth it (`background`)."""
        if self.path is None or self._read:
            return False
        head = self._read_file(len(_MAGIC) + _DIGEST)
        return head == _MAGIC + tool_identity()

    def payload(self) -> memoryview | None:
        """The disk file's entries as stored, checked (header and checksum); None when
        there is no usable file. What `lookup` reads first (an indexer's, for its parent:
        `parts`)."""
        if self.path is None:
            return None
        data = self._read_file()
        if data is None:
            return None
        head = len(_MAGIC)
        if (not data.startswith(_MAGIC)
                or data[head:head + _DIGEST] != tool_identity()):
            return None
        payload = memoryview(data)[head + 2 * _DIGEST:]  # not copied
        if hashlib.blake2b(payload, digest_size=_DIGEST).digest() != \
                data[head + _DIGEST:head + 2 * _DIGEST]:
            return None  # damaged
        return payload

    def _read_file(self, count: int | None = None) -> bytes | None:
        """The cache file's first `count` bytes (None: all of it), when it is a file this
        tool could have written (see the module's docstring); None when there is none or
        it is refused (the first refusal warns and turns the file off for this cache)."""
        if self._refused or self.path is None:
            return None
        try:
            fd = os.open(self.path, _OPEN_FLAGS)
        except (FileNotFoundError, NotADirectoryError):  # none yet, or no cache folder
            return None
        except OSError as exc:
            why = ("it is a symbolic link" if exc.errno == errno.ELOOP
                   else f"it cannot be opened: {exc.strerror}")
            return self._refuse(why, left_alone=True)
        try:
            st = os.fstat(fd)
            why, ours = _untrusted(st, self.limit)
            if why:
                return self._refuse(why, left_alone=not ours)
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read(st.st_size + 1 if count is None else count)
        except OSError as exc:
            return self._refuse(f"it cannot be read: {exc.strerror}", left_alone=True)
        finally:
            os.close(fd)
        if count is None and len(data) > st.st_size:  # it grew: not the file checked
            return self._refuse("it changed while it was read", left_alone=False)
        return data

    def _refuse(self, why: str, *, left_alone: bool) -> None:
        """Warn (once) that the cache file is not used, and why; the load goes on as with
        the cache off."""
        if not self._refused:
            self._refused = True
            self._read = True
            self._left_alone = left_alone
            log.warning("spec cache %s not used: %s; the specs are loaded without it%s",
                        self.path, why, " (remove it to use the cache again)"
                        if left_alone else "")
        return None

    def parts(self, size: int) -> Iterator[dict[bytes, tuple]]:
        """The entries read from the disk file that the load used (`lookup`), `size` at
        a time, as `adopt` takes them: what a child process sends its parent."""
        items = [(key, (entry[0], entry[1])) for key, entry in self._entries.items()
                 if key in self._used and entry[1] is not None]
        for at in range(0, len(items), size):
            yield dict(items[at:at + size])

    def all_used(self) -> bool:
        """Whether every entry was looked up since the last save: unless one is put, a
        save leaves the file as it is."""
        return len(self._used) == len(self._entries)

    def adopt(self, entries: Mapping[bytes, tuple],
              share: Mapping[str, Any] | None = None) -> None:
        """Take `entries` (`parts`, read by another process) as (some of) the disk
        file's, instead of reading the file here. With `share`, their workloads are made
        at once (`workloads`) and, the cache unchanged, their marshalled form let go."""
        self._read = True
        for key, (keys, packed) in entries.items():
            self._entries[key] = [keys, packed, None]
            if share is not None:
                self.workloads(key, share)

    def _load(self) -> dict[bytes, list]:
        return _entries_of(self.payload())


def _entries_of(payload: bytes | memoryview | None) -> dict[bytes, list]:
    if payload is None:
        return {}
    try:
        raw = marshal.loads(payload)
        entries = {k: [keys, packed, None] for k, (keys, packed) in raw.items()}
        if not all(isinstance(k, bytes) and isinstance(e[1], bytes)
                   for k, e in entries.items()):
            return {}
        return entries
    except Exception:  # noqa: BLE001 - whatever is wrong in it, the cache is not used
        return {}


def _content_digest(path: Path, sizes: dict[Path, int] | None = None) -> bytes | None:
    """A digest of the file's bytes; None for what the loader refuses unread (not a
    regular file: a FIFO would block, a device never end; or too large) or cannot read:
    it is loaded, and the loader says why. `sizes` takes the file's size."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_FILE_BYTES:
            return None
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_FILE_BYTES:
        return None
    if sizes is not None:
        sizes[path] = len(data)
    return hashlib.blake2b(data, digest_size=_DIGEST).digest()


def _bound(files: Iterable[tuple[Path, str, tuple]], sizes: Mapping[Path, int]) -> int:
    """The largest cache file worth reading for `files`: _BOUND_FACTOR times the bytes of
    each file and of the `_defaults.yaml` files that apply to it, plus _BOUND_FLOOR."""
    total = 0
    for path, _, chain in files:
        total += sizes.get(path, 0)
        total += sum(sizes.get(lower, 0) for lower, _ in chain if lower != path)
    return _BOUND_FLOOR + _BOUND_FACTOR * total


def _untrusted(st: os.stat_result, limit: int | None) -> tuple[str | None, bool]:
    """Why a cache file of status `st` is not read (None: it is), and whether it is a
    regular file of the user's (then a save may replace it)."""
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file", False
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it is owned by user {st.st_uid}, not by this user", False
    if st.st_mode & 0o077:
        return (f"its mode is {stat.S_IMODE(st.st_mode):04o}: others may read or change it "
                "(it is written 0600)"), True
    if limit is not None and st.st_size > limit:
        return (f"it holds {st.st_size} bytes, more than the {limit} its specs could "
                "need"), True
    return None, True


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)


def _body_digest(body: Any) -> bytes | None:
    """A digest of `body`'s JSON, keys sorted (orjson tells 1 from 1.0 and from true),
    or None when orjson cannot write it (an integer beyond 64 bits)."""
    try:
        text = orjson.dumps(body, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return None
    return hashlib.blake2b(text, digest_size=16).digest()


def _to_plain(w: DesiredWorkload) -> tuple:
    """The workload as marshal keeps it; its body marshalled apart, so that a body the
    state's replaces is never made."""
    lc = w.lifecycle
    return (w.address, w.kind, w.name, w.project_id, w.cluster_id, marshal.dumps(w.body),
            w.desired_phase, (lc.prevent_destroy, lc.ignore_changes, lc.sensitive), w.source,
            w.line, w.project_name, w.project_at, w.warnings, _body_digest(w.body))


def _from_plain(t: tuple, body: Any = None) -> DesiredWorkload:
    (_, kind, name, project_id, cluster_id, own_body, desired_phase,
     (prevent, ignore, sensitive), source, line, project_name, project_at, warnings, _) = t
    return DesiredWorkload(kind=kind, name=name, project_id=project_id, cluster_id=cluster_id,
                           body=marshal.loads(own_body) if body is None else body,
                           desired_phase=desired_phase,
                           lifecycle=Lifecycle(prevent, tuple(ignore), tuple(sensitive)),
                           source=source, line=line, project_name=project_name,
                           project_at=project_at, warnings=tuple(warnings))
