"""Text generation with the NumPy engine: temperature, top-k and top-p sampling with a KV
cache (seed 000 §8; seed 002 §11.2), the same rules as :mod:`light_llm.generate` with a NumPy
random Generator.

    P(x_t | x_<t) = softmax(logits_t / τ)         τ = 0 is argmax (greedy)
    top-k: keep the k largest logits               top-p: keep the smallest set of mass >= p
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from light_llm.errors import ConfigError, SamplingError
from light_llm.limits import check_integer, check_new_tokens, check_seed
from light_llm.reference.embedding import check_ids_in_vocabulary
from light_llm.reference.softmax import softmax_forward
from light_llm.sampling_options import (  # one rule
    DEFAULT_TEMPERATURE,
    NO_DISTRIBUTION,
    check_prompt_mask,
    check_text_tokenizer,
    validate_sampling,
)
from light_llm.tokenizers.stream import TextStream, whole_text


def filter_logits(
    logits: np.ndarray,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> np.ndarray:
    """Divide by the temperature, then set to -inf every logit outside the top-k set and
    outside the nucleus (seed 000 §8). ``logits``: (B, V) -> (B, V).

    Top-k keeps every logit >= the k-th largest (ties at the boundary are kept). Top-p sorts the
    probabilities in descending order and keeps the smallest prefix whose cumulative mass
    reaches p; the most likely token is always kept. A temperature of 0 is treated as 1 here:
    greedy decoding is done by :func:`sample_next`."""
    validate_sampling(temperature, top_k, top_p)
    logits = np.array(logits, dtype=np.float64)
    if temperature > 0.0:
        # shifted by the largest logit first (softmax does not change), so that a tiny τ
        # drives the others to -inf, never to inf - inf
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            scaled = logits / temperature
            if not np.isfinite(scaled).all():  # a tiny τ: all but the top logit go to -inf
                scaled = (logits - logits.max(axis=-1, keepdims=True)) / temperature
        logits = scaled
    vocab = logits.shape[-1]
    if top_k is not None and top_k < vocab:
        kth_largest = np.partition(logits, vocab - int(top_k), axis=-1)[..., vocab - int(top_k)]
        logits[logits < kth_largest[..., None]] = -np.inf
    if top_p is not None and top_p < 1.0:
        order = np.argsort(-logits, axis=-1, kind="stable")  # descending
        sorted_probs, _ = softmax_forward(np.take_along_axis(logits, order, axis=-1))
        mass_before = np.cumsum(sorted_probs, axis=-1) - sorted_probs
        drop_sorted = mass_before >= top_p
        drop_sorted[..., 0] = False  # the most likely token is always kept
        drop = np.zeros_like(logits, dtype=bool)
        np.put_along_axis(drop, order, drop_sorted, axis=-1)
        logits[drop] = -np.inf
    return logits


def sample_next(
    logits: np.ndarray,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    rng: np.random.Generator | None = None,
) -> np.ndarray:
    """Draw the next token of each row from softmax(filtered logits) (seed 000 §8), by
    inverse-CDF sampling with one uniform number per row. (B, V) -> (B,) ids.
    Temperature 0 is greedy (argmax)."""
    logits = np.asarray(logits)
    if logits.ndim != 2 or not np.issubdtype(logits.dtype, np.number):
        raise SamplingError(f"logits must be a (B, V) array of numbers, got shape {logits.shape}.")
    if logits.shape[-1] == 0 or not np.isfinite(np.max(logits, axis=-1)).all():
        raise SamplingError(NO_DISTRIBUTION)
    if temperature == 0.0:
        validate_sampling(temperature, top_k, top_p)
        return np.argmax(logits, axis=-1)
    rng = rng if rng is not None else np.random.default_rng()
    probs, _ = softmax_forward(filter_logits(logits, temperature, top_k, top_p))  # (B, V)
    cumulative = np.cumsum(probs, axis=-1)
    uniform = rng.random((probs.shape[0], 1)) * cumulative[:, -1:]
    chosen = (cumulative <= uniform).sum(axis=-1)  # first index whose mass passes u
    return np.minimum(chosen, probs.shape[-1] - 1)


def check_numpy_model(model: object) -> None:
    """ConfigError unless ``model`` is a :class:`~light_llm.reference.model.NumpyGPT` (a
    PyTorch GPT samples with :mod:`light_llm.generate`): known by its weights, a dict of
    arrays, as NumpyGPT's own ``generate`` imports this module."""
    if not isinstance(getattr(model, "params", None), dict) or not hasattr(model, "config"):
        hint = ""
        if hasattr(model, "transformer"):  # a PyTorch GPT, without importing torch here
            hint = "; a PyTorch GPT generates with light_llm.generate's functions of the same name"
        raise ConfigError(f"model must be a NumpyGPT, got {type(model).__name__}{hint}.")


