"""The explorer's second edition in a real browser (set-up: test_browser.py): the flow view's
numbers are the API's, the temperature redraws the bars, and a run trained by a real
``light-llm train`` process beside the server is followed live, survives the trainer's SIGKILL,
and its slider reaches every recorded iteration with the numbers the checkpoint gives."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import httpx
import numpy as np
from selenium.webdriver.common.by import By

from light_llm.checkpoints import load, load_tokenizer
from light_llm.checkpoints.probes import probe_iterations, read_probe
from light_llm.checkpoints.run import read_trainer_state
from light_llm.errors import CheckpointError
from light_llm.inspect.probe import take_probe
from light_llm.train.probes import PROBE_SLICE_WINDOWS
from tests.serve.test_browser import (  # noqa: F401 (fixtures)
    api_table,
    browser,
    light_llm_command,
    page_ready,
    page_table,
    screenshot,
    server,
    serving,
    texts,
    wait_for,
)
from tests.train.helpers import tiny_flags, write_corpus

PROMPT = "the king shall"


def checkpoint_probed(out) -> bool:
    """Whether the run's latest checkpoint has its probe record."""
    try:
        return read_trainer_state(out / "checkpoint")["iteration"] in probe_iterations(out)
    except CheckpointError:  # caught between two checkpoints' renames
        return False


def move_slider(driver, index: int, iteration: int) -> None:
    """The time slider moved to its ``index``-th recorded iteration, ``iteration``, and
    waited for until the page says so."""
    driver.execute_script(
        "const s = document.getElementById('probe-slider'); s.value = arguments[0];"
        "s.dispatchEvent(new Event('input'));",
        str(index),
    )
    wait_for(
        driver,
        lambda d: d.find_element(By.ID, "probe-iteration").text == f"{iteration:,}",
        f"the slider at iteration {iteration}",
    )


def set_prompt(driver, prompt: str) -> None:
    driver.execute_script(
        "const box = document.getElementById('prompt'); box.value = arguments[0];"
        "box.dispatchEvent(new Event('input'));",
        prompt,
    )


def test_the_flow_view_shows_the_apis_numbers(server, browser, tmp_path):  # noqa: F811
    driver = browser
    driver.get(server)
    wait_for(driver, page_ready, "the page never got ready")
    set_prompt(driver, PROMPT)
    wait_for(driver, lambda d: len(texts(d, "#flow-tokens .chip")) == len(PROMPT), "flow tokens")
    driver.find_elements(By.CSS_SELECTOR, "#flow-tokens .chip")[4].click()
    wait_for(driver, lambda d: d.execute_script("return flowState.result.position") == 4, "pick")
    api = httpx.post(server + "api/flow", json={"prompt": PROMPT, "position": 4}).json()
    assert driver.execute_script("return flowState.result") == api
    # a stage clicked: its formula typeset and its numbers as the API gives them
    driver.find_element(By.CSS_SELECTOR, '.flow-stage[data-path="2.2"]').click()  # layer 0 Q/K/V
    wait_for(driver, lambda d: texts(d, "#flow-detail h3") != [], "the stage's detail")
    detail = driver.find_element(By.ID, "flow-detail")
    q = api["stages"][2]["stages"][2]["values"]["q"]
    shown = detail.find_element(By.CSS_SELECTOR, '[data-values="q"] pre').text.splitlines()
    assert shown[0].split(": ")[1].split()[:3] == [f"{value:.3f}" for value in q[0][:3]]
    assert detail.find_elements(By.CSS_SELECTOR, ".tex i")  # typeset symbols, not raw TeX
    assert "\\" not in detail.find_element(By.CSS_SELECTOR, ".tex").text
    screenshot(driver, tmp_path, "explorer-flow.png")


def test_the_temperature_redraws_the_bars(server, browser):  # noqa: F811
    driver = browser
    driver.get(server)
    wait_for(driver, page_ready, "the page never got ready")
    set_prompt(driver, PROMPT)

    def widths(d):
        return d.execute_script(
            "return Array.from(document.querySelectorAll('#next-table .bar.after'),"
            " b => b.style.width)"
        )

    wait_for(driver, lambda d: len(widths(d)) == 20, "the bars")
    before = widths(driver)
    driver.execute_script(
        "const s = document.getElementById('temperature'); s.value = '0.3';"
        "s.dispatchEvent(new Event('input'));"
    )
    wait_for(driver, lambda d: widths(d) != before, "the bars after the filters redrawn")
    after = [float(width.rstrip("%")) for width in widths(driver)]
    assert after[1] < float(before[1].rstrip("%"))  # sharper: the runner-up falls behind the top


