"""Worked examples of efficient attention and training memory: the KV cache, one decoding step
with and without it (seed 002 §11.2, eqs. 45-47), causal linear attention's running state
against its quadratic form (§11.3, eq. 48), and gradient checkpointing's memory (seed 001,
"Gradient Checkpointing").

Everything runs through the GPT the project trains (``light_llm.models.gpt``) and its attention
code (``light_llm.nn.attention``). Work is counted by PyTorch's FLOP counter
(``torch.utils.flop_counter``) on the explicit attention path; memory by the bytes of the
tensors autograd keeps for the backward pass, read with its saved-tensor hooks.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import torch
from torch.utils.flop_counter import FlopCounterMode

from light_llm.config import ModelConfig, model_counts, preset
from light_llm.explain import plots
from light_llm.explain.steps import Example, Step
from light_llm.models.gpt import GPT
from light_llm.nn.attention import (
    LinearAttentionState,
    attention_explicit,
    attention_mask,
    causal_linear_attention,
    linear_attention_feature_map,
)

SEED = 0
SEED_002_CACHE = "seed 002 §11.2"
CACHE_CONFIG = ModelConfig(vocab_size=32, block_size=64, n_layer=2, n_head=2, n_embd=8)
CACHE_PROMPT = [3, 1, 4, 1, 5, 9]
CACHE_NEW_TOKEN = 2
CACHE_LENGTHS = (2, 4, 8, 16, 32, 64)  # positions for the work table and its picture


def seeded_model(config: ModelConfig) -> GPT:
    """A GPT with weights N(0, 0.02) drawn from torch seed SEED, float64, explicit attention
    (so that the FLOP counter sees every product)."""
    torch.manual_seed(SEED)
    model = GPT(config).double().eval()
    model.use_fast_attention(False)
    return model


def flops(run) -> int:
    """Floating-point operations of ``run()`` (2 per multiply-add), by PyTorch's counter."""
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        run()
    return counter.get_total_flops()


def decode_flops(model: GPT, length: int) -> tuple[int, int]:
    """FLOPs to get the logits of token ``length`` (1-based): recomputing every position, and
    one step with the first length - 1 positions cached."""
    ids = torch.arange(length)[None] % model.config.vocab_size
    without = flops(lambda: model(ids))
    cache = model.new_cache(1)
    with torch.no_grad():
        model(ids[:, :-1], kv_cache=cache)
    with_cache = flops(lambda: model(ids[:, -1:], kv_cache=cache))
    return without, with_cache


@functools.cache
def decode_work() -> np.ndarray:
    """(Computed once, read-only.) Rows (FLOPs without, with the cache) for each n in
    CACHE_LENGTHS, on the example's model."""
    model = seeded_model(CACHE_CONFIG)
    work = np.array([decode_flops(model, length) for length in CACHE_LENGTHS])
    work.setflags(write=False)
    return work


def layer_zero_key_value(model: GPT, token: int, position: int) -> tuple[torch.Tensor, ...]:
    """k_new and v_new of head 0 in layer 0 for ``token`` at ``position``, by hand: the block's
    first norm of E[token] + P[position], then the key and value columns of W^QKV."""
    block = model.transformer.h[0]
    with torch.no_grad():
        x = model.transformer.wte.weight[token] + model.transformer.wpe.weight[position]
        qkv = block.attn.c_attn(block.ln_1(x))  # (3 d,)
    d, hs = model.config.n_embd, model.config.head_dim
    return qkv[d : d + hs], qkv[2 * d : 2 * d + hs]


