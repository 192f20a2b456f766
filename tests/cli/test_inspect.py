"""``light-llm inspect`` through ``light_llm.cli.main`` on a small saved character model: every
analysis's JSON equals the Python API's on the same model and ids, its pictures are PNGs, and
bad input is one line and exit code 2."""

from __future__ import annotations

import json
import re
from pathlib import Path

import matplotlib.image
import numpy as np
import pytest

from light_llm.checkpoints import load, load_tokenizer
from light_llm.cli import main
from light_llm.inspect import (
    ablate_prompt,
    activation_patching,
    direct_logit_attribution,
    head_importance,
    head_roles,
    logit_lens,
    surprise,
    top_activations,
)
from tests.conftest import CHAR_CORPUS, save_char_checkpoint

TEXT = (CHAR_CORPUS + " ") * 6


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("inspect")
    folder, _, _ = save_char_checkpoint(root / "checkpoint", block_size=24, n_layer=2, n_embd=16)
    (root / "text.txt").write_text(TEXT, encoding="utf-8")
    return root


def inspect(capsys, run_folder, *argv):
    code = main(["inspect", *argv, "--checkpoint", str(run_folder / "checkpoint")])
    out, err = capsys.readouterr()
    return code, out, err


def as_json(capsys, run_folder, *argv) -> dict:
    code, out, err = inspect(capsys, run_folder, *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def model_and_ids(run_folder, text: str):
    model = load(run_folder / "checkpoint")
    return model, np.array(load_tokenizer(run_folder / "checkpoint").encode(text))


def test_lens_prints_a_table_and_its_json_is_the_apis(capsys, run_folder, tmp_path):
    code, out, _ = inspect(
        capsys, run_folder, "lens", "--prompt", "to be or not", "--plot", str(tmp_path / "l.png")
    )
    assert code == 0 and "logit lens" in out and "L1 mlp" in out
    assert matplotlib.image.imread(tmp_path / "l.png").ndim == 3
    document = as_json(capsys, run_folder, "lens", "--prompt", "to be or not", "--top-k", "2")
    model, ids = model_and_ids(run_folder, "to be or not")
    expected = logit_lens(model, ids, top_k=2)
    assert document["top_ids"] == expected.top_ids.tolist()
    np.testing.assert_allclose(document["top_probs"], expected.top_probs)
    assert document["stages"] == expected.stages and document["target_probs"][-1][-1] is None


def test_attribute_follows_the_top_token_or_the_one_given(capsys, run_folder):
    document = as_json(
        capsys, run_folder, "attribute", "--prompt", "to be", "--token", "o", "--versus", "t"
    )
    model, ids = model_and_ids(run_folder, "to be")
    tokenizer = load_tokenizer(run_folder / "checkpoint")
    o, t = tokenizer.encode("o")[0], tokenizer.encode("t")[0]
    expected = direct_logit_attribution(model, ids, o, versus=t)
    np.testing.assert_allclose(document["values"], expected.values)
    assert document["names"] == expected.names
    top = as_json(capsys, run_folder, "attribute", "--prompt", "to be")
    logits = model(__import__("torch").as_tensor(ids[None]))[0][0, -1]
    assert top["token"] == int(logits.argmax())


def test_ablate_a_prompt_a_text_and_the_importance_table(capsys, run_folder, tmp_path):
    model, ids = model_and_ids(run_folder, "to be or")
    prompt = as_json(
        capsys, run_folder, "ablate", "--prompt", "to be or", "--components", "L0H1,L1MLP"
    )
    expected = ablate_prompt(model, ids, ["L0H1", "L1MLP"])
    assert prompt["delta_p"] == pytest.approx(expected.delta_p)
    table = as_json(
        capsys, run_folder, "ablate", "--text", str(run_folder / "text.txt"), "--method", "mean"
    )
    _, text_ids = model_and_ids(run_folder, TEXT)
    expected = head_importance(model, text_ids, method="mean")
    np.testing.assert_allclose(table["heads"], expected.heads, atol=1e-9)
    code, out, _ = inspect(
        capsys,
        run_folder,
        "ablate",
        "--text",
        str(run_folder / "text.txt"),
        "--plot",
        str(tmp_path / "i.png"),
    )
    assert code == 0 and (tmp_path / "i.png").is_file()
    zeroed = head_importance(model, text_ids)  # the zero ablation the command ran
    named = {f"L{layer}H{head}": float(value)
             for (layer, head), value in np.ndenumerate(zeroed.heads)}  # fmt: skip
    raising = [name for name in sorted(named, key=named.get, reverse=True) if named[name] > 0]
    line = next(line for line in out.splitlines() if line.startswith("heads the loss leans"))
    assert [part.split(" (")[0] for part in line.split(": ")[1].split(", ")] == raising[:5]


def test_patch_heads_neurons_and_surprise_equal_the_api(capsys, run_folder):
    model, clean = model_and_ids(run_folder, "to be or")
    _, corrupt = model_and_ids(run_folder, "to qe or")
    tokenizer = load_tokenizer(run_folder / "checkpoint")
    n, t = tokenizer.encode("n")[0], tokenizer.encode("t")[0]
    document = as_json(
        capsys,
        run_folder,
        "patch",
        "--clean",
        "to be or",
        "--corrupt",
        "to qe or",
        "--answer",
        "n",
        "--wrong",
        "t",
    )
    expected = activation_patching(model, clean, corrupt, n, t)
    np.testing.assert_allclose(document["resid"], expected.resid)
    _, text_ids = model_and_ids(run_folder, TEXT)
    heads = as_json(
        capsys, run_folder, "heads", "--text", str(run_folder / "text.txt"), "--length", "8"
    )
    np.testing.assert_allclose(heads["induction"], head_roles(model, text_ids, length=8).induction)
    neurons = as_json(
        capsys,
        run_folder,
        "neurons",
        "--text",
        str(run_folder / "text.txt"),
        "--layer",
        "1",
        "--neuron",
        "5",
        "--k",
        "3",
    )
    assert neurons["positions"] == top_activations(model, text_ids, 1, 5, k=3).positions.tolist()
    scored = as_json(capsys, run_folder, "surprise", "--prompt", TEXT)
    expected = surprise(model, text_ids)
    np.testing.assert_allclose(scored["losses"], expected.losses)
    # rank 0 is the top guess: exactly the tokens the model ranked first
    assert scored["ranks"] == expected.ranks.tolist()
    assert [r == 0 for r in scored["ranks"]] == [
        top == actual for top, actual in zip(scored["top_ids"], text_ids[1:].tolist(), strict=True)
    ]
    code, out, _ = inspect(capsys, run_folder, "surprise", "--prompt", TEXT)
    assert code == 0 and "its rank (0: the model's top guess)" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["patch", "--clean", "to be", "--corrupt", "to be or", "--answer", "o", "--wrong", "t"],
            "the clean one has 5 and the corrupted one 8",
        ),
        (
            ["attribute", "--prompt", "to be", "--token", "to"],
            "'to' is 2 tokens to this model's tokenizer",
        ),
        (
            ["ablate", "--prompt", "to be", "--components", "L5H0"],
            "layer 5 is out of range: this model's layers run from 0 to 1",
        ),
        (
            ["ablate", "--prompt", "to be", "--components", "L0H9"],
            "head 9 is out of range: this model's heads run from 0 to 1",
        ),
        (
            ["neurons", "--prompt", "to be", "--layer", "0", "--neuron", "999"],
            "MLP units run from 0 to 63",
        ),
        (["lens", "--prompt", ""], "--prompt is empty"),
        # a flag an analysis reads in its other mode only is refused too, not dropped
        (["lens", "--text", "text.txt", "--token", "o"], "lens over a text does not use --token"),
        (["lens", "--text", "text.txt", "--top-k", "7"], "lens over a text does not use --top-k"),
        (["lens", "--prompt", "to be", "--max-tokens", "5"], "of a --prompt does not use --max"),
        (
            ["ablate", "--prompt", "to be", "--components", "L0H0", "--max-tokens", "5"],
            "ablate of --components on a --prompt does not use --max-tokens",
        ),
        (
            ["ablate", "--text", "text.txt", "--components", "L0H0", "--token", "o"],
            "ablate of --components over a text does not use --token",
        ),
        (["ablate", "--prompt", "to be", "--token", "o"], "without --components (the table"),
        (["lens", "--prompt", "to be", "--token", "€"], "the --token '€' has 1 character(s) out"),
        (
            ["patch", "--clean", "to be", "--corrupt", "to bo", "--answer", "o", "--wrong", "o"],
            "the wrong token must differ from the answer",
        ),
        (
            ["attribute", "--prompt", "to be", "--token", "o", "--versus", "o"],
            "the token to compare with must differ from the token",
        ),
        (["ablate", "--prompt", "to be", "--components", ","], "--components names no part"),
        (["ablate", "--prompt", "to be", "--components", "L0H1,l0h1"], "L0H1 named twice"),
        (["ablate", "--prompt", "to be", "--components", "L0MLP,L0N3"], "L0N3 lies inside L0MLP"),
        (["ablate", "--prompt", "to be", "--components", "L1H0,L1ATTN"], "L1H0 lies inside L1"),
        (["ablate", "--components", " "], "--components names no part"),
        (["attribute"], "needs --prompt TEXT"),
        (["lens", "--prompt", "to be " * 10], "more than the model's context of 24 tokens"),
        (["surprise", "--prompt", "t"], "--prompt is 1 token long; the text needs at least 2"),
        (["surprise", "--prompt", ""], "--prompt holds no token; the text needs at least 2"),
        # a bare char checkpoint records no corpus, and Shakespeare has letters it lacks
        (["heads"], "records no corpus of its own, so the text read was Shakespeare's valid"),
        (["neurons", "--prompt", "to be"], "needs --layer L and --neuron N"),
        # a flag the analysis does not read is refused, not ignored (neurons draws nothing,
        # yet said "wrote FILE")
        (
            ["neurons", "--prompt", "to be", "--layer", "0", "--neuron", "1", "--plot", "n.png"],
            "inspect neurons does not use --plot (what does: --plot: lens, attribute, ablate, "
            "patch, heads, surprise)",
        ),
        (["ablate", "--prompt", "to be", "--top-k", "3"], "does not use --top-k (what does: "),
        (
            ["attribute", "--prompt", "to be", "--seed", "1", "--k", "2"],
            "does not use --k, --seed (what does: --k: neurons; --seed: heads)",
        ),
        (
            [
                "patch",
                "--clean",
                "a",
                "--corrupt",
                "b",
                "--answer",
                "o",
                "--wrong",
                "t",
                "--prompt",
                "x",
            ],
            "inspect patch does not use --prompt",
        ),
        (["lens", "--prompt", "to be", "--text", "text.txt"], "give --prompt or --text, not both"),
    ],
)
def test_bad_input_is_one_line_and_exit_code_2(capsys, run_folder, argv, message):
    code, out, err = inspect(capsys, run_folder, *argv)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert "Traceback" not in err


