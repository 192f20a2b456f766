"""Text printed on a terminal: a model's control characters shown as escapes, not obeyed."""

import io

from light_llm.terminal import for_terminal


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_commands_to_a_terminal_are_shown_as_escapes_and_the_rest_kept():
    text = "red \x1b[31m\x0eline\x07 \x7f\x85 \u202egnirts\u2066 é 日本 🙂\ttab\nnext\r"
    shown = for_terminal(text, Terminal())
    assert shown == (
        "red \\x1b[31m\\x0eline\\x07 \\x7f\\x85 \\u202egnirts\\u2066 é 日本 🙂\ttab\nnext\\x0d"
    )
    assert for_terminal(text, io.StringIO()) == text  # piped or to a file: exactly the text