def kv_cache() -> list[Step]:
    """One decoding step with and without the KV cache (seed 002 §11.2, eqs. 45-47): the cache
    grows by one key and one value per layer; the logits are the same; the work is counted."""
    model = seeded_model(CACHE_CONFIG)
    prompt = torch.tensor([CACHE_PROMPT])
    full = torch.tensor([[*CACHE_PROMPT, CACHE_NEW_TOKEN]])
    cache = model.new_cache(1)
    with torch.no_grad():
        model(prompt, kv_cache=cache)
        keys_before = cache.layers[0].keys[0, 0, : len(CACHE_PROMPT)].clone()
        values_before = cache.layers[0].values[0, 0, : len(CACHE_PROMPT)].clone()
        cached_logits, _ = model(full[:, -1:], kv_cache=cache)
        full_logits, _ = model(full)
    n = len(CACHE_PROMPT) + 1
    keys_after = cache.layers[0].keys[0, 0, :n]
    values_after = cache.layers[0].values[0, 0, :n]
    k_new, v_new = layer_zero_key_value(model, CACHE_NEW_TOKEN, n - 1)
    positions = tuple(f"pos {i}" for i in range(n))
    work = decode_work()
    config = CACHE_CONFIG
    return [
        Step(
            "Prompt ids and the new token",
            f"Assumed: a small GPT with random weights (L = {config.n_layer} layers, "
            f"{config.n_head} heads of size {config.head_dim}, d = {config.n_embd}), a 6-token "
            "prompt, then one new token. The prompt is run once with the cache (the prefill).",
            full[0],
            SEED_002_CACHE,
            columns=(*positions[:-1], "new"),
            key="prompt-ids-and-the-new-token",
        ),
        Step(
            "K_cache before the step (layer 0, head 0)",
            "One row per prompt position: the keys the prefill stored.",
            keys_before,
            SEED_002_CACHE,
            rows=positions[:-1],
            key="k-cache-before-the-step-layer-0-head-0",
        ),
        Step(
            "k_new = LayerNorm(E[new] + P[6]) W^K + b^K (layer 0, head 0)",
            "The new token's key, computed by hand from its embedding, position and the block's "
            "key projection.",
            k_new,
            SEED_002_CACHE,
            key="k-new-layernorm-e-new-p-6-w-k-layer-0-head-0",
        ),
        Step(
            "K_cache after the step: [K_cache; k_new]",
            "Eq. 45: the decoding step ran the new token alone and appended its key; the old "
            "rows are untouched and the last row is k_new.",
            keys_after,
            f"{SEED_002_CACHE}, eq. 45",
            rows=positions,
            key="k-cache-after-the-step-k-cache-k-new",
        ),
        Step(
            "V_cache after the step: [V_cache; v_new]",
            "Eq. 46: the same for the values (the prompt's rows as before the step).",
            values_after,
            f"{SEED_002_CACHE}, eq. 46",
            rows=positions,
            key="v-cache-after-the-step-v-cache-v-new",
        ),
        Step(
            "Largest change of the cached prompt rows",
            "Keys and values of earlier tokens never change: that is why they can be cached.",
            float(
                max(
                    (keys_after[:-1] - keys_before).abs().max(),
                    (values_after[:-1] - values_before).abs().max(),
                )
            ),
            SEED_002_CACHE,
            key="largest-change-of-the-cached-prompt-rows",
        ),
        Step(
            "Next-token logits with the cache",
            "Eq. 47: the new token's query against all cached keys, softmax, times the cached "
            "values, through both layers; the first 8 of the 32 logits.",
            cached_logits[0, -1, :8],
            f"{SEED_002_CACHE}, eq. 47",
            key="next-token-logits-with-the-cache",
        ),
        Step(
            "Next-token logits without the cache (all 7 tokens recomputed)",
            "The same numbers, to float64 rounding: the cache changes the work, not the result.",
            full_logits[0, -1, :8],
            SEED_002_CACHE,
            key="next-token-logits-without-the-cache-all",
        ),
        Step(
            "Work for the logits of token n: FLOPs without and with the cache",
            "Counted by PyTorch's FLOP counter. Without the cache every step recomputes all n "
            "tokens (projections ∝ n, attention ∝ n²); with it, one token's projections and "
            "one row of attention (∝ n): exactly n times less here, since recomputing does the "
            "new token's work for each of the n tokens. The cache costs memory instead: "
            "2 L n d numbers.",
            np.column_stack([work, work[:, 0] / work[:, 1]]),
            f"{SEED_002_CACHE}; §11.1",
            rows=tuple(f"n={n}" for n in CACHE_LENGTHS),
            columns=("without", "with cache", "ratio"),
            key="work-for-the-logits-of-token-n",
        ),
    ]