def card_iteration(driver) -> int:
    """The model card's "iterations" row (read in one script: the card may be redrawn)."""
    value = driver.execute_script(
        "const row = [...document.querySelectorAll('#card-section table.card tr')]"
        ".find(r => r.cells[0].textContent === 'iterations');"
        "return row ? row.cells[1].textContent : null;"
    )
    return int(value)


def panels_iteration(driver) -> int | None:
    """The checkpoint iteration the prompt's panels were last drawn from after a newer
    checkpoint came (None: none came since the page loaded)."""
    value = driver.execute_script("return document.body.dataset.panelsIteration")
    return int(value) if value else None


def test_a_run_is_followed_live_and_replayed_after_a_kill(browser, tmp_path):  # noqa: F811
    driver = browser
    corpus = write_corpus(tmp_path / "corpus.txt", n_lines=300)
    out = tmp_path / "run"
    flags = tiny_flags(corpus, out, tokenizer="char", max_iters=100000, eval_interval=40)
    command, env = light_llm_command("train", *flags, "--probe-interval", "10")
    trainer = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while len(probe_iterations(out)) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        with serving(out, tmp_path) as url:
            driver.get(url)
            wait_for(driver, page_ready, "the page never got ready")
            set_prompt(driver, PROMPT)  # inside the tiny model's context

            def slider_max(d):
                return int(d.find_element(By.ID, "probe-slider").get_attribute("max"))

            def dots(d):
                return len(d.find_elements(By.CSS_SELECTOR, "circle.eval-dot"))

            wait_for(driver, lambda d: slider_max(d) >= 1, "the recorded probes")
            first, first_dots = slider_max(driver), dots(driver)
            assert "training now" in driver.find_element(By.ID, "training-status").text
            wait_for(driver, lambda d: slider_max(d) > first, "new probes, without a reload")
            wait_for(driver, lambda d: dots(d) > first_dots, "the curve gains points")
            loaded = card_iteration(driver)
            wait_for(driver, lambda d: card_iteration(d) > loaded, "the card follows the run")
            # killed just after a checkpoint's probe is on disk (the next is 40 steps away)
            wait_for(driver, lambda d: checkpoint_probed(out), "a probed checkpoint")
            trainer.send_signal(signal.SIGKILL)
            trainer.wait(timeout=30)
            wait_for(
                driver,
                lambda d: "not training" in d.find_element(By.ID, "training-status").text,
                "the page sees the run stopped",
            )
            # the card and the next-token table come from the last checkpoint, not the first
            saved = read_trainer_state(out / "checkpoint")["iteration"]
            wait_for(
                driver,
                lambda d: card_iteration(d) == panels_iteration(d) == saved,
                "the card and the panels of the last checkpoint",
            )
            temperature = float(driver.find_element(By.ID, "temperature").get_attribute("value"))
            shown = page_table(driver)
            assert len(shown) == 20 and shown == api_table(url, PROMPT, temperature)
            recorded = probe_iterations(out)
            for iteration in recorded:  # nothing corrupt: every record reads whole
                read_probe(out, iteration)
            wait_for(driver, lambda d: slider_max(d) == len(recorded) - 1, "every record")
            for index, iteration in enumerate(recorded):  # the slider reaches each
                move_slider(driver, index, iteration)
            # at the checkpoint's iteration, the panel shows what the checkpoint gives
            move_slider(driver, recorded.index(saved), saved)
            model, tokenizer = load(out), load_tokenizer(out)
            record = read_probe(out, saved)
            val = np.fromfile(out / "data" / "val.bin", dtype=np.uint16)
            fresh = take_probe(
                model, tokenizer, record["prompt"]["ids"], val[: PROBE_SLICE_WINDOWS * 16 + 1]
            )
            wait_for(
                driver,
                lambda d: (
                    texts(d, ".probe-panel > .muted")[:1]
                    == [
                        t
                        for t in texts(d, ".probe-panel > .muted")[:1]
                        if t.startswith(f"iteration {saved:,},")
                    ]
                    and texts(d, ".probe-panel > .muted")
                ),
                "the panel of the checkpoint's iteration",
            )
            shown = [float(x) for x in texts(driver, ".probe-next .p-before")]
            np.testing.assert_allclose(shown, fresh["next_token"]["probs"], atol=1e-4)
            screenshot(driver, tmp_path, "explorer-learning.png")
    finally:
        if trainer.poll() is None:
            os.kill(trainer.pid, signal.SIGKILL)
            trainer.wait()
