"""The worked examples of looking inside a model: the logit lens, direct logit attribution,
ablation and activation patching, each on a tiny GPT whose every number fits on the page (6
tokens, 1 layer, 2 heads, 4 wide), computed by the functions of ``light_llm.inspect`` that
``light-llm inspect`` and the explorer call, and checked by another route in each step.

The tiny model's weights are drawn N(0, 0.7²) with seed 0 (no training: a handful of numbers
that are all visible is the point); the prompt is "the cat", the question what comes next.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from light_llm.config import ModelConfig
from light_llm.explain.steps import Example, Step, by_key, value_of
from light_llm.inspect import (
    Inspector,
    ablate_prompt,
    activation_patching,
    direct_logit_attribution,
    logit_lens,
)
from light_llm.inspect.ablation import next_token_probs
from light_llm.inspect.plots import bars, heatmap
from light_llm.models.gpt import GPT

WORDS = ["the", "cat", "dog", "sat", "ran", "."]
PROMPT = [0, 1]  # "the cat"
PATCH_CLEAN, PATCH_CORRUPT = [0, 1, 3], [0, 2, 3]  # "the cat sat", "the dog sat"
PATCH_COLUMNS = ["the", "cat/dog", "sat"]
SOURCE = "not in the seeds (light_llm.inspect), on seed 000 §6's residual stream"
HEADS = ["L0H0", "L0H1"]


def tiny_model() -> GPT:
    """1 layer, 2 heads of size 2, 4 wide, an MLP of 8 units, learned positions, LayerNorm,
    no biases, the head tied to the embeddings; weights ~ N(0, 0.7²), seed 0, float64."""
    config = ModelConfig(
        vocab_size=len(WORDS),
        block_size=4,
        n_layer=1,
        n_head=2,
        n_embd=4,
        n_inner=8,
        bias=False,
    )
    generator = torch.Generator().manual_seed(0)
    model = GPT(config).double().eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() == 2:
                parameter.copy_(0.7 * torch.randn(parameter.shape, generator=generator))
    return model


def residual_steps(model: GPT) -> tuple[list[Step], dict[str, np.ndarray]]:
    """The residual stream of "the cat": embeddings, each head's output, the MLP's output."""
    trace = Inspector(model).run(np.array([PROMPT]), record=True)
    acts = {name: value[0] for name, value in trace.activations.items()}
    tokens, dims = [WORDS[i] for i in PROMPT], [f"x{i}" for i in range(4)]
    steps = [
        Step(
            "x_0 = E[tokens] + P[positions]",
            "The residual stream starts as the token's row "
            "of the embedding table plus its position's row.",
            acts["resid_pre.0"],
            SOURCE,
            rows=tokens,
            columns=dims,
            key="x-0-e-tokens-p-positions",
        ),
    ]
    for head in range(2):
        steps.append(
            Step(
                f"head {head}'s output, through its slice of W_O",
                f"head_{head} = A_{head} V_{head} (2 numbers per token), times the columns "
                f"{2 * head}-{2 * head + 1} of W_O: what head {head} adds to the stream.",
                acts["head_out.0"][:, head],
                SOURCE,
                rows=tokens,
                columns=dims,
                key=f"head-{head}-output",
            )
        )
    steps += [
        Step(
            "x_mid = x_0 + head 0 + head 1",
            "The attention sub-layer's output is the sum of "
            "its heads' (no bias here); the residual adds it.",
            acts["resid_mid.0"],
            SOURCE,
            rows=tokens,
            columns=dims,
            key="x-mid-x-0-head-0-head-1",
        ),
        Step(
            "x_1 = x_mid + MLP(LN_2(x_mid))",
            "The MLP adds its output: the last residual.",
            acts["resid_post.0"],
            SOURCE,
            rows=tokens,
            columns=dims,
            key="x-1-x-mid-mlp-ln-2-x-mid",
        ),
    ]
    return steps, acts


def logit_lens_example() -> list[Step]:
    """The logit lens on "the cat": LN_f and the unembedding applied to the residual after the
    embeddings, after the attention and after the MLP; the last is the model's output."""
    model = tiny_model()
    steps, _ = residual_steps(model)
    lens = logit_lens(model, np.array(PROMPT), keep_log_probs=True)
    probs = np.exp(lens.log_probs[:, -1])  # (stages, V) at "cat"
    own = next_token_probs(model(torch.tensor([PROMPT]))[0][0, -1].detach().numpy())
    steps += [
        Step(
            "p(next | residual after each stage), at 'cat'",
            "softmax(LN_f(x) E^T) for x = x_0, x_mid, x_1: what the model would predict if it "
            "stopped there. LN_f takes its mean and variance from that x.",
            probs,
            SOURCE,
            rows=lens.stages,
            columns=WORDS,
            key="p-next-residual-after-each-stage-at-cat",
        ),
        Step(
            "The model's own next-token distribution",
            "softmax of its logits (a separate forward): equal to the lens's last row, "
            f"within {np.abs(own - probs[-1]).max():.0e}.",
            own,
            SOURCE,
            columns=WORDS,
            key="the-model-s-own-next-token-distribution",
        ),
    ]
    return steps


