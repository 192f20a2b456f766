"""Worked examples of seed 002 §10: next-token cross-entropy and perplexity of a trained model
on a short text (eqs. 2, 41, 44), and weight tying, the output head that is the embedding
table (eq. 43).

The model is a small character-level GPT (``light_llm.models.gpt``) trained here, in a few
seconds on a CPU, on the first 20 KB of the packaged Shakespeare (``light_llm.data``), with the
optimiser the trainer uses; the trained model is kept for the rest of the process. Nothing is
downloaded and nothing is written.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from light_llm.config import ModelConfig, count_parameters
from light_llm.explain import plots
from light_llm.explain.steps import Example, Step
from light_llm.models.gpt import GPT
from light_llm.shakespeare import shakespeare_slice
from light_llm.tokenizers import CharTokenizer
from light_llm.train.optim import configure_adamw

SEED_002_OBJECTIVE = "seed 002 §10"
TRAIN_BYTES = 20_000
EVAL_TEXT = "To be, or not to be, that is the question."
TRAIN_STEPS = 120
BATCH_SIZE = 8
SEED = 0
LEARNING_RATE = 3e-3
TRAIN_WINDOW = 32  # characters per training window
SHOWN_POSITIONS = 12  # next-token columns printed


@dataclass(frozen=True)
class TrainedModel:
    """A trained character GPT, its tokenizer, and its training loss before and after."""

    model: GPT
    tokenizer: CharTokenizer
    loss_before: float
    loss_after: float
    train_chars: int


def model_config(vocab_size: int) -> ModelConfig:
    """Two layers of width 32, a 48-character context (training uses windows of
    TRAIN_WINDOW), a tied head."""
    return ModelConfig(
        vocab_size=vocab_size, block_size=48, n_layer=2, n_head=2, n_embd=32, tie_embeddings=True
    )


@functools.cache
def trained_model() -> TrainedModel:
    """Train the small GPT for TRAIN_STEPS AdamW steps on random 32-character windows of the
    first TRAIN_BYTES bytes of Shakespeare (seeded, so the same model every run)."""
    text = shakespeare_slice(TRAIN_BYTES)
    tokenizer = CharTokenizer.from_text(text)
    data = torch.tensor(tokenizer.encode(text))
    torch.manual_seed(SEED)
    model = GPT(model_config(tokenizer.vocab_size))
    optimizer = configure_adamw(model, 0.1, LEARNING_RATE, (0.9, 0.99), device_type="cpu")
    generator = torch.Generator().manual_seed(SEED)
    block = TRAIN_WINDOW
    losses = []
    model.train()
    for _ in range(TRAIN_STEPS):
        starts = torch.randint(len(data) - block - 1, (BATCH_SIZE,), generator=generator)
        x = torch.stack([data[s : s + block] for s in starts.tolist()])
        y = torch.stack([data[s + 1 : s + block + 1] for s in starts.tolist()])
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return TrainedModel(model, tokenizer, losses[0], float(np.mean(losses[-10:])), len(text))


def next_token_losses(model: GPT, ids: list[int]) -> tuple[np.ndarray, float]:
    """-log p(x_t | x_<t) for t = 1..T-1 of ``ids`` (one window) and the model's own mean
    loss (GPT.forward with targets, the training loss)."""
    x = torch.tensor([ids[:-1]])
    y = torch.tensor([ids[1:]])
    with torch.no_grad():
        logits, loss = model(x, y)
        log_probs = torch.log_softmax(logits[0].double(), dim=-1)
    picked = -log_probs[torch.arange(len(ids) - 1), y[0]]
    return picked.numpy(), float(loss)


def perplexity() -> list[Step]:
    """Cross-entropy of each next character (seed 002 §2.3, eq. 2; §10.1, eq. 41) and perplexity
    exp(mean) (§10.2, eq. 44) of a trained small GPT on a line of Hamlet, beside an untrained
    model's and the uniform guess's."""
    trained = trained_model()
    tokenizer = trained.tokenizer
    ids = tokenizer.encode(EVAL_TEXT)
    per_token, mean_loss = next_token_losses(trained.model, ids)
    torch.manual_seed(SEED)
    untrained = GPT(model_config(tokenizer.vocab_size)).eval()
    untrained_tokens, _ = next_token_losses(untrained, ids)  # its losses in float64
    shown = SHOWN_POSITIONS
    targets = [repr(c)[1:-1] or " " for c in EVAL_TEXT[1 : shown + 1]]
    columns = tuple(f"{t}" if t.strip() else "' '" for t in targets)
    vocab = tokenizer.vocab_size
    return [
        Step(
            "Training: loss at the first and the last steps",
            f"A character-level GPT (2 layers, width 32, {vocab} characters, tied head) trained "
            f"here for {TRAIN_STEPS} AdamW steps on {trained.train_chars} characters of "
            f"Shakespeare, batches of {BATCH_SIZE} windows of 32 characters (mean of the last 10 "
            f"steps). An untrained model scores about log V = log {vocab} = "
            f"{math.log(vocab):.2f}.",
            [trained.loss_before, trained.loss_after],
            SEED_002_OBJECTIVE,
            columns=("first step", "last steps"),
            key="training-loss-at-the-first-and-the-last-steps",
        ),
        Step(
            "p(x_t | x_<t) of each next character",
            f'The text "{EVAL_TEXT}", not in the training slice. Each column is the character '
            "to predict (the first ones), each value the probability the trained model gave it "
            "after reading everything before.",
            np.exp(-per_token[:shown]),
            f"{SEED_002_OBJECTIVE}.1",
            columns=columns,
            key="p-x-t-x-t-of-each-next-character",
        ),
        Step(
            "Cross-entropy of each next token: -log p(x_t | x_<t)",
            "Eq. 2 with a one-hot target y: only the log-probability of the true next character "
            "counts. Likely characters (a space after a word) cost little, surprising ones much.",
            per_token[:shown],
            f"{SEED_002_OBJECTIVE}.1; seed 002 §2.3, eq. 2",
            columns=columns,
            key="cross-entropy-of-each-next-token-log-p-x-t-x-t",
        ),
        Step(
            "Mean cross-entropy (the training loss)",
            f"Eq. 41 divided by T = {len(ids) - 1}: the mean of the previous step over the whole "
            "line, as the model's forward pass computes it with targets.",
            mean_loss,
            f"{SEED_002_OBJECTIVE}.1, eq. 41",
            key="mean-cross-entropy-the-training-loss",
        ),
        Step(
            "Perplexity exp(mean cross-entropy)",
            "Eq. 44: the model is as unsure as if it chose uniformly among this many "
            "characters at every step.",
            math.exp(mean_loss),
            f"{SEED_002_OBJECTIVE}.2, eq. 44",
            key="perplexity-exp-mean-cross-entropy",
        ),
        Step(
            "Perplexity: untrained model, uniform guess, trained model",
            f"An untrained model (weights N(0, 0.02)) is close to the uniform guess, whose "
            f"perplexity is the vocabulary size {vocab}; training brings it far below.",
            [math.exp(untrained_tokens.mean()), float(vocab), math.exp(mean_loss)],
            f"{SEED_002_OBJECTIVE}.2, eq. 44",
            columns=("untrained", "uniform", "trained"),
            key="perplexity-untrained-model-uniform-guess-trained-model",
        ),
        Step(
            "Check: exp of the mean of -log p equals the mean loss's exp",
            "Perplexity from the per-character values of step 3 (all positions), the same as "
            "step 5; for the untrained model, the same formula.",
            [math.exp(per_token.mean()), math.exp(untrained_tokens.mean())],
            f"{SEED_002_OBJECTIVE}.2, eq. 44",
            columns=("trained", "untrained"),
            key="check-exp-of-the-mean-of-log",
        ),
    ]


def perplexity_figures(folder: Path) -> list[Path]:
    trained = trained_model()
    ids = trained.tokenizer.encode(EVAL_TEXT)
    per_token, mean_loss = next_token_losses(trained.model, ids)
    labels = [c if c.strip() else "␣" for c in EVAL_TEXT[1:]]
    positions = np.arange(len(labels))
    path = plots.lines_figure(
        folder / "next_token_loss.png",
        positions,
        [
            ("-log p(x_t | x_<t)", per_token, "o-"),
            (
                f"mean {mean_loss:.2f} (perplexity {math.exp(mean_loss):.1f})",
                np.full(len(labels), mean_loss),
                "--",
            ),
            (
                f"uniform guess log V = {math.log(trained.tokenizer.vocab_size):.2f}",
                np.full(len(labels), math.log(trained.tokenizer.vocab_size)),
                ":",
            ),
        ],
        f'Next-character cross-entropy of a small trained GPT on "{EVAL_TEXT}" (seed 002 §10)',
        "character to predict (position)",
        "nats",
        tick_labels=labels,
    )
    return [path]


# --------------------------------------------------------------------------- weight tying
TIED_CONTEXT = "To be, or not to "


def weight_tying() -> list[Step]:
    """Weight tying (seed 002 §10.2, eq. 43): the output head is the token-embedding table E,
    one tensor in memory; P(w | context) = softmax(E h); the parameters it saves; and the
    gradient of the shared table, the sum of its two uses."""
    trained = trained_model()
    model, tokenizer = trained.model, trained.tokenizer
    embedding, head = model.transformer.wte.weight, model.lm_head.weight
    config = model.config
    tied_count = count_parameters(config)
    untied_count = count_parameters(dataclasses.replace(config, tie_embeddings=False))
    ids = torch.tensor([tokenizer.encode(TIED_CONTEXT)])
    with torch.no_grad():
        hidden = model.transformer.ln_f(run_blocks(model, ids))[0, -1]  # h_t: (d,)
        logits_by_hand = embedding @ hidden  # E h: (V,)
        logits, _ = model(ids)
    probabilities = torch.softmax(logits_by_hand.double(), -1)
    top = torch.topk(probabilities, 5)
    top_chars = tuple(repr(tokenizer.decode([i]))[1:-1] or " " for i in top.indices.tolist())
    grad_tied, grad_input_use, grad_output_use = shared_gradient_parts(model, ids)
    return [
        Step(
            "The head and the embedding table: one tensor",
            "The model's output projection and its token-embedding table are the same object: "
            "same storage address (1 = yes), same shape V x d. E maps a token to a vector at "
            "the input (eq. 42) and scores every token against the last vector at the output.",
            [
                int(head.data_ptr() == embedding.data_ptr()),
                embedding.shape[0],
                embedding.shape[1],
            ],
            f"{SEED_002_OBJECTIVE}.2",
            columns=("same storage", "V", "d"),
            key="the-head-and-the-embedding-table-one-tensor",
        ),
        Step(
            "Parameters with and without tying",
            f"Tying saves one V x d matrix: {config.vocab_size} x {config.n_embd} = "
            f"{config.vocab_size * config.n_embd} (for GPT-2's V = 50257, d = 768: 38.6M of "
            "124M).",
            [
                tied_count["total"],
                untied_count["total"],
                untied_count["total"] - tied_count["total"],
            ],
            f"{SEED_002_OBJECTIVE}.2",
            columns=("tied", "untied", "saved"),
            key="parameters-with-and-without-tying",
        ),
        Step(
            "softmax(E h): the next-token distribution",
            f'h is the last position\'s final vector after reading "{TIED_CONTEXT}"; E h scores '
            "every character by its dot product with its own embedding. The five likeliest "
            "characters and their probabilities.",
            top.values,
            f"{SEED_002_OBJECTIVE}.2, eq. 43",
            columns=top_chars,
            key="softmax-e-h-the-next-token-distribution",
        ),
        Step(
            "Largest difference between E h and the model's logits",
            "The model's forward pass gives the same scores (its head is E).",
            float((logits_by_hand - logits[0, -1]).abs().max()),
            f"{SEED_002_OBJECTIVE}.2, eq. 43",
            key="largest-difference-between-e-h-and-the",
        ),
        Step(
            "Gradient of the shared table: input use + output use",
            "One backward pass through the tied model, and the same model with its head "
            "untied (a copy of E): the tied table's gradient is the sum of the gradients of "
            "the two uses. Norms of the three, then the largest entry of the difference.",
            [
                float(grad_tied.norm()),
                float(grad_input_use.norm()),
                float(grad_output_use.norm()),
                float((grad_tied - grad_input_use - grad_output_use).abs().max()),
            ],
            f"{SEED_002_OBJECTIVE}.2",
            columns=("tied", "as input", "as head", "|difference|"),
            key="gradient-of-the-shared-table-input-use",
        ),
    ]


def run_blocks(model: GPT, ids: torch.Tensor) -> torch.Tensor:
    """The residual stream after the last block (before the final norm): (B, T, d)."""
    positions = torch.arange(ids.size(1))
    x = model.transformer.wte(ids) + model.transformer.wpe(positions)
    for block in model.transformer.h:
        x = block(x)
    return x


def shared_gradient_parts(
    model: GPT, ids: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The gradient of the next-character loss on ``ids`` at the tied table, and, in an
    untied copy of the model, at its embedding table and at its head."""
    targets = torch.roll(ids, -1, dims=1)
    targets[:, -1] = -1
    model.zero_grad(set_to_none=True)
    model(ids, targets)[1].backward()
    tied = model.transformer.wte.weight.grad.clone()
    model.zero_grad(set_to_none=True)
    untied = GPT(dataclasses.replace(model.config, tie_embeddings=False)).eval()
    state = model.state_dict()
    untied.load_state_dict({**state, "lm_head.weight": state["transformer.wte.weight"].clone()})
    untied(ids, targets)[1].backward()
    return tied, untied.transformer.wte.weight.grad, untied.lm_head.weight.grad


