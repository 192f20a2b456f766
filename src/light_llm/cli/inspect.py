"""``light-llm inspect``: look inside a trained GPT (the logit lens, direct logit attribution,
ablation, activation patching, head roles, neurons, surprise), as tables, JSON or pictures."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np  # light: light-llm --help stays instant; torch only inside handlers

DESCRIPTION = """\
Look inside a GPT that light-llm trained (or a HuggingFace GPT-2, Llama or Qwen3 folder of the
shapes light-llm reads; an encoder through its masked-LM head): how it computes its
prediction, not only what it predicts. Layers and heads count from 0; a head is written L1H2,
an MLP L1MLP, one MLP unit L1N37. Tokens given as text (--token, --answer...) must be exactly
one token of the model's tokenizer (' the', with its space, for a BPE model).

  lens       what the model would predict after each sublayer (the logit lens); without
             --prompt, over a text: each stage's top-1 accuracy on the next token
  attribute  a next-token logit split into the embeddings, every head and every MLP
  ablate     remove heads, MLPs or units: Δp of the next token for --prompt, Δloss over a text;
             without --components, the Δloss of every head and MLP alone (the importance table)
  patch      which (layer, position) and which heads carry the difference of two prompts
  heads      previous-token, first-token and induction scores of every head
  neurons    the contexts of a text that make one MLP unit fire most
  surprise   each token's loss and the model's top guess

A text (ablate, heads, neurons, surprise) is --text FILE or --prompt TEXT; by default the
validation split of the corpus the run trained on (Shakespeare for other models), its first
--max-tokens tokens, scored in consecutive windows of the context.
"""

EXAMPLES = """\
examples:
  light-llm inspect lens --checkpoint out-light-llm --prompt "ROMEO: What say you"
  light-llm inspect attribute --checkpoint out-light-llm --prompt "ROMEO: What say" --token " you"
  light-llm inspect ablate --checkpoint out-light-llm --plot importance.png
  light-llm inspect ablate --checkpoint out-light-llm --components L1H0,L2MLP --prompt "ROMEO:"
  light-llm inspect patch --checkpoint out-light-llm --clean "Then he took up" \\
      --corrupt "Then she took up" --answer " his" --wrong " her"
  light-llm inspect heads --checkpoint out-light-llm --json
  light-llm inspect neurons --checkpoint out-light-llm --layer 2 --neuron 17
  light-llm inspect surprise --checkpoint out-light-llm --text play.txt --plot surprise.png
