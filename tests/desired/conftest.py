"""Fixtures for the desired-state tests: a spec directory to write files into."""

from __future__ import annotations

import pathlib
import textwrap

import pytest

class SpecDir:
    """A temporary spec directory; `write` dedents and writes a file under it."""

    def __init__(self, root: pathlib.Path):
        self.root = root

    def write(self, rel: str, text: str) -> pathlib.Path:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path


@pytest.fixture
def specdir(tmp_path: pathlib.Path) -> SpecDir:
    root = tmp_path / "specs"
    root.mkdir()
    return SpecDir(root)
