"""``light-llm attention``: a checkpoint's attention weights for a prompt, per layer and head."""

from __future__ import annotations

import argparse
from pathlib import Path

DESCRIPTION = """\
Run a prompt through a GPT checkpoint and draw the attention weights
A = softmax(Q K^T / sqrt(d_k)) of every layer and head (or of the one --layer / --head given),
as heatmaps with the prompt's tokens on both axes: row i shows what token i attends to
(only earlier tokens: the causal mask). Layers and heads count from 0.

--out FILE.png writes one picture (a grid: one row per layer, one column per head);
--out DIR writes one picture per layer, DIR/attention_layer{L}.png.
"""

EXAMPLES = """\
examples:
  light-llm attention --checkpoint out/ --prompt "To be, or not to be"
  light-llm attention --checkpoint out/ --prompt "ROMEO:" --layer 0 --head 2 --out head.png
  light-llm attention --checkpoint gpt2-folder/ --prompt "The cat sat" --out pictures/
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
        required=True,
        metavar="DIR",
        help="a light-llm checkpoint, a training output folder, or a HuggingFace GPT-2 folder",
    )
    parser.add_argument("--prompt", required=True, metavar="TEXT", help="the text to look at")
    parser.add_argument("--layer", type=int, metavar="L", help="only layer L (default: all)")
    parser.add_argument("--head", type=int, metavar="H", help="only head H (default: all)")
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("attention.png"),
        metavar="FILE_or_DIR",
        help="a .png file (one grid), or a folder (one picture per layer); default: attention.png",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from light_llm.checkpoints import load, load_tokenizer, resolve_checkpoint_dir
    from light_llm.explain.attention_maps import prompt_attention, write_attention_figures

    folder = resolve_checkpoint_dir(args.checkpoint)
    model = load(folder)
    tokenizer = load_tokenizer(folder, check_model=True)
    attention = prompt_attention(model, tokenizer, args.prompt, args.layer, args.head)
    shown = args.prompt if len(args.prompt) <= 60 else args.prompt[:57] + "..."
    title = f"Attention weights for {shown!r} ({folder.name})"
    written = write_attention_figures(attention, args.out, title)
    print(f"{len(attention.tokens)} tokens: {attention.tokens}")
    for path in written:
        print(f"wrote {path}")
    return 0
