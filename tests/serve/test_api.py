"""The explorer's JSON API through FastAPI's test client: every number equals the one the
Python API computes (filter_logits + softmax, attention_maps, generate_text, predict_masked,
embed_sentences, explain.run), and bad input is a 422 naming the field."""

from __future__ import annotations

import json
import shutil

import matplotlib.image
import numpy as np
import pytest
import torch

from light_llm import explain
from light_llm.assets import packaged_encoder_folder
from light_llm.checkpoints import load, load_tokenizer, save
from light_llm.checkpoints.run import MetricsLog, evaluation_records, read_trainer_state
from light_llm.cli import main
from light_llm.explain.attention_maps import prompt_attention
from light_llm.explain.registry import EXAMPLES
from light_llm.explain.render import needs_scientific
from light_llm.generate import filter_logits, generate_text
from light_llm.models.bert import (
    cosine_similarity_matrix,
    embed_sentences,
    predict_masked,
)
from light_llm.models.gpt import GPT
from light_llm.serve import ExplorerModel, create_app
from tests.cli.test_fill_mask import shipped_answer
from tests.conftest import tiny_config
from tests.serve.conftest import local_client
from tests.train.helpers import tiny_flags, write_corpus

PROMPT = "the king shall"


def events(response_text: str) -> list[tuple[str, dict]]:
    """The (event, data) pairs of a server-sent-event stream."""
    parsed = []
    for block in response_text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n"))
        parsed.append((lines["event"], json.loads(lines["data"])))
    return parsed


def test_tokenize_gives_the_tokenizers_ids(client, gpt):
    _, tokenizer = gpt
    body = client.post("/api/tokenize", json={"text": PROMPT}).json()
    assert body["ids"] == tokenizer.encode(PROMPT)
    assert body["tokens"] == tokenizer.tokens(tokenizer.encode(PROMPT))
    assert "".join(body["pieces"]) == PROMPT
    assert body["context"] == 16


@pytest.mark.parametrize(
    "sampling",
    [
        {"temperature": 1.0},
        {"temperature": 0.5, "top_k": 3},
        {"temperature": 1.7, "top_p": 0.6},
        {"temperature": 0.8, "top_k": 5, "top_p": 0.3},
        {"temperature": 0.0},
    ],
)
def test_next_token_probabilities_before_and_after_the_filters(client, gpt, sampling):
    model, tokenizer = gpt
    body = client.post("/api/next-token", json={"prompt": PROMPT, "limit": 50, **sampling})
    assert body.status_code == 200
    result = body.json()
    with torch.no_grad():
        logits, _ = model(torch.tensor([tokenizer.encode(PROMPT)]))
    logits = logits[:, -1].float()  # (1, V)
    before = torch.softmax(logits, dim=-1)[0]
    if sampling["temperature"] == 0.0:
        after = torch.zeros_like(before)
        after[before.argmax()] = 1.0
    else:
        options = {"top_k": None, "top_p": None, **sampling}
        after = torch.softmax(filter_logits(logits, **options), dim=-1)[0]
    shown = result["tokens"]
    assert len(shown) == min(50, tokenizer.vocab_size)
    ids = [token["id"] for token in shown]
    largest = before.sort(descending=True).values[: len(ids)]
    np.testing.assert_allclose(before[ids], largest)  # the most likely tokens, in order
    np.testing.assert_allclose([t["probability"] for t in shown], before[ids], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(
        [t["filtered_probability"] for t in shown], after[ids], rtol=1e-5, atol=1e-7
    )
    assert [t["kept"] for t in shown] == (after[ids] > 0).tolist()
    assert result["kept_count"] == int((after > 0).sum())
    assert [t["token"] for t in shown] == [tokenizer.decode([i]) for i in ids]


def test_attention_equals_attention_maps(client, gpt):
    model, tokenizer = gpt
    body = client.post("/api/attention", json={"prompt": PROMPT}).json()
    expected = prompt_attention(model, tokenizer, PROMPT)
    weights = np.array(body["weights"])
    assert weights.shape == (2, 2, len(PROMPT), len(PROMPT))  # layer, head, query, key
    np.testing.assert_allclose(weights, expected.maps, atol=1e-6)
    assert body["tokens"] == expected.tokens and body["causal"] is True


def test_a_linear_attention_model_has_its_maps_drawn(gpt, tmp_path):
    """Linear attention forms no T x T matrix, yet its output averages the values with
    weights a_ij (seed 002 eq. 48): the page gets those, equal to the Python API's, rows
    summing to 1 (it answered 400)."""
    _, tokenizer = gpt
    torch.manual_seed(0)
    model = GPT(tiny_config(vocab_size=tokenizer.vocab_size, attention="linear")).eval()
    folder = tmp_path / "linear"
    save(model, folder, tokenizer=tokenizer)
    with local_client(create_app(ExplorerModel(folder, "test"))) as linear_client:
        response = linear_client.post("/api/attention", json={"prompt": PROMPT})
    assert response.status_code == 200
    weights = np.array(response.json()["weights"])
    np.testing.assert_allclose(weights, prompt_attention(model, tokenizer, PROMPT).maps, atol=1e-6)
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)