def test_a_plot_never_lands_on_a_file_that_is_not_a_png(capsys, run_folder, tmp_path):
    """--plot naming the checkpoint's weights, a text, a non-PNG file called .png or a
    missing folder is refused before any table is printed, and the file is left as it was;
    a picture drawn before is drawn again."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(run_folder / "checkpoint", copy)
    notes = tmp_path / "notes.png"
    notes.write_text("my notes", encoding="utf-8")
    weights = copy / "model.safetensors"
    before = {path: path.read_bytes() for path in (weights, notes)}
    for target, message in [
        (weights, "is drawn as a PNG picture: give a name ending in .png"),
        (tmp_path / "lens.txt", "is drawn as a PNG picture"),
        (notes, "is a file that is not a PNG picture: light-llm draws over its own pictures"),
        (notes / "lens.png", "is a file, not a folder"),
        (tmp_path, "is drawn as a PNG picture"),
    ]:
        code = main(["inspect", "lens", "--checkpoint", str(copy), "--prompt", "to be"]
                     + ["--plot", str(target)])  # fmt: skip
        out, err = capsys.readouterr()
        assert code == 2 and out == "" and message in err, err
        assert len(err.strip().splitlines()) == 1
    assert {path: path.read_bytes() for path in before} == before
    assert not (tmp_path / "lens.txt").exists()
    picture = tmp_path / "new" / "lens.png"  # its folder made
    for _ in range(2):  # a picture light-llm drew is redrawn
        code = main(["inspect", "lens", "--checkpoint", str(copy), "--prompt", "to be"]
                     + ["--plot", str(picture)])  # fmt: skip
        assert code == 0, capsys.readouterr().err
    assert picture.read_bytes().startswith(b"\x89PNG")


def documented_inspect_commands() -> list[tuple[str, list[str]]]:
    """Every ``light-llm inspect`` command that inspect's --help, docs/inspect.md and the
    README show, as (where, its arguments after ``light-llm``), continuation lines joined."""
    import re
    import shlex

    from light_llm.cli.inspect import EXAMPLES

    root = Path(__file__).resolve().parents[2]
    sources = {
        "inspect --help": EXAMPLES,
        "docs/inspect.md": (root / "docs" / "inspect.md").read_text(encoding="utf-8"),
        "README.md": (root / "README.md").read_text(encoding="utf-8"),
    }
    commands = []
    for where, text in sources.items():
        joined = re.sub(r"\\\n\s*", " ", text)
        for line in joined.splitlines():
            line = line.strip().split("   #")[0]
            if line.startswith("light-llm inspect ") and "|" not in line:
                commands.append((where, shlex.split(line)[1:]))
    return commands


def test_every_documented_inspect_command_runs_on_the_run_that_ships(capsys, tmp_path):
    """The examples a reader copies (with the run that ships as OUT, a text of its own for
    play.txt, pictures into a scratch folder, and at most 2,048 tokens of a text) exit 0: an
    example naming a layer, head or word the default's model does not have was refused."""
    from light_llm.assets import packaged_run_folder

    commands = documented_inspect_commands()
    assert {where for where, _ in commands} == {"inspect --help", "docs/inspect.md", "README.md"}
    play = tmp_path / "play.txt"
    play.write_text("ROMEO: What say you, my lord?\nJULIET: Good night.\n" * 20, encoding="utf-8")
    for where, argv in commands:
        values = dict(zip(argv, argv[1:], strict=False))
        argv = [packaged_run_folder().as_posix() if values.get("--checkpoint") == word
                else word for word in argv]  # fmt: skip
        argv = [str(play) if word == "play.txt" else word for word in argv]
        argv = [str(tmp_path / word) if word.endswith(".png") else word for word in argv]
        on_prompt = "--prompt" in argv and (argv[1] == "lens" or "--components" in argv)
        if argv[1] in ("lens", "ablate", "heads", "neurons", "surprise") and not on_prompt:
            argv += ["--max-tokens", "2048"]  # a text read in part (a prompt is read whole)
        code = main(argv)
        assert code == 0, (where, argv, capsys.readouterr().err)
        capsys.readouterr()


