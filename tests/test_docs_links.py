"""Every relative link in README.md and docs/**/*.md resolves: the file or folder it names
exists, and an `#anchor` names a heading of the page it points to (GitHub's heading ids).
A broken link fails naming its file, line and link."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# [text](target) and [text](target "title"); images too. Inline code is blanked first.
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
# [label]: target reference definitions.
_REF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:|^//")


def _lines(path: Path, blank_code: bool = True):
    """(line number, text) outside fenced code blocks, inline code blanked unless not
    `blank_code`."""
    fence = None
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = _FENCE.match(line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif line.strip().startswith(fence):
                fence = None
            continue
        if fence is None:
            yield n, (_CODE_SPAN.sub(lambda s: " " * len(s.group(0)), line)
                      if blank_code else line)


def links(path: Path) -> list[tuple[int, str]]:
    found = []
    for n, line in _lines(path):
        found += [(n, m.group(1)) for m in _LINK.finditer(line)]
        ref = _REF.match(line)
        if ref:
            found.append((n, ref.group(1)))
    return found


def slug(heading: str) -> str:
    """GitHub's id for a heading: markup dropped, lower case, punctuation removed but
    `-` and `_`, each space a `-`."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # links: their text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    ids = set()
    for _, line in _lines(path, blank_code=False):
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        ids.add(base if n == 0 else f"{base}-{n}")
    text = path.read_text(encoding="utf-8")
    ids |= set(re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", text))
    return ids


def problems(path: Path, root: Path = ROOT) -> list[str]:
    out = []
    for n, target in links(path):
        if _EXTERNAL.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / unquote(file_part)).resolve() if file_part else path
        where = f"{path.relative_to(root)}:{n}: ({target})"
        if not dest.exists():
            out.append(f"{where}: {file_part} does not exist")
        elif root not in dest.parents and dest != root:
            out.append(f"{where}: points outside the repository")
        elif anchor and dest.suffix == ".md" and unquote(anchor).lower() not in anchors(dest):
            out.append(f"{where}: {dest.relative_to(root)} has no heading #{anchor}")
    return out


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert problems(page) == []


def test_the_readme_is_a_front_page_from_which_every_page_is_reached():
    readme = ROOT / "README.md"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= 200
    reached, todo = {readme}, [readme]
    while todo:
        page = todo.pop()
        for _, target in links(page):
            dest = (page.parent / unquote(target.partition("#")[0])).resolve()
            if not _EXTERNAL.match(target) and dest.suffix == ".md" and dest.is_file() \
                    and dest not in reached:
                reached.add(dest)
                todo.append(dest)
    orphans = [str(p.relative_to(ROOT)) for p in PAGES if p not in reached]
    assert orphans == [], "pages no link from README.md leads to"


def test_a_broken_link_or_anchor_is_named_with_its_file_and_line(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.md").write_text("# B\n\n## Saved plans (`plan --out FILE`)\n")
    page = tmp_path / "README.md"
    page.write_text(
        "# A\n"
        "[ok](docs/b.md) and [ok too](docs/b.md#saved-plans-plan---out-file), [here](#a)\n"
        "`[not a link](nowhere.md)`\n"
        "```\n[in code](nowhere.md)\n```\n"
        "[gone](docs/c.md) [bad anchor](docs/b.md#no-such) [web](https://example.com/x)\n"
        "[ref]: docs/d.md\n")
    assert problems(page, tmp_path) == [
        "README.md:7: (docs/c.md): docs/c.md does not exist",
        "README.md:7: (docs/b.md#no-such): docs/b.md has no heading #no-such",
        "README.md:8: (docs/d.md): docs/d.md does not exist",
    ]