def test_a_bpe_model_is_explored_token_by_token(bpe_run):
    """The default kind of model: tokens are pieces of words, and the numbers still equal
    the Python API's (the attention maps, and a too-long prompt cut to whole tokens)."""
    model, tokenizer = load(bpe_run), load_tokenizer(bpe_run)
    assert tokenizer.name == "bpe"
    prompt = "the king shall come to rome"
    with local_client(create_app(ExplorerModel(bpe_run, "test"))) as bpe_client:
        body = bpe_client.post("/api/attention", json={"prompt": prompt}).json()
        expected = prompt_attention(model, tokenizer, prompt)
        n_tokens = len(tokenizer.encode(prompt))
        assert n_tokens < len(prompt) and body["tokens"] == expected.tokens
        np.testing.assert_allclose(np.array(body["weights"]), expected.maps, atol=1e-6)
        long_prompt = " ".join([prompt] * 4)
        response = bpe_client.post("/api/next-token", json={"prompt": long_prompt})
        assert response.status_code == 422
        kept = response.json()["detail"][0]["kept_prompt"]
        assert long_prompt.endswith(kept) and len(tokenizer.encode(kept)) <= 16
        assert bpe_client.post("/api/next-token", json={"prompt": kept}).status_code == 200


def test_seeded_generation_equals_light_llm_generate(client, gpt, gpt_run, capsys):
    model, tokenizer = gpt
    options = {"max_new_tokens": 12, "temperature": 0.9, "top_k": 6, "seed": 5}
    response = client.post("/api/generate", json={"prompt": PROMPT, **options})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    stream = events(response.text)
    kinds = [kind for kind, _ in stream]
    assert kinds[0] == "start" and kinds[-1] == "done" and set(kinds[1:-1]) == {"token"}
    final = stream[-1][1]["text"]
    assert "".join(data["text"] for kind, data in stream if kind == "token") == final

    python_api = generate_text(model, tokenizer, [PROMPT], 12, temperature=0.9, top_k=6, seed=5)[0]
    assert final == python_api
    argv = ["generate", "--checkpoint", str(gpt_run), "--prompt", PROMPT, "--json"]
    argv += ["--max-new-tokens", "12", "--temperature", "0.9", "--top-k", "6", "--seed", "5"]
    argv += ["--show-probs", "3"]
    assert main(argv) == 0
    cli = json.loads(capsys.readouterr().out)["completions"][0]
    assert cli["completion"] == final
    drawn = [token for kind, data in stream if kind == "token" for token in data["tokens"]]
    assert [t["id"] for t in drawn] == [step["id"] for step in cli["steps"]]
    np.testing.assert_allclose(
        [t["probability"] for t in drawn], [step["probability"] for step in cli["steps"]]
    )


