"""``light-llm attention``: a checkpoint's attention weights for a prompt, per layer and head."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DESCRIPTION = """\
Run a prompt through a checkpoint and draw the attention weights
A = softmax(Q K^T / sqrt(d_k)) of every layer and head (or of the one --layer / --head given),
as heatmaps with the prompt's tokens on both axes: row i shows what token i attends to. A GPT
attends to earlier tokens only (the causal mask); an encoder (a --model bert run, a
HuggingFace BERT folder, or without --checkpoint the packaged MiniLM) to every token, with
[CLS] and [SEP] around the prompt. A model with linear attention (--attention linear) shows
the weights its output averages the values with, phi(q_i).phi(k_j) / sum_{j'<=i}
phi(q_i).phi(k_j'), phi = elu + 1 (seed 002 eq. 48). Layers and heads count from 0.

--out FILE.png writes one picture (a grid: one row per layer, one column per head);
--out DIR writes one picture per layer, DIR/attention_layer{L}.png.
--json prints the weights instead, as weights[layer][head][query][key] (and still draws them
when --out is given).
"""

EXAMPLES = """\
examples:
  light-llm attention --checkpoint out/ --prompt "To be, or not to be"
  light-llm attention --checkpoint out/ --prompt "ROMEO:" --layer 0 --head 2 --out head.png
  light-llm attention --checkpoint gpt2-folder/ --prompt "The cat sat" --out pictures/
  light-llm attention --prompt "The bank of the river was flooded!"   # the packaged MiniLM
  light-llm attention --checkpoint out/ --prompt "ROMEO:" --layer 1 --json > weights.json
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "attention",
        help="draw a checkpoint's attention weights for a prompt (per layer and head)",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--checkpoint",
        type=Path,
        metavar="DIR",
        help="a light-llm checkpoint (GPT or encoder), a training output folder, or a "
        "HuggingFace GPT-2 or BERT folder (default: the packaged MiniLM encoder)",
    )
    parser.add_argument("--prompt", required=True, metavar="TEXT", help="the text to look at")
    parser.add_argument("--layer", type=int, metavar="L", help="only layer L (default: all)")
    parser.add_argument("--head", type=int, metavar="H", help="only head H (default: all)")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="FILE_or_DIR",
        help="a .png file (one grid), or a folder (one picture per layer); default: "
        "attention.png (none with --json)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"tokens", "ids", "layers", "heads", "weights"} with '
        "weights[layer][head][query][key]",
    )
    parser.set_defaults(func=run)


def load_model_and_tokenizer(checkpoint: Path | None):
    """The model in ``checkpoint`` (a GPT or an encoder, whichever the folder holds; the
    packaged MiniLM when None), its tokenizer and its folder."""
    from light_llm.checkpoints import inspect_folder, load, load_tokenizer
    from light_llm.tokenizers.bert import packaged_bert_folder

    folder = inspect_folder(checkpoint if checkpoint is not None else packaged_bert_folder())
    architecture = "bert" if folder.holds_encoder else "gpt"
    model = load(folder.path, architecture=architecture, dequantize=True)
    return model, load_tokenizer(folder.path, check_model=True), folder.path


def run(args: argparse.Namespace) -> int:
    from light_llm.atomic import check_picture_path
    from light_llm.checkpoints.folder import run_name
    from light_llm.explain.attention_maps import prompt_attention, write_attention_figures

    out = args.out if args.out is not None or args.json else Path("attention.png")
    if out is not None and out.suffix.lower() == ".png":  # before the slow loading
        check_picture_path(out, "--out")
    model, tokenizer, folder = load_model_and_tokenizer(args.checkpoint)
    attention = prompt_attention(model, tokenizer, args.prompt, args.layer, args.head)
    written = []
    if out is not None:
        shown = args.prompt if len(args.prompt) <= 60 else args.prompt[:57] + "..."
        title = f"Attention weights for {shown!r} ({run_name(folder)})"
        written = write_attention_figures(attention, out, title)
    if args.json:
        document = {
            "tokens": attention.tokens,
            "ids": attention.ids,
            "layers": attention.layers,
            "heads": attention.heads,
            "weights": attention.maps.tolist(),
        }
        print(json.dumps(document, ensure_ascii=False))
        for path in written:
            print(f"wrote {path}", file=sys.stderr)
        return 0
    print(f"{len(attention.tokens)} tokens: {attention.tokens}")
    for path in written:
        print(f"wrote {path}")
    return 0
