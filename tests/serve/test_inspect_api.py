"""The explorer's "look inside" API (/api/inspect/...) through FastAPI's test client: every
number equals the one light_llm.inspect computes when called directly on the same checkpoint,
loaded apart from the server's, and every bad field is a 422 naming it."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from light_llm.checkpoints.run import read_trainer_state
from light_llm.data import split_train_val
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
from light_llm.serve import ExplorerModel, create_app
from light_llm.serve.inspection import page_tokens
from tests.conftest import save_char_checkpoint
from tests.serve.conftest import local_client

PROMPT = "the king shall"  # 14 characters, one token each; the context is 16
CLOSE = {"rtol": 1e-6, "atol": 1e-9}


def post(client, path: str, body: dict) -> dict:
    response = client.post(f"/api/inspect/{path}", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def nan_as_none(array) -> list:
    array = np.asarray(array, dtype=float)
    return np.where(np.isnan(array), None, array).tolist()


def validation_text_ids(gpt_run, tokenizer) -> np.ndarray:
    """The run's validation split, tokenized here from the corpus the run recorded."""
    corpus = read_trainer_state(gpt_run / "checkpoint")["resolved_config"]["data"]
    with open(corpus, encoding="utf-8") as file:
        _, validation = split_train_val(file.read())
    return np.array(tokenizer.encode(validation)[:8192])


def test_lens_equals_logit_lens(client, gpt):
    model, tokenizer = gpt
    ids = tokenizer.encode(PROMPT)
    for target, target_id in ((None, None), ("e", tokenizer.encode("e")[0])):
        body = post(client, "lens", {"prompt": PROMPT, "target": target, "top_k": 3})
        lens = logit_lens(model, ids, target=target_id, top_k=3)
        assert body["stages"] == lens.stages == ["embed", "L0 attn", "L0 mlp", "L1 attn", "L1 mlp"]
        assert body["top_ids"] == lens.top_ids.tolist()
        np.testing.assert_allclose(body["top_probs"], lens.top_probs, **CLOSE)
        assert body["top_tokens"][2][5] == [tokenizer.decode([i]) for i in lens.top_ids[2, 5]]
        assert body["target_ids"] == lens.target_ids.tolist()
        probs = np.array(body["target_probs"], dtype=float)  # null where nothing follows
        np.testing.assert_allclose(probs, lens.target_probs, equal_nan=True, **CLOSE)
        ranks = np.array(body["target_ranks"], dtype=float)
        np.testing.assert_array_equal(
            ranks, np.where(lens.target_ranks < 0, np.nan, lens.target_ranks)
        )
    assert body["target_tokens"] == ["e"] * len(ids)


def test_attribution_equals_direct_logit_attribution(client, gpt):
    model, tokenizer = gpt
    ids = tokenizer.encode(PROMPT)
    body = post(client, "attribution", {"prompt": PROMPT})
    # the defaults: the model's top guess against its second
    first, second = logit_lens(model, ids, top_k=2).top_ids[-1, -1]
    expected = direct_logit_attribution(model, ids, int(first), versus=int(second))
    assert body["token"]["id"] == first and body["versus"]["id"] == second
    assert body["names"] == expected.names
    np.testing.assert_allclose(body["values"], expected.values, **CLOSE)
    np.testing.assert_allclose(body["heads"], expected.heads, **CLOSE)
    np.testing.assert_allclose(body["mlps"], expected.mlps, **CLOSE)
    assert body["total"] == pytest.approx(expected.logit, abs=1e-5)
    # a typed token, its logit alone, at another position
    typed = {"prompt": PROMPT, "token": "k", "difference": False, "position": 3}
    body = post(client, "attribution", typed)
    expected = direct_logit_attribution(model, ids, tokenizer.encode("k")[0], position=3)
    assert body["versus"] is None and body["position"] == 3
    np.testing.assert_allclose(body["values"], expected.values, **CLOSE)
    assert body["logit"] == pytest.approx(expected.logit, rel=1e-6)


def test_mean_ablation_of_a_one_token_prompt_changes_nothing(client):
    # the mean of a part over one position is its value there: nothing is removed
    request = {"prompt": "t", "components": ["L0H1", "L1MLP"], "method": "mean"}
    body = post(client, "ablate", request)
    assert body["delta_p"] == pytest.approx(0.0, abs=1e-6)
    np.testing.assert_allclose(
        [t["ablated_probability"] for t in body["tokens"]],
        [t["probability"] for t in body["tokens"]],
        atol=1e-6,
    )


