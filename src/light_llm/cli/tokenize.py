"""``light-llm tokenize``: show the ids a tokenizer gives a text, and the tokens they stand for."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from light_llm.errors import DataError, TokenizerError

TOKENIZER_NAMES = ("char", "gpt2", "bert", "bpe")  # --tokenizer's names; anything else: a folder

DESCRIPTION = """\
Tokenize a text and print the ids a model would see.

gpt2 and char print a table of the tokens (index, id, the text each id stands for) and their
count. bert prints the model inputs of seed 003 §4: input ids with [CLS]/[SEP] (and [PAD]),
the attention mask and the token type ids; give a second TEXT for a sentence pair.
With --checkpoint the checkpoint's own tokenizer is used (a folder written by `light-llm
tokenizer train` counts as one; --tokenizer DIR says the same). Without one, the char
vocabulary is built from the text itself. --stats prints counts instead of the listing:
characters, UTF-8 bytes, tokens, bytes and characters per token, unknown tokens, and the most
frequent tokens.
"""

EXAMPLES = """\
examples:
  light-llm tokenize "Hello world"
  light-llm tokenize --tokenizer bert " I love chess" "I love soccer" \\
      --max-length 20 --padding max_length
  light-llm tokenize --tokenizer gpt2 --file notes.txt --json
  light-llm tokenize --checkpoint out-bpe --stats --file notes.txt
  light-llm tokenize --tokenizer my-tokenizer "a folder of light-llm tokenizer train"
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
        metavar="NAME|DIR",
        help=(
            f"which tokenizer: {', '.join(TOKENIZER_NAMES)}, or a folder holding one, as "
            "--checkpoint (default: the checkpoint's, else gpt2; bpe needs its folder)"
        ),
    )
    parser.add_argument(
        "--file",
        type=Path,
        metavar="PATH",
        help="tokenize this UTF-8 file, read as train reads a corpus (line ends as \\n, no BOM)",
    )
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
    parser.add_argument(
        "--stats", action="store_true", help="counts and the most frequent tokens, not the ids"
    )
    parser.add_argument(
        "--top", type=int, default=10, metavar="N", help="--stats: the N most frequent tokens"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from light_llm.checkpoints import load_tokenizer
    from light_llm.tokenizers import get_tokenizer

    text = read_input(args)
    if args.tokenizer is not None and args.tokenizer not in TOKENIZER_NAMES:
        if not Path(args.tokenizer).is_dir():
            raise TokenizerError(
                f"--tokenizer must be one of {', '.join(TOKENIZER_NAMES)} or a folder holding "
                f"a tokenizer (light-llm tokenizer train, a training run), got "
                f"{args.tokenizer!r}."
            )
        if args.checkpoint is not None:
            raise TokenizerError(
                f"give the tokenizer's folder once: --tokenizer {args.tokenizer} or "
                f"--checkpoint {args.checkpoint}, not both."
            )
        args.checkpoint, args.tokenizer = Path(args.tokenizer), None  # a folder: as --checkpoint
    if args.checkpoint is not None:
        tokenizer = load_tokenizer(args.checkpoint)
        if args.tokenizer is not None and args.tokenizer != tokenizer.name:
            raise TokenizerError(
                f"the checkpoint {args.checkpoint} uses the {tokenizer.name} tokenizer, "
                f"not {args.tokenizer}."
            )
    elif args.tokenizer == "bpe":
        raise TokenizerError(
            "a bpe tokenizer is learned from a corpus: give the folder it was saved in with "
            "--checkpoint DIR (light-llm tokenizer train, or a run of light-llm train)."
        )
    else:
        tokenizer = get_tokenizer(args.tokenizer or "gpt2", text=text)

    if args.stats:
        if args.text_pair is not None:
            raise TokenizerError("--stats counts the tokens of one text, not of a pair.")
        print_stats(tokenizer, text, args.top, as_json=args.json)
        return 0
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
    """The TEXT argument or the contents of --file (exactly one of them), the file's text as
    train and eval read it."""
    if args.file is None:
        if args.text is None:
            raise TokenizerError("give a TEXT to tokenize, or --file PATH.")
        return args.text
    if args.text is not None:
        raise TokenizerError("give either a TEXT or --file PATH, not both.")
    from light_llm.data import read_utf8_text

    if not args.file.exists() and not args.file.is_symlink():
        raise DataError(f"no such file: {args.file}.")
    return read_utf8_text(args.file, "the file")


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


def token_stats(tokenizer, text: str, top: int) -> dict:
    """Characters, UTF-8 bytes, tokens, bytes and characters per token, unknowns (ids of
    [UNK], or characters outside a char vocabulary, which are left out of the count; a
    byte-level tokenizer has none) and the ``top`` most frequent tokens of ``text``."""
    from collections import Counter

    unknown = 0
    if tokenizer.name == "char":
        alphabet = set(tokenizer.chars)
        unknown = sum(1 for char in text if char not in alphabet)
        ids = tokenizer.encode("".join(char for char in text if char in alphabet))
    else:
        ids = tokenizer.encode(text)
        unk_id = getattr(tokenizer, "unk_id", None)
        unknown = ids.count(unk_id) if unk_id is not None else 0
    n_bytes = len(text.encode("utf-8"))
    frequent = Counter(ids).most_common(top)
    texts = tokenizer.tokens([token_id for token_id, _ in frequent])
    return {
        "tokenizer": tokenizer.name,
        "vocab_size": tokenizer.vocab_size,
        "characters": len(text),
        "bytes": n_bytes,
        "tokens": len(ids),
        "bytes_per_token": n_bytes / len(ids) if ids else None,
        "characters_per_token": len(text) / len(ids) if ids else None,
        "unknown": unknown,
        "distinct_tokens": len(set(ids)),
        "most_frequent": [
            {"id": token_id, "token": token, "count": count}
            for (token_id, count), token in zip(frequent, texts, strict=True)
        ],
    }


def print_stats(tokenizer, text: str, top: int, as_json: bool) -> None:
    """:func:`token_stats` as JSON or as a few lines and a table."""
    if top < 0:
        raise TokenizerError(f"--top must be at least 0, got {top}.")
    stats = token_stats(tokenizer, text, top)
    if as_json:
        print(json.dumps(stats))
        return
    per_token = (
        f"{stats['bytes_per_token']:.3f} bytes and {stats['characters_per_token']:.3f} "
        "characters per token"
        if stats["tokens"]
        else "no tokens"
    )
    unknown_what = "characters outside the vocabulary" if tokenizer.name == "char" else "[UNK]"
    print(f"{tokenizer.name} tokenizer, vocabulary of {tokenizer.vocab_size}")
    print(f"characters: {stats['characters']:,}")
    print(f"bytes (UTF-8): {stats['bytes']:,}")
    print(f"tokens: {stats['tokens']:,} ({stats['distinct_tokens']:,} distinct); {per_token}")
    if tokenizer.name in ("gpt2", "bpe"):
        print("unknown: 0 (byte-level: every byte has an id)")
    else:
        print(f"unknown: {stats['unknown']:,} ({unknown_what})")
    if stats["most_frequent"]:
        print(f"most frequent tokens:\n{'count':>9}  {'share':>6}  {'id':>6}  token")
        for entry in stats["most_frequent"]:
            share = entry["count"] / stats["tokens"]
            print(f"{entry['count']:>9,}  {share:>6.1%}  {entry['id']:>6}  {entry['token']!r}")


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
