"""``light-llm serve --compare RUN`` in a real browser (set-up: test_browser.py): the compared
run's curve is drawn over the served run's, its probe panel stands beside at the slider's
iteration (its latest record at or before it) with the numbers its record holds, runs of
different tokenizers (or of one kind, other vocabularies) are said to differ, and a damaged
record is one sentence in its panel while the rest of the page keeps working; an encoder's run
says why it has no probe panels."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import numpy as np
import pytest
from selenium.webdriver.common.by import By

from light_llm.checkpoints.probes import probe_file, probe_iterations, read_probe
from light_llm.checkpoints.run import MetricsLog, evaluation_records
from light_llm.cli import main
from tests.serve.test_browser import (  # noqa: F401 (fixtures)
    browser,
    page_ready,
    screenshot,
    serving,
    texts,
    wait_for,
)
from tests.serve.test_browser_learning import move_slider
from tests.train.helpers import tiny_flags, write_corpus

DIFFER = "the runs' tokenizers differ"
DOT_TITLE = re.compile(r"^(?P<run>\S+) validation at iteration (?P<iter>[\d,]+): (?P<value>\S+) ")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The served run (characters, probes at 0, 5, 10) and the compared one (a BPE learned
    from the same corpus, probes at 0, 4, 8, 10, 12): records at different iterations."""
    folder = tmp_path_factory.mktemp("compare")
    corpus = write_corpus(folder / "corpus.txt", n_lines=300)
    chars, bpe = folder / "chars", folder / "bpe"
    assert main(["train", *tiny_flags(corpus, chars, tokenizer="char")]) == 0
    assert main(["train", *tiny_flags(corpus, bpe, max_iters=12, eval_interval=4)]) == 0
    assert probe_iterations(chars) == [0, 5, 10] and probe_iterations(bpe) == [0, 4, 8, 10, 12]
    return chars, bpe


def trained_encoder(folder) -> Path:
    """A masked-LM encoder's training output folder under ``folder``: 2 iterations over a
    WordPiece of 90 ids learned from a small corpus."""
    corpus = write_corpus(folder / "corpus.txt", n_lines=300)
    encoder = folder / "encoder"
    flags = tiny_flags(corpus, encoder, tokenizer="wordpiece", vocab_size=90, max_iters=2)
    assert main(["train", "--model", "bert", *flags]) == 0
    return encoder


def status_once_it_says(driver, words: str, what: str) -> str:
    """The Learning section's status line, once it holds ``words`` (``what`` names the wait)."""
    wait_for(driver, lambda d: words in d.find_element(By.ID, "training-status").text, what)
    return driver.find_element(By.ID, "training-status").text


def wait_for_panel(driver, run: int, iteration: int) -> None:
    """Until run ``run``'s probe panel shows its record of ``iteration``."""
    selector = f'.probe-panel[data-run="{run}"] > .muted'
    wait_for(
        driver,
        lambda d: any(t.startswith(f"iteration {iteration:,},") for t in texts(d, selector)),
        f"run {run}'s panel at iteration {iteration}",
    )


def shown_probabilities(driver, run: int) -> list[float]:
    """The next-token probabilities run ``run``'s panel shows."""
    return [
        float(t) for t in texts(driver, f'.probe-panel[data-run="{run}"] .probe-next .p-before')
    ]


def panel_boxes(driver) -> list[dict[str, float]]:
    """Where each probe panel lies on the page (left, top), read at one instant."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('.probe-panel'), p => {"
        " const r = p.getBoundingClientRect(); return {left: r.left, top: r.top}; })"
    )


def validation_dots(driver) -> dict[str, dict[int, float]]:
    """run name -> iteration -> value, read off the evaluation dots' hover titles."""
    dots: dict[str, dict[int, float]] = {}
    titles = driver.execute_script(
        "return Array.from(document.querySelectorAll('#curves-svg circle.eval-dot title'),"
        " t => t.textContent)"
    )
    for title in titles:
        match = DOT_TITLE.match(title)
        assert match, title
        dots.setdefault(match["run"], {})[int(match["iter"].replace(",", ""))] = float(
            match["value"]
        )
    return dots


