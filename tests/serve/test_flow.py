"""The flow view's numbers (/api/flow) against the model's own modules and its plain forward,
for a chosen token; the stages follow the config; bad input is a 422 naming the field."""

import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from light_llm.checkpoints import save
from light_llm.models.gpt import GPT
from light_llm.serve import ExplorerModel, create_app
from light_llm.tokenizers import CharTokenizer
from tests.conftest import tiny_config
from tests.serve.conftest import local_client

PROMPT = "the king shall"


def stages_by_key(result):
    flat = {}
    for stage in result["stages"]:
        if stage["key"] == "layer":
            for inner in stage["stages"]:
                flat[(stage["layer"], inner["key"])] = inner
        else:
            flat[stage["key"]] = stage
    return flat


def test_the_flow_of_a_token_is_the_models_own_computation(client, gpt):
    model, tokenizer = gpt
    position = 5
    result = client.post("/api/flow", json={"prompt": PROMPT, "position": position}).json()
    ids = tokenizer.encode(PROMPT)
    assert result["ids"] == ids and result["position"] == position
    stages = stages_by_key(result)
    idx = torch.tensor([ids])
    with torch.no_grad():
        x = model.transformer.wte(idx)  # (1, T, d)
        np.testing.assert_allclose(stages["embed"]["values"]["vector"], x[0, position], atol=1e-5)
        rope = model.rope(torch.arange(len(ids)))
        for layer, block in enumerate(model.transformer.h):
            assert stages[(layer, "resid_pre")]["values"]["vector"] == pytest.approx(
                x[0, position].tolist(), abs=1e-5
            )
            normed = block.ln_1(x)
            np.testing.assert_allclose(
                stages[(layer, "ln1")]["values"]["vector"], normed[0, position], atol=1e-5
            )
            q, k, v = block.attn.queries_keys_values(normed, rope)  # (1, nh, T, hs)
            for name, value in zip("qkv", (q, k, v), strict=True):
                np.testing.assert_allclose(
                    stages[(layer, "qkv")]["values"][name], value[0, :, position], atol=1e-5
                )
            scores = torch.einsum("he,hte->ht", q[0, :, position], k[0]) / math.sqrt(q.shape[-1])
            scores[:, position + 1 :] = -math.inf
            np.testing.assert_allclose(
                stages[(layer, "pattern")]["values"]["rows"], scores.softmax(-1), atol=1e-5
            )
            x = block(x, rope=rope)
            np.testing.assert_allclose(
                stages[(layer, "resid_post")]["values"]["vector"], x[0, position], atol=1e-4
            )
        logits, _ = model(idx)
    probs = torch.softmax(logits[0, position].double(), -1)
    top = torch.argsort(probs, descending=True, stable=True)[:10]
    assert stages["softmax"]["values"]["ids"] == top.tolist()
    np.testing.assert_allclose(stages["softmax"]["values"]["probs"], probs[top], atol=1e-5)
    assert "tanh" not in stages["logits"]["formula"]  # the default config has no soft-cap
    assert stages["rotary"]["values"]["angles"][0] == pytest.approx(position)  # t·θ_0, θ_0 = 1


@pytest.mark.parametrize(
    ("shape", "present", "absent", "formula"),
    [
        (
            {"norm": "layernorm", "positions": "learned", "activation": "swiglu"},
            ["pos_embed", "final_norm"],
            ["rotary"],
            "Swish",
        ),
        ({"block_order": "post", "activation": "gelu"}, [], ["final_norm"], "GELU"),
        ({"activation": "relu2", "logit_softcap": 15.0}, ["final_norm"], [], "\\max(0, x W_1)^2"),
        ({"activation": "gelu", "smear": True}, ["smear"], [], "GELU"),
    ],
)
def test_the_stages_follow_the_config(tmp_path, shape, present, absent, formula):
    tokenizer = CharTokenizer.from_text("abcdefgh ")
    torch.manual_seed(0)
    model = GPT(tiny_config(vocab_size=tokenizer.vocab_size, block_size=16, **shape))
    save(model.eval(), tmp_path / "m", tokenizer=tokenizer)
    client = local_client(create_app(ExplorerModel(tmp_path / "m", "test")))
    result = client.post("/api/flow", json={"prompt": "abc abc"}).json()
    stages = stages_by_key(result)
    assert result["position"] == 6  # the last token by default
    for key in present:
        assert key in stages
    for key in absent:
        assert key not in stages
    assert formula in stages[(0, "mlp_hidden")]["formula"]
    assert ((0, "ln1") in stages) == (shape.get("block_order", "pre") == "pre")
    assert ("tanh" in stages["logits"]["formula"]) == ("logit_softcap" in shape)  # the soft-cap
    assert ("smear" in stages) == ("smear" in shape)


