"""The explorer in a real browser: ``light-llm serve`` in a subprocess, driven by headless
Chromium (Debian's ``chromium`` and ``chromium-driver``; ``.ci/run`` installs them) through
selenium. The page must show what the API computes, and load nothing from another host.
Without Chromium the tests skip with one line, unless $LIGHT_LLM_REQUIRE_BROWSER is 1 (``.ci/run``
sets it), where they fail.

Screenshots go to ``tmp_path`` (and to $LIGHT_LLM_SCREENSHOTS when set, e.g. for the README).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import httpx
import numpy as np
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

import light_llm
from light_llm import explain
from light_llm.checkpoints import save
from light_llm.explain.render import format_number, needs_scientific
from light_llm.models.gpt import GPT
from light_llm.tokenizers import CharTokenizer
from tests.conftest import tiny_config

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1360,2400",
)
WAIT_S = 30  # the longest the page may take to show a result (a bound on a hang, not a speed)
NETWORK_SCHEMES = ("http", "https", "ws", "wss", "ftp")  # the others never leave the browser


REQUIRE_BROWSER = "LIGHT_LLM_REQUIRE_BROWSER"  # set to 1 by .ci/run: a missing browser fails


def installed(program: str) -> str:
    """The path of ``program``; when it is missing, the test is skipped with one line, or
    fails when $LIGHT_LLM_REQUIRE_BROWSER is 1 (CI), so that CI never skips it silently."""
    path = shutil.which(program)
    if path is None:
        reason = (
            f"{program} is not installed: apt-get install -y chromium chromium-driver "
            "(.ci/run does it)"
        )
        if os.environ.get(REQUIRE_BROWSER) == "1":
            pytest.fail(f"{reason}; ${REQUIRE_BROWSER} is 1")
        pytest.skip(reason)
    return path


def test_a_missing_browser_skips_unless_ci_requires_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no chromium on it
    monkeypatch.delenv(REQUIRE_BROWSER, raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium is not installed"):
        installed("chromium")
    monkeypatch.setenv(REQUIRE_BROWSER, "1")
    with pytest.raises(pytest.fail.Exception, match="LIGHT_LLM_REQUIRE_BROWSER is 1"):
        installed("chromium")
    (tmp_path / "chromium").write_text("#!/bin/sh\n")
    (tmp_path / "chromium").chmod(0o755)
    assert installed("chromium") == str(tmp_path / "chromium")


def light_llm_command(*args: str) -> tuple[list[str], dict[str, str]]:
    """``python -m light_llm ARGS`` and the environment that runs this checkout's code."""
    source = str(Path(light_llm.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([source, os.environ.get("PYTHONPATH", "")])}
    return [sys.executable, "-m", "light_llm", *args], env


@contextlib.contextmanager
def serving(folder: Path, cwd: Path, *extra: str):
    """``light-llm serve --checkpoint FOLDER --port 0`` in a subprocess: its base URL."""
    command, env = light_llm_command("serve", "--checkpoint", str(folder), *extra)
    process = subprocess.Popen(
        [*command, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
    )
    try:
        url = None
        for line in process.stdout:
            if line.startswith("open "):
                url = line.split()[1]
                break
        if url is None:
            pytest.fail(f"light-llm serve did not start: {process.stderr.read()}")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def server(gpt_run, tmp_path_factory):
    """``light-llm serve`` on the tiny GPT's run: its base URL."""
    with serving(gpt_run, tmp_path_factory.mktemp("serve")) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    options = Options()
    options.binary_location = installed("chromium")
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    driver = webdriver.Chrome(service=Service(installed("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def requested_urls(driver) -> list[str]:
    """Every URL the browser requested since the last call (from its performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent":
            urls.append(message["params"]["request"]["url"])
    return urls


def assert_all_local(driver, base_url: str) -> None:
    host = urlparse(base_url).netloc
    urls = requested_urls(driver)
    assert urls, "the performance log saw no request at all"
    foreign = [
        url
        for url in urls
        if urlparse(url).scheme in NETWORK_SCHEMES and urlparse(url).netloc != host
    ]
    assert not foreign, f"the page requested other hosts: {foreign}"


def wait_for(driver, condition, message: str):
    return WebDriverWait(driver, WAIT_S).until(lambda d: condition(d), message)


def page_ready(driver) -> bool:
    return driver.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == "true"


def texts(driver, selector: str) -> list[str]:
    """The text of every element ``selector`` finds, read at one instant (the page redraws)."""
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), n => n.textContent)",
        selector,
    )


def screenshot(driver, tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    driver.save_screenshot(str(path))
    target = os.environ.get("LIGHT_LLM_SCREENSHOTS")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(target) / name)


def api_table(base_url: str, prompt: str, temperature: float) -> list[tuple[str, str]]:
    """(P before, P after) of the 20 most likely tokens, as the page prints them."""
    result = httpx.post(
        base_url + "api/next-token",
        json={"prompt": prompt, "temperature": temperature, "limit": 20},
    ).json()
    return [
        (f"{t['probability']:.4f}", f"{t['filtered_probability']:.4f}") for t in result["tokens"]
    ]


def page_table(driver) -> list[tuple[str, str]]:
    before = texts(driver, "#next-table td.p-before")
    after = texts(driver, "#next-table td.p-after")
    return list(zip(before, after, strict=True))


def api_generation(base_url: str, body: dict) -> str:
    with httpx.stream("POST", base_url + "api/generate", json=body, timeout=60) as response:
        done = [line for line in response.iter_lines() if line.startswith("data: ")][-1]
    return json.loads(done[len("data: ") :])["text"]


def test_the_page_shows_what_the_api_computes(server, browser, tmp_path):
    driver = browser
    driver.get(server)
    wait_for(driver, page_ready, "the page never got ready")

    # type a prompt: its tokens appear as chips, ids on hover (title)
    prompt = "the king shall"
    box = driver.find_element(By.ID, "prompt")
    box.clear()
    box.send_keys(prompt)
    tokens = httpx.post(server + "api/tokenize", json={"text": prompt}).json()
    wait_for(driver, lambda d: len(texts(d, "#chips .chip")) == tokens["count"], "chips")
    chips = driver.find_elements(By.CSS_SELECTOR, "#chips .chip")
    assert [chip.get_attribute("title") for chip in chips] == [f"id {i}" for i in tokens["ids"]]

    # the next-token table at temperature 1, then after moving the temperature to 0.5
    # the slider starts at the library's default temperature (generate's), then moves
    start = httpx.get(server + "api/model").json()["defaults"]["temperature"]
    assert driver.find_element(By.ID, "temperature-value").text == f"{start:g}"
    wait_for(driver, lambda d: page_table(d) == api_table(server, prompt, start), "table at τ0")
    slider = driver.find_element(By.ID, "temperature")
    slider.send_keys(*([Keys.ARROW_LEFT] * 10))
    lower = round(start - 0.5, 2)
    assert driver.find_element(By.ID, "temperature-value").text == f"{lower:g}"
    wait_for(
        driver, lambda d: page_table(d) == api_table(server, prompt, lower), "table at τ - 0.5"
    )

    # one small heatmap per layer and head
    attention = httpx.post(server + "api/attention", json={"prompt": prompt}).json()
    n_maps = len(attention["weights"]) * len(attention["weights"][0])
    wait_for(driver, lambda d: len(texts(d, "canvas.heatmap")) == n_maps, "one map per head")

    # hovering a token marks its row (the query) in the enlarged map
    chip = driver.find_elements(By.CSS_SELECTOR, "#chips .chip")[4]
    ActionChains(driver).move_to_element(chip).perform()
    title = driver.find_element(By.ID, "enlarged-title").text
    assert title == f'layer 0, head 0: row of "{attention["tokens"][4]}"'
    assert "hovered" in chip.get_attribute("class")
    red = driver.execute_script(
        "const c = document.getElementById('enlarged'); const n = arguments[0];"
        "const cell = (c.width - 90) / n;"
        "return Array.from(c.getContext('2d').getImageData(91, 90 + 4.5 * cell, 1, 1).data);",
        len(attention["tokens"]),
    )
    assert red[:3] == [255, 59, 31]

    # generate: the streamed text equals the API's with the same seed and options
    for field, value in (("max-new-tokens", "15"), ("seed", "7")):
        node = driver.find_element(By.ID, field)
        node.clear()
        node.send_keys(value)
    driver.find_element(By.ID, "generate").click()
    status = driver.find_element(By.ID, "generate-status")
    finished = ("done", "error")
    wait_for(driver, lambda d: status.get_attribute("data-state") in finished, "generation")
    assert status.get_attribute("data-state") == "done"
    shown = driver.find_element(By.ID, "generated").get_attribute("data-text")
    body = {"prompt": prompt, "max_new_tokens": 15, "temperature": lower, "seed": 7}
    assert shown == api_generation(server, body)
    pieces = texts(driver, "#generated .gen-token")
    assert "".join(pieces).replace("\n", "") == shown.replace("\n", "")
    assert all(
        0 < float(p) <= 1
        for p in (
            span.get_attribute("data-p")
            for span in driver.find_elements(By.CSS_SELECTOR, ".gen-token")
        )
    )
    screenshot(driver, tmp_path, "explorer.png")

    # a prompt longer than the context: the sentence once, under the prompt, the offer to keep
    # the last tokens, and the panels it stopped greyed
    box.clear()
    box.send_keys("the king shall come to rome and speak of love")
    error = driver.find_element(By.ID, "prompt-error")
    wait_for(driver, lambda d: "tokens long" in error.text, "the context sentence")
    wait_for(
        driver,
        lambda d: "stale" in d.find_element(By.ID, "next-section").get_attribute("class"),
        "greyed",
    )
    sentences = [text for text in texts(driver, ".error") if "tokens long" in text]
    assert len(sentences) == 1, sentences
    driver.find_element(By.ID, "keep-last").click()
    wait_for(driver, lambda d: box.get_attribute("value") == "rome and speak of love"[-16:], "cut")
    wait_for(driver, lambda d: error.text == "", "error cleared")
    assert "stale" not in driver.find_element(By.ID, "next-section").get_attribute("class")
    assert_all_local(driver, server)


def test_an_explain_page_shows_the_examples_steps(server, browser, tmp_path):
    driver = browser
    driver.get(server + "explain/cat-sat")
    wait_for(driver, page_ready, "the page never got ready")
    steps = explain.run("cat-sat")
    titles = texts(driver, "#steps .step h3")
    assert titles == [f"{i}. {step.title}" for i, step in enumerate(steps, start=1)]
    image = driver.find_element(By.CSS_SELECTOR, "#figures img")
    loaded = "return arguments[0].complete && arguments[0].naturalWidth"
    wait_for(driver, lambda d: d.execute_script(loaded, image) > 0, "the picture")
    # every matrix as light-llm explain prints it
    for index, step in enumerate(steps, start=1):
        if np.ndim(step.value) != 2:
            continue
        cells = texts(driver, f"#steps .step:nth-child({index}) table:first-child td")
        scientific = needs_scientific(step.value)
        assert cells == [format_number(x, scientific) for x in step.value.flatten().tolist()]
    screenshot(driver, tmp_path, "explain.png")
    driver.get(server + "explain")
    wait_for(driver, lambda d: len(texts(d, "#examples li")) == len(explain.names()), "list")
    assert_all_local(driver, server)


# ---------------------------------------------------------------------- looking inside
def visible(token: str) -> str:
    """A token as the page prints it (explorer.js's visible)."""
    shown = token.replace(" ", "␣").replace("\n", "⏎").replace("\t", "⇥")
    return shown or "''"


def signed(x: float, digits: int = 4) -> str:
    """A signed number as the page prints it (inspect.js's signed)."""
    return ("+" if x >= 0 else "−") + f"{abs(x):.{digits}f}"


def fixed(x: float, digits: int) -> str:
    """``x`` to ``digits`` decimals as the page prints it (inspect.js's fixed: no "-0.00")."""
    text = f"{x:.{digits}f}"
    return text.replace("-", "") if float(text) == 0 else text


def inspect_api(base_url: str, path: str, body: dict) -> dict:
    response = httpx.post(f"{base_url}api/inspect/{path}", json=body, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()


def type_into(driver, field: str, text: str) -> None:
    box = driver.find_element(By.ID, field)
    box.clear()
    box.send_keys(text)


def test_the_inspect_panels_show_what_the_api_computes(server, browser, tmp_path):
    driver = browser
    driver.get(server)
    wait_for(driver, page_ready, "the page never got ready")
    prompt = "the king shall"
    type_into(driver, "prompt", prompt)

    # the logit lens: a layers x positions grid of top tokens and their probabilities
    lens = inspect_api(server, "lens", {"prompt": prompt})
    tops = [visible(t[0]) for row in lens["top_tokens"] for t in row]
    probabilities = [f"{p[0]:.2f}" for row in lens["top_probs"] for p in row]
    wait_for(driver, lambda d: texts(d, ".lens-cell .token") == tops, "the lens's top tokens")
    assert texts(driver, ".lens-cell .p") == probabilities
    assert len(tops) == len(lens["stages"]) * len(prompt)

    # attribution: one bar per component, the top guess against the runner-up
    attribution = inspect_api(server, "attribution", {"prompt": prompt})
    values = [signed(v) for v in attribution["values"]]
    wait_for(driver, lambda d: texts(d, "#attr-bars .attr-value") == values, "attribution bars")
    assert texts(driver, "#attr-bars th") == attribution["names"]
    type_into(driver, "attr-token", "e")  # a token typed: its logit against the top guess
    typed = inspect_api(server, "attribution", {"prompt": prompt, "token": "e"})
    assert typed["token"]["token"] == "e"
    typed_values = [signed(v) for v in typed["values"]]
    wait_for(driver, lambda d: texts(d, "#attr-bars .attr-value") == typed_values, "typed token")

    # ablation: the Δloss heatmap; clicking heads ablates them and redraws the distribution
    table = inspect_api(server, "importance", {"prompt": prompt})
    cells = [
        signed(v, 3)
        for layer, row in enumerate(table["heads"])
        for v in [*row, table["mlps"][layer]]
    ]
    wait_for(driver, lambda d: texts(d, ".importance-cell") == cells, "the importance heatmap")

    def click(component: str) -> None:
        selector = f'.importance-cell[data-component="{component}"]'
        driver.find_element(By.CSS_SELECTOR, selector).click()

    def shown_ablation(components: list[str]) -> bool:
        table = driver.find_element(By.ID, "ablation-table")
        if table.get_attribute("data-components") != ",".join(components):
            return False
        result = inspect_api(server, "ablate", {"prompt": prompt, "components": components})
        line = (
            f"P({json.dumps(result['token']['token'])}) {result['p']:.4f} → "
            f"{result['ablated_p']:.4f} (Δp {signed(result['delta_p'])})"
        )
        after = [f"{t['ablated_probability']:.4f}" for t in result["tokens"]]
        return (
            driver.find_element(By.ID, "ablation-delta").text == line
            and texts(driver, "#ablation-table .p-ablated") == after
        )

    click("L0H1")
    wait_for(driver, lambda d: shown_ablation(["L0H1"]), "L0H1 ablated")
    click("L1H0")
    wait_for(driver, lambda d: shown_ablation(["L0H1", "L1H0"]), "two heads ablated")
    marked = driver.find_elements(By.CSS_SELECTOR, ".importance-cell.ablated")
    assert [cell.get_attribute("data-component") for cell in marked] == ["L0H1", "L1H0"]
    click("L0H1")  # again: restored
    wait_for(driver, lambda d: shown_ablation(["L1H0"]), "L0H1 restored")
    driver.find_element(By.ID, "ablation-clear").click()
    model = api_table(server, prompt, 1.0)
    wait_for(
        driver,
        lambda d: texts(d, "#ablation-table .p-model") == [before for before, _ in model[:10]],
        "nothing ablated: the model's own distribution",
    )

    # patching: two prompts of the same length, answer and wrong token
    body = {"clean": prompt, "corrupt": "the lord shall", "answer": " ", "wrong": "e"}
    for name, value in body.items():
        type_into(driver, f"patch-{name}", value)
    driver.find_element(By.ID, "patch").click()
    patching = inspect_api(server, "patching", body)
    fractions = [fixed(x, 2) for x in np.ravel(patching["resid"])]
    heads = [fixed(x, 2) for x in np.ravel(patching["heads"])]
    wait_for(driver, lambda d: texts(d, "#patching-resid .patch-cell") == fractions, "patching")
    assert texts(driver, "#patching-heads .patch-cell") == heads

    # surprise: the prompt's tokens coloured by their loss, the loss and top guess on hover
    scored = inspect_api(server, "surprise", {"text": prompt})
    wait_for(driver, lambda d: texts(d, ".surprise-token") == list(prompt), "surprise")
    spans = driver.find_elements(By.CSS_SELECTOR, ".surprise-token")[1:]
    losses = [float(span.get_attribute("data-loss")) for span in spans]
    np.testing.assert_allclose(losses, scored["losses"], rtol=1e-12)
    guess = json.dumps(scored["top_tokens"][0])
    assert f"the model's guess: {guess}" in spans[0].get_attribute("title")

    # the neuron browser: layer 1, unit 7
    driver.find_element(By.CSS_SELECTOR, "#neuron-layer option[value='1']").click()
    type_into(driver, "neuron-unit", "7")
    neuron = inspect_api(
        server, "neuron", {"prompt": prompt, "layer": 1, "neuron": 7, "k": 8, "context": 16}
    )
    activations = [f"{e['activation']:.3f}" for e in neuron["examples"]]
    wait_for(driver, lambda d: texts(d, "#neuron-examples .activation") == activations, "neuron")
    contexts = ["".join(e["tokens"]) for e in neuron["examples"]]
    assert texts(driver, "#neuron-examples td.token") == contexts

    # head roles
    roles = inspect_api(server, "head-roles", {"prompt": prompt})
    scores = [
        fixed(x, 2)
        for key in ("previous_token", "first_token", "induction")
        for x in np.ravel(roles[key])
    ]
    wait_for(driver, lambda d: texts(d, ".role-cell") == scores, "head roles")

    screenshot(driver, tmp_path, "explorer-inspect.png")
    assert_all_local(driver, server)


def test_a_linear_attention_model_draws_its_weights(browser, tmp_path):
    """A model with linear attention gets every layer's and head's maps, under its own
    formula (seed 002 eq. 48), not the softmax's (the API answered 400, the page drew none)."""
    tokenizer = CharTokenizer.from_text(  # every character of the page's prompt presets
        "It is the east, and Juliet is the ROMEO: To be, or not to be First Citizen:\nBefore"
    )
    config = tiny_config(vocab_size=tokenizer.vocab_size, block_size=64, attention="linear")
    save(GPT(config).eval(), tmp_path / "linear", tokenizer=tokenizer)
    driver = browser
    with serving(tmp_path / "linear", tmp_path) as url:
        driver.get(url)
        wait_for(driver, page_ready, "the page never got ready")
        heading = driver.find_element(By.CSS_SELECTOR, "#attention-section h2").text
        assert "φ(q_i)·φ(k_j)" in heading and "softmax" not in heading
        wait_for(
            driver,
            lambda d: len(d.find_elements(By.CSS_SELECTOR, "#heads canvas")) == 4,
            "the four heads' maps",
        )
        assert not driver.find_element(By.ID, "prompt-error").text