def test_a_compared_run_is_overlaid_and_its_probes_shown_beside(runs, browser, tmp_path):  # noqa: F811
    chars, bpe = runs
    driver = browser
    with serving(chars, tmp_path, "--compare", str(bpe)) as url:
        driver.get(url)
        wait_for(driver, page_ready, "the page never got ready")
        wait_for(driver, lambda d: len(d.find_elements(By.CSS_SELECTOR, ".probe-panel")) == 2, "")
        status = driver.find_element(By.ID, "training-status").text
        assert "chars:" in status and "bpe:" in status and DIFFER in status
        # both runs' validation curves in one chart, in bits per byte as metrics.jsonl has them
        assert "bits per byte" in driver.find_element(By.ID, "curves-svg").text
        dots = validation_dots(driver)
        for run in (chars, bpe):
            evaluations = evaluation_records(MetricsLog(run).records())
            expected = {record["iter"]: record["val_bpb"] for record in evaluations}
            assert dots[run.name].keys() == expected.keys()
            np.testing.assert_allclose(
                [dots[run.name][i] for i in expected], list(expected.values()), atol=6e-5
            )
        legend = texts(driver, "#curve-legend div")
        assert "chars validation" in legend and "bpe validation" in legend
        # at iteration 5 of the served run, the compared run's record of iteration 4, beside
        move_slider(driver, 1, 5)
        wait_for_panel(driver, 0, 5)
        wait_for_panel(driver, 1, 4)
        served, compared = panel_boxes(driver)
        assert compared["top"] == served["top"] and compared["left"] > served["left"]
        for index, run, iteration in ((0, chars, 5), (1, bpe, 4)):
            record = read_probe(run, iteration)
            np.testing.assert_allclose(
                shown_probabilities(driver, index), record["next_token"]["probs"], atol=6e-5
            )
        driver.execute_script("document.getElementById('training-section').scrollIntoView()")
        screenshot(driver, tmp_path, "explorer-compare.png")


def test_a_damaged_compared_record_is_one_sentence_and_the_rest_works(
    runs,
    browser,  # noqa: F811
    tmp_path,
):
    chars, bpe = runs
    damaged = tmp_path / "bpe"
    shutil.copytree(bpe, damaged)
    probe_file(damaged, 10).write_text('{"format": "light-llm-probe", ', encoding="utf-8")
    driver = browser
    with serving(chars, tmp_path, "--compare", str(damaged)) as url:
        driver.get(url)
        wait_for(driver, page_ready, "the page never got ready")
        move_slider(driver, 2, 10)
        wait_for_panel(driver, 0, 10)
        selector = '.probe-panel[data-run="1"] .error'
        wait_for(driver, lambda d: texts(d, selector), "the damaged record's sentence")
        (sentence,) = texts(driver, selector)
        assert "not valid JSON" in sentence and probe_file(damaged, 10).name in sentence
        assert driver.page_source.count("not valid JSON") == 1  # said once
        served = read_probe(chars, 10)["next_token"]["probs"]
        np.testing.assert_allclose(shown_probabilities(driver, 0), served, atol=6e-5)
        move_slider(driver, 1, 5)  # the compared run's other records still show
        wait_for_panel(driver, 1, 4)
        compared = read_probe(damaged, 4)["next_token"]["probs"]
        np.testing.assert_allclose(shown_probabilities(driver, 1), compared, atol=6e-5)


def test_runs_are_said_to_differ_exactly_when_their_tokens_do(runs, browser, tmp_path):  # noqa: F811
    """A copy of a run has its tokens; a character run on another text has other characters,
    though both tokenizers are called "char"."""
    chars, _ = runs
    twin = tmp_path / "chars-again"
    shutil.copytree(chars, twin)
    other = tmp_path / "chars-other"
    corpus = tmp_path / "other.txt"
    corpus.write_text("a text of other letters: xyz, quiz, jazz!\n" * 200, encoding="utf-8")
    assert main(["train", *tiny_flags(corpus, other, tokenizer="char", max_iters=2)]) == 0
    driver = browser
    for compared, differ in ((twin, False), (other, True)):
        with serving(chars, tmp_path, "--compare", str(compared)) as url:
            driver.get(url)
            wait_for(driver, page_ready, "the page never got ready")
            status = status_once_it_says(driver, f"{compared.name}:", "the compared run's status")
            assert status.count("char tokens") == 2 and (DIFFER in status) == differ


