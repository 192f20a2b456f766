"""What a training run prints and writes, built in one place for both engines' loops (the
PyTorch :mod:`~light_llm.train.trainer` and the NumPy :mod:`~light_llm.train.numpy_trainer`):
the training-loss line, the evaluation record, their printed lines, the trainer state and the
prompt of the final sample. Their ``metrics.jsonl`` therefore hold the same kinds of line with
the same fields (:mod:`light_llm.checkpoints.run` describes them), and the explorer draws
either run's curve. Nothing here needs torch.

Every loss is a mean next-token cross-entropy in nats per token (seed 000 §7); a run whose
loss is per next token also gives it in bits per byte and per character of the split's text
(:func:`~light_llm.train.metrics.bits_per_unit`), an encoder's masked-LM loss does not.
"""

from __future__ import annotations

import sys
from typing import Any

from tqdm.auto import tqdm

from light_llm.checkpoints.run import MetricsLog
from light_llm.errors import TokenizerError, flag
from light_llm.terminal import for_terminal
from light_llm.train.budget import format_seconds
from light_llm.train.config import SIZE_WARMUPS, TrainConfig
from light_llm.train.metrics import bits_per_unit, perplexity


class RunRecord:
    """The records of one run, appended to its ``metrics.jsonl`` (``metrics``). ``sizes`` are
    the token cache's split sizes of what a next-token loss predicts
    (:func:`light_llm.data.predicted_sizes`: tokens, bytes and characters of each split, its
    first token left out), or None for a loss that is not per next token.
    ``mtp_weight`` > 0: the training loss adds multi-token prediction's second term, so its
    lines give no bits per byte (the evaluations, of the next token alone, do)."""

    def __init__(
        self, metrics: MetricsLog, sizes: dict[str, dict[str, int]] | None, mtp_weight: float = 0
    ) -> None:
        self.metrics = metrics
        self.sizes = sizes
        self.mtp_weight = mtp_weight

    def bits(self, loss: float, split: str, prefix: str = "") -> dict[str, float]:
        """``loss`` (nats per token over ``split``) in bits per byte and per character of the
        split's text, as ``{prefix + "bpb", prefix + "bpc"}``: bpb = loss x tokens / (ln 2 x
        bytes); {} without sizes."""
        if self.sizes is None:
            return {}
        size = self.sizes[split]
        return {
            f"{prefix}bpb": bits_per_unit(loss, size["tokens"], size["bytes"]),
            f"{prefix}bpc": bits_per_unit(loss, size["tokens"], size["chars"]),
        }

    def training(
        self, iteration: int, loss: float, lr: float, tokens_per_s: float, elapsed_s: float
    ) -> dict[str, Any]:
        """The training-loss line of ``iteration`` (the loss of its batch), appended."""
        record = {
            "kind": "train",
            "iter": iteration,
            "loss": loss,
            **({} if self.mtp_weight else self.bits(loss, "train")),
            "lr": lr,
            "tokens_per_s": tokens_per_s,
            "elapsed_s": elapsed_s,
        }
        self.metrics.append(record)
        return record

    def evaluation(
        self,
        iteration: int,
        losses: dict[str, float],
        lr: float,
        tokens_per_s: float,
        elapsed_s: float,
    ) -> dict[str, Any]:
        """The evaluation record of ``iteration`` from the mean losses of each split, with the
        validation perplexity exp(loss) (seed 002 §10.2, eq. 44); not yet appended: its line
        follows its checkpoint (:meth:`write_evaluation`)."""
        return {
            "kind": "eval",
            "iter": iteration,
            "train_loss": losses["train"],
            "val_loss": losses["val"],
            "val_perplexity": perplexity(losses["val"]),
            **self.bits(losses["train"], "train", "train_"),
            **self.bits(losses["val"], "val", "val_"),
            "lr": lr,
            "tokens_per_s": tokens_per_s,
            "elapsed_s": elapsed_s,
        }

    def probe(self, probe: dict[str, Any]) -> None:
        """Append the probe line of a probe record (light_llm.train.probes): the loss of the
        probe's slice of validation text, so that a short run's curve has points often."""
        self.metrics.append(
            {
                "kind": "probe",
                "iter": probe["iter"],
                "loss": probe["slice_loss"],
                "bpb": probe["slice_bpb"],
                "elapsed_s": probe["elapsed_s"],
            }
        )

    def write_evaluation(self, record: dict[str, Any]) -> None:
        """Append an evaluation record and print its line."""
        self.metrics.append(record)
        tqdm.write(evaluation_line(record), file=sys.stdout)


def evaluation_line(record: dict[str, Any]) -> str:
    """iter 100: train loss 2.1, val loss 2.2 (perplexity 9.03, 3.174 bits/byte)"""
    in_bits = f", {record['val_bpb']:.3f} bits/byte" if "val_bpb" in record else ""
    return (
        f"iter {record['iter']}: train loss {record['train_loss']:.4f}, val loss "
        f"{record['val_loss']:.4f} (perplexity {record['val_perplexity']:.2f}{in_bits})"
    )