def kv_cache_figures(folder: Path) -> list[Path]:
    work = decode_work()
    return [
        plots.lines_figure(
            folder / "kv_cache_work.png",
            np.array(CACHE_LENGTHS, dtype=float),
            [("recompute every token", work[:, 0], "o-"), ("with the KV cache", work[:, 1], "s-")],
            "FLOPs to produce the logits of token n, with and without the KV cache "
            "(seed 002 §11.2)",
            "n (tokens so far, the new one included)",
            "FLOPs (counted)",
            log_x=True,
            log_y=True,
        )
    ]


# ----------------------------------------------------------------------- linear attention
SEED_002_LINEAR = "seed 002 §11.3"
LINEAR_TOKENS = 6
LINEAR_DIM = 4


def linear_inputs() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q, k, v (1, 1, T, d) drawn N(0, 1) from NumPy's default_rng([SEED, 11])."""
    draws = np.random.default_rng([SEED, 11]).standard_normal((3, LINEAR_TOKENS, LINEAR_DIM))
    return tuple(torch.from_numpy(draw)[None, None] for draw in draws)


def linear_attention() -> list[Step]:
    """Causal linear attention (seed 002 §11.3, eq. 48) with φ = elu + 1: the quadratic form
    (φ(Q) φ(K)^T ⊙ M) V over the sequence against the running state S = Σ φ(k) v^T, z = Σ φ(k)
    carried token by token, both by the GPT's linear-attention code; and the weights it gives
    beside softmax attention's."""
    q, k, v = linear_inputs()
    quadratic = causal_linear_attention(q, k, v, None, None)[0, 0]  # (T, d)
    state = LinearAttentionState()
    running = torch.cat(
        [
            causal_linear_attention(
                q[:, :, t : t + 1], k[:, :, t : t + 1], v[:, :, t : t + 1], None, state
            )
            for t in range(LINEAR_TOKENS)
        ],
        dim=2,
    )[0, 0]
    phi_q, phi_k = linear_attention_feature_map(q)[0, 0], linear_attention_feature_map(k)[0, 0]
    causal = torch.ones(LINEAR_TOKENS, LINEAR_TOKENS, dtype=torch.bool).tril()
    kernel = (phi_q @ phi_k.T).masked_fill(~causal, 0.0)
    linear_weights = kernel / kernel.sum(-1, keepdim=True)
    allowed = attention_mask(LINEAR_TOKENS, LINEAR_TOKENS, 0, True, None, q.device)
    _, softmax_weights = attention_explicit(q, k, v, allowed)
    tokens = tuple(f"t{i}" for i in range(LINEAR_TOKENS))
    square = {"rows": tokens, "columns": tokens}
    return [
        Step(
            "Q, K, V (T = 6 tokens, d = 4, one head)",
            "Assumed: random queries, keys and values (N(0, 1), seeded), side by side.",
            torch.cat([q[0, 0], k[0, 0], v[0, 0]], dim=1),
            SEED_002_LINEAR,
            rows=tokens,
            columns=(
                *(f"q{j}" for j in range(4)),
                *(f"k{j}" for j in range(4)),
                *(f"v{j}" for j in range(4)),
            ),
            key="q-k-v-t-6-tokens-d-4-one-head",
        ),
        Step(
            "Kernel φ(Q) φ(K)^T ⊙ M, φ(x) = elu(x) + 1",
            "The positive feature map makes every φ(q)·φ(k) > 0, standing in for exp(q·k); the "
            "causal mask M keeps keys j <= i. This T x T matrix is the quadratic form.",
            kernel,
            f"{SEED_002_LINEAR}, eq. 48",
            **square,
            key="kernel-phi-q-phi-k-t-m-phi-x-elu-x-1",
        ),
        Step(
            "Outputs, quadratic form: (φ(Q)φ(K)^T ⊙ M) V / row sums",
            "Eq. 48 over the whole sequence at once, as in training.",
            quadratic,
            f"{SEED_002_LINEAR}, eq. 48",
            rows=tokens,
            key="outputs-quadratic-form-phi-q-phi-k",
        ),
        Step(
            "Running state, token by token",
            "Generation: each token adds φ(k) v^T to S and φ(k) to z, then reads "
            "y = φ(q)^T S / φ(q)^T z. The same outputs, without any T x T matrix.",
            running,
            f"{SEED_002_LINEAR}, eq. 48",
            rows=tokens,
            key="running-state-token-by-token",
        ),
        Step(
            "State after the last token: S = Σ φ(k) v^T (d x d) and z = Σ φ(k)",
            "The whole memory of linear attention: d x d + d numbers per head whatever the "
            "length, where softmax attention's KV cache holds 2 T d. Rows of S, then z.",
            torch.cat([state.kv[0, 0], state.k_sum[0, 0][None]]),
            SEED_002_LINEAR,
            rows=(*(f"S row {j}" for j in range(4)), "z"),
            key="state-after-the-last-token-s-sigma",
        ),
        Step(
            "Largest difference: running state against quadratic form",
            "The two orders of the same sums (φ(Q)(φ(K)^T V) against (φ(Q)φ(K)^T)V): equal to "
            "rounding, the associativity eq. 48 relies on.",
            float((running - quadratic).abs().max()),
            SEED_002_LINEAR,
            key="largest-difference-running-state-against-quadratic-form",
        ),
        Step(
            "Weights of linear attention (kernel / row sum)",
            "What linear attention gives each key: flatter than softmax, since φ(q)·φ(k) "
            "grows far more slowly than exp(q·k / sqrt(d)).",
            linear_weights,
            SEED_002_LINEAR,
            **square,
            key="weights-of-linear-attention-kernel-row-sum",
        ),
        Step(
            "Weights of softmax attention, same Q and K",
            "softmax(Q K^T / sqrt(d)) with the causal mask, for comparison: linear attention "
            "is a different attention, not an approximation of this one to any set accuracy.",
            softmax_weights[0, 0],
            SEED_002_LINEAR,
            **square,
            key="weights-of-softmax-attention-same-q-and-k",
        ),
    ]