def weight_tying_figures(folder: Path) -> list[Path]:
    trained = trained_model()
    config = trained.model.config
    tied = count_parameters(config)
    untied = count_parameters(dataclasses.replace(config, tie_embeddings=False))
    embedding = config.vocab_size * config.n_embd
    labels = ["token embedding E", "output head", "everything else"]
    series = [
        ("tied", np.array([embedding, 0, tied["total"] - embedding])),
        ("untied", np.array([embedding, embedding, untied["total"] - 2 * embedding])),
    ]
    title = (
        f"Weight tying: parameters of the small GPT (V = {config.vocab_size}, "
        f"d = {config.n_embd}); tied, the head is E itself"
    )
    return [
        plots.grouped_bars(
            folder / "weight_tying.png",
            series,
            labels,
            title,
            "parameters",
            annotate=True,
            value_format="%d",
        )
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "perplexity",
        "next-token cross-entropy and perplexity of a small GPT trained here on "
        "Shakespeare, on a line of Hamlet (seed 002 §10, eqs. 2, 41, 44)",
        perplexity,
        perplexity_figures,
    ),
    Example(
        "weight-tying",
        "weight tying: the output head is the embedding table (one tensor), softmax(E h), "
        "the parameters saved, the shared gradient (seed 002 §10.2, eq. 43)",
        weight_tying,
        weight_tying_figures,
    ),
)