def test_the_readmes_look_inside_figures_are_those_of_the_run_that_ships(capsys):
    """README's "Look inside" paragraph, figure by figure, against inspect's JSON on the run
    that ships: the embeddings' and the last stage's top-1, the head the loss leans on most
    with its Δloss and previous-token score, the MLPs' range, the second head."""
    import re

    from light_llm.assets import packaged_run_folder

    def document(analysis):
        assert main(["inspect", analysis, "--checkpoint", str(packaged_run_folder()),
                     "--json"]) == 0  # fmt: skip
        return json.loads(capsys.readouterr().out)

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    paragraph = " ".join(readme.split("## Look inside")[1].split("nanoGPT's recipe")[0].split())
    lens, ablation, heads = document("lens"), document("ablate"), document("heads")
    embed = re.search(r"guess the next token (\d+)% of the time", paragraph).group(1)
    assert int(embed) == round(100 * lens["top1"][0])
    assert re.search(r"to ([\d.]+)%;", paragraph).group(1) == f"{100 * lens['top1'][-1]:.1f}"
    named = {f"L{layer}H{head}": delta for layer, row in enumerate(ablation["heads"])
             for head, delta in enumerate(row)}  # fmt: skip
    ranked = sorted(named, key=named.get, reverse=True)
    top = re.search(r"head (L\dH\d) matters most \(Δloss \+([\d.]+) removed; it is the "
                    r"strongest previous-token head, at ([\d.]+)\)", paragraph)  # fmt: skip
    strongest = max(map(max, heads["previous_token"]))
    assert top.groups() == (ranked[0], f"{named[ranked[0]]:.2f}", f"{strongest:.2f}")
    layer, head = int(ranked[0][1]), int(ranked[0][3])
    assert heads["previous_token"][layer][head] == strongest
    mlps = re.search(r"the MLPs \(\+([\d.]+) to \+([\d.]+)\)", paragraph).groups()
    assert mlps == (f"{min(ablation['mlps']):.2f}", f"{max(ablation['mlps']):.2f}")
    second = re.search(r"and head (L\dH\d) \(\+([\d.]+)\)", paragraph).groups()
    assert second == (ranked[1], f"{named[ranked[1]]:.2f}")


