"""``light-llm tokenize``: show the ids a tokenizer gives a text, and the tokens they stand for."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from light_llm.errors import DataError, TokenizerError

DESCRIPTION = """\
Tokenize a text and print the ids a model would see.

gpt2 and char print a table of the tokens (index, id, the text each id stands for) and their
count. bert prints the model inputs of seed 003 §4: input ids with [CLS]/[SEP] (and [PAD]),
the attention mask and the token type ids; give a second TEXT for a sentence pair.
With --checkpoint the checkpoint's own tokenizer is used. Without one, the char vocabulary
is built from the text itself.
"""

EXAMPLES = """\
examples:
  light-llm tokenize "Hello world"
  light-llm tokenize --tokenizer bert " I love chess" "I love soccer" \\
      --max-length 20 --padding max_length
  light-llm tokenize --tokenizer gpt2 --file notes.txt --json
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tokenize",
        help="show the token ids (and tokens) of a text",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("text", nargs="?", metavar="TEXT", help="the text to tokenize")
    parser.add_argument(
        "text_pair", nargs="?", metavar="TEXT_PAIR", help="second sentence of a pair (bert only)"
    )
    parser.add_argument(
        "--tokenizer",
        choices=["char", "gpt2", "bert"],
        help="which tokenizer (default: the checkpoint's, else gpt2)",
    )
    parser.add_argument("--file", type=Path, metavar="PATH", help="tokenize this UTF-8 file")
    parser.add_argument(
        "--checkpoint", type=Path, metavar="DIR", help="use the tokenizer saved in this folder"
    )
    parser.add_argument(
        "--max-length",
        type=int,
        metavar="N",
        help="bert: at most N positions with [CLS]/[SEP] (default 512), truncating longest first",
    )
    parser.add_argument(
        "--padding",
        choices=["max_length", "longest"],
        help="bert: pad with [PAD] to --max-length ('longest' leaves a single input as it is)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from light_llm.checkpoints import load_tokenizer
    from light_llm.tokenizers import get_tokenizer

    text = read_input(args)
    if args.checkpoint is not None:
        tokenizer = load_tokenizer(args.checkpoint)
        if args.tokenizer is not None and args.tokenizer != tokenizer.name:
            raise TokenizerError(
                f"the checkpoint {args.checkpoint} uses the {tokenizer.name} tokenizer, "
                f"not {args.tokenizer}."
            )
    else:
        tokenizer = get_tokenizer(args.tokenizer or "gpt2", text=text)

    if tokenizer.name == "bert":
        print_bert(tokenizer, text, args)
        return 0
    if args.text_pair is not None or args.max_length is not None or args.padding is not None:
        raise TokenizerError(
            "TEXT_PAIR, --max-length and --padding apply to the bert tokenizer only."
        )
    if args.checkpoint is None and tokenizer.name == "char":
        print(
            f"note: no --checkpoint, so the char vocabulary is built from this text "
            f"({tokenizer.vocab_size} distinct characters).",
            file=sys.stderr,
        )
    print_ids(tokenizer, text, as_json=args.json)
    return 0


def read_input(args: argparse.Namespace) -> str:
    """The TEXT argument or the contents of --file (exactly one of them)."""
    if args.file is None:
        if args.text is None:
            raise TokenizerError("give a TEXT to tokenize, or --file PATH.")
        return args.text
    if args.text is not None:
        raise TokenizerError("give either a TEXT or --file PATH, not both.")
    try:
        return args.file.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise DataError(f"no such file: {args.file}.") from None
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{args.file} is not UTF-8 text (byte {exc.start} cannot be decoded)."
        ) from None
    except OSError as exc:
        raise DataError(f"cannot read {args.file}: {exc.strerror}.") from None


def print_ids(tokenizer, text: str, as_json: bool) -> None:
    """A table of index, id and token (repr, so spaces and newlines show), then the count."""
    ids = tokenizer.encode(text)
    tokens = tokenizer.tokens(ids)
    if as_json:
        print(json.dumps({"input_ids": ids, "tokens": tokens}))
        return
    id_width = max(len("id"), len(str(tokenizer.vocab_size - 1)))
    index_width = max(len("index"), len(str(len(ids) - 1)))
    print(f"{'index':>{index_width}}  {'id':>{id_width}}  token")
    for index, (token_id, token) in enumerate(zip(ids, tokens, strict=True)):
        print(f"{index:>{index_width}}  {token_id:>{id_width}}  {token!r}")
    print(f"Input Ids: {ids}")
    print(f"{len(ids)} tokens ({tokenizer.name} tokenizer, vocabulary of {tokenizer.vocab_size}).")


def print_bert(tokenizer, text: str, args: argparse.Namespace) -> None:
    """Input ids, attention mask and token type ids as seed 003 §4 prints them, and the tokens."""
    inputs = tokenizer.encode_plus(
        text, args.text_pair, max_length=args.max_length, padding=args.padding or False
    )
    if args.json:
        print(json.dumps(inputs))
        return
    print(f"Tokens: {tokenizer.tokens(inputs['input_ids'])}")
    print(f"Input Ids: {inputs['input_ids']}")
    print(f"Attention mask: {inputs['attention_mask']}")
    print(f"Token type ids: {inputs['token_type_ids']}")