def objective_note(mtp_weight: float) -> str | None:
    """The run's first lines' word on what its training loss is, when it is not the next
    token's cross-entropy alone (multi-token prediction)."""
    if not mtp_weight:
        return None
    return (
        f"multi-token prediction: the training loss is the next token's cross-entropy + "
        f"{mtp_weight:g} x the token after next's (a second head); evaluations give the next "
        "token's alone"
    )


def warmup_note(warmup_iters: int, max_iters: int) -> str | None:
    """The run's first lines' word on a warmup as long as the run or longer: the rate, at
    lr (t + 1) / (T_w + 1) on step t (light_llm.schedule), rises to max_iters / (T_w + 1) of
    its peak by the last step and never decays."""
    if not max_iters or warmup_iters < max_iters:
        return None
    return (
        f"warmup: {warmup_iters} iterations, as many as the run's {max_iters} or more: the "
        f"learning rate rises to {max_iters / (warmup_iters + 1):.0%} of its peak by the last "
        "step and never decays (a --warmup-iters below --max-iters lets it)"
    )


def longer_warmups_note(cfg: TrainConfig) -> str | None:
    """The run's first lines' word on a size or momentum warmup as long as the run or longer
    (light_llm.schedule): the run then never trains at its batch size or context, or Muon's
    momentum never reaches its value; None when every warmup ends inside the run."""
    if not cfg.max_iters:
        return None
    notes = []
    for warmup in SIZE_WARMUPS:
        length = getattr(cfg, warmup.name) or 0
        if length >= cfg.max_iters:
            notes.append(
                f"{flag(warmup.name)} {length} is as long as the run's {cfg.max_iters} "
                f"iterations or longer, so it never trains at its {flag(warmup.sized)} "
                f"{getattr(cfg, warmup.sized)}"
            )
    momentum_warmup = cfg.muon_momentum_warmup or 0
    if cfg.optimizer == "muon" and momentum_warmup >= cfg.max_iters:
        notes.append(
            f"--muon-momentum-warmup {momentum_warmup} is as long as the run's "
            f"{cfg.max_iters} iterations or longer, so Muon's momentum never reaches its "
            f"{cfg.muon_momentum}"
        )
    if not notes:
        return None
    return "warmup: " + "; ".join(notes) + " (a warmup below --max-iters lets it)."


def training_line(record: dict[str, Any], end: str, seconds_left: float) -> str:
    """iter 10/500: loss 2.3 (3.3 bits/byte), 20,000 tokens/s, 1m40s left: the line printed
    in place of a progress bar (a log file, CI)."""
    in_bits = f" ({record['bpb']:.3f} bits/byte)" if "bpb" in record else ""
    return (
        f"iter {record['iter']}/{end}: loss {record['loss']:.4f}{in_bits}, "
        f"{record['tokens_per_s']:,.0f} tokens/s, {format_seconds(seconds_left)} left"
    )


def trainer_state(
    *,
    progress: dict[str, Any],
    given: TrainConfig,
    config: TrainConfig,
    dtype: str,
    tokenizer_name: str,
    split_tokens: tuple[int, int],
    world_size: int,
    rng: list[Any],
    scaler: dict[str, Any],
    **extra: Any,
) -> dict[str, Any]:
    """The fields of ``trainer_state.json`` that both engines write: ``progress`` (iteration,
    last_eval_iteration, best_val_loss, elapsed_s, tokens_seen), the configuration as given
    and resolved, the data and where its batches stand, the generators' states (one entry per
    process), the fp16 scaler; then ``extra`` (the engine, the torch version, the base a
    fine-tuning started from)."""
    return {
        **progress,
        "config": given.to_dict(),
        "resolved_config": config.to_dict(),
        "dtype": dtype,
        "data": {
            "corpus": config.data or "shakespeare",
            "tokenizer": tokenizer_name,
            "train_tokens": split_tokens[0],
            "val_tokens": split_tokens[1],
        },
        # the batches of iteration i are a function of (seed, i, slot): see batches.py
        "data_position": {
            "next_iteration": progress["iteration"],
            "seed": config.seed,
            "grad_accum": config.grad_accum,
            "world_size": world_size,
        },
        "rng": rng,
        "scaler": scaler,
        **extra,
    }


def printed_sample(sample: str, prompt: str, config: TrainConfig) -> str:
    """The final sample as printed: a heading that says what it was sampled from (tokens,
    temperature, seed, the prompt), then the text; a newline prompt is named in the heading
    rather than printed as a blank first line."""
    from light_llm.train.result import SAMPLE_TEMPERATURE

    source = "a newline" if prompt == "\n" else f"{prompt!r}, the validation split's first token"
    heading = (
        f"sample: up to {config.sample_tokens} tokens sampled at temperature "
        f"{SAMPLE_TEMPERATURE} (seed {config.seed}), continuing {source}:"
    )
    shown = sample.removeprefix(prompt) if prompt == "\n" else sample
    return f"{heading}\n{for_terminal(shown)}"  # the model's text: no command to a terminal


def sample_prompt(tokenizer, first_val_token: int) -> str:
    """What the final sample continues: a newline, or the validation split's first token for a
    tokenizer that cannot encode one."""
    try:
        tokenizer.encode("\n")
        return "\n"
    except TokenizerError:
        return tokenizer.decode([first_val_token])
