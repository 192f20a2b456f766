"""Probes taken while a GPT trains, by both engines' loops: at every evaluation and every
``probe_interval`` iterations, the model is seen through :func:`light_llm.inspect.probe.
take_probe` on a fixed prompt and a fixed slice of the validation text, and the record is
written to ``OUT/probes/`` (:mod:`light_llm.checkpoints.probes`). The explorer replays them:
the next-token distribution, the attention, the logit lens, the head roles and importances
and a sample, as the model was at each recorded iteration.

    probe_interval   None: a fifth of eval_interval, at least 10 (every 50 iterations of the default
                     run); 0: no probes at all
    probe_prompt     None: "It is the east, and Juliet is the" on Shakespeare, else the
                     first 32 tokens of the validation split (both cut to the context)
    the slice        the validation split's first 2 windows of the context

A probe runs in float32 with dropout off on rank 0 alone, on one thread in the PyTorch trainer
(its products are too small to share out); the default run's 25 probes take about 2.5% of its
training time (3.2 s of 126 s in float32 on a 2-core AVX2 CPU, benchmarks/bench_probes.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from light_llm.checkpoints.probes import drop_probes_after, probe_file, write_probe
from light_llm.errors import ConfigError, SamplingError, TokenizerError
from light_llm.inspect.probe import PROBE_SAMPLE_TEMPERATURE, PROBE_SAMPLE_TOKENS, take_probe
from light_llm.train.config import TrainConfig
from light_llm.train.metrics import bits_per_unit

DEFAULT_PROBE_PROMPT = "It is the east, and Juliet is the"  # mid-sentence: "sun" follows
PROBE_PROMPT_TOKENS = 32  # of the validation split, for a corpus of the learner's own
PROBE_SLICE_WINDOWS = 2  # windows of the context that the importance table reads
EVALUATIONS_PER_PROBE_DEFAULT = 5  # probes between two evaluations by default
MIN_DEFAULT_PROBE_INTERVAL = 10  # ... but no more often than this (evaluations aside)

# (model, tokenizer, prompt text, new tokens, temperature, seed) -> the continuation, drawn
# by the engine's own sampler
Sampler = Callable[[object, object, str, int, float, int], str]


def probe_interval(config: TrainConfig) -> int:
    """Iterations between probes (0: none) of a resolved config."""
    if config.probe_interval is not None:
        return config.probe_interval
    return max(MIN_DEFAULT_PROBE_INTERVAL, config.eval_interval // EVALUATIONS_PER_PROBE_DEFAULT)


def given_prompt_ids(config: TrainConfig, tokenizer) -> list[int] | None:
    """The ids of ``--probe-prompt`` (None when not given); ConfigError when it cannot be
    encoded or is longer than the context. Called before anything is written."""
    context = config.block_size
    if config.probe_prompt is not None and probe_interval(config):
        try:
            ids = tokenizer.encode(config.probe_prompt)
        except TokenizerError as exc:
            raise ConfigError(
                f"--probe-prompt cannot be read by this run's tokenizer: {exc}"
            ) from None
        if len(ids) > context:
            raise ConfigError(
                f"--probe-prompt is {len(ids)} tokens, longer than the context of {context}; "
                "shorten it."
            )
        if not ids:
            raise ConfigError("--probe-prompt encodes to no tokens; give some text.")
        return ids
    return None


def probe_prompt_ids(config: TrainConfig, tokenizer, val_tokens: np.ndarray) -> list[int]:
    """The token ids of the run's probe prompt (module docstring)."""
    given = given_prompt_ids(config, tokenizer)
    if given is not None:
        return given
    context = config.block_size
    if config.data is None:
        try:
            ids = tokenizer.encode(DEFAULT_PROBE_PROMPT)
        except TokenizerError:
            ids = []
        if ids:
            return ids[-context:]
    return [int(token) for token in val_tokens[: min(PROBE_PROMPT_TOKENS, context)]]


class ProbeRecorder:
    """Takes and writes a run's probes. ``resumed_at``: the iteration a resumed run starts
    from (its later records, a killed run's, are dropped); None for a fresh run, which drops
    any an earlier run left in the folder once its own first checkpoint is written. Under
    torchrun every process asks :meth:`due` (so that all take part in rank 0's probe);
    ``writes`` is False in the others, which never touch the files."""

    def __init__(
        self,
        out: Path,
        config: TrainConfig,
        tokenizer,
        val_tokens: np.ndarray,
        sampler: Sampler,
        resumed_at: int | None,
        writes: bool = True,
    ) -> None:
        self.out = Path(out)
        self.interval = probe_interval(config)
        self.tokenizer = tokenizer
        self.sampler = sampler
        self.seed = config.seed
        self.prompt_ids = probe_prompt_ids(config, tokenizer, val_tokens) if self.interval else []
        self.slice_ids = np.asarray(val_tokens[: PROBE_SLICE_WINDOWS * config.block_size + 1])
        # the bytes of the text the slice's scored tokens (each after the first) stand for
        self.slice_bytes = len(tokenizer.decode(self.slice_ids[1:].tolist()).encode("utf-8"))
        self.fresh = resumed_at is None and writes  # the other processes only keep count
        self.last_recorded: int | None = None
        if resumed_at is not None and writes:
            drop_probes_after(self.out, resumed_at)
            if probe_file(self.out, resumed_at).is_file():
                self.last_recorded = resumed_at
        self.seconds = 0.0  # spent probing, in all

    def due(self, iteration: int, evaluated: bool) -> bool:
        """Whether ``iteration`` is probed: every evaluation (``evaluated``) and every
        ``interval`` iterations, each once. Asked first after a fresh run's first checkpoint,
        when an earlier run's records in the folder are dropped (they are not this run's)."""
        if self.fresh:
            drop_probes_after(self.out, None)
            self.fresh = False
        if not self.interval or iteration == self.last_recorded:
            return False
        return evaluated or iteration % self.interval == 0

    def record(self, model, iteration: int, tokens_seen: int, elapsed_s: float) -> dict | None:
        """Take the probe of ``model`` (in evaluation mode: the caller's to set and restore),
        write it and return it. Its ``slice_bpb`` is the slice's loss in bits per byte of its
        text (:func:`~light_llm.train.metrics.bits_per_unit`), for the curves. None, with
        nothing written, when the model's logits are NaN or infinite (its weights have gone
        bad, or overflow): there is nothing to probe, and the trainer's check of the loss
        that follows stops the run in its own sentence (the iteration, the last good
        checkpoint), not in the sampler's."""
        started = time.perf_counter()
        prompt = self.tokenizer.decode(self.prompt_ids)
        try:
            sample = self.sampler(
                model,
                self.tokenizer,
                prompt,
                PROBE_SAMPLE_TOKENS,
                PROBE_SAMPLE_TEMPERATURE,
                self.seed,
            )
        except SamplingError:  # the settings are the recorder's own: the logits are bad
            return None
        record = take_probe(model, self.tokenizer, self.prompt_ids, self.slice_ids, sample=sample)
        record["prompt"]["text"] = prompt
        scored = record["importance"]["tokens"]
        record["slice_bpb"] = bits_per_unit(record["slice_loss"], scored, self.slice_bytes)
        record.update(iter=iteration, tokens_seen=tokens_seen, elapsed_s=elapsed_s)
        write_probe(self.out, record)
        self.last_recorded = iteration
        self.seconds += time.perf_counter() - started
        return record
