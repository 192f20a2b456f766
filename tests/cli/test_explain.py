"""``light-llm explain`` through ``light_llm.cli.main``: the list, one example as text and as
JSON, pictures, and an unknown name."""

from __future__ import annotations

import json

import matplotlib.image
import pytest

from light_llm import explain
from light_llm.cli import main


def run(capsys, *argv):
    code = main(["explain", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_names_every_example_with_its_summary(capsys):
    code, out, _ = run(capsys)
    assert code == 0
    lines = out.splitlines()[1:]
    assert [line.split()[0] for line in lines] == explain.names()
    assert len(explain.names()) >= 16
    assert any("The cat sat" in line for line in lines)


def test_docs_explain_md_groups_every_example():
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "explain.md").read_text()
    table = page.split("| group | examples (seed) |")[1].split("\n\n")[0]
    missing = [name for name in explain.names() if f"`{name}`" not in table]
    assert not missing, missing


def test_list_as_json(capsys):
    code, out, _ = run(capsys, "--json")
    assert code == 0
    assert [item["name"] for item in json.loads(out)] == explain.names()


def test_one_example_prints_labelled_steps_with_the_seed_beside(capsys):
    code, out, _ = run(capsys, "cat-sat")
    assert code == 0
    assert out.startswith("cat-sat: ")
    assert "3/11. Scores = Q·K^T   [seed figure differs]" in out
    # The·cat = 1.0·0.3 + 0.2·1.5 + 0.1·0.4 = 0.64, where the seed prints 0.74
    row = next(line for line in out.splitlines() if line.strip().startswith("The  1.0500"))
    assert row.split() == ["The", "1.0500", "0.6400", "0.4800", "|", "1.05", "0.74*", "0.49*"]
    assert "-inf" in out


def test_json_parses_and_carries_the_same_numbers(capsys):
    code, out, _ = run(capsys, "tiny-attention", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["name"] == "tiny-attention"
    steps = {step["title"]: step for step in data["steps"]}
    grad_v = steps["dL/dV = A^T · dL/dO"]
    a = 1 / (1 + 2.718281828459045 ** (1 / 3**0.5))  # softmax([1, 2] / sqrt 3)[0]
    assert abs(grad_v["value"][0][0] - a) < 1e-6
    assert grad_v["seed_value"][0][0] == 0.38
    assert grad_v["seed_differs"][0] == [True, False, True]


def test_json_of_masked_scores_uses_strings_for_infinity(capsys):
    _, out, _ = run(capsys, "cat-sat", "--json")
    steps = {step["title"]: step for step in json.loads(out)["steps"]}
    assert steps["Causal mask (GPT): future positions set to -inf"]["value"][0][1] == "-inf"


def test_unknown_name_lists_the_known_ones_and_exits_2(capsys):
    code, out, err = run(capsys, "cat-sta")
    assert code == 2
    assert out == ""
    assert err.startswith("light-llm explain: error: there is no worked example 'cat-sta'")
    for name in explain.names():
        assert name in err
    assert len(err.strip().splitlines()) == 1


def test_plot_writes_the_example_pictures(capsys, tmp_path):
    code, out, err = run(capsys, "lr-schedule", "--plot", str(tmp_path))
    assert code == 0
    assert out.startswith("lr-schedule: ")
    path = tmp_path / "learning_rate_schedule.png"
    assert f"wrote {path}" in err
    assert matplotlib.image.imread(path).ndim == 3


def test_plot_of_an_example_without_pictures_says_so(capsys, tmp_path, monkeypatch):
    from light_llm.explain import registry

    bare = registry.Example("bare", "an example without pictures", explain.get("norms").steps)
    monkeypatch.setitem(registry.EXAMPLES, "bare", bare)
    code, _, err = run(capsys, "bare", "--plot", str(tmp_path))
    assert code == 0
    assert "has no pictures" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # 28 s drawing every picture, which tests/explain/test_plots.py checks one by one
def test_json_with_plot_and_no_name_lists_every_picture_written(capsys, tmp_path):
    code, out, err = run(capsys, "--json", "--plot", str(tmp_path))
    assert code == 0
    listing = json.loads(out)
    assert [item["name"] for item in listing] == explain.names()
    for item in listing:
        assert item["pictures"], item["name"]
        for path in item["pictures"]:
            assert matplotlib.image.imread(path).ndim == 3
            assert f"wrote {path}" in err


def test_markdown_page_to_a_file_with_its_pictures_beside_it(capsys, tmp_path):
    page = tmp_path / "docs" / "tiny.md"
    code, out, err = run(capsys, "tiny-attention", "--markdown", str(page))
    assert code == 0
    assert out == ""
    text = page.read_text(encoding="utf-8")
    assert text.startswith("# `light-llm explain tiny-attention`")
    assert "![tiny attention](tiny_attention.png)" in text
    assert (page.parent / "tiny_attention.png").is_file()
    assert f"wrote {page}" in err


def test_markdown_to_stdout_links_pictures_only_with_plot(capsys, tmp_path):
    code, out, _ = run(capsys, "norms", "--markdown")
    assert code == 0
    assert out.startswith("# `light-llm explain norms`") and "![" not in out
    code, out, _ = run(capsys, "norms", "--markdown", "--plot", str(tmp_path))
    assert f"]({tmp_path / 'norms.png'})" in out


def test_markdown_of_every_example_has_contents_and_a_section_each(capsys):
    code, out, _ = run(capsys, "--markdown")
    assert code == 0
    for name in explain.names():
        assert f"- [`{name}`](#light-llm-explain-{name})" in out
        assert f"\n## `light-llm explain {name}`\n" in out


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["cat-sat"], id="one-example"),
        # every example's page, written to a file, draws every picture (20-40 s): -m slow
        pytest.param([], id="every-example", marks=pytest.mark.slow),
        pytest.param(["--equations"], id="equations"),
    ],
)
def test_a_page_light_llm_wrote_is_written_over(capsys, tmp_path, argv):
    """--markdown rewrites a page it wrote before (one example's, every example's, the
    equations')."""
    page = tmp_path / "page.md"
    if argv:
        code, _, err = run(capsys, *argv, "--markdown", str(page))
        assert code == 0, err
    else:  # every example's page as it goes to stdout, without its pictures: written
        # to a file, it draws them all, which one rewrite below is enough to pay for
        code, out, err = run(capsys, "--markdown")
        assert code == 0, err
        page.write_text(out, encoding="utf-8")
    code, _, err = run(capsys, *argv, "--markdown", str(page))
    assert code == 0, err