def attribution_example() -> list[Step]:
    """Direct logit attribution of the top next token after "the cat", minus the second."""
    model = tiny_model()
    steps, acts = residual_steps(model)
    logits = model(torch.tensor([PROMPT]))[0][0, -1].detach().numpy()
    first, second = np.argsort(-logits, kind="stable")[:2]
    result = direct_logit_attribution(model, np.array(PROMPT), int(first), versus=int(second))
    scale = float(
        Inspector(model)
        .run(np.array([PROMPT]), record=["final_scale"])
        .activations["final_scale"][0, -1, 0]
    )
    steps += [
        Step(
            "The final norm's scale at 'cat'",
            "s = 1 / sqrt(Var(x_1) + ε): held at this value, "
            "LN_f(x) = γ ⊙ (x - mean(x)) s is linear in x, so it splits over the parts of x.",
            scale,
            SOURCE,
            key="the-final-norm-s-scale-at-cat",
        ),
        Step(
            f"z[{WORDS[first]}] - z[{WORDS[second]}] by part",
            "Each part c of x_1 (embedding, position, each head, the MLP) contributes "
            "(γ ⊙ (c - mean(c)) s) · (E[a] - E[b]); no biases here, so nothing else.",
            result.values,
            SOURCE,
            columns=result.names,
            key="logit-difference-by-part",
        ),
        Step(
            "Their sum, and the logit difference itself",
            "The parts add up to the model's own logit difference (a separate forward).",
            np.array([result.total, float(logits[first] - logits[second])]),
            SOURCE,
            columns=["sum of the parts", "z[a] - z[b]"],
            key="their-sum-and-the-logit-difference-itself",
        ),
    ]
    return steps


def ablation_example() -> list[Step]:
    """Zero-ablate each head in turn: the next-token distribution after "the cat" redrawn."""
    model = tiny_model()
    rows, deltas = [], []
    base = ablate_prompt(model, np.array(PROMPT), ["L0H0"])
    for name in HEADS:
        result = ablate_prompt(model, np.array(PROMPT), [name], token=base.token)
        rows.append(result.ablated_probs)
        deltas.append(result.delta_p)
    recomputed = tiny_model()
    with torch.no_grad():
        recomputed.transformer.h[0].attn.c_proj.weight[:, 0:2] = 0.0  # head 0's slice of W_O
    by_weights = next_token_probs(recomputed(torch.tensor([PROMPT]))[0][0, -1].detach().numpy())
    return [
        Step(
            "p(next) after 'the cat'",
            "The model as it is.",
            base.probs,
            SOURCE,
            columns=WORDS,
            key="p-next-after-the-cat",
        ),
        Step(
            "p(next) with one head's output set to zero",
            "Row h: head h removed (its output through W_O replaced by 0) in the same forward.",
            np.stack(rows),
            SOURCE,
            rows=HEADS,
            columns=WORDS,
            key="p-next-with-one-head-s-output-set-to-zero",
        ),
        Step(
            f"Δp({WORDS[base.token]}) for each head removed",
            f"How much the top token '{WORDS[base.token]}' loses (or gains) without each head.",
            np.array(deltas),
            SOURCE,
            columns=HEADS,
            key="change-of-p-answer-per-head",
        ),
        Step(
            "Check: head 0 removed by zeroing its columns of W_O",
            "The same distribution from a plain forward of a copy whose W_O[:, 0:2] = 0.",
            by_weights,
            SOURCE,
            columns=WORDS,
            key="check-head-0-removed-by-zeroing-its",
        ),
    ]


