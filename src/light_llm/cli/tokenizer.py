"""``light-llm tokenizer train``: learn a byte-level BPE or WordPiece vocabulary from a text."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from light_llm.train.config import (
    DEFAULT_MODEL,
    DEFAULT_PRESETS,
    PRESET_RECIPES,
    TRAINED_TOKENIZER_VOCAB,
)

# what `light-llm train` learns by default: its default preset's tokenizer
DEFAULT_KIND = PRESET_RECIPES[DEFAULT_PRESETS[DEFAULT_MODEL]]["tokenizer"]

DESCRIPTION = """\
Learn a tokenizer from a UTF-8 text file and write it to a folder that `light-llm train
--tokenizer DIR` and `light-llm tokenize --checkpoint DIR` read.

bpe: byte-level BPE for GPT models. The text is cut by GPT-2's pre-tokenisation regex (words
with their leading space, digits, punctuation, whitespace), each piece becomes its UTF-8
bytes, and the most frequent adjacent pair is merged into a new token until the vocabulary
has --vocab-size ids: <|endoftext|> (id 0), the 256 bytes (ids 1-256, in GPT-2's byte order:
the printable bytes ! to ~ first, so "l", byte 108, is id 76), then the merges.
Any text encodes and decodes back exactly. --vocab-size is at least 257.

wordpiece: an uncased WordPiece vocabulary with BERT's special tokens ([PAD] [UNK] [CLS]
[SEP] [MASK] = ids 0-4), for `light-llm train --model bert`.

The tokenizer is learned from the first 90% of the file, the training split that `light-llm
train --data FILE` uses, so that its validation text stays unseen (--whole-file: all of it).
Without --kind and --vocab-size it learns what `light-llm train` learns by default.
"""

EXAMPLES = """\
examples:
  light-llm tokenizer train --data my.txt --kind bpe --vocab-size 1024 --out tok-bpe
  light-llm tokenize --checkpoint tok-bpe --stats --file my.txt
  light-llm train --data my.txt --tokenizer tok-bpe --out out-mine
  light-llm tokenizer train --data my.txt --kind wordpiece --vocab-size 4000 --out tok-wp
"""

TOKENIZER_FILES = ("light_tokenizer.json", "vocab.txt")  # what a tokenizer folder may hold


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "tokenizer",
        help="learn a tokenizer (byte-level BPE or WordPiece) from your text",
        description="Tokenizers learned from your own text.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    train = actions.add_parser(
        "train",
        help="learn a bpe or wordpiece tokenizer from a text file",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    train.add_argument("--data", required=True, type=Path, metavar="FILE", help="UTF-8 text")
    train.add_argument(
        "--kind",
        choices=list(TRAINED_TOKENIZER_VOCAB),
        default=DEFAULT_KIND,
        help=f"bpe for a GPT, wordpiece for --model bert (default {DEFAULT_KIND}, as train's)",
    )
    train.add_argument(
        "--vocab-size",
        type=int,
        metavar="N",
        help="ids in all (default, as train's: "
        + ", ".join(f"{size} for {kind}" for kind, size in TRAINED_TOKENIZER_VOCAB.items())
        + ", or as many as a small text gives)",
    )
    train.add_argument("--out", required=True, type=Path, metavar="DIR", help="folder to write")
    train.add_argument(
        "--whole-file", action="store_true", help="learn from all of FILE, not its first 90%%"
    )
    train.add_argument(
        "--overwrite", action="store_true", help="replace the tokenizer already in DIR"
    )
    train.set_defaults(func=run_train)


def run_train(args: argparse.Namespace) -> int:
    from light_llm.atomic import write_folder_atomically
    from light_llm.data import encode_in_chunks, load_corpus, split_train_val
    from light_llm.errors import DataError
    from light_llm.tokenizers import train_tokenizer

    check_out_folder(args.out, args.overwrite)
    text = load_corpus(args.data)
    learned_from = text if args.whole_file else split_train_val(text)[0]
    if not learned_from.strip():
        raise DataError(
            f"the first 90% of {args.data} (its training split) holds no text to learn from: "
            f"the file has {len(text):,} character(s); give a longer text, or --whole-file."
        )
    asked = args.vocab_size
    vocab_size = TRAINED_TOKENIZER_VOCAB[args.kind] if asked is None else asked
    tokenizer = train_tokenizer(args.kind, learned_from, vocab_size, at_most=asked is None)
    with tempfile.TemporaryDirectory() as scratch:
        tokenizer.save(scratch)
        files = {path.name: path.read_bytes() for path in Path(scratch).iterdir()}
    write_folder_atomically(args.out, files, what="the tokenizer")

    n_bytes = len(learned_from.encode("utf-8"))
    n_tokens = sum(len(ids) for ids in encode_in_chunks(learned_from, tokenizer))
    part = "all of" if args.whole_file else "the first 90% of"
    print(
        f"wrote a {args.kind} tokenizer of {tokenizer.vocab_size} ids to {args.out}, learned "
        f"from {part} {args.data} ({n_bytes:,} bytes): {n_tokens:,} tokens there, "
        f"{n_bytes / max(n_tokens, 1):.2f} bytes per token"
    )
    print(
        f"use it: light-llm train --data {args.data} --tokenizer {args.out}"
        + (" --model bert" if args.kind == "wordpiece" else "")
    )
    return 0


def check_out_folder(out: Path, overwrite: bool) -> None:
    """ConfigError unless ``out`` is free: missing, empty, or (with ``overwrite``) holding
    nothing but a tokenizer."""
    from light_llm.atomic import FOLDER_MANIFEST, refuse_working_folder
    from light_llm.errors import ConfigError
    from light_llm.tokenizers.base import TOKENIZER_FILE

    refuse_working_folder(out, f"--out {out}")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a folder.")
    if not out.is_dir():
        return
    names = {path.name for path in out.iterdir()} - {FOLDER_MANIFEST}
    if not names:
        return
    if not names <= set(TOKENIZER_FILES) or TOKENIZER_FILE not in names:
        raise ConfigError(
            f"--out {out} holds other files than a tokenizer (a checkpoint?); choose a new "
            "or empty folder."
        )
    if not overwrite:
        raise ConfigError(f"--out {out} already holds a tokenizer; add --overwrite to replace it.")