def linear_attention_figures(folder: Path) -> list[Path]:
    steps = {step.key: np.asarray(step.value) for step in linear_attention()}
    tokens = [f"t{i}" for i in range(LINEAR_TOKENS)]
    panels = [
        [
            ("linear: φ(q)·φ(k) / Σ", steps["weights-of-linear-attention-kernel-row-sum"]),
            ("softmax(q·k / sqrt d)", steps["weights-of-softmax-attention-same-q-and-k"]),
        ]
    ]
    return [
        plots.heatmap_grid(
            folder / "linear_attention_weights.png",
            panels,
            tokens,
            tokens,
            "Causal linear attention against softmax attention (seed 002 §11.3)",
        )
    ]


# ------------------------------------------------------------------- gradient checkpointing
SEED_001_CHECKPOINT = 'seed 001, "Optimization: Gradient Checkpointing"'
CHECKPOINT_CONFIG = ModelConfig(vocab_size=64, block_size=64, n_layer=4, n_head=2, n_embd=32)
CHECKPOINT_BATCH = 2
CHECKPOINT_LAYERS = (1, 2, 4, 8)
INFO_PRESET_CONTEXT = 1024
SEED_PRESET = "seed-30m"  # seed 000's model


@dataclasses.dataclass(frozen=True)
class TrainingStepMeasure:
    """Bytes of activations kept for the backward pass, and the FLOPs of forward + backward."""

    saved_bytes: int
    flops: int


