"""Text made safe to print on a terminal: a model's text may hold any character (a byte-level
BPE can emit all 256 bytes even when trained on plain ASCII), and some of them are commands to
the terminal: ESC starts colour and cursor sequences, SO switches to line-drawing characters,
BEL rings, U+202E reverses the rest of the line. On a terminal those are shown as escapes
(``\\x1b``, ``\\u202e``); piped or written to a file, the text stays exactly as generated.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

# C0 and C1 control characters but the newline and the tab, DEL, and the bidirectional
# embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069)
TERMINAL_COMMANDS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def escaped(character: re.Match) -> str:
    code = ord(character.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def for_terminal(text: str, stream: TextIO | None = None) -> str:
    """``text`` with its terminal commands shown as escapes when ``stream`` (stdout by
    default) is a terminal; ``text`` itself otherwise."""
    stream = sys.stdout if stream is None else stream
    if not stream.isatty():
        return text
    return TERMINAL_COMMANDS.sub(escaped, text)