@pytest.mark.parametrize(
    ("components", "method"), [(["L0H1"], "zero"), (["L0H0", "L1MLP", "L0N5"], "mean")]
)
def test_ablate_equals_ablate_prompt(client, gpt, components, method):
    model, tokenizer = gpt
    body = post(client, "ablate", {"prompt": PROMPT, "components": components, "method": method})
    expected = ablate_prompt(model, tokenizer.encode(PROMPT), components, method=method)
    assert body["components"] == expected.components and body["token"]["id"] == expected.token
    assert body["p"] == pytest.approx(expected.p, rel=1e-6)
    assert body["ablated_p"] == pytest.approx(expected.ablated_p, rel=1e-6)
    assert body["delta_p"] == pytest.approx(expected.delta_p, rel=1e-5, abs=1e-9)
    shown = [token["id"] for token in body["tokens"]]
    assert shown == np.argsort(-expected.ablated_probs, kind="stable")[:10].tolist()
    np.testing.assert_allclose(
        [t["ablated_probability"] for t in body["tokens"]], expected.ablated_probs[shown], **CLOSE
    )
    np.testing.assert_allclose(
        [t["probability"] for t in body["tokens"]], expected.probs[shown], **CLOSE
    )


def test_importance_reads_the_runs_validation_split(client, gpt, gpt_run):
    model, tokenizer = gpt
    body = post(client, "importance", {"prompt": PROMPT})
    ids = validation_text_ids(gpt_run, tokenizer)
    table = head_importance(model, ids)
    assert body["source"] == "validation split" and body["n_tokens"] == len(ids) - 1
    assert body["loss"] == pytest.approx(table.loss, rel=1e-6)
    np.testing.assert_allclose(body["heads"], table.heads, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(body["mlps"], table.mlps, rtol=1e-5, atol=1e-7)
    assert post(client, "importance", {"prompt": "other"}) == body  # the same text, cached
    assert post(client, "importance", {}) == body  # a run's table needs no prompt


def test_importance_and_neurons_read_the_prompt_without_a_run(gpt, gpt_run, tmp_path):
    model, tokenizer = gpt
    folder = shutil.copytree(gpt_run / "checkpoint", tmp_path / "weights")  # no run around it
    prompt = "the king shall come to rome and speak of love"  # longer than the context
    ids = tokenizer.encode(prompt)
    with local_client(create_app(ExplorerModel(folder, "test"))) as client:
        body = post(client, "importance", {"prompt": prompt, "method": "mean"})
        table = head_importance(model, ids, method="mean")
        assert body["source"] == "prompt" and body["n_tokens"] == len(ids) - 1
        np.testing.assert_allclose(body["heads"], table.heads, rtol=1e-5, atol=1e-7)
        neuron = post(client, "neuron", {"prompt": prompt, "layer": 0, "neuron": 2, "k": 3})
        found = top_activations(model, ids, 0, 2, k=3)
        assert neuron["source"] == "prompt"
        assert [e["position"] for e in neuron["examples"]] == found.positions.tolist()
        for path, body in (("importance", {}), ("neuron", {"layer": 0, "neuron": 2})):
            response = client.post(f"/api/inspect/{path}", json=body)
            assert response.status_code == 422, response.text
            assert "prompt" in response.text and "no training run" in response.text


def test_patching_equals_activation_patching(client, gpt):
    model, tokenizer = gpt
    clean, corrupt = "the king shall", "the lord shall"
    body = post(
        client, "patching", {"clean": clean, "corrupt": corrupt, "answer": " ", "wrong": "e"}
    )
    expected = activation_patching(
        model, tokenizer.encode(clean), tokenizer.encode(corrupt), *tokenizer.encode(" e")
    )
    assert body["resid_labels"] == expected.resid_labels == ["L0 in", "L1 in", "L1 out"]
    assert body["clean_metric"] == pytest.approx(expected.clean_metric, rel=1e-6)
    assert body["corrupt_metric"] == pytest.approx(expected.corrupt_metric, rel=1e-6)
    np.testing.assert_allclose(body["resid"], expected.resid, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(body["heads"], expected.heads, rtol=1e-5, atol=1e-6)
    assert body["clean_tokens"] == list(clean) and body["answer"]["token"] == " "


def test_head_roles_equal_head_roles(client, gpt):
    model, tokenizer = gpt
    body = post(client, "head-roles", {"prompt": PROMPT, "n_sequences": 4, "seed": 3})
    roles = head_roles(model, tokenizer.encode(PROMPT), n_sequences=4, seed=3)
    for name in ("previous_token", "first_token", "induction"):
        np.testing.assert_allclose(body[name], getattr(roles, name), **CLOSE)
    assert body["loss_second_copy"] == pytest.approx(roles.loss_second_copy, rel=1e-6)
    assert body["length"] == roles.length == 8


def test_neuron_equals_top_activations(client, gpt, gpt_run):
    model, tokenizer = gpt
    body = post(client, "neuron", {"prompt": PROMPT, "layer": 1, "neuron": 7, "k": 4})
    found = top_activations(model, validation_text_ids(gpt_run, tokenizer), 1, 7, k=4)
    assert body["units"] == model.config.ffn_hidden and body["source"] == "validation split"
    np.testing.assert_allclose([e["activation"] for e in body["examples"]], found.activations)
    assert [e["position"] for e in body["examples"]] == found.positions.tolist()
    assert [e["tokens"] for e in body["examples"]] == [
        [tokenizer.decode([i]) for i in context] for context in found.contexts
    ]
    assert body["max"] == pytest.approx(found.max)


def test_surprise_equals_surprise(client, gpt):
    model, tokenizer = gpt
    text = "the king shall come to rome and speak of love"  # windows of the context
    body = post(client, "surprise", {"text": text})
    scored = surprise(model, tokenizer.encode(text))
    assert body["tokens"] == list(text)
    np.testing.assert_allclose(body["losses"], scored.losses, rtol=1e-5)
    np.testing.assert_allclose(body["probs"], scored.probs, rtol=1e-5)
    assert body["ranks"] == scored.ranks.tolist()
    assert body["top_tokens"] == [tokenizer.decode([i]) for i in scored.top_ids]
    assert body["mean_loss"] == pytest.approx(scored.mean_loss, rel=1e-6)


def test_the_text_read_shrinks_with_the_model_so_the_page_answers_in_seconds():
    # bpe-cpu (590,688 parameters, 4 x 4 heads: 22 passes) reads all 8192 tokens
    assert page_tokens(590_688, 4 * (4 + 1) + 2) == 8192
    # GPT-2 small's table (124M parameters, 12 x 13 parts and the clean pass): 64 tokens
    assert page_tokens(124_000_000, 12 * 13 + 1) == 64
    assert 64 < page_tokens(124_000_000, 1) < 8192  # one pass over its text reads more


TOO_LONG = "the king shall come to rome"  # 27 tokens, the context is 16


@pytest.mark.parametrize(
    ("path", "body", "field", "words"),
    [
        ("lens", {"prompt": ""}, "prompt", "empty"),
        ("lens", {"prompt": TOO_LONG}, "prompt", "27 tokens"),
        ("lens", {"prompt": PROMPT, "target": " the"}, "target", "' the' is 4 tokens"),
        ("lens", {"prompt": PROMPT, "target": ""}, "target", "a token written as text"),
        ("lens", {"prompt": PROMPT, "target": "€"}, "target", "€"),
        ("lens", {"prompt": PROMPT, "top_k": 0}, "top_k", ""),
        ("attribution", {"prompt": PROMPT, "token": "ki"}, "token", "'ki' is 2 tokens"),
        ("attribution", {"prompt": PROMPT, "versus": "ki"}, "versus", "2 tokens"),
        ("attribution", {"prompt": PROMPT, "token": "k", "versus": "k"}, "versus", "differ"),
        ("attribution", {"prompt": PROMPT, "position": 14}, "position", "-14 to 13"),
        ("ablate", {"prompt": PROMPT, "components": ["L2H0"]}, "components", "0 to 1"),
        ("ablate", {"prompt": PROMPT, "components": ["L0H2"]}, "components", "0 to 1"),
        # the tiny default model's MLP has 48 hidden units (SwiGLU's ffn_hidden at 16 wide)
        ("ablate", {"prompt": PROMPT, "components": ["L0N48"]}, "components", "0 to 47"),
        ("ablate", {"prompt": PROMPT, "components": ["head"]}, "components", "L0H1"),
        ("ablate", {"prompt": PROMPT, "components": []}, "components", "at least one"),
        ("ablate", {"prompt": PROMPT, "components": ["L0H0"], "method": "x"}, "method", ""),
        ("ablate", {"prompt": "", "components": ["L0H0"]}, "prompt", "empty"),
        (
            "patching",
            {"clean": PROMPT, "corrupt": "the king", "answer": " ", "wrong": "e"},
            "corrupt",
            "has 14 and the corrupted one 8",
        ),
        (
            "patching",
            {"clean": "", "corrupt": PROMPT, "answer": " ", "wrong": "e"},
            "clean",
            "empty",
        ),
        (
            "patching",
            {"clean": TOO_LONG, "corrupt": PROMPT, "answer": " ", "wrong": "e"},
            "clean",
            "27 tokens",
        ),
        (
            "patching",
            {"clean": PROMPT, "corrupt": PROMPT, "answer": "ki", "wrong": "e"},
            "answer",
            "'ki' is 2 tokens",
        ),
        (
            "patching",
            {"clean": PROMPT, "corrupt": PROMPT, "answer": "e", "wrong": "e"},
            "wrong",
            "differ",
        ),
        ("head-roles", {"prompt": PROMPT, "length": 9}, "length", "2 to 8"),
        ("head-roles", {"prompt": "t"}, "prompt", "is 1 token long; it needs at least 2 tokens"),
        (
            "attribution",
            {"prompt": PROMPT, "versus": "e", "difference": False},
            "versus",
            "but difference is false",
        ),
        ("neuron", {"prompt": PROMPT, "layer": 2, "neuron": 0}, "layer", "0 to 1"),
        ("neuron", {"prompt": PROMPT, "layer": 0, "neuron": 48}, "neuron", "0 to 47"),
        ("neuron", {"prompt": PROMPT, "layer": -1, "neuron": 0}, "layer", ""),
        ("surprise", {"text": ""}, "text", "empty"),
        ("surprise", {"text": "t"}, "text", "is 1 token long; it needs at least 2 tokens"),
        ("surprise", {"text": PROMPT, "txt": 1}, "txt", ""),
    ],
)
def test_a_bad_field_is_a_422_naming_it(client, path, body, field, words):
    response = client.post(f"/api/inspect/{path}", json=body)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"][-1] == field
    assert words in detail["msg"]


def test_versus_the_top_guess_it_defaults_to_is_a_422_naming_versus(client, gpt):
    model, tokenizer = gpt
    top = int(logit_lens(model, tokenizer.encode(PROMPT), top_k=1).top_ids[-1, -1, 0])
    response = client.post(
        "/api/inspect/attribution", json={"prompt": PROMPT, "versus": tokenizer.decode([top])}
    )
    assert response.status_code == 422, response.text
    detail = response.json()["detail"][0]
    assert detail["loc"][-1] == "versus" and "differ" in detail["msg"]


def test_an_encoder_is_told_these_analyses_read_a_gpt(encoder_client):
    bodies = {
        "lens": {"prompt": "the bank"},
        "attribution": {"prompt": "the bank"},
        "ablate": {"prompt": "the bank", "components": ["L0H0"]},
        "importance": {"prompt": "the bank"},
        "patching": {"clean": "a", "corrupt": "b", "answer": "a", "wrong": "b"},
        "head-roles": {"prompt": "the bank"},
        "neuron": {"prompt": "the bank", "layer": 0, "neuron": 0},
        "surprise": {"text": "the bank"},
    }
    for path, body in bodies.items():
        response = encoder_client.post(f"/api/inspect/{path}", json=body)
        assert response.status_code == 422, path
        (error,) = response.json()["detail"]
        assert error["loc"] == ["body", "model"] and "encoder" in error["msg"]


def test_attribution_on_a_post_ln_model_says_why_not(tmp_path):
    """A post-LN residual is no sum of the sublayers' outputs: attribution is refused with the
    library's sentence (a 422 naming the model), while the lens still answers."""
    folder, _, _ = save_char_checkpoint(
        tmp_path / "post", n_layer=2, n_embd=16, block_size=16, block_order="post"
    )
    with local_client(create_app(ExplorerModel(folder, "test"))) as client:
        response = client.post("/api/inspect/attribution", json={"prompt": "to be"})
        assert response.status_code == 422
        (error,) = response.json()["detail"]
        assert error["loc"] == ["body", "model"] and "pre-LN" in error["msg"]
        assert client.post("/api/inspect/lens", json={"prompt": "to be"}).status_code == 200


def test_pieces_of_a_multi_byte_character_are_shown_as_the_cli_shows_them():
    """The shipped run's byte-level BPE cuts 'é' and an emoji into byte pieces: each is shown
    by its byte (<0xC3>), as `light-llm inspect` shows it, not decoded alone into U+FFFD."""
    from light_llm.assets import packaged_run_folder
    from light_llm.checkpoints import load_tokenizer

    folder = packaged_run_folder()
    tokenizer = load_tokenizer(folder)
    prompt = "ROMEO: é😀 the"
    ids = tokenizer.encode(prompt)
    with local_client(create_app(ExplorerModel(folder, "test"))) as client:
        lens = post(client, "lens", {"prompt": prompt})
        surprising = post(client, "surprise", {"text": prompt})
    assert lens["tokens"] == surprising["tokens"] == tokenizer.tokens(ids)
    pieces = [token for token in lens["tokens"] if token.startswith("<0x")]
    assert len(pieces) == len(set(pieces)) == len("é".encode()) + len("😀".encode())
    assert "\ufffd" not in "".join(lens["tokens"])
