"""What a newcomer reads: the README's opening names what the product is (the seven kinds
and the watch controller), every docs page is listed in the README's own table, and no
page speaks the team's internal language (an issue number, a "round" of work) that a
reader outside the team cannot follow. docs/performance.md stays a reference, not a log.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]

# "issue 21", "issues 11 and 13", "Issue #4"; "round 3", "the second round", "this round".
_INTERNAL = re.compile(
    r"\bissues? #?\d+"
    r"|\bround \d+"
    r"|\b(?:first|second|third|last|next|this|that|earlier|each|every|its) rounds?\b(?! trip)",
    re.IGNORECASE)


def internal_references(text: str) -> list[tuple[int, str]]:
    return [(n, m.group(0)) for n, line in enumerate(text.splitlines(), 1)
            for m in _INTERNAL.finditer(line)]


def test_no_page_cites_an_issue_number_or_a_round_of_work():
    found = [f"{page.relative_to(ROOT)}:{n}: {words!r}"
             for page in PAGES
             for n, words in internal_references(page.read_text(encoding="utf-8"))]
    assert found == []


def test_the_check_finds_what_it_is_for_and_spares_a_round_trip():
    text = ("Measured in issue 21.\nSee Issue #4 and issues 11 and 13.\n"
            "From its second round on.\nround 3's loaders\n"
            "three round trips of 50 ms\na round of 429s halves it\n")
    assert [w for _, w in internal_references(text)] == [
        "issue 21", "Issue #4", "issues 11", "second round", "round 3"]


def test_the_readme_opening_names_the_seven_kinds_and_watch():
    opening = README.read_text(encoding="utf-8").split("\n## ", 1)[0].lower()
    opening = " ".join(opening.split())
    for words in ("trainings", "workspaces", "inferences", "distributed trainings",
                  "distributed inferences", "nim services", "workloads v2 manifests",
                  "watch"):
        assert words in opening, words


def test_the_readme_table_lists_every_docs_page():
    text = README.read_text(encoding="utf-8")
    table = text[text.index("| page | what it covers |"):]
    listed = {(ROOT / t).resolve() for t in re.findall(r"\]\((docs/[^)#]+\.md)", table)}
    unlisted = [str(p.relative_to(ROOT)) for p in PAGES[1:] if p.resolve() not in listed]
    assert unlisted == []


def test_performance_is_a_reference_of_at_most_300_lines():
    assert len((ROOT / "docs" / "performance.md").read_text().splitlines()) <= 300


def test_no_code_or_test_text_cites_an_issue_number():
    """Test names, docstrings and comments say what they prove, not which issue asked."""
    cites = re.compile(r"\bissues? #?\d+", re.IGNORECASE)
    files = [p for folder in ("reconciler", "tests", "benchmarks")
             for p in sorted((ROOT / folder).rglob("*.py")) if p != Path(__file__).resolve()]
    found = [f"{p.relative_to(ROOT)}:{n}: {m.group(0)!r}" for p in files
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             for m in cites.finditer(line)]
    assert found == []
