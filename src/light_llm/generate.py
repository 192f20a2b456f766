"""Text generation: temperature, top-k and top-p sampling with a KV cache (seed 000 §8,
seed 002 §11.2).

    P(x_t | x_<t) = softmax(logits_t / τ)        τ -> 0 is argmax (greedy)
    top-k: keep the k largest logits              top-p: keep the smallest set whose mass >= p

Decoding runs the prompt through the model once (filling the cache), then feeds one token per
step. When the sequence reaches the context length, the model keeps seeing exactly the last
``block_size`` tokens: the cache is refilled from that window at each further step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import torch

from light_llm.errors import ConfigError, SamplingError
from light_llm.limits import MAX_BATCH_SIZE, check_integer, check_new_tokens, check_seed
from light_llm.models.gpt import check_attention_mask, check_token_ids
from light_llm.sampling_options import (
    DEFAULT_TEMPERATURE,
    NO_DISTRIBUTION,
    check_prompt_mask,
    check_text_tokenizer,
    validate_sampling,
)
from light_llm.tokenizers.stream import TextStream, whole_text


def check_logits(logits: object) -> None:
    """SamplingError unless ``logits`` is a torch tensor with a vocabulary dimension (of at
    least one token)."""
    if not isinstance(logits, torch.Tensor) or logits.dim() == 0 or logits.size(-1) == 0:
        got = tuple(logits.shape) if isinstance(logits, torch.Tensor) else type(logits).__name__
        raise SamplingError(f"logits must be a (B, V) torch tensor, got {got}.")


def filter_logits(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """Divide by the temperature, then set to -inf every logit outside the top-k set and
    outside the nucleus (seed 000 §8). ``logits``: (B, V), returned as float32 (B, V).

    Top-k keeps every logit >= the k-th largest (ties at the boundary are kept, so exactly k
    survive when values are distinct). Top-p sorts probabilities in descending order and keeps
    the smallest prefix whose cumulative mass reaches p; the most likely token is always kept.
    A temperature of 0 is treated as 1 here: greedy decoding is done by :func:`sample_next`.
    """
    validate_sampling(temperature, top_k, top_p)
    check_logits(logits)
    logits = logits.float()
    if temperature > 0.0:
        scaled = logits / temperature
        if not bool(torch.isfinite(scaled).all()):
            # a tiny τ overflowed: shift by the largest logit first (softmax does not
            # change), so the top logit is 0 and the others go to -inf, never inf - inf;
            # in float64, where τ down to 5e-324 is a number, not 0
            shifted = (logits - logits.amax(dim=-1, keepdim=True)).double()
            scaled = (shifted / temperature).float()
        logits = scaled
    if top_k is not None and top_k < logits.size(-1):
        kth_largest = torch.topk(logits, int(top_k), dim=-1).values[..., -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth_largest, float("-inf"))
    if top_p is not None and top_p < 1.0:
        # stable: of tied logits the lower id comes first, as in the NumPy engine's argsort
        sorted_logits, sorted_index = torch.sort(logits, dim=-1, descending=True, stable=True)
        cumulative = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        # drop a token when the mass *before* it already reaches p: the kept prefix is the
        # smallest one with cumulative mass >= p, and always contains the first token
        mass_before = cumulative - torch.softmax(sorted_logits, dim=-1)
        drop_sorted = mass_before >= top_p
        drop_sorted[..., 0] = False  # even a p below float32's smallest number keeps one
        drop = drop_sorted.scatter(-1, sorted_index, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sample_next(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Draw the next token from P_temp = softmax(filtered logits) (seed 000 §8).
    ``logits``: (B, V) -> (B,) token ids. Temperature 0 is greedy (argmax)."""
    check_logits(logits)
    # a row's largest logit is NaN if any is, +inf if any is, -inf if all are
    if not bool(torch.isfinite(logits.amax(dim=-1)).all()):
        raise SamplingError(NO_DISTRIBUTION)
    if temperature == 0.0:
        validate_sampling(temperature, top_k, top_p)
        return logits.argmax(dim=-1)
    probs = sampling_distribution(logits, temperature, top_k, top_p)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)


