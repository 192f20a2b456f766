"""The documentation against the code: every seed section that a source file cites is defined
in docs/seeds.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src" / "light_llm"
SEEDS_PAGE = ROOT / "docs" / "seeds.md"

SEED = re.compile(r"\b[Ss]eeds? (?=00[0-4])")
SEPARATOR = re.compile(r"(?:,? (?:and )?|, ?)")
ITEM = re.compile(
    r"(?P<seed>00[0-4])\b"
    r"|§ ?(?P<first>\d+(?:\.\d+)?)(?:-(?P<last>\d+(?:\.\d+)?))?"
    r"|(?P<appendix>App\. [A-C])"
)
TITLE = re.compile(r"\b[Ss]eed 001,? \"(?P<title>[^\"]+)\"")


def section_citations(text: str) -> set[tuple[str, str]]:
    """(seed, section) for every citation in ``text``: "seed 002 §7.1, §7.3", "seed 000 §7,
    002 §4.2", "seed 003 §16-25" (a range of whole sections counts every one), "seed 002 App. B".
    A seed named with no section gives none."""
    found = set()
    for match in SEED.finditer(text):
        position, seed = match.end(), None
        while item := ITEM.match(text, position):
            if item["seed"]:
                seed = item["seed"]
            elif item["appendix"]:
                found.add((seed, item["appendix"]))
            elif item["last"] and "." not in item["first"] + item["last"]:
                found.update(
                    (seed, f"§{n}") for n in range(int(item["first"]), int(item["last"]) + 1)
                )
            else:
                found.update((seed, f"§{end}") for end in (item["first"], item["last"]) if end)
            position = item.end()
            separator = SEPARATOR.match(text, position)
            if separator is None or not ITEM.match(text, separator.end()):
                break
            position = separator.end()
    return found


def defined_sections() -> dict[str, set[str]]:
    """seed -> the first cells of the table rows under its '## Seed NNN' heading."""
    sections: dict[str, set[str]] = {}
    seed = None
    for line in SEEDS_PAGE.read_text(encoding="utf-8").splitlines():
        if heading := re.match(r"## Seed (00[0-4])\b", line):
            seed = heading[1]
            sections[seed] = set()
        elif seed and line.startswith("| ") and not line.startswith("| ---"):
            sections[seed].add(line.split("|")[1].strip())
    return sections


def source_texts() -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8") for path in sorted(SOURCE.rglob("*.py"))}


def test_section_citations_reads_every_form_the_code_uses():
    assert section_citations("(seed 002 §7.1, §7.3, §8.1, §12.1)") == {
        ("002", "§7.1"),
        ("002", "§7.3"),
        ("002", "§8.1"),
        ("002", "§12.1"),
    }
    assert section_citations("seed 000 §7, 002 §4.2 and seed 001") == {
        ("000", "§7"),
        ("002", "§4.2"),
    }
    assert section_citations("seed 003 §16-25") == {("003", f"§{n}") for n in range(16, 26)}
    assert section_citations("seeds 002 §12-13 and App. B") == {
        ("002", "§12"),
        ("002", "§13"),
        ("002", "App. B"),
    }
    assert section_citations("seed 002 §10.2, eq. 42 (seed 001, seed 004)") == {("002", "§10.2")}


def test_every_seed_section_the_code_cites_is_defined_in_docs_seeds_md():
    defined = defined_sections()
    assert sorted(defined) == ["000", "001", "002", "003", "004"]
    missing = sorted(
        f"seed {seed} {section} (cited in {path.relative_to(ROOT)})"
        for path, text in source_texts().items()
        for seed, section in section_citations(text)
        if section not in defined[seed]
    )
    assert missing == []


def test_every_seed_001_heading_the_code_quotes_is_defined_in_docs_seeds_md():
    headings = defined_sections()["001"]
    quoted = {
        " ".join(match["title"].split())  # a title broken over two lines of a docstring
        for text in source_texts().values()
        for match in TITLE.finditer(text)
    }
    assert len(quoted) >= 10
    assert sorted(title for title in quoted if not any(title in h for h in headings)) == []


# The README and the pages under docs/: short enough to read, every link and file they name real.

README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
CODE = re.compile(r"`([^`]+)`")


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as
    hyphens, a repeated anchor numbered -1, -2, ..."""
    anchors: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        fenced ^= line.startswith("```")
        if not fenced and (heading := re.match(r"#{1,6} (.+)", line)):
            anchor = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
            candidate, count = anchor, 0
            while candidate in anchors:
                count += 1
                candidate = f"{anchor}-{count}"
            anchors.add(candidate)
    return anchors


def broken_links(page: Path) -> list[str]:
    """The relative links of a Markdown page (outside HTML comments) whose file or #anchor does
    not exist."""
    broken = []
    for target in LINK.findall(COMMENT.sub("", page.read_text(encoding="utf-8"))):
        if re.match(r"[a-z]+:", target):  # https:, mailto:: not this repository's
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{page.name}: {target} (no such file)")
        elif anchor and anchor not in heading_anchors(linked):
            broken.append(f"{page.name}: {target} (no such heading)")
    return broken


def reading_path() -> list[list[str]]:
    """The cells of the README's table under '## Read the code in this order'."""
    text = README.read_text(encoding="utf-8")
    section = text.split("## Read the code in this order", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def test_the_readme_fits_on_a_page():
    assert len(README.read_text(encoding="utf-8").splitlines()) < 300


def test_heading_anchors_follow_github():
    page = ROOT / "docs" / "reliability.md"
    assert "what-you-can-rely-on-after-a-crash-and-after-bad-input" in heading_anchors(page)


def test_broken_links_finds_a_missing_file_and_a_missing_heading(tmp_path):
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# A heading, with (punctuation)\n", encoding="utf-8")
    page.write_text(
        "[ok](other.md#a-heading-with-punctuation) [gone](missing.md) [bad](other.md#nope) "
        "[web](https://example.com/x.md) <!-- [hidden](hidden.md) -->\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "page.md: missing.md (no such file)",
        "page.md: other.md#nope (no such heading)",
    ]


def test_every_relative_link_in_the_readme_and_docs_resolves():
    assert len(PAGES) > 5
    assert [broken for page in PAGES for broken in broken_links(page)] == []


def test_every_file_test_and_example_in_the_reading_path_exists():
    from light_llm import explain

    rows = reading_path()
    assert len(rows) >= 15
    files = [name for row in rows for name in CODE.findall(row[2])]
    tests = [name for row in rows for name in CODE.findall(row[3])]
    examples = [name for row in rows for name in CODE.findall(row[4])]
    assert len(files) >= len(rows) and len(tests) == len(rows) and examples
    assert [name for name in files if not (SOURCE / name).is_file()] == []
    assert [name for name in tests if not (ROOT / name).is_file()] == []
    assert [name for name in examples if name not in explain.names()] == []