def test_a_folder_or_a_users_file_is_not_written_over(capsys, tmp_path):
    """--markdown refuses, before drawing any picture, a folder or a user's file, which it
    leaves as it was."""
    fresh = tmp_path / "fresh"
    folder = fresh / "pages"
    folder.mkdir(parents=True)
    notes = fresh / "notes.md"
    notes.write_text("# my notes\n", encoding="utf-8")
    for target, message in [(notes, "is a file that is not a page light-llm wrote"),
                            (folder, "is a folder: give a file name")]:  # fmt: skip
        code, out, err = run(capsys, "cat-sat", "--markdown", str(target))
        assert code == 2 and out == "" and message in err, err
        assert len(err.strip().splitlines()) == 1
    assert notes.read_text(encoding="utf-8") == "# my notes\n"
    assert sorted(path.name for path in fresh.rglob("*")) == ["notes.md", "pages"]


def test_json_and_markdown_together_are_refused(capsys):
    code, _, err = run(capsys, "norms", "--json", "--markdown")
    assert code == 2
    assert "--json" in err and len(err.strip().splitlines()) == 1


def test_equations_lists_1_to_53_with_their_code(capsys):
    from light_llm.explain.equations import EQUATIONS

    code, out, _ = run(capsys, "--equations")
    assert code == 0
    for eq in EQUATIONS:
        assert f"({eq.number}) {eq.section}" in out
    code, out, _ = run(capsys, "--equations", "--json")
    assert [item["number"] for item in json.loads(out)] == [eq.number for eq in EQUATIONS]