def sampling_distribution(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """The distribution :func:`sample_next` draws from (seed 000 §8): softmax of the filtered
    logits, P_temp = softmax(filter_logits(logits / τ)); at τ = 0 (greedy) all the mass on the
    argmax. ``logits``: (B, V) -> float32 (B, V)."""
    if temperature == 0.0:
        validate_sampling(temperature, top_k, top_p)
        greedy = torch.zeros_like(logits, dtype=torch.float32)
        return greedy.scatter(-1, logits.argmax(dim=-1, keepdim=True), 1.0)
    return torch.softmax(filter_logits(logits, temperature, top_k, top_p), dim=-1)


def non_finite_message(dtype: torch.dtype) -> str:
    """The one sentence for logits that came out NaN or infinite."""
    if dtype in (torch.float16, torch.bfloat16):
        return (
            f"the model's logits overflowed to inf/NaN in {str(dtype).removeprefix('torch.')}: "
            "decode in float32 (--dtype float32)."
        )
    return "the model's logits are NaN or infinite: its weights are probably corrupt."


def check_torch_model(model: object) -> None:
    """ConfigError unless ``model`` is a PyTorch GPT (a NumpyGPT samples with
    :mod:`light_llm.reference.sampling`, an encoder does not generate)."""
    # a GPT, or a wrapper that hands its attributes on (the explorer's serialised forward)
    if not isinstance(getattr(model, "transformer", None), torch.nn.Module):
        other = "light_llm.reference.sampling" if type(model).__name__ == "NumpyGPT" else ""
        hint = f"; a NumpyGPT generates with {other}'s functions of the same name" if other else ""
        raise ConfigError(f"model must be a PyTorch GPT, got {type(model).__name__}{hint}.")


@torch.no_grad()
def stream_tokens(
    model,
    idx: torch.Tensor,
    max_new_tokens: int,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
    eos_id: int | None = None,
    attention_mask: torch.Tensor | None = None,
    use_cache: bool = True,
    on_step: Callable[[torch.Tensor, torch.Tensor], None] | None = None,
) -> Iterator[torch.Tensor]:
    """Yield the new token ids, (B,), one step at a time.

    ``idx`` (B, T) holds the prompts, left-padded when ``attention_mask`` (B, T) marks padding.
    Prompts longer than the context are cropped to their last ``block_size`` tokens. Rows that
    produced ``eos_id`` keep yielding ``eos_id``; the stream ends when every row has.
    ``on_step(logits, ids)`` sees each step's float32 next-token logits (B, V) and the ids
    drawn from them (B,), before they are yielded (to show the distribution sampled from).
    """
    check_torch_model(model)
    validate_sampling(temperature, top_k, top_p)
    check_new_tokens(max_new_tokens, SamplingError)
    check_token_ids(idx, model.config.vocab_size)
    if generator is not None and not isinstance(generator, torch.Generator):
        raise SamplingError(
            f"generator must be a torch.Generator or None, got {type(generator).__name__}."
        )
    if eos_id is not None:
        check_integer("eos_id", eos_id, 0, model.config.vocab_size - 1, SamplingError)
    block_size = model.config.block_size
    was_training = model.training
    model.eval()
    try:
        tokens = idx
        mask = attention_mask
        if tokens.size(1) == 0:
            raise SamplingError("the prompt is empty: give at least one token.")
        if mask is not None:
            check_attention_mask(mask, tuple(idx.shape))
            check_prompt_mask(mask)  # left padding, a token in every prompt
        finished = torch.zeros(idx.size(0), dtype=torch.bool, device=idx.device)
        cache = None
        for _ in range(max_new_tokens):
            window = tokens[:, -block_size:]
            window_mask = mask[:, -block_size:] if mask is not None else None
            if not use_cache:
                logits, _ = model(window, attention_mask=window_mask, last_only=True)
            elif cache is None or cache.length >= block_size:
                # fill (or refill, once the context is full) the cache from the window
                if cache is None:
                    cache = model.new_cache(tokens.size(0))
                else:
                    cache.clear()
                logits, _ = model(
                    window, kv_cache=cache, attention_mask=window_mask, last_only=True
                )
            else:
                logits, _ = model(
                    tokens[:, -1:], kv_cache=cache, attention_mask=window_mask, last_only=True
                )
            next_logits = logits[:, -1, :].float()  # (B, V); float32 argmax is fastest
            if not torch.isfinite(next_logits.sum()):
                raise SamplingError(non_finite_message(model.dtype))
            next_ids = sample_next(next_logits, temperature, top_k, top_p, generator)
            if on_step is not None:
                on_step(next_logits, next_ids)
            if eos_id is not None:
                next_ids = torch.where(finished, torch.full_like(next_ids, eos_id), next_ids)
                finished |= next_ids == eos_id
            tokens = torch.cat((tokens, next_ids[:, None]), dim=1)
            if mask is not None:
                mask = torch.cat((mask, torch.ones_like(mask[:, :1])), dim=1)
            yield next_ids
            if eos_id is not None and bool(finished.all()):
                return
    finally:
        model.train(was_training)


def generate(model, idx: torch.Tensor, max_new_tokens: int, **sampling) -> torch.Tensor:
    """Continue ``idx`` (B, T) by up to ``max_new_tokens`` tokens: returns (B, T + n).
    Options as :func:`stream_tokens`."""
    steps = list(stream_tokens(model, idx, max_new_tokens, **sampling))
    if not steps:
        return idx
    return torch.cat((idx, torch.stack(steps, dim=1)), dim=1)


def left_pad(
    sequences: Sequence[Sequence[int]], pad_id: int, device: torch.device | str = "cpu"
) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack token lists of different lengths, padding on the left so that every row's last
    token is its newest: returns ids (B, T) and attention_mask (B, T) (1 = real token)."""
    if not sequences:
        raise SamplingError("left_pad needs at least one sequence.")
    longest = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), longest), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), longest), dtype=torch.long)
    for row, seq in enumerate(sequences):
        if len(seq):
            ids[row, longest - len(seq) :] = torch.tensor(list(seq), dtype=torch.long)
            mask[row, longest - len(seq) :] = 1
    return ids.to(device), mask.to(device)


def generate_text(
    model,
    tokenizer,
    prompts: Sequence[str],
    max_new_tokens: int,
    *,
    temperature: float = DEFAULT_TEMPERATURE,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int | None = None,
    stop_at_eos: bool = True,
    use_cache: bool = True,
    on_text: Callable[[int, str], None] | None = None,
    on_step: Callable[[torch.Tensor, torch.Tensor], None] | None = None,
) -> list[str]:
    """Generate a continuation for each prompt and return the continuations (without the
    prompts). ``on_text(row, piece)`` receives each row's new text as soon as it decodes to
    whole characters (a byte-level token can hold part of a UTF-8 character, held back until
    it completes; one still cut at the end is left out: :mod:`light_llm.tokenizers.stream`);
    ``on_step(logits, ids)`` each step's next-token logits (B, V) and drawn ids (B,), as in
    :func:`stream_tokens`.
    """
    check_torch_model(model)
    check_text_tokenizer(tokenizer, model.config.vocab_size)
    validate_sampling(temperature, top_k, top_p)
    if isinstance(prompts, str):  # else each character would be a prompt of its own
        raise SamplingError("generate_text takes a list of prompts, not one str: write [prompt].")
    if not isinstance(prompts, Sequence):  # a generator: its prompts are counted, then read
        raise SamplingError(
            f"generate_text takes a list of prompts, not a {type(prompts).__name__}: write "
            "list(prompts)."
        )
    if not prompts:
        raise SamplingError("give at least one prompt.")
    if len(prompts) > MAX_BATCH_SIZE:  # one row of the batch each
        raise SamplingError(
            f"at most {MAX_BATCH_SIZE:,} prompts are generated at once, got {len(prompts):,}; "
            "split them into several calls."
        )
    encoded = [tokenizer.encode(p) for p in prompts]
    for prompt, ids in zip(prompts, encoded, strict=True):
        if not ids:
            raise SamplingError(
                f"the prompt {prompt!r} encodes to no tokens: give at least one character."
            )
    device = model.transformer.wte.weight.device
    if len(encoded) == 1:
        idx = torch.tensor([encoded[0]], dtype=torch.long, device=device)
        mask = None
    else:
        idx, mask = left_pad(encoded, pad_id=0, device=device)
    generator = None
    if seed is not None:
        check_seed(seed, SamplingError)
        generator = torch.Generator(device=device)
        generator.manual_seed(seed)
    eos_id = tokenizer.eos_id if stop_at_eos else None
    new_ids: list[list[int]] = [[] for _ in prompts]
    streams = [TextStream(tokenizer) for _ in prompts]  # whole characters only
    done = [False] * len(prompts)
    for step_ids in stream_tokens(
        model,
        idx,
        max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        generator=generator,
        eos_id=eos_id,
        attention_mask=mask,
        use_cache=use_cache,
        on_step=on_step,
    ):
        for row, token in enumerate(step_ids.tolist()):
            if done[row]:
                continue
            if eos_id is not None and token == eos_id:
                done[row] = True
                continue
            new_ids[row].append(token)
            if on_text is not None and (piece := streams[row].add([token])):
                on_text(row, piece)
    return [whole_text(tokenizer, ids) for ids in new_ids]
