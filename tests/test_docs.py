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