def test_equations_take_no_example_name(capsys):
    code, _, err = run(capsys, "cat-sat", "--equations")
    assert code == 2
    assert "--equations" in err


def test_schedule_of_a_saved_training_run(capsys, tmp_path):
    from light_llm.checkpoints.run import trainer_state_file
    from light_llm.train.config import TrainConfig

    config = TrainConfig(lr=3e-3, min_lr=3e-4, warmup_iters=10, max_iters=300).resolve()
    folder = tmp_path / "run" / "checkpoint"
    folder.mkdir(parents=True)
    for name, data in trainer_state_file({"resolved_config": config.to_dict()}).items():
        (folder / name).write_bytes(data)
    (folder / "config.json").write_text("{}")
    code, out, err = run(
        capsys,
        "lr-schedule",
        "--run",
        str(tmp_path / "run"),
        "--json",
        "--plot",
        str(tmp_path / "pictures"),
    )
    assert code == 0
    steps = {step["title"]: step for step in json.loads(out)["steps"]}
    assert steps["Peak and floor: lr_max, lr_min"]["value"] == [3e-3, 3e-4]
    assert steps["Lengths: warmup_iters T_w, lr_decay_iters T_d, max_iters"]["value"] == [
        10,
        300,
        300,
    ]
    assert (tmp_path / "pictures" / "learning_rate_schedule.png").is_file()


def test_run_option_belongs_to_the_schedule(capsys, tmp_path):
    code, _, err = run(capsys, "norms", "--run", str(tmp_path))
    assert code == 2
    assert "lr-schedule" in err


def test_schedule_of_a_run_shows_the_learning_rates_it_logged(capsys, tmp_path):
    """A run extended with --restretch-schedule did not follow the formula of its final
    settings before the extension: the logged rates tell what it really used."""
    from tests.train.helpers import tiny_flags, write_corpus

    corpus = write_corpus(tmp_path / "corpus.txt")
    out = tmp_path / "run"
    flags = tiny_flags(corpus, out, max_iters=8, warmup_iters=2, log_interval=1)
    assert main(["train", *flags]) == 0
    extend = ["--resume", "--out", str(out), "--max-iters", "12", "--restretch-schedule"]
    assert main(["train", *extend]) == 0
    capsys.readouterr()
    code, printed, _ = run(
        capsys, "lr-schedule", "--run", str(out), "--json", "--plot", str(tmp_path / "pictures")
    )
    assert code == 0
    steps = {step["title"]: step for step in json.loads(printed)["steps"]}
    logged = steps["Learning rate the run logged (metrics.jsonl)"]
    lines = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    by_iter = {line["iter"]: line["lr"] for line in lines if line["kind"] == "train"}
    at = [int(label.removeprefix("t=")) for label in logged["columns"]]
    assert at[0] == 0 and at[-1] == 11
    assert logged["value"] == [by_iter[t] for t in at]
    formula = steps["Learning rate at selected steps"]  # of the final, re-stretched settings
    rate_at = dict(zip(formula["columns"], formula["value"], strict=True))
    before = [t for t in at if f"t={t}" in rate_at and 2 < t < 8]  # decaying, before 8
    assert before and all(by_iter[t] != rate_at[f"t={t}"] for t in before)
    assert (tmp_path / "pictures" / "learning_rate_schedule.png").is_file()


def test_a_plot_folder_that_cannot_be_made_is_one_sentence_before_any_text(capsys, tmp_path):
    """--plot naming a file: exit 2 and the obstacle named, with no example printed first."""
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    code, out, err = run(capsys, "cat-sat", "--plot", str(blocker))
    assert code == 2
    assert out == ""
    assert f"{blocker} is a file, not a folder" in err and len(err.strip().splitlines()) == 1