def stream_tokens(
    model,
    idx: np.ndarray,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    rng: np.random.Generator | None = None,
    eos_id: int | None = None,
    attention_mask: np.ndarray | None = None,
    use_cache: bool = True,
) -> Iterator[np.ndarray]:
    """Yield the new token ids, (B,), one step at a time, as
    :func:`light_llm.generate.stream_tokens` does for the PyTorch engine.

    The prompt fills the KV cache in one pass; then one token per step reads and extends it
    (seed 002 §11.2). Once the sequence fills the context, the cache is refilled from the last
    ``block_size`` tokens at each step. ``idx`` (B, T) may be left-padded, marked by
    ``attention_mask``. Rows that produced ``eos_id`` keep yielding it; the stream ends when
    every row has."""
    check_numpy_model(model)
    validate_sampling(temperature, top_k, top_p)
    check_new_tokens(max_new_tokens, SamplingError)
    if rng is not None and not isinstance(rng, np.random.Generator):
        raise SamplingError(
            f"rng must be a numpy.random.Generator or None, got {type(rng).__name__}."
        )
    given = np.asarray(idx)
    if given.size and not np.issubdtype(given.dtype, np.integer):
        raise SamplingError(f"token ids must be integers, got {given.dtype}.")
    vocab_size = model.config.vocab_size
    if eos_id is not None:  # as the torch engine's generate
        check_integer("eos_id", eos_id, 0, vocab_size - 1, SamplingError)
    check_ids_in_vocabulary(given, vocab_size)
    tokens = given.astype(np.int64)
    if tokens.ndim != 2:
        raise SamplingError(f"token ids must have shape (B, T), got {tokens.shape}.")
    if attention_mask is None and tokens.shape[1] == 0:
        raise SamplingError("the prompt is empty: give at least one token in a (B, T) array.")
    if attention_mask is not None:
        if np.shape(attention_mask) != tokens.shape:
            raise SamplingError(
                f"the attention mask must have the prompts' shape {tokens.shape}, got "
                f"{np.shape(attention_mask)}."
            )
        check_prompt_mask(np.asarray(attention_mask))  # as the torch engine's generate
    mask = None if attention_mask is None else np.asarray(attention_mask, dtype=np.int64)
    block_size = model.config.block_size
    was_training = model.training
    model.training = False
    try:
        finished = np.zeros(tokens.shape[0], dtype=bool)
        cache = None
        for _ in range(max_new_tokens):
            window = tokens[:, -block_size:]
            window_mask = mask[:, -block_size:] if mask is not None else None
            if not use_cache:
                logits, _, _ = model.forward(window, attention_mask=window_mask, last_only=True)
            elif cache is None or cache.length >= block_size:
                cache = model.new_cache(tokens.shape[0])
                logits, _, _ = model.forward(
                    window, kv_cache=cache, attention_mask=window_mask, last_only=True
                )
            else:
                logits, _, _ = model.forward(
                    tokens[:, -1:], kv_cache=cache, attention_mask=window_mask, last_only=True
                )
            next_ids = sample_next(logits[:, -1, :], temperature, top_k, top_p, rng)
            if eos_id is not None:
                next_ids = np.where(finished, eos_id, next_ids)
                finished |= next_ids == eos_id
            tokens = np.concatenate((tokens, next_ids[:, None]), axis=1)
            if mask is not None:
                mask = np.concatenate((mask, np.ones_like(mask[:, :1])), axis=1)
            yield next_ids
            if eos_id is not None and finished.all():
                return
    finally:
        model.training = was_training


def generate(model, idx: np.ndarray, max_new_tokens: int, **sampling) -> np.ndarray:
    """Continue ``idx`` (B, T) by up to ``max_new_tokens`` tokens: returns (B, T + n).
    Options as :func:`stream_tokens`."""
    steps = list(stream_tokens(model, idx, max_new_tokens, **sampling))
    idx = np.asarray(idx, dtype=np.int64)  # integer ids, as stream_tokens checked
    if not steps:
        return idx
    return np.concatenate((idx, np.stack(steps, axis=1)), axis=1)


def generate_text(
    model,
    tokenizer,
    prompt: str,
    max_new_tokens: int,
    *,
    temperature: float = DEFAULT_TEMPERATURE,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    stop_at_eos: bool = True,
    use_cache: bool = True,
    on_text=None,
) -> str:
    """Generate a continuation of one prompt and return it (without the prompt);
    ``on_text(piece)`` receives the new text as soon as it decodes to whole characters."""
    check_numpy_model(model)
    check_text_tokenizer(tokenizer, model.config.vocab_size)
    if not isinstance(prompt, str):  # the torch engine's generate_text takes a list of them
        raise SamplingError(
            f"the NumPy engine's generate_text takes one prompt, a str, got "
            f"{type(prompt).__name__}."
        )
    ids = tokenizer.encode(prompt)
    if not ids:
        raise SamplingError(
            f"the prompt {prompt!r} encodes to no tokens: give at least one character."
        )
    rng = np.random.default_rng(None if seed is None else check_seed(seed, SamplingError))
    eos_id = tokenizer.eos_id if stop_at_eos else None
    new_ids: list[int] = []
    stream = TextStream(tokenizer)  # whole characters only
    for step in stream_tokens(
        model,
        np.array([ids], dtype=np.int64),
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        rng=rng,
        eos_id=eos_id,
        use_cache=use_cache,
    ):
        token = int(step[0])
        if eos_id is not None and token == eos_id:
            break
        new_ids.append(token)
        if on_text is not None and (piece := stream.add([token])):
            on_text(piece)
    return whole_text(tokenizer, new_ids)