def test_the_packaged_minilm_has_no_masked_lm_head_to_look_through(capsys):
    from light_llm.tokenizers.bert import packaged_bert_folder

    code = main(["inspect", "lens", "--prompt", "hi", "--checkpoint", str(packaged_bert_folder())])
    _, err = capsys.readouterr()
    assert code == 2 and "no masked-LM head" in err and len(err.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def encoder_folder(tmp_path_factory):
    from light_llm.checkpoints import save
    from light_llm.models.bert import BertEncoder, EncoderConfig
    from light_llm.tokenizers import BertTokenizer
    from light_llm.tokenizers.bert import SPECIAL_TOKENS

    tokenizer = BertTokenizer([*SPECIAL_TOKENS, *"to be or not that is the question".split()])
    config = EncoderConfig(
        vocab_size=tokenizer.vocab_size, block_size=16, n_layer=2, n_head=2, n_embd=16, dropout=0.0
    )
    folder = tmp_path_factory.mktemp("encoder") / "bert"
    save(BertEncoder(config).eval(), folder, tokenizer)
    (folder.parent / "text.txt").write_text("to be or not to be that is the question " * 8)
    return folder


def test_an_encoder_is_looked_at_through_its_masked_lm_head(capsys, encoder_folder):
    from light_llm.inspect import ablate_prompt, ablate_text

    model = load(encoder_folder, architecture="bert")
    tokenizer = load_tokenizer(encoder_folder)

    def run(*argv):
        code = main(["inspect", *argv, "--checkpoint", str(encoder_folder), "--json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        return json.loads(out)

    lens = run("lens", "--prompt", "to be or [MASK]")
    ids = np.array(tokenizer.encode_plus("to be or [MASK]")["input_ids"])
    np.testing.assert_allclose(lens["top_probs"], logit_lens(model, ids, top_k=3).top_probs)
    # the specials by name, which decoding drops (the table showed '' for them)
    assert lens["tokens"] == ["[CLS]", "to", "be", "or", "[MASK]", "[SEP]"]
    prompt = run("ablate", "--prompt", "to be or [MASK]", "--components", "L0H1")
    expected = ablate_prompt(model, ids, ["L0H1"], position=4)
    assert prompt["delta_p"] == pytest.approx(expected.delta_p)
    text = encoder_folder.parent / "text.txt"
    loss = run("ablate", "--text", str(text), "--components", "L1MLP")
    text_ids = np.array(tokenizer.encode(text.read_text()))
    assert loss["delta_loss"] == pytest.approx(
        ablate_text(model, text_ids, ["L1MLP"], tokenizer=tokenizer).delta_loss
    )
    units = run("neurons", "--text", str(text), "--layer", "1", "--neuron", "3", "--k", "4")
    expected = top_activations(model, text_ids, 1, 3, k=4, tokenizer=tokenizer)
    assert units["positions"] == expected.positions.tolist()  # read on [CLS] window [SEP]
    code = main(["inspect", "heads", "--checkpoint", str(encoder_folder)])
    _, err = capsys.readouterr()
    assert code == 2 and "head roles needs a GPT" in err
    # the table follows each token itself, and its top-1 counts the words alone
    assert main(["inspect", "lens", "--checkpoint", str(encoder_folder), "--prompt",
                 "to be or [MASK]"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "* = the token itself" in out and "next token" not in out
    line = next(line for line in out.splitlines() if line.startswith("top-1 on the followed"))
    words = np.array([False, True, True, True, False, False])  # to, be, or
    full = logit_lens(model, ids, top_k=3)
    ranks = zip(full.stages, full.target_ranks, strict=True)
    expected = ", ".join(f"{stage} {float(np.mean(row[words] == 0)):.0%}" for stage, row in ranks)
    assert line.endswith("by stage: " + expected)


def test_mean_ablation_of_a_one_token_prompt_says_it_removes_nothing(run_folder, capsys):
    """The mean of a part over one position is its value there: Δp is 0, and the output says
    why, where a zero ablation of the same part says nothing of the kind."""
    argv = ["inspect", "ablate", "--checkpoint", str(run_folder), "--prompt", "t"]
    assert main([*argv, "--components", "L0H0", "--method", "mean"]) == 0
    out = capsys.readouterr().out
    assert "mean ablation removes nothing" in out and re.search(r"Δp [+-]0\.0000\)", out)
    assert main([*argv, "--components", "L0H0", "--method", "zero"]) == 0
    assert "removes nothing" not in capsys.readouterr().out