def test_a_generation_says_how_much_of_a_long_prompt_the_model_does_not_see(client, gpt):
    """The model reads the last block_size tokens of a longer prompt (as generate_text does);
    the stream said nothing of it, where the CLI notes it and /api/next-token refuses it."""
    model, tokenizer = gpt
    options = {"max_new_tokens": 4, "temperature": 0.0}
    for prompt in (PROMPT, PROMPT * 3):
        stream = events(client.post("/api/generate", json={"prompt": prompt, **options}).text)
        length = len(tokenizer.encode(prompt))
        context = model.config.block_size
        assert stream[0] == (
            "start",
            {"prompt_tokens": length, "context": context, "not_seen": max(0, length - context)},
        )
        window = tokenizer.decode(tokenizer.encode(prompt)[-context:])  # what the model reads
        expected = generate_text(model, tokenizer, [window], 4, temperature=0.0)[0]
        assert stream[-1][1]["text"] == expected
    assert stream[0][1]["not_seen"] > 0  # the long prompt was longer than the context


def test_model_card_reports_the_run(client, gpt, gpt_run):
    model, _ = gpt
    card = client.get("/api/model").json()
    state = read_trainer_state(gpt_run / "checkpoint")
    evaluations = evaluation_records(MetricsLog(gpt_run).records())
    last = evaluations[-1]
    assert card["kind"] == "gpt" and card["folder_present"] is True and card["warning"] is None
    assert card["parameters"] == model.num_parameters()
    assert card["config"]["n_layer"] == model.config.n_layer
    training = card["training"]
    assert training["iteration"] == state["iteration"] == 10
    assert training["val_loss"] == pytest.approx(last["val_loss"])
    assert training["val_bpb"] == pytest.approx(last["val_bpb"])
    assert training["curve"]["val"] == [[r["iter"], r["val_loss"]] for r in evaluations]
    assert len(training["curve"]["val"]) == 3  # before training, at 5 and at 10
    assert card["quantization"] is None  # float weights


def test_model_card_says_an_int8_checkpoint_is_int8(gpt, gpt_run, tmp_path):
    model, _ = gpt
    folder = tmp_path / "int8"
    assert main(["quantize", "--checkpoint", str(gpt_run), "--out", str(folder)]) == 0
    assert json.loads((folder / "config.json").read_text())["quantization"] == "int8"
    with local_client(create_app(ExplorerModel(folder, "test"))) as int8_client:
        card = int8_client.get("/api/model").json()
    assert card["quantization"] == "int8"
    assert card["parameters"] == model.num_parameters()  # shown as its float weights q s


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/next-token", {"prompt": PROMPT, "temperature": -0.1}, "temperature"),
        ("/api/next-token", {"prompt": PROMPT, "top_k": 0}, "top_k"),
        ("/api/next-token", {"prompt": PROMPT, "top_p": 0}, "top_p"),
        ("/api/next-token", {"prompt": PROMPT, "top_p": 1.5}, "top_p"),
        ("/api/next-token", {"prompt": PROMPT, "limit": 0}, "limit"),
        ("/api/next-token", {"prompt": ""}, "prompt"),
        ("/api/next-token", {"prompt": "king €"}, "prompt"),
        ("/api/next-token", {"temperature": 1.0}, "prompt"),
        ("/api/next-token", {"prompt": PROMPT, "temprature": 1.0}, "temprature"),
        ("/api/attention", {"prompt": ""}, "prompt"),
        ("/api/tokenize", {"text": ""}, "text"),
        ("/api/generate", {"prompt": PROMPT, "max_new_tokens": 0}, "max_new_tokens"),
        ("/api/generate", {"prompt": PROMPT, "seed": -1}, "seed"),
        ("/api/generate", {"prompt": ""}, "prompt"),
        ("/api/generate", {"prompt": PROMPT, "top_k": 2.5}, "top_k"),
    ],
)
def test_a_bad_field_is_a_422_naming_it(client, path, body, field):
    response = client.post(path, json=body)
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail[0]["loc"][-1] == field
    assert detail[0]["msg"]