def test_an_encoder_flows_through_its_masked_lm_head(encoder_client):
    result = encoder_client.post("/api/flow", json={"prompt": "the river bank"}).json()
    assert result["tokens"][0] == "[CLS]" and result["tokens"][-1] == "[SEP]"
    assert "masked-LM" in stages_by_key(result)["logits"]["title"]


@pytest.mark.parametrize("position", [14, -15, "two"])
def test_a_position_outside_the_prompt_is_a_422_naming_it(client, position):
    answer = client.post("/api/flow", json={"prompt": PROMPT, "position": position})
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"][-1] == "position"
    if position != "two":  # the range said is the one taken: -1 is the last token
        assert "position is 0 to 13 (or -14 to -1 from the end)" in answer.text
        assert client.post("/api/flow", json={"prompt": PROMPT, "position": -14}).status_code == 200


def test_every_command_of_the_flow_formulas_is_one_the_page_renders(tmp_path):
    """Every \\name in the formulas the flow sends, for a model with every switch that
    changes them, is a symbol or space of the page's TeX (static/flow.js), or one of its
    constructs: none is shown as a bare word (as "lambda" once was)."""
    import light_llm.serve

    script = (Path(light_llm.serve.__file__).parent / "static" / "flow.js").read_text()
    table = re.search(r"const TEX_SYMBOLS = \{(.*?)\};", script, re.S).group(1)
    spaces = re.search(r"const TEX_SPACES = \{(.*?)\};", script, re.S).group(1)
    known = set(re.findall(r"([a-zA-Z]+):", table)) | set(re.findall(r"([a-zA-Z]+):", spaces))
    known |= {"frac", "sqrt", "mathrm", "left", "right"}
    tokenizer = CharTokenizer.from_text("abcdefgh ")
    shape = {"smear": True, "embedding_skip": True, "value_embeddings": True, "qk_norm": True,
             "logit_softcap": 15.0, "activation": "swiglu", "positions": "rotary"}  # fmt: skip
    model = GPT(tiny_config(vocab_size=tokenizer.vocab_size, block_size=16, **shape))
    save(model.eval(), tmp_path / "m", tokenizer=tokenizer)
    client = local_client(create_app(ExplorerModel(tmp_path / "m", "test")))
    result = client.post("/api/flow", json={"prompt": "abc abc"}).json()
    formulas = [stage["formula"] for stage in stages_by_key(result).values()]
    commands = {name for formula in formulas for name in re.findall(r"\\([a-zA-Z]+)", formula)}
    assert "lambda" in commands  # the embedding skip's and the smear's gain
    assert commands <= known, commands - known


def test_a_rotary_encoder_shows_its_positions_stage():
    """The shipped encoder has rotary positions: its flow has the rotary stage a rotary GPT's
    has, angles t θ_i with θ_i = b^(-2i/d_k) computed here from its config."""
    from light_llm.assets import packaged_encoder_folder

    folder = packaged_encoder_folder()
    explorer = ExplorerModel(folder / "checkpoint", "test")
    config = explorer.model.config
    assert config.positions == "rotary"
    with local_client(create_app(explorer)) as client:
        result = client.post("/api/flow", json={"prompt": "the river bank", "position": 2}).json()
    rotary = stages_by_key(result)["rotary"]
    d = config.n_embd // config.n_head
    expected = [2 * config.position_base ** (-2 * i / d) for i in range(d // 2)]
    np.testing.assert_allclose(rotary["values"]["angles"], expected, atol=5e-6)  # 5 decimals


def test_linear_attention_rows_carry_its_own_formula(tmp_path):
    """A linear-attention model's attention row is φ(q_t)·φ(k_j) over its row sum (seed 002
    eq. 48), not the softmax: the stage says so, links the linear-attention example, its rows
    sum to 1, and the page renders every command of the formula."""
    import light_llm.serve
    from light_llm.explain.registry import EXAMPLES

    tokenizer = CharTokenizer.from_text("abcdefgh ")
    torch.manual_seed(0)
    model = GPT(tiny_config(vocab_size=tokenizer.vocab_size, block_size=16, attention="linear"))
    save(model.eval(), tmp_path / "m", tokenizer=tokenizer)
    client = local_client(create_app(ExplorerModel(tmp_path / "m", "test")))
    pattern = stages_by_key(client.post("/api/flow", json={"prompt": "abc abc"}).json())[
        (0, "pattern")
    ]
    assert "softmax" not in pattern["formula"] and "\\phi" in pattern["formula"]
    assert pattern["example"] in EXAMPLES
    np.testing.assert_allclose(np.sum(pattern["values"]["rows"], axis=-1), 1.0, atol=1e-4)
    script = (Path(light_llm.serve.__file__).parent / "static" / "flow.js").read_text()
    table = re.search(r"const TEX_SYMBOLS = \{(.*?)\};", script, re.S).group(1)
    assert "phi:" in table