def test_a_compared_run_deleted_while_watched_stays_on_the_page(runs, browser, tmp_path):  # noqa: F811
    chars, bpe = runs
    doomed = tmp_path / "doomed"
    shutil.copytree(bpe, doomed)
    driver = browser
    with serving(chars, tmp_path, "--compare", str(doomed)) as url:
        driver.get(url)
        wait_for(driver, page_ready, "the page never got ready")
        wait_for_panel(driver, 1, 10)
        before = validation_dots(driver)
        shutil.rmtree(doomed)
        status = status_once_it_says(driver, "has gone", "the page says the run folder has gone")
        assert status.count("has gone") == 1 and str(doomed) in status
        assert validation_dots(driver) == before  # its curve stays
        move_slider(driver, 1, 5)  # the served run's panels still answer
        wait_for_panel(driver, 0, 5)
        served = read_probe(chars, 5)["next_token"]["probs"]
        np.testing.assert_allclose(shown_probabilities(driver, 0), served, atol=6e-5)


def test_an_encoder_beside_a_gpt_is_said_not_comparable(runs, browser, tmp_path):  # noqa: F811
    """A masked-LM run's loss is over masked tokens, and its records have no bits per byte: the
    page says both, and draws the curves in nats per token (its axis says so)."""
    chars, _ = runs
    encoder = trained_encoder(tmp_path)
    driver = browser
    with serving(chars, tmp_path, "--compare", str(encoder)) as url:
        driver.get(url)
        wait_for(driver, page_ready, "the page never got ready")
        status = status_once_it_says(driver, "encoder:", "the encoder run's status")
        assert "encoder is a masked-LM encoder" in status and "not comparable" in status
        assert DIFFER in status and "the curves are in nats per token" in status
        assert "bits per byte, which are" not in status  # the old sentence, false here
        assert "nats per token" in driver.find_element(By.ID, "curves-svg").text


def test_a_non_finite_evaluation_keeps_the_curves_in_bits_per_byte(runs, browser, tmp_path):  # noqa: F811
    """One evaluation with a NaN loss (weights gone bad) beside a BPE run: the chart stays in
    bits per byte (the run records them; it said a run records none and drew nats per token),
    the bad evaluation is left out of the curve and named in the status line, and the good
    evaluations keep their dots and values."""
    chars, bpe = runs
    copy = tmp_path / "chars"
    shutil.copytree(chars, copy)
    with (copy / "metrics.jsonl").open("a", encoding="utf-8") as log:
        log.write(
            '{"kind": "eval", "iter": 11, "train_loss": NaN, "val_loss": NaN, '
            '"train_bpb": NaN, "val_bpb": NaN, "elapsed_s": 9.0}\n'
        )
    driver = browser
    with serving(copy, tmp_path, "--compare", str(bpe)) as url:
        driver.get(url)
        wait_for(driver, page_ready, "the page never got ready")
        status = status_once_it_says(
            driver, "not finite", "the status line names the non-finite evaluation"
        )
        assert "1 evaluation not finite (iteration 11" in status
        assert "bits per byte, which are" in status and "nats per token" not in status
        assert "bits per byte" in driver.find_element(By.ID, "curves-svg").text
        recorded = evaluation_records(MetricsLog(chars).records())
        dots = validation_dots(driver)["chars"]
        assert sorted(dots) == [r["iter"] for r in recorded]  # not 11
        assert [round(dots[r["iter"]], 4) for r in recorded] == [
            round(r["val_bpb"], 4) for r in recorded
        ]


def test_an_encoder_run_says_why_it_has_no_probes(browser, tmp_path):  # noqa: F811
    """A masked-LM run records no probes (its trainer takes none): its Learning section says
    so, not that none were recorded yet."""
    encoder = trained_encoder(tmp_path)
    assert probe_iterations(encoder) == []
    driver = browser
    with serving(encoder, tmp_path) as url:
        driver.get(url)
        wait_for(driver, page_ready, "the page never got ready")
        wait_for(
            driver,
            lambda d: "masked-LM" in d.find_element(By.ID, "probe-panels").text,
            "the probe panels' sentence",
        )
        sentence = driver.find_element(By.ID, "probe-panels").text
        assert "records no probes" in sentence and "yet" not in sentence