def patching_example() -> list[Step]:
    """Activation patching between "the cat sat" and "the dog sat": which residual carries the
    difference of the two predictions."""
    model = tiny_model()
    clean_logits = model(torch.tensor([PATCH_CLEAN]))[0][0, -1].detach().numpy()
    answer = int(np.argmax(clean_logits))
    corrupt_logits = model(torch.tensor([PATCH_CORRUPT]))[0][0, -1].detach().numpy()
    wrong = int(np.argmax(corrupt_logits - clean_logits))
    clean, corrupt = np.array(PATCH_CLEAN), np.array(PATCH_CORRUPT)
    result = activation_patching(model, clean, corrupt, answer, wrong)
    metric = f"z[{WORDS[answer]}] - z[{WORDS[wrong]}]"
    return [
        Step(
            f"m = {metric} on both prompts",
            "The metric: how much more the model favours the clean answer.",
            np.array([result.clean_metric, result.corrupt_metric]),
            SOURCE,
            columns=["the cat sat", "the dog sat"],
            key="metric-on-both-prompts",
        ),
        Step(
            "m with one clean residual patched into the 'the dog sat' run",
            "Rows: the residual entering the layer (L0 in) and leaving it (L0 out); columns: "
            "the position whose residual is taken from the 'the cat sat' run.",
            result.resid_metrics,
            SOURCE,
            rows=result.resid_labels,
            columns=PATCH_COLUMNS,
            key="m-with-one-clean-residual-patched-into",
        ),
        Step(
            "Fraction restored = (m_patched - m_dog) / (m_cat - m_dog)",
            "1: that one activation carries the whole difference; 0: none of it. Entering the "
            "layer, only 'cat' differs, so it carries everything and 'the' and 'sat' nothing; "
            "leaving it, the difference has moved (through attention) to the last position, "
            "whose residual is the prediction itself.",
            result.resid,
            SOURCE,
            rows=result.resid_labels,
            columns=PATCH_COLUMNS,
            key="fraction-restored-m-patched-m-dog-m-cat-m-dog",
        ),
        Step(
            "Fraction restored by each head's output (all positions)",
            "The same with one head's output taken from the clean run: each head carries part "
            "of the difference (the parts need not add up to 1: the MLP after them is not "
            "linear).",
            result.heads[0],
            SOURCE,
            columns=HEADS,
            key="fraction-restored-by-each-head-s-output",
        ),
    ]


def logit_lens_figures(folder: Path) -> list[Path]:
    model = tiny_model()
    lens = logit_lens(model, np.array(PROMPT), keep_log_probs=True)
    probs = np.exp(lens.log_probs[:, -1])
    return [
        heatmap(
            probs,
            lens.stages,
            WORDS,
            folder / "logit_lens.png",
            "logit lens at 'cat': p(next) after each stage",
            "probability",
        )
    ]


def attribution_figures(folder: Path) -> list[Path]:
    model = tiny_model()
    logits = model(torch.tensor([PROMPT]))[0][0, -1].detach().numpy()
    first, second = np.argsort(-logits, kind="stable")[:2]
    result = direct_logit_attribution(model, np.array(PROMPT), int(first), versus=int(second))
    title = f"direct logit attribution: z[{WORDS[first]}] - z[{WORDS[second]}] after 'the cat'"
    return [bars(result.values, result.names, folder / "attribution.png", title, "logit")]


def ablation_figures(folder: Path) -> list[Path]:
    steps = ablation_example()
    rows = np.vstack(
        [
            value_of(steps, "p-next-after-the-cat"),
            value_of(steps, "p-next-with-one-head-s-output-set-to-zero"),
        ]
    )
    return [
        heatmap(
            rows,
            ["the model", *[f"without {h}" for h in HEADS]],
            WORDS,
            folder / "ablation.png",
            "p(next) after 'the cat', each head removed",
            "probability",
        )
    ]


def patching_figures(folder: Path) -> list[Path]:
    step = by_key(patching_example())["fraction-restored-m-patched-m-dog-m-cat-m-dog"]
    return [
        heatmap(
            step.value,
            list(step.rows),
            PATCH_COLUMNS,
            folder / "patching.png",
            "activation patching: fraction restored",
            "restored",
            diverging=True,
        )
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "logit-lens",
        'the logit lens on a tiny GPT after "the cat": p(next) after the embeddings, the '
        "attention and the MLP; the last is the model's own output",
        logit_lens_example,
        logit_lens_figures,
    ),
    Example(
        "attribution",
        "direct logit attribution: a logit difference split into embeddings, heads and "
        "the MLP, the final norm's scale held fixed; the parts add up to it",
        attribution_example,
        attribution_figures,
    ),
    Example(
        "ablation",
        "zero ablation of each head of a tiny GPT: the next-token distribution redrawn, "
        "checked against the head's slice of W_O set to zero",
        ablation_example,
        ablation_figures,
    ),
    Example(
        "patching",
        'activation patching between "the cat sat" and "the dog sat": the fraction of a '
        "logit difference each clean residual and head restores",
        patching_example,
        patching_figures,
    ),
)