def measure_training_step(config: ModelConfig, checkpointing: bool) -> TrainingStepMeasure:
    """One forward and backward pass of a GPT on a (CHECKPOINT_BATCH, T_max) batch, float32.

    Memory: the storages autograd keeps for the backward pass (saved-tensor hooks), parameters
    excluded; with checkpointing the blocks' own tensors are not kept (their inputs are, to
    recompute them: those are added, read by a hook on each block)."""
    torch.manual_seed(SEED)
    model = GPT(config).train()
    model.use_fast_attention(False)
    model.gradient_checkpointing = checkpointing
    generator = torch.Generator().manual_seed(SEED)
    ids = torch.randint(
        config.vocab_size, (CHECKPOINT_BATCH, config.block_size), generator=generator
    )
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept: dict[int, int] = {}

    def keep(tensor: torch.Tensor) -> None:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in weights:
            kept[storage.data_ptr()] = storage.nbytes()

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        keep(tensor)
        return tensor

    hooks = []
    if checkpointing:
        hooks = [
            block.register_forward_pre_hook(lambda _, args: keep(args[0]))
            for block in model.transformer.h
        ]
    with FlopCounterMode(display=False) as counter:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            _, loss = model(ids, ids)
        loss.backward()
    for hook in hooks:
        hook.remove()
    return TrainingStepMeasure(sum(kept.values()), counter.get_total_flops())


@functools.cache
def checkpoint_measures() -> tuple[tuple[int, TrainingStepMeasure, TrainingStepMeasure], ...]:
    """(n_layer, without, with checkpointing) for each depth in CHECKPOINT_LAYERS."""
    return tuple(
        (
            layers,
            measure_training_step(dataclasses.replace(CHECKPOINT_CONFIG, n_layer=layers), False),
            measure_training_step(dataclasses.replace(CHECKPOINT_CONFIG, n_layer=layers), True),
        )
        for layers in CHECKPOINT_LAYERS
    )


