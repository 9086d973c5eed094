"""Editing a spec file behind a cache's back (the spec cache's and the indexer's tests)."""

from __future__ import annotations

import os
import pathlib


def edit_in_place(path: pathlib.Path, old: str, new: str) -> None:
    """Replace `old` by `new` (same length), keeping the file's size and times."""
    assert len(old) == len(new)
    st = path.stat()
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.stat().st_mtime_ns == st.st_mtime_ns
