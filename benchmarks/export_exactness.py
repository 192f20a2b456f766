"""How exactly an exported Llama or Qwen3 folder computes what the light-llm model computes, in
``transformers`` (AutoModelForCausalLM, eager attention, float32).

With ``--checkpoint DIR`` (a trained GPT of an exportable shape, e.g. ``light-llm train
--preset qwen3-cpu``): exports it, then prints the largest |logit difference| on Shakespeare
text and on random ids, whether greedy text over the whole context is identical through
transformers' ``generate``, and whether AutoTokenizer gives light-llm's ids on unseen
Unicode text. Without it: for the qwen3-cpu preset's shape as Llama (no QK-norm) and as
Qwen3, ``--seeds`` models with their weights shaken off initialisation by N(0, 0.3²), the
largest |logit difference|, next to the model's own float32 rounding (its float32 logits
against its float64 ones), and whether the weights come back in bit-identical.

    PYTHONPATH=src python benchmarks/export_exactness.py [--checkpoint DIR] [--seeds 5]
"""

from __future__ import annotations

import argparse
import os
import tempfile

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import transformers  # noqa: E402

from light_llm.checkpoints import load, load_tokenizer  # noqa: E402
from light_llm.checkpoints.hf_llama import export_hf_llama  # noqa: E402
from light_llm.config import preset  # noqa: E402
from light_llm.generate import generate  # noqa: E402
from light_llm.models.gpt import GPT  # noqa: E402
from light_llm.shakespeare import shakespeare_text  # noqa: E402

UNSEEN = "Ünïcödé ναι, 你好 — 🎉 naïve café\n\ttabs and <|endoftext|>"


def theirs(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(
        folder, attn_implementation="eager"
    ).eval()


@torch.no_grad()
def largest_difference(model, hf_model, idx) -> float:
    return (hf_model(idx).logits - model(idx)[0]).abs().max().item()


def trained(checkpoint: str, scratch: str) -> None:
    model, tokenizer = load(checkpoint), load_tokenizer(checkpoint)
    export_hf_llama(model, scratch, tokenizer)
    hf_model, T = theirs(scratch), model.config.block_size
    text = torch.tensor([tokenizer.encode(shakespeare_text()[:2000])[:T]])
    noise = torch.randint(0, model.config.vocab_size, (8, T))
    on_text = largest_difference(model, hf_model, text)
    on_noise = largest_difference(model, hf_model, noise)
    print(f"{type(hf_model).__name__}: max |Δlogit| on text {on_text:.2e}, on 8x{T} random ids "
          f"{on_noise:.2e}")  # fmt: skip
    prompt = text[:, :4]
    n = T - prompt.size(1)
    with torch.no_grad():
        expected = hf_model.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False,
                                     eos_token_id=None, pad_token_id=0)  # fmt: skip
    same = torch.equal(generate(model, prompt, n, temperature=0.0), expected)
    print(f"greedy text over {n} tokens identical: {same}")
    ids = transformers.AutoTokenizer.from_pretrained(scratch)(UNSEEN)["input_ids"]
    print(f"AutoTokenizer ids on unseen Unicode identical: {ids == tokenizer.encode(UNSEEN)}")


def shaken(seeds: int, scratch: str) -> None:
    for qk_norm in (False, True):
        worst = own = 0.0
        bit_identical = True
        for seed in range(seeds):
            torch.manual_seed(seed)
            model = GPT(preset("qwen3-cpu", qk_norm=qk_norm)).eval()
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.add_(0.3 * torch.randn_like(parameter))
            folder = os.path.join(scratch, f"{qk_norm}-{seed}")
            export_hf_llama(model, folder)
            back = load(folder).state_dict()
            bit_identical &= all(torch.equal(back[k], v) for k, v in model.state_dict().items())
            idx = torch.randint(0, model.config.vocab_size, (4, model.config.block_size))
            worst = max(worst, largest_difference(model, theirs(folder), idx))
            with torch.no_grad():
                logits = model(idx)[0]
                own = max(own, (model.double()(idx)[0].float() - logits).abs().max().item())
        name = "Qwen3" if qk_norm else "Llama"
        print(f"{name}, qwen3-cpu shape, {seeds} seeds: max |Δlogit| {worst:.2e} (its own float32 "
              f"rounding {own:.2e}); round trip bit-identical: {bit_identical}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", metavar="DIR", help="a trained Llama- or Qwen3-shaped GPT")
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()
    with tempfile.TemporaryDirectory() as scratch:
        if args.checkpoint:
            trained(args.checkpoint, os.path.join(scratch, "hf"))
        else:
            shaken(args.seeds, scratch)


if __name__ == "__main__":
    main()