def checkpointing() -> list[Step]:
    """Gradient checkpointing (seed 001): memory of the activations kept for the backward pass
    with and without it, from the model's own counts (``light-llm info``: L x T x d for the
    residual stream) and measured on training steps, with the extra compute counted."""
    config = CHECKPOINT_CONFIG
    measures = checkpoint_measures()
    rows = []
    for layers, without, with_ in measures:
        counts = model_counts(dataclasses.replace(config, n_layer=layers), bytes_per_value=4)
        rows.append(
            [
                without.saved_bytes / 2**10,
                with_.saved_bytes / 2**10,
                CHECKPOINT_BATCH * counts.activation_bytes / 2**10,
                with_.flops / without.flops,
            ]
        )
    rows = np.array(rows)
    per_layer_without = np.diff(rows[:, 0]) / np.diff(CHECKPOINT_LAYERS)
    per_layer_with = np.diff(rows[:, 1]) / np.diff(CHECKPOINT_LAYERS)
    seed_config = preset(SEED_PRESET)
    seed_counts = model_counts(seed_config, context=INFO_PRESET_CONTEXT, bytes_per_value=4)
    t, d = config.block_size, config.n_embd
    return [
        Step(
            "Kept for the backward pass (KiB), and compute, by depth",
            f"Measured on one training step of a small GPT (d = {d}, T = {t}, batch "
            f"{CHECKPOINT_BATCH}, float32, explicit attention) for several depths L: the bytes "
            "of the tensors autograd keeps for the backward pass (weights excluded), without "
            "and with checkpointing every block; the residual stream L x T x d x 4 bytes "
            "x batch that `light-llm info` counts as activations; and FLOPs with / without.",
            rows,
            SEED_001_CHECKPOINT,
            rows=tuple(f"L={layers}" for layers in CHECKPOINT_LAYERS),
            columns=("without", "with", "info: L·T·d", "compute ratio"),
            key="kept-for-the-backward-pass-kib-and",
        ),
        Step(
            "Memory per extra layer (KiB)",
            "Without checkpointing every block keeps its internals (its norms' inputs, Q, K, "
            "V, the T x T attention weights, the 4d-wide MLP activations...); with it a block "
            "keeps only its input, B x T x d x 4 bytes = "
            f"{CHECKPOINT_BATCH * t * d * 4 / 2**10:g} KiB, the info figure per layer, and "
            "recomputes the rest during the backward pass.",
            np.column_stack([per_layer_without, per_layer_with]),
            SEED_001_CHECKPOINT,
            rows=tuple(
                f"L={a}->{b}"
                for a, b in zip(CHECKPOINT_LAYERS, CHECKPOINT_LAYERS[1:], strict=False)
            ),
            columns=("without", "with"),
            key="memory-per-extra-layer-kib",
        ),
        Step(
            "Extra compute of checkpointing",
            "Measured FLOPs with / without, at the deepest model. A forward pass is a third of "
            "forward + backward (the backward's products cost twice the forward's), so "
            "recomputing every block would add 33%, the seed's figure. PyTorch stops each "
            "recomputation once the tensors the backward needs are rebuilt, so the block's "
            "last product (the MLP's output projection, about a quarter of a block's FLOPs "
            "here) is not redone: about +25%.",
            rows[-1, 3] - 1.0,
            f"{SEED_001_CHECKPOINT}, Compute: +33%",
            seed_value=0.33,
            key="extra-compute-of-checkpointing",
        ),
        Step(
            "The seed's model (seed 000) at T = 1024: residual stream L·T·d, per sequence (MiB)",
            f"From the model's own counts (light-llm info --preset {SEED_PRESET}: L = "
            f"{seed_config.n_layer}, d = {seed_config.n_embd}): "
            "what checkpointing keeps, in float32. Without it each layer keeps several times "
            "more: its attention weights alone are n_h T² numbers (second column). (The "
            "seed's O(√N N d) is for checkpoints every √L layers; this model checkpoints "
            "every block.)",
            [seed_counts.activation_bytes / 2**20, seed_counts.attention_matrix_bytes / 2**20],
            SEED_001_CHECKPOINT,
            columns=("L·T·d (kept)", "attention weights, 1 layer"),
            key="the-seed-s-model-seed-000-at",
        ),
    ]


def checkpointing_figures(folder: Path) -> list[Path]:
    measures = checkpoint_measures()
    layers = np.array([m[0] for m in measures], dtype=float)
    return [
        plots.lines_figure(
            folder / "checkpointing_memory.png",
            layers,
            [
                (
                    "without checkpointing",
                    np.array([m[1].saved_bytes for m in measures]) / 2**10,
                    "o-",
                ),
                (
                    "with checkpointing",
                    np.array([m[2].saved_bytes for m in measures]) / 2**10,
                    "s-",
                ),
            ],
            "Activations kept for the backward pass of one training step, measured "
            "(seed 001, gradient checkpointing)",
            "layers L",
            "KiB",
        )
    ]


# the worked examples of this module, in the order light-llm explain lists them
EXAMPLES = (
    Example(
        "kv-cache",
        "one decoding step with and without the KV cache: the cache grows by one key and "
        "value, the logits agree, the work is counted (seed 002 §11.2)",
        kv_cache,
        kv_cache_figures,
    ),
    Example(
        "linear-attention",
        "causal linear attention: its running state equals its quadratic form; its "
        "weights beside softmax's (seed 002 §11.3)",
        linear_attention,
        linear_attention_figures,
    ),
    Example(
        "checkpointing",
        "gradient checkpointing: activations kept for the backward pass with and without "
        "it, from the model's counts and measured, and the extra compute (seed 001)",
        checkpointing,
        checkpointing_figures,
    ),
)
