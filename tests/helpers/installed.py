"""What of the dependency lock this Python lacks: the root conftest stops the run at once,
saying so, rather than on an ImportError deep in a fixture module."""

from __future__ import annotations

import importlib.metadata
import re

# A release pinned for every platform: `name==version \` (a line with a marker is not).
_PINNED = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==\S+ \\$", re.MULTILINE)


def missing(lock_text: str) -> list[str]:
    """The releases `lock_text` (a requirements file made by .ci/lock) pins for every
    platform that this Python has not installed."""
    out = []
    for name in _PINNED.findall(lock_text):
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            out.append(name)
    return out
