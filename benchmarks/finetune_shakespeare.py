"""Fine-tuning end to end, on data that ships: a base model trained on Shakespeare without one
play, then fine-tuned on that play (every weight, and LoRA), each against the base on the
play's validation text, in one invocation.

    PYTHONPATH=src python benchmarks/finetune_shakespeare.py [--play hamlet] [--base-iters N]
        [--tune-iters N] [--lora-rank R] [--out DIR]

Steps (each is one ``light-llm`` command; the script prints them):

1. write ``DIR/without-PLAY.txt`` (every other play) and ``DIR/PLAY.txt``
   (:func:`light_llm.shakespeare.shakespeare_plays`);
2. ``light-llm train --data without-PLAY.txt --max-iters BASE`` (the default recipe, its
   schedule ending at BASE);
3. ``light-llm train --init-from base --data PLAY.txt`` (every weight) and the same with
   ``--lora-rank R`` (adapters only), ``--max-iters TUNE`` each.

The validation loss "before" is the fine-tuning run's evaluation at iteration 0 (the base on
the last 10% of the play), "after" its last one; the base's own validation loss (on the
last 10% of the other plays) is printed beside. Wall times are of this machine at the time.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from light_llm.shakespeare import shakespeare_plays
from light_llm.train.config import TrainConfig
from light_llm.train.trainer import train


def run(label: str, config: TrainConfig, command: str):
    print(f"\n== {label}: {command}", flush=True)
    tick = time.perf_counter()
    result = train(config)
    return result, time.perf_counter() - tick


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--play", default="hamlet", help="the play held out (a file stem)")
    parser.add_argument("--base-iters", type=int, default=300)
    parser.add_argument("--tune-iters", type=int, default=100)
    parser.add_argument("--lora-rank", type=int, default=8)
    parser.add_argument("--eval-iters", type=int, default=50)
    parser.add_argument("--out", default="out-finetune-demo")
    args = parser.parse_args()

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    plays = shakespeare_plays()
    held_out = plays.pop(args.play)
    base_text, play_text = out / f"without-{args.play}.txt", out / f"{args.play}.txt"
    base_text.write_text("".join(plays.values()), encoding="utf-8")
    play_text.write_text(held_out, encoding="utf-8")
    print(f"{base_text}: {len(plays)} plays; {play_text}: {len(held_out):,} characters")

    common = {"eval_iters": args.eval_iters, "overwrite": True, "sample_tokens": 300}
    base, base_s = run(
        "base",
        TrainConfig(
            data=str(base_text), out=str(out / "base"), max_iters=args.base_iters, **common
        ),
        f"light-llm train --data {base_text} --max-iters {args.base_iters} --out {out / 'base'}",
    )
    tune = {"init_from": str(out / "base"), "data": str(play_text), "max_iters": args.tune_iters}
    rows = []
    for label, extra, flags in (
        ("full", {}, ""),
        ("lora", {"lora_rank": args.lora_rank}, f" --lora-rank {args.lora_rank}"),
    ):
        result, seconds = run(
            label,
            TrainConfig(out=str(out / label), **tune, **extra, **common),
            f"light-llm train --init-from {out / 'base'} --data {play_text} --max-iters "
            f"{args.tune_iters}{flags} --out {out / label}",
        )
        before, after = result.evaluations[0], result.evaluations[-1]
        rows.append((label, before["val_loss"], after["val_loss"], seconds, result.sample))

    print(
        f"\nbase: {args.base_iters} iterations in {base_s:.0f} s; val loss on the other plays "
        f"{base.evaluations[-1]['val_loss']:.4f}"
    )
    print(f"{'run':<6} {'val loss on ' + args.play + ' before':>26} {'after':>8} {'wall':>7}")
    for label, before, after, seconds, _ in rows:
        print(f"{label:<6} {before:>26.4f} {after:>8.4f} {seconds:>6.0f}s")
    print(f"\nbase sample:\n{base.sample}")
    for label, *_, sample in rows:
        print(f"\n{label} sample:\n{sample}")


if __name__ == "__main__":
    main()
