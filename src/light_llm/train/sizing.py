"""One line of advice on the size of a model against its vocabulary and its corpus.

Two signs of a model sized wrongly for its data, both common when a small corpus meets a
large vocabulary (GPT-2's 50257 ids on a few hundred KB of text):

- the vocabulary's parameters (the token table, the output head when it is not tied to
  it and the value embeddings' table: V x d each) are more than half of all parameters, so
  most of the model is a lookup table and most of each step is spent on the softmax over V;
- the corpus has fewer than about 20 training tokens per parameter, the compute-optimal ratio
  of Hoffmann et al. (2022, "Chinchilla"): a model this large needs more text (or a few
  epochs, with the validation loss watched for overfitting).
"""

from __future__ import annotations

TOKENS_PER_PARAMETER = 20  # Chinchilla's compute-optimal tokens per parameter
VOCABULARY_SHARE = 0.5


def vocabulary_parameters(
    vocab_size: int, n_embd: int, tie_embeddings: bool, value_embeddings: bool = False
) -> int:
    """V x d for the token table, V x d more for an output head of its own and for the value
    embeddings' table E_v."""
    return vocab_size * n_embd * (1 + (not tie_embeddings) + value_embeddings)


def vocabulary_remedy(model: str | None, tokenizer: str | None) -> str:
    """How to shrink the vocabulary's tables with flags the same command accepts: a GPT
    learns a byte-level BPE (``--tokenizer bpe``), an encoder a WordPiece vocabulary
    (``--tokenizer wordpiece``; BPE has no [MASK])."""
    learned = "wordpiece" if model == "bert" else "bpe"
    if tokenizer == learned:
        return "a smaller --vocab-size frees them"
    return f"--tokenizer {learned} with a small --vocab-size frees them"


def sizing_advice(
    n_parameters: int,
    n_vocabulary_parameters: int,
    n_training_tokens: int,
    remedy: str = "a smaller --vocab-size or --tokenizer bpe frees them",
) -> str | None:
    """The advice line, with the numbers, or None when the model is sized sensibly.

    vocabulary share = n_vocabulary_parameters / n_parameters  (> 1/2: advised)
    tokens per parameter = n_training_tokens / n_parameters      (< 20: advised)
    """
    problems = []
    share = n_vocabulary_parameters / n_parameters
    if share > VOCABULARY_SHARE:
        problems.append(
            f"the vocabulary's tables hold {n_vocabulary_parameters / 1e6:.2f}M of the "
            f"{n_parameters / 1e6:.2f}M parameters ({share:.0%}; {remedy})"
        )
    ratio = n_training_tokens / n_parameters
    if ratio < TOKENS_PER_PARAMETER:
        problems.append(
            f"the corpus has {n_training_tokens:,} training tokens, {ratio:.1f} per parameter "
            f"(fewer than ~{TOKENS_PER_PARAMETER}: expect overfitting on long runs; a smaller "
            "model or more text)"
        )
    if not problems:
        return None
    return "sizing: " + "; ".join(problems) + "."