"""

ANALYSES = ("lens", "attribute", "ablate", "patch", "heads", "neurons", "surprise")
# the flags each analysis reads; another one given is refused, not ignored (a text is --prompt
# or --text, read up to --max-tokens)
TEXT_FLAGS = {"prompt", "text", "max_tokens"}
READS = {
    "lens": {*TEXT_FLAGS, "token", "top_k", "plot"},
    "attribute": {"prompt", "token", "versus", "position", "plot"},
    "ablate": {*TEXT_FLAGS, "token", "components", "method", "plot"},
    "patch": {"clean", "corrupt", "answer", "wrong", "plot"},
    "heads": {*TEXT_FLAGS, "length", "seed", "plot"},
    "neurons": {*TEXT_FLAGS, "layer", "neuron", "k"},
    "surprise": {*TEXT_FLAGS, "plot"},
}
# the defaults of the flags above that have one, filled in once the flags given are checked
DEFAULTS = {"max_tokens": 32_768, "position": -1, "top_k": 3, "method": "zero", "k": 10, "seed": 0}
TABLE_ROWS = 64  # rows a table prints before it says how many more there are


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "inspect",
        help="look inside a GPT: logit lens, attribution, ablation, patching, head roles",
        description=DESCRIPTION,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("analysis", choices=ANALYSES, help="what to look at (above)")
    parser.add_argument(
        "--checkpoint",
        required=True,
        type=Path,
        metavar="DIR",
        help="a light-llm checkpoint or training output folder, or a HuggingFace GPT-2, Llama "
        "or Qwen3 folder",
    )
    parser.add_argument("--prompt", metavar="TEXT", help="the prompt (or, for a text, the text)")
    parser.add_argument("--text", type=Path, metavar="FILE", help="a UTF-8 text file to read")
    parser.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help=f"tokens of a text read at most (default {DEFAULTS['max_tokens']})",
    )
    parser.add_argument(
        "--token", metavar="TOKEN", help="lens, attribute, ablate: the token followed"
    )
    parser.add_argument(
        "--versus", metavar="TOKEN", help="attribute: the logit difference with this token"
    )
    parser.add_argument(
        "--position", type=int, metavar="T", help="attribute: position (default: last)"
    )
    parser.add_argument(
        "--top-k",
        type=int,
        metavar="K",
        help=f"lens: tokens per cell (default {DEFAULTS['top_k']})",
    )
    parser.add_argument("--components", metavar="PARTS", help="ablate: e.g. L0H1,L2MLP,L1N37")
    parser.add_argument("--method", choices=("zero", "mean"), help="ablate: zero or mean ablation")
    parser.add_argument("--clean", metavar="TEXT", help="patch: the clean prompt")
    parser.add_argument(
        "--corrupt", metavar="TEXT", help="patch: the corrupted prompt (same length in tokens)"
    )
    parser.add_argument("--answer", metavar="TOKEN", help="patch: the clean prompt's answer")
    parser.add_argument("--wrong", metavar="TOKEN", help="patch: the corrupted prompt's answer")
    parser.add_argument("--layer", type=int, metavar="L", help="neurons: the layer")
    parser.add_argument("--neuron", type=int, metavar="N", help="neurons: the MLP unit")
    parser.add_argument(
        "--k", type=int, metavar="K", help=f"neurons: contexts shown (default {DEFAULTS['k']})"
    )
    parser.add_argument(
        "--length", type=int, metavar="N", help="heads: length of the repeated random sequence"
    )
    parser.add_argument("--seed", type=int, help="heads: seed of the random sequences")
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of tables"
    )
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="also draw the result")
    parser.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default="cpu",
        help="where the model runs (default cpu; auto takes a GPU when there is one)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from light_llm.atomic import check_picture_path
    from light_llm.checkpoints import inspect_folder, load, load_tokenizer
    from light_llm.device import resolve_device
    from light_llm.errors import InspectError
    from light_llm.limits import check_integer

    check_flags_read(args)  # before the slow loading
    if args.plot is not None:  # and before any table is printed
        check_picture_path(args.plot, "--plot")
    for name, value in DEFAULTS.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    check_integer("--max-tokens", args.max_tokens, 2, 10_000_000, InspectError)
    folder = inspect_folder(args.checkpoint)
    architecture = "bert" if folder.holds_encoder else "gpt"
    device = resolve_device(args.device)  # an int8 checkpoint as its float weights q s:
    model = load(folder.path, architecture=architecture, device=device, dequantize=True)
    tokenizer = load_tokenizer(folder.path, check_model=True)
    session = Session(args, model, tokenizer, folder.path)
    document = getattr(session, args.analysis)()
    if args.json:
        print(json.dumps(document, ensure_ascii=False))
    if args.plot is not None:
        print(f"wrote {args.plot}", file=sys.stderr if args.json else sys.stdout)
    return 0


def check_flags_read(args: argparse.Namespace) -> None:
    """InspectError naming the flags given that ``args.analysis`` does not read (:data:`READS`)
    and the analyses that do, and for --prompt with --text: one sentence, not a flag ignored
    (a --plot that neurons never drew was reported written)."""
    from light_llm.errors import InspectError, flag

    every = set().union(*READS.values())
    unread = sorted(f for f in every - READS[args.analysis] if getattr(args, f) is not None)
    if unread:
        flags = [flag(name) for name in unread]
        users = "; ".join(
            f"{shown}: {', '.join(a for a in ANALYSES if name in READS[a])}"
            for name, shown in zip(unread, flags, strict=True)
        )
        raise InspectError(
            f"light-llm inspect {args.analysis} does not use {', '.join(flags)} "
            f"(what does: {users})."
        )
    if args.prompt is not None and args.text is not None:
        raise InspectError("give --prompt or --text, not both: the text to read is one of them.")
    unused, mode, reads = flags_unused_in_mode(args)
    if unused:
        flags = " or ".join(flag(name) for name in unused)
        raise InspectError(
            f"light-llm inspect {args.analysis} {mode} does not use {flags}: {reads}."
        )


def flags_unused_in_mode(args: argparse.Namespace) -> tuple[list[str], str, str]:
    """The flags given that ``args.analysis`` reads in its other mode only (the lens and the
    ablation of one --prompt against those over a text), with the mode in words and what it
    reads: ([], "", "") when every flag given is read."""
    on_prompt = args.prompt is not None  # (--prompt with --text is refused before this)
    if args.analysis == "lens" and on_prompt:
        unused = ["max_tokens"]
        mode, reads = "of a --prompt", "it reads the whole prompt (at most the context)"
    elif args.analysis == "lens":
        unused = ["token", "top_k"]
        mode = "over a text"
        reads = "it scores every next token; --token and --top-k shape the lens of a --prompt"
    elif args.analysis == "ablate" and on_prompt and args.components is not None:
        unused = ["max_tokens"]
        mode = "of --components on a --prompt"
        reads = "it reads the whole prompt (at most the context)"
    elif args.analysis == "ablate":
        unused = ["token"]
        mode = (
            "of --components over a text"
            if args.components is not None
            else "without --components (the table of every head and MLP)"
        )
        reads = (
            "it scores the loss on every next token; --token is followed in the ablation of "
            "--components on a --prompt"
        )
    else:
        return [], "", ""
    return [name for name in unused if getattr(args, name) is not None], mode, reads


class Session:
    """One ``light-llm inspect`` call: the model, its tokenizer and the arguments; each analysis
    a method that prints its table (unless --json), draws (with --plot) and returns its JSON."""

    def __init__(self, args, model, tokenizer, folder: Path) -> None:
        self.args, self.model, self.tokenizer, self.folder = args, model, tokenizer, folder
        self.quiet = args.json
        self.encoder = getattr(model.config, "type_vocab_size", None) is not None

    # ------------------------------------------------------------------ inputs
    def say(self, line: str = "") -> None:
        if not self.quiet:
            print(line)

    def token_text(self, token_id: int) -> str:
        """The token as the tokenizer shows it: [CLS] and [MASK] by name (decoding drops
        them), a piece of a multi-byte character as <0xNN> (decoding makes it U+FFFD)."""
        return self.tokenizer.tokens([int(token_id)])[0]

    def prompt(self, field: str = "--prompt", text: str | None = None):
        from light_llm.errors import InspectError
        from light_llm.inspect.text import prompt_ids

        text = self.args.prompt if text is None else text
        if text is None:
            raise InspectError(f"light-llm inspect {self.args.analysis} needs {field} TEXT.")
        if not text:
            raise InspectError(f"{field} is empty: give some text.")
        if self.encoder:  # [CLS] text [SEP], as the encoder was trained
            ids = np.array(self.tokenizer.encode_plus(text, truncation=False)["input_ids"])
        else:
            ids = np.array(self.tokenizer.encode(text))
        if len(ids) > self.model.config.block_size:
            raise InspectError(
                f"{field} is {len(ids)} tokens long, more than the model's context of "
                f"{self.model.config.block_size} tokens."
            )
        return prompt_ids(ids, self.model.config)

    def one(self, text: str | None, field: str) -> int:
        from light_llm.errors import InspectError
        from light_llm.inspect.tokens import one_token

        if text is None:
            raise InspectError(f"light-llm inspect {self.args.analysis} needs {field} TOKEN.")
        return one_token(self.tokenizer, text, field)

    def text(self):
        """(token ids, what they are): --text, --prompt, or the validation split."""
        from light_llm.data import load_corpus
        from light_llm.errors import InspectError
        from light_llm.inspect.tokens import text_ids, validation_ids

        if self.args.text is not None:
            ids = text_ids(self.tokenizer, load_corpus(self.args.text), self.args.max_tokens)
            what = f"{len(ids):,} tokens of {self.args.text}"
        elif self.args.prompt is not None:
            ids = text_ids(self.tokenizer, self.args.prompt, self.args.max_tokens)
            what = f"the {len(ids)} tokens of --prompt"
        else:
            ids, what = validation_ids(self.folder, self.tokenizer, None, self.args.max_tokens)
        if len(ids) < 2:
            given = self.args.prompt is not None
            source = self.args.text or ("--prompt" if given else "the validation split")
            held = "is 1 token long" if len(ids) else "holds no token"
            raise InspectError(
                f"{source} {held}; the text needs at least 2 (one to predict the other from)."
            )
        return ids, what

    def plot(self):
        return self.args.plot

    def mask_position(self, ids) -> int:
        """The position of the prompt's [MASK], whose prediction an encoder's ablation follows."""
        from light_llm.errors import InspectError

        found = np.flatnonzero(ids == self.tokenizer.mask_id)
        if not len(found):
            raise InspectError(
                "put a [MASK] in --prompt: an encoder's ablation follows its prediction there."
            )
        return int(found[0])

    # ------------------------------------------------------------------ analyses
    def lens(self) -> dict:
        from light_llm.inspect import logit_lens
        from light_llm.inspect.plots import heatmap

        if self.args.prompt is None:  # (--token and --top-k refused: flags_unused_in_mode)
            return self.lens_over_text()
        ids = self.prompt()
        target = None if self.args.token is None else self.one(self.args.token, "--token")
        result = logit_lens(self.model, ids, target=target, top_k=self.args.top_k)
        tokens = [self.token_text(i) for i in ids]
        followed = (
            "--token " + repr(self.args.token)
            if target is not None
            else "the token itself (a masked-LM head predicts its own position's)"
            if self.encoder
            else "the actual next token"
        )
        self.say(
            f"logit lens: the top guess after each sublayer, with its probability; * = {followed}"
        )
        wanted_label = "itself" if self.encoder else "next"  # the masked-LM head's target
        header = f"{'pos':>4} {'token':>12} {wanted_label:>10}  " + "".join(
            f"{s:>16}" for s in result.stages
        )
        self.say(header)
        for t, token in enumerate(tokens[:TABLE_ROWS]):
            wanted = result.target_ids[t]
            nxt = repr(self.token_text(wanted)) if wanted >= 0 else "-"
            cells = ""
            for s in range(len(result.stages)):
                top = result.top_ids[s, t, 0]
                mark = "*" if top == wanted else " "
                shown = repr(self.token_text(top))[:9]
                cells += f"{mark}{shown:>9} {result.top_probs[s, t, 0]:.2f}".rjust(16)
            self.say(f"{t:>4} {repr(token)[:12]:>12} {nxt[:10]:>10}  {cells}")
        counted = result.target_ids >= 0
        words = ""
        if self.encoder and target is None:  # [CLS], [SEP], [MASK] are no word to get right
            tk = self.tokenizer
            counted &= ~np.isin(ids, [tk.cls_id, tk.sep_id, tk.mask_id, tk.pad_id])
            words = " (the words; not [CLS], [SEP], [MASK])"
        scored = result.target_ranks[:, counted]
        if scored.size:
            self.say(
                f"top-1 on the followed token{words}, by stage: "
                + ", ".join(
                    f"{stage} {float(np.mean(row == 0)):.0%}"
                    for stage, row in zip(result.stages, scored, strict=True)
                )
            )
        if self.plot():
            labels = np.vectorize(lambda i: self.token_text(i))(result.top_ids[..., 0])
            heatmap(
                np.nan_to_num(result.target_probs),
                result.stages,
                tokens,
                self.plot(),
                f"logit lens: probability of {followed} (cells: top guess)",
                "probability",
                annotations=labels,
            )
        return {
            "tokens": tokens,
            "ids": ids.tolist(),
            "stages": result.stages,
            "top_ids": result.top_ids.tolist(),
            "top_probs": result.top_probs.tolist(),
            "target_ids": result.target_ids.tolist(),
            "target_probs": nan_to_none(result.target_probs.tolist()),
            "target_ranks": result.target_ranks.tolist(),
        }

    def lens_over_text(self) -> dict:
        from light_llm.inspect import lens_over_text
        from light_llm.inspect.plots import bars

        ids, what = self.text()
        result = lens_over_text(self.model, ids, tokenizer=self.tokenizer)
        followed = "masked token" if self.encoder else "next token"
        self.say(
            f"logit lens over {what} ({result.n_tokens:,} {followed}s scored): how often "
            f"each stage's top guess is the {followed}, and the mean log-probability it gives"
        )
        for stage, top1, log_prob in zip(
            result.stages, result.top1, result.mean_log_prob, strict=True
        ):
            self.say(f"  {stage:>10}  top-1 {top1:6.1%}   mean log p {log_prob:8.3f}")
        if self.plot():
            bars(
                result.top1,
                result.stages,
                self.plot(),
                f"logit lens: top-1 accuracy on the {followed}, by stage",
                "top-1 accuracy",
            )
        return {
            "stages": result.stages,
            "top1": result.top1.tolist(),
            "mean_log_prob": result.mean_log_prob.tolist(),
            "n_tokens": result.n_tokens,
            "text": what,
        }

    def attribute(self) -> dict:
        from light_llm.inspect import Inspector, direct_logit_attribution
        from light_llm.inspect.plots import bars
        from light_llm.inspect.text import check_position

        ids = self.prompt()
        if self.args.token is None:
            position = check_position(self.args.position, len(ids))
            token = int(Inspector(self.model).run(ids[None]).logits[0, position].argmax())
        else:
            token = self.one(self.args.token, "--token")
        versus = None if self.args.versus is None else self.one(self.args.versus, "--versus")
        result = direct_logit_attribution(
            self.model, ids, token, versus=versus, position=self.args.position
        )
        what = f"logit of {self.token_text(token)!r}"
        if versus is not None:
            what += f" minus that of {self.token_text(versus)!r}"
        capped = " (before the soft-cap)" if self.model.config.logit_softcap is not None else ""
        self.say(
            f"{what} at position {result.position} ({self.token_text(ids[result.position])!r}): "
            f"{result.logit:.4f}{capped} = the sum of the parts below ({result.total:.4f}), "
            "the final norm's scale held at the value it had"
        )
        order = np.argsort(-np.abs(result.values), kind="stable")
        scale = max(1e-12, float(np.abs(result.values).max()))
        for index in order[:24]:
            value = result.values[index]
            bar = "█" * int(round(20 * abs(value) / scale))
            self.say(f"  {result.names[index]:>16} {value:+9.4f} {'+' if value >= 0 else '-'}{bar}")
        if len(order) > 24:
            rest = float(result.values[order[24:]].sum())
            self.say(f"  {'the other ' + str(len(order) - 24):>16} {rest:+9.4f}")
        if self.plot():
            shown = order[:40]
            bars(
                result.values[shown],
                [result.names[i] for i in shown],
                self.plot(),
                f"direct logit attribution: {what}",
                "contribution to the logit",
            )
        return {
            "token": token,
            "versus": versus,
            "position": result.position,
            "logit": result.logit,
            "output_logit": result.output_logit,
            "total": result.total,
            "names": result.names,
            "values": result.values.tolist(),
            "heads": result.heads.tolist(),
            "mlps": result.mlps.tolist(),
        }

    def ablate(self) -> dict:
        from light_llm.errors import InspectError
        from light_llm.inspect import ablate_prompt, ablate_text, head_importance
        from light_llm.inspect.plots import heatmap

        components = None
        if self.args.components is not None:
            components = [part for part in self.args.components.split(",") if part.strip()]
            if not components:  # else it would run the whole importance table, unasked
                raise InspectError(
                    f"--components names no part ({self.args.components!r}); write e.g. "
                    "L0H1,L2MLP, or leave it out for the table of every head and MLP."
                )
        if components and self.args.prompt is not None and self.args.text is None:
            ids = self.prompt()
            token = None if self.args.token is None else self.one(self.args.token, "--token")
            position = self.mask_position(ids) if self.encoder else -1
            result = ablate_prompt(
                self.model,
                ids,
                components,
                method=self.args.method,
                token=token,
                position=position,
            )
            self.say(
                f"p({self.token_text(result.token)!r} | --prompt) {result.p:.4f} -> "
                f"{result.ablated_p:.4f} (Δp {result.delta_p:+.4f}) with "
                f"{', '.join(result.components)} {result.method}-ablated"
            )
            if result.method == "mean" and len(ids) == 1:
                self.say(
                    "(a part's mean over a one-token prompt is its value there: mean ablation "
                    "removes nothing; --method zero, or a longer prompt)"
                )
            for name, probs in (("before", result.probs), ("after", result.ablated_probs)):
                top = np.argsort(-probs, kind="stable")[:5]
                self.say(
                    f"  {name}: " + ", ".join(f"{self.token_text(i)!r} {probs[i]:.3f}" for i in top)
                )
            return {
                "components": result.components,
                "method": result.method,
                "token": result.token,
                "p": result.p,
                "ablated_p": result.ablated_p,
                "delta_p": result.delta_p,
                "probs": result.probs.tolist(),
                "ablated_probs": result.ablated_probs.tolist(),
            }
        ids, what = self.text()
        if components:
            result = ablate_text(
                self.model, ids, components, method=self.args.method, tokenizer=self.tokenizer
            )
            self.say(
                f"loss over {what}: {result.loss:.4f} -> {result.ablated_loss:.4f} "
                f"(Δloss {result.delta_loss:+.4f}) with {', '.join(result.components)} "
                f"{result.method}-ablated"
            )
            return {
                "components": result.components,
                "method": result.method,
                "loss": result.loss,
                "ablated_loss": result.ablated_loss,
                "delta_loss": result.delta_loss,
                "n_tokens": result.n_tokens,
            }
        table = head_importance(self.model, ids, method=self.args.method, tokenizer=self.tokenizer)
        config = self.model.config
        self.say(
            f"Δloss when each head or MLP is {table.method}-ablated alone, over {what} "
            f"(loss {table.loss:.4f}); rows are layers"
        )
        self.say(
            "       " + "".join(f"{'H' + str(h):>9}" for h in range(config.n_head)) + f"{'MLP':>9}"
        )
        for layer in range(config.n_layer):
            cells = "".join(f"{v:+9.4f}" for v in table.heads[layer])
            self.say(f"  L{layer:<4}{cells}{table.mlps[layer]:+9.4f}")
        flat = [(float(v), f"L{l}H{h}") for (l, h), v in np.ndenumerate(table.heads)]
        top = [(v, n) for v, n in sorted(flat, reverse=True)[:5] if v > 0]  # removing it hurts
        self.say(
            "heads the loss leans on most: " + ", ".join(f"{n} ({v:+.3f})" for v, n in top)
            if top
            else "no head's removal raises the loss: the model leans on none of them alone"
        )
        if self.plot():
            matrix = np.concatenate([table.heads, table.mlps[:, None]], 1)
            columns = [f"H{h}" for h in range(config.n_head)] + ["MLP"]
            heatmap(
                matrix,
                [f"L{l}" for l in range(config.n_layer)],
                columns,
                self.plot(),
                f"Δloss, {table.method} ablation",
                "Δloss (nats per token)",
                diverging=True,
            )
        return {
            "method": table.method,
            "loss": table.loss,
            "n_tokens": table.n_tokens,
            "text": what,
            "heads": table.heads.tolist(),
            "mlps": table.mlps.tolist(),
        }

    def patch(self) -> dict:
        from light_llm.inspect import activation_patching
        from light_llm.inspect.plots import heatmap

        clean = self.prompt("--clean", self.args.clean)
        corrupt = self.prompt("--corrupt", self.args.corrupt)
        answer, wrong = self.one(self.args.answer, "--answer"), self.one(self.args.wrong, "--wrong")
        result = activation_patching(self.model, clean, corrupt, answer, wrong)
        tokens = [self.token_text(i) for i in clean]
        metric = f"z[{self.token_text(answer)!r}] - z[{self.token_text(wrong)!r}]"
        restored = (
            "the fraction restored by each clean activation patched in:"
            if result.clean_metric != result.corrupt_metric
            else "the same on both, so no fraction of it can be restored (nan):"
        )
        self.say(
            f"{metric}: clean {result.clean_metric:.4f}, corrupted {result.corrupt_metric:.4f}; "
            + restored
        )
        self.say("residual stream    " + "".join(f"{repr(t)[:8]:>9}" for t in tokens))
        for label, row in zip(result.resid_labels, result.resid, strict=True):
            self.say(f"  {label:<16} " + "".join(f"{v:9.2f}" for v in row))
        self.say(
            "heads (every position) "
            + "".join(f"{'H' + str(h):>7}" for h in range(self.model.config.n_head))
        )
        for layer, row in enumerate(result.heads):
            self.say(f"  L{layer:<20} " + "".join(f"{v:7.2f}" for v in row))
        if self.plot():
            heatmap(
                result.resid,
                result.resid_labels,
                tokens,
                self.plot(),
                f"activation patching: fraction of {metric} restored",
                "restored",
                diverging=True,
            )
        return {
            "tokens": tokens,
            "clean_metric": result.clean_metric,
            "corrupt_metric": result.corrupt_metric,
            "resid_labels": result.resid_labels,
            "resid": nan_to_none(result.resid.tolist()),
            "heads": nan_to_none(result.heads.tolist()),
        }

    def heads(self) -> dict:
        from light_llm.inspect import head_roles
        from light_llm.inspect.plots import heatmap

        ids, what = self.text()
        result = head_roles(self.model, ids, length=self.args.length, seed=self.args.seed)
        config = self.model.config
        plural = "s" if result.text_windows != 1 else ""
        self.say(
            "head scores: previous-token and first-token on the first "
            f"{result.text_windows} window{plural} of {result.text_window_length} tokens of "
            f"{what}; "
            f"induction on {result.n_sequences} random sequences of {result.length} tokens, "
            "each repeated"
        )
        self.say(f"{'head':>6} {'previous':>9} {'first':>9} {'induction':>10}")
        for layer in range(config.n_layer):
            for head in range(config.n_head):
                scores = (
                    result.previous_token[layer, head],
                    result.first_token[layer, head],
                    result.induction[layer, head],
                )
                self.say(
                    f"{'L' + str(layer) + 'H' + str(head):>6} {scores[0]:9.3f} "
                    f"{scores[1]:9.3f} {scores[2]:10.3f}"
                )
        self.say(
            f"loss on the repeated random tokens: first copy {result.loss_first_copy:.3f}, "
            f"second copy {result.loss_second_copy:.3f} nats per token"
        )
        if self.plot():
            matrix = np.concatenate(
                [result.previous_token, result.first_token, result.induction], 1
            )
            columns = [
                f"{kind} H{h}" for kind in ("prev", "first", "ind") for h in range(config.n_head)
            ]
            heatmap(
                matrix,
                [f"L{l}" for l in range(config.n_layer)],
                columns,
                self.plot(),
                "head roles: previous-token, first-token and induction scores",
                "score",
            )
        return {
            "previous_token": result.previous_token.tolist(),
            "first_token": result.first_token.tolist(),
            "induction": result.induction.tolist(),
            "loss_first_copy": result.loss_first_copy,
            "loss_second_copy": result.loss_second_copy,
            "length": result.length,
            "n_sequences": result.n_sequences,
        }

    def neurons(self) -> dict:
        from light_llm.errors import InspectError
        from light_llm.inspect import top_activations

        if self.args.layer is None or self.args.neuron is None:
            raise InspectError("light-llm inspect neurons needs --layer L and --neuron N.")
        ids, what = self.text()
        layer, neuron, k = self.args.layer, self.args.neuron, self.args.k
        result = top_activations(self.model, ids, layer, neuron, k=k, tokenizer=self.tokenizer)
        self.say(
            f"unit {result.neuron} of layer {result.layer}'s MLP over {what}: mean "
            f"{result.mean:.3f}, max {result.max:.3f}; its strongest contexts ([the token]):"
        )
        contexts = []
        for value, context in zip(result.activations, result.contexts, strict=True):
            before, last = (
                self.tokenizer.decode(context[:-1].tolist()),
                self.token_text(context[-1]),
            )
            contexts.append({"before": before, "token": last, "activation": float(value)})
            self.say(f"  {value:8.3f}  {(before + '[' + last + ']')[-70:]!r}")
        return {
            "layer": result.layer,
            "neuron": result.neuron,
            "mean": result.mean,
            "max": result.max,
            "positions": result.positions.tolist(),
            "contexts": contexts,
        }

    def surprise(self) -> dict:
        from light_llm.inspect import surprise
        from light_llm.inspect.plots import bars

        ids, what = self.text()
        result = surprise(self.model, ids)
        tokens = [self.token_text(i) for i in ids]
        self.say(
            f"each token of {what}: its loss -ln p (nats), p, its rank (0: the model's top "
            "guess) and the model's top guess"
        )
        for t in range(min(len(result.losses), TABLE_ROWS)):
            self.say(
                f"{t + 1:>6} {repr(tokens[t + 1])[:14]:>14} {result.losses[t]:7.3f} "
                f"{result.probs[t]:6.3f} {result.ranks[t]:>6}  "
                f"{self.token_text(result.top_ids[t])!r}"
            )
        if len(result.losses) > TABLE_ROWS:
            self.say(f"... and {len(result.losses) - TABLE_ROWS:,} more (--json gives all)")
        self.say(f"mean loss {result.mean_loss:.4f} nats per token")
        if self.plot():
            shown = slice(0, min(len(result.losses), 200))
            bars(
                result.losses[shown],
                tokens[1:][shown],
                self.plot(),
                "surprise: -ln p of each token",
                "nats",
            )
        return {
            "tokens": tokens,
            "losses": result.losses.tolist(),
            "probs": result.probs.tolist(),
            "ranks": result.ranks.tolist(),
            "top_ids": result.top_ids.tolist(),
            "top_tokens": [self.token_text(i) for i in result.top_ids],
            "mean_loss": result.mean_loss,
        }


def nan_to_none(rows):
    """Nested lists with NaN written as None (JSON has no NaN)."""
    if isinstance(rows, list):
        return [nan_to_none(row) for row in rows]
    return None if rows != rows else rows
