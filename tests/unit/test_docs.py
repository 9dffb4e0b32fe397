"""The README is a newcomer's guide and docs/ holds the reference: every relative link between them
leads to a file that exists and to a heading that file has, as GitHub renders them; `sextant --help`
names the same pages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from collector.cli import REFERENCE_PAGES
from tests.support.cli import sextant

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MAX_README_LINES = 300
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+)\)")


def prose(text: str) -> str:
    """The text a reader sees as Markdown: fenced blocks and inline code spans removed."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link text kept, lower case, punctuation dropped except `-`
    and `_`, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor, a repeated one numbered `-1`, `-2`... as GitHub numbers them."""
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M).splitlines():
        heading = re.match(r"#{1,6} (.*)", line)
        if heading:
            base = slug(heading.group(1))
            seen[base] = seen.get(base, -1) + 1
            found.add(base if seen[base] == 0 else f"{base}-{seen[base]}")
    return found


def broken_links(page: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(page.read_text())):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target}: no heading #{anchor} in {linked.name}")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_a_link_to_a_missing_heading_or_file_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## Tokens and `TLS`\n")
    page = tmp_path / "page.md"
    page.write_text(
        "## One\n\n[ok](#one) [ok](other.md#tokens-and-tls) [gone](#two) [gone](missing.md)\n"
        "`[code](#not-a-link)`\n\n```\n[block](#not-a-link)\n```\n"
    )
    assert broken_links(page) == ["#two: no heading #two in page.md", "missing.md: no such file"]


def test_the_readme_is_short_and_lists_every_reference_page() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= MAX_README_LINES
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f"](docs/{page.name})" in readme, page.name


def test_sextant_help_names_every_reference_page(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = sextant(capsys, "--help")
    assert code == 0
    named = re.findall(r"^  docs/(\S+\.md) ", out, re.M)
    assert named == [page for page, _ in REFERENCE_PAGES]
    assert sorted(named) == sorted(p.name for p in (ROOT / "docs").glob("*.md"))