@pytest.mark.parametrize("temperature", [b"NaN", b"Infinity", b"1e999"])
def test_a_temperature_that_is_not_a_finite_number_is_refused(client, temperature):
    """NaN and infinity (Python's JSON reads 1e999 as infinity): logits / inf are 0, and a
    masked -inf / inf is NaN."""
    response = client.post(
        "/api/next-token",
        content=b'{"prompt": "the", "temperature": ' + temperature + b"}",
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"][-1] == "temperature"


def test_a_prompt_longer_than_the_context_offers_its_last_tokens(client, gpt):
    _, tokenizer = gpt
    long_prompt = "the king shall come to rome and speak"
    for path in ("/api/next-token", "/api/attention"):
        response = client.post(path, json={"prompt": long_prompt})
        assert response.status_code == 422
        detail = response.json()["detail"][0]
        assert detail["loc"][-1] == "prompt"
        assert f"{len(long_prompt)} tokens long" in detail["msg"] and "16" in detail["msg"]
        assert detail["keep_last"] == 16
        assert detail["kept_prompt"] == long_prompt[-16:]
        assert len(tokenizer.encode(detail["kept_prompt"])) == 16
        assert client.post(path, json={"prompt": detail["kept_prompt"]}).status_code == 200


def test_the_offered_end_of_a_long_prompt_fits_when_sent_back(bpe_run, encoder_client):
    """The offered text is the prompt's own last characters, so that sent back it fits:
    decoding the last tokens gave a cut inside a character (U+FFFD) for the byte-level BPE,
    and a lower-cased, accent-less text starting with a "##" piece for the encoder, each
    more tokens than the context when encoded again."""
    emoji = "a café 😀 and 東京 " * 12
    cased = "The UNBELIEVABLE Naïve Café Owners Overreacted Spectacularly " * 4
    with local_client(create_app(ExplorerModel(bpe_run, "test"))) as bpe_client:
        for client, path, prompt in (
            (bpe_client, "/api/next-token", emoji),
            (encoder_client, "/api/attention", cased),
        ):
            response = client.post(path, json={"prompt": prompt})
            assert response.status_code == 422, response.text
            detail = response.json()["detail"][0]
            kept = detail["kept_prompt"]
            assert prompt.endswith(kept) and "\ufffd" not in kept and kept
            assert client.post(path, json={"prompt": kept}).status_code == 200, (path, kept)
            # and no longer end fits: one more character is over the context
            longer = prompt[-len(kept) - 1 :]
            assert client.post(path, json={"prompt": longer}).status_code == 422


def test_explain_pages_are_explain_json(client, tmp_path):
    listing = client.get("/api/explain").json()
    assert [entry["name"] for entry in listing] == explain.names()
    for name in ("cat-sat", "tokenization", "lr-schedule"):  # decimal, integer, scientific
        document = client.get(f"/api/explain/{name}").json()
        example = explain.get(name)
        steps = explain.run(name)
        expected = json.loads(json.dumps(explain.example_json(name, example.summary, steps)))
        shown_steps = document.pop("steps")
        assert {key: document[key] for key in expected if key != "steps"} == {
            key: value for key, value in expected.items() if key != "steps"
        }
        # each step as explain --json gives it, plus how the terminal prints its numbers
        assert [
            {key: step[key] for key in want}
            for step, want in zip(shown_steps, expected["steps"], strict=True)
        ] == expected["steps"]
        for step, shown in zip(steps, shown_steps, strict=True):
            values = np.asarray(step.value)
            if values.dtype.kind in "iub":
                assert shown["format"] == "integer"
            else:
                scientific = needs_scientific(values)
                assert shown["format"] == ("scientific" if scientific else "decimal")
    figures = client.get("/api/explain/cat-sat").json()["figures"]
    assert figures == ["/api/explain/cat-sat/figures/cat_sat_attention.png"]
    png = client.get(figures[0])
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    written = EXAMPLES["tokenization"].figures(tmp_path)  # the pictures the CLI writes
    assert client.get("/api/explain/tokenization").json()["figures"] == [
        f"/api/explain/tokenization/figures/{path.name}" for path in written
    ]
    assert client.get("/api/explain/no-such").status_code == 404
    assert client.get("/api/explain/cat-sat/figures/other.png").status_code == 404


def test_the_page_and_its_files_are_served_from_the_package(client):
    page = client.get("/")
    assert page.status_code == 200 and "/static/explorer.js" in page.text
    assert client.get("/explain/river").text == page.text
    names = ("explorer.js", "inspect.js", "explorer.css")
    for name in names:
        assert f"/static/{name}" in page.text
        assert client.get(f"/static/{name}").status_code == 200
    text = page.text + "".join(client.get(f"/static/{name}").text for name in names)
    assert "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in text


def test_a_vanished_checkpoint_folder_is_reported_and_the_model_still_served(gpt_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(gpt_run, copy)
    with local_client(create_app(ExplorerModel(copy, "test"))) as client:
        before = client.post("/api/next-token", json={"prompt": PROMPT}).json()
        shutil.rmtree(copy)
        card = client.get("/api/model").json()
        assert card["folder_present"] is False
        assert str(copy / "checkpoint") in card["warning"] and "disappeared" in card["warning"]
        assert card["training"]["iteration"] == 10  # as read while it was there
        client.post("/api/next-token", json={"prompt": "the"})  # another prompt in between
        assert client.post("/api/next-token", json={"prompt": PROMPT}).json() == before


# ---------------------------------------------------------------------- the encoder
def test_encoder_tokens_attention_fill_mask_and_similarity(encoder_client, encoder_folder):
    model = load(encoder_folder, architecture="bert")
    tokenizer = load_tokenizer(encoder_folder)
    river = "The bank of the river was flooded!"

    tokens = encoder_client.post("/api/tokenize", json={"text": river}).json()
    ids = tokenizer.encode_plus(river)["input_ids"]
    assert tokens["ids"] == ids and tokens["tokens"][0] == "[CLS]"

    attention = encoder_client.post("/api/attention", json={"prompt": river}).json()
    weights = np.array(attention["weights"])
    expected = torch.stack(model.attention_maps(torch.tensor([ids])))[:, 0]  # (L, H, T, T)
    np.testing.assert_allclose(weights, expected.numpy(), atol=1e-6)
    assert (weights[..., -1] > 0).all()  # bidirectional: the first token sees the last

    text = "the bank of the [MASK] was [MASK]."
    filled = encoder_client.post("/api/fill-mask", json={"text": text, "top_k": 4}).json()
    masks = filled["masks"]
    assert filled["left_out"] == 0
    # a text longer than the model's 24 positions: the tokens cut off are counted
    long_text = "the [MASK] " + "river " * 30
    full = len(tokenizer.encode_plus(long_text, max_length=512)["input_ids"])
    cut = encoder_client.post("/api/fill-mask", json={"text": long_text}).json()
    assert cut["left_out"] == full - 24 > 0
    predicted = predict_masked(model, tokenizer, text, top_k=4)
    assert [[c["id"] for c in row] for row in masks] == [[c.id for c in row] for row in predicted]
    np.testing.assert_allclose(
        [[c["probability"] for c in row] for row in masks],
        [[c.probability for c in row] for row in predicted],
        rtol=1e-5,
    )

    sentences = [river, "The river overflowed.", "I paid at the bank."]
    matrix = encoder_client.post("/api/similarity", json={"sentences": sentences}).json()
    vectors = embed_sentences(model, tokenizer, sentences, max_length=24)
    np.testing.assert_allclose(
        matrix["similarity"], cosine_similarity_matrix(vectors).numpy(), atol=1e-6
    )


def test_encoder_refuses_what_only_a_gpt_does(encoder_client):
    for path in ("/api/next-token", "/api/generate"):
        response = encoder_client.post(path, json={"prompt": "the bank"})
        assert response.status_code == 409
        assert "encoder" in response.json()["detail"]
    response = encoder_client.post("/api/fill-mask", json={"text": "no mask here"})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"][-1] == "text"
    response = encoder_client.post("/api/similarity", json={"sentences": []})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"][-1] == "sentences"


def test_an_encoders_bad_field_is_named_where_it_is(encoder_client):
    """The second text of a pair, and which sentence of a list, by their own place: ["body",
    "text_pair"], ["body", "sentences", 1], in a sentence that reads as one."""
    response = encoder_client.post("/api/fill-mask", json={"text": "a [MASK]", "text_pair": ""})
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert (
        detail["loc"] == ["body", "text_pair"]
        and "second text (text_pair) is empty" in (detail["msg"])
    )
    response = encoder_client.post("/api/similarity", json={"sentences": ["a bank", "", "b"]})
    assert response.status_code == 422
    detail = response.json()["detail"][0]
    assert detail["loc"] == ["body", "sentences", 1] and detail["msg"].startswith(
        "sentence 1 is empty"
    )


def test_gpt_refuses_fill_mask_and_similarity(client):
    assert client.post("/api/fill-mask", json={"text": "a [MASK]"}).status_code == 409
    assert client.post("/api/similarity", json={"sentences": ["a"]}).status_code == 409


def test_explain_figures_are_pngs_of_the_example(client, tmp_path):
    url = client.get("/api/explain/sampling").json()["figures"][0]
    path = tmp_path / "figure.png"
    path.write_bytes(client.get(url).content)
    drawn = explain.write_figures("sampling", tmp_path / "direct")
    assert matplotlib.image.imread(path).shape == matplotlib.image.imread(drawn[0]).shape


def test_a_numpy_runs_card_has_its_curve_like_any_other(tmp_path):
    """The NumPy engine writes the same records as the PyTorch one, so the explorer draws its
    training curve and reports its bits per byte."""
    corpus = write_corpus(tmp_path / "corpus.txt", n_lines=300)
    out = tmp_path / "numpy-run"
    flags = tiny_flags(corpus, out, n_layer=1, tokenizer="char", max_iters=4)
    assert main(["train", *flags, "--engine", "numpy", "--log-interval", "1"]) == 0
    records = MetricsLog(out).records()
    with local_client(create_app(ExplorerModel(out, "test"))) as numpy_client:
        training = numpy_client.get("/api/model").json()["training"]
    logged = [r for r in records if r["kind"] == "train"]
    assert training["curve"]["train"] == [[i, r["loss"]] for i, r in enumerate(logged)]
    assert len(logged) == 4
    assert training["val_bpb"] == pytest.approx(evaluation_records(records)[-1]["val_bpb"])


def test_the_shipped_encoder_is_served_with_its_history():
    """What ``light-llm serve --encoder`` shows before anything is trained: the encoder that
    ships fills masks as its own forward does, and its run's curve is replayed."""
    folder = packaged_encoder_folder()
    client = local_client(create_app(ExplorerModel(folder, "test")))
    card = client.get("/api/model").json()
    assert card["kind"] == "encoder" and card["name"] == folder.name
    text = "to be or not to [MASK]"
    (masks,) = client.post("/api/fill-mask", json={"text": text, "top_k": 5}).json()["masks"]
    expected = shipped_answer(text)
    assert [c["id"] for c in masks] == [i for i, _ in expected]
    np.testing.assert_allclose([c["probability"] for c in masks], [p for _, p in expected])
    (run,) = client.get("/api/runs").json()
    evaluations = evaluation_records(MetricsLog(folder).records())
    assert [point[3] for point in run["curves"]["val"]] == [r["val_loss"] for r in evaluations]
